//! The one place that turns a probe error into a [`ProbeReason`].
//!
//! Walks the error's source chain from the outside in and returns the first reason it
//! recognises, so our own wrappers (a [`DnsError`] around an I/O error) win over what they wrap.
//! Must not: match on error message text, or perform I/O.

use std::error::Error;
use std::io;
use std::time::Duration;

use gslb_core::model::{Millis, ProbeReason};
use rustls::CertificateError;

use super::dns::DnsError;

/// The reason for a failed probe, from its error.
///
/// Rules, first match along the chain wins (outermost first):
/// - our [`DnsError`]: an answer that the name does not exist (NXDOMAIN) or has no address
///   (NODATA) → `dns_resolution` (the origin's side: a deleted record is the zone owner's
///   problem); anything else from the vantage point's own resolver (SERVFAIL, REFUSED or any
///   other error code, no answer within the lookup's limit, an I/O error, no nameserver
///   listening) → `resolver_unavailable` (the prober's side, never counted toward `fall`);
/// - a `rustls::Error`: a certificate that expired → `tls_expired`, is not valid yet →
///   `tls_not_yet_valid`, is for another name → `tls_name_mismatch`, does not chain to a
///   trusted root → `tls_unknown_issuer`; anything else (handshake, protocol) → `tls`;
/// - a tokio timeout (`Elapsed`) or an I/O `TimedOut` → `timeout`;
/// - an I/O `ConnectionRefused` → `connection_refused`;
/// - an I/O `NetworkUnreachable` → `network_unreachable` (counts against the origin: a withdrawn
///   regional prefix looks the same; the HTTP and TCP checks then ask `family` whether the
///   whole address family is unusable here, which makes it `unprobeable`); `AddrNotAvailable`, `OutOfMemory`, `EMFILE`, `ENFILE` or
///   `ENOBUFS` → `local_resources` (the prober's side);
/// - an I/O `ConnectionReset`, `ConnectionAborted`, `BrokenPipe` or `UnexpectedEof` (the
///   connection ended before the whole answer, head or body) → `connection_reset`;
/// - anything else (an answer that is not HTTP: `InvalidData`) → `other`.
///
/// An `io::Error` that wraps another error is looked through via `get_ref` (its `source()`
/// skips the wrapped error itself, which is where rustls puts its error).
pub fn classify(err: &(dyn Error + 'static)) -> ProbeReason {
    along_the_chain(err, reason_of).unwrap_or(ProbeReason::Other)
}

/// The reason for a probe cut off by its timeout, from the time it lost to starvation
/// (`late_by`: how late after the deadline the timeout was seen, see
/// [`within`](super::trace::within), or what the starvation watch counted during the probe,
/// whichever is larger) and whether the name lookup was still running then:
/// - more than `late_after` (`[probing] late_after`, default 50 ms) lost → `late`: the
///   process was starved of CPU during the probe, so its own steps (connect, write, read)
///   waited in the run queue and the origin was never given its time; not a result
///   (issue 14: under a CPU quota, 11,411 probes of healthy origins timed out in 30 s and
///   failed services over for real);
/// - else, the lookup still running → `resolver_unavailable` (our own resolver, the prober's
///   side);
/// - else → `timeout`: a timely timeout is the origin's failure.
///
/// A probe that failed otherwise (connection refused, a status) is evidence however late it
/// ran: only a wait for an answer can be the prober's own slowness ([`judged`]).
pub(crate) fn timed_out(
    late_by: Duration,
    late_after: Duration,
    lookup_running: bool,
) -> ProbeReason {
    if late_by > late_after {
        ProbeReason::Late
    } else if lookup_running {
        ProbeReason::ResolverUnavailable
    } else {
        ProbeReason::Timeout
    }
}

/// The reason of a probe that ended by itself as `reason` (before its timeout) after losing
/// `lost` of its time to CPU starvation ([`Starvation`](super::starvation)): a wait for an
/// answer that did not come in time (a `timeout` that the OS reported, or a
/// `resolver_unavailable` from a name lookup that got no answer within its limit:
/// `lookup_timed_out`) is `late` when more than `late_after` of it was lost, like a timeout seen
/// late ([`timed_out`]); any other reason stands, however starved the process (a refusal, a
/// reset, a status, a resolver's error answer are answers).
pub(crate) fn judged(
    reason: ProbeReason,
    lookup_timed_out: bool,
    lost: Duration,
    late_after: Duration,
) -> ProbeReason {
    let waited = reason == ProbeReason::Timeout
        || (reason == ProbeReason::ResolverUnavailable && lookup_timed_out);
    if waited && lost > late_after {
        ProbeReason::Late
    } else {
        reason
    }
}

/// The `notAfter` of the certificate a `tls_expired` failure refused (the verifier reports
/// the first expired certificate of the chain it built), for `probe_ssl_earliest_cert_expiry`.
pub(crate) fn expired_not_after(err: &(dyn Error + 'static)) -> Option<Millis> {
    along_the_chain(err, |e| match e.downcast_ref::<rustls::Error>()? {
        rustls::Error::InvalidCertificate(CertificateError::ExpiredContext {
            not_after, ..
        }) => Some(Millis(not_after.as_secs().saturating_mul(1000))),
        _ => None,
    })
}

/// The first `Some` of `f` along `err`'s source chain, outermost first, looking through
/// `io::Error` wrappers.
fn along_the_chain<T>(
    err: &(dyn Error + 'static),
    f: impl Fn(&(dyn Error + 'static)) -> Option<T>,
) -> Option<T> {
    let mut next = Some(err);
    while let Some(e) = next {
        if let Some(found) = f(e) {
            return Some(found);
        }
        next = match e.downcast_ref::<io::Error>() {
            Some(io) => io.get_ref().map(|inner| inner as &(dyn Error + 'static)),
            None => e.source(),
        };
    }
    None
}

/// The detail of a TLS failure: which certificate check failed, or `tls` (handshake,
/// protocol, other certificate problems).
fn tls_reason(e: &rustls::Error) -> ProbeReason {
    use CertificateError as C;
    match e {
        rustls::Error::InvalidCertificate(c) => match c {
            C::Expired | C::ExpiredContext { .. } => ProbeReason::TlsExpired,
            C::NotValidYet | C::NotValidYetContext { .. } => ProbeReason::TlsNotYetValid,
            C::NotValidForName | C::NotValidForNameContext { .. } => ProbeReason::TlsNameMismatch,
            C::UnknownIssuer => ProbeReason::TlsUnknownIssuer,
            // A CA certificate served as the server's own: what `openssl req -x509` makes by
            // default (CA:TRUE), a self-signed certificate no root vouches for. webpki refuses
            // it before looking for an issuer; the operator's question is the same.
            C::Other(other)
                if matches!(
                    other.0.downcast_ref::<webpki::Error>(),
                    Some(webpki::Error::CaUsedAsEndEntity)
                ) =>
            {
                ProbeReason::TlsUnknownIssuer
            }
            _ => ProbeReason::Tls,
        },
        _ => ProbeReason::Tls,
    }
}

fn reason_of(e: &(dyn Error + 'static)) -> Option<ProbeReason> {
    if let Some(dns) = e.downcast_ref::<DnsError>() {
        return Some(match dns {
            DnsError::Lookup { source, .. } if name_has_no_address(source) => {
                ProbeReason::DnsResolution
            }
            _ => ProbeReason::ResolverUnavailable,
        });
    }
    if let Some(tls) = e.downcast_ref::<rustls::Error>() {
        return Some(tls_reason(tls));
    }
    if e.is::<tokio::time::error::Elapsed>() {
        return Some(ProbeReason::Timeout);
    }
    if let Some(io) = e.downcast_ref::<io::Error>() {
        return match io.kind() {
            io::ErrorKind::ConnectionRefused => Some(ProbeReason::ConnectionRefused),
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::UnexpectedEof => Some(ProbeReason::ConnectionReset),
            io::ErrorKind::TimedOut => Some(ProbeReason::Timeout),
            io::ErrorKind::NetworkUnreachable => Some(ProbeReason::NetworkUnreachable),
            io::ErrorKind::AddrNotAvailable | io::ErrorKind::OutOfMemory => {
                Some(ProbeReason::LocalResources)
            }
            _ if matches!(
                io.raw_os_error(),
                Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS)
            ) =>
            {
                Some(ProbeReason::LocalResources)
            }
            _ => None,
        };
    }
    None
}

/// Whether hickory's error is an answer about the name itself: NXDOMAIN, or NOERROR without
/// an address (NODATA). SERVFAIL, REFUSED and the other error codes are the resolver's trouble.
fn name_has_no_address(e: &hickory_resolver::ResolveError) -> bool {
    use hickory_resolver::proto::ProtoErrorKind;
    use hickory_resolver::proto::op::ResponseCode;
    e.proto().is_some_and(|p| {
        matches!(
            p.kind(),
            ProtoErrorKind::NoRecordsFound {
                response_code: ResponseCode::NXDomain | ResponseCode::NoError,
                ..
            }
        )
    })
}

/// An error and its sources, joined by `: ` (`outer: inner: innermost`), for logs and fatal
/// errors.
pub fn error_chain(e: &(dyn Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut next = e.source();
    while let Some(inner) = next {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        next = inner.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use std::fmt;
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_timeout_seen_late_is_late_and_a_timely_one_the_origins() {
        let late_after = Duration::from_millis(50);
        let ms = Duration::from_millis;
        // Timely: the origin did not answer in time.
        assert_eq!(timed_out(ms(0), late_after, false), ProbeReason::Timeout);
        assert_eq!(timed_out(ms(50), late_after, false), ProbeReason::Timeout);
        assert_eq!(
            timed_out(ms(3), late_after, true),
            ProbeReason::ResolverUnavailable
        );
        // Seen past the threshold: this process was starved at the deadline; whatever ran.
        assert_eq!(timed_out(ms(51), late_after, false), ProbeReason::Late);
        assert_eq!(timed_out(ms(700), late_after, true), ProbeReason::Late);
        assert!(!ProbeReason::Late.counts_toward_health());
        assert!(!ProbeReason::Late.is_prober_side());
    }

    /// A wrapper like the ones error types put around their causes.
    #[derive(Debug)]
    struct Wrap(&'static str, Box<dyn Error + Send + Sync>);

    impl fmt::Display for Wrap {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Error for Wrap {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&*self.1)
        }
    }

    fn wrapped(e: impl Error + Send + Sync + 'static) -> Wrap {
        Wrap(
            "client error (Connect)",
            Box::new(Wrap("tcp connect error", Box::new(e))),
        )
    }

    #[test]
    fn a_wait_that_lost_its_time_to_starvation_is_late_and_answers_stand() {
        let late_after = Duration::from_millis(50);
        let ms = Duration::from_millis;
        let judge =
            |reason, lookup_timed_out, lost| judged(reason, lookup_timed_out, ms(lost), late_after);
        // A timeout or a lookup without an answer, with the process starved meanwhile.
        assert_eq!(judge(ProbeReason::Timeout, false, 51), ProbeReason::Late);
        assert_eq!(
            judge(ProbeReason::ResolverUnavailable, true, 300),
            ProbeReason::Late
        );
        // The same waits with the CPU they needed: evidence as before.
        assert_eq!(judge(ProbeReason::Timeout, false, 50), ProbeReason::Timeout);
        assert_eq!(
            judge(ProbeReason::ResolverUnavailable, true, 0),
            ProbeReason::ResolverUnavailable
        );
        // Answers stand however starved: a resolver's SERVFAIL, a refusal, a reset, a status.
        for answer in [
            ProbeReason::ResolverUnavailable,
            ProbeReason::ConnectionRefused,
            ProbeReason::ConnectionReset,
            ProbeReason::HttpStatus,
            ProbeReason::Ok,
        ] {
            assert_eq!(judge(answer, false, 900), answer);
        }
    }

    #[test]
    fn io_kinds_along_the_chain() {
        let cases = [
            (
                io::ErrorKind::ConnectionRefused,
                ProbeReason::ConnectionRefused,
            ),
            (io::ErrorKind::ConnectionReset, ProbeReason::ConnectionReset),
            (
                io::ErrorKind::ConnectionAborted,
                ProbeReason::ConnectionReset,
            ),
            (io::ErrorKind::BrokenPipe, ProbeReason::ConnectionReset),
            (io::ErrorKind::UnexpectedEof, ProbeReason::ConnectionReset),
            (io::ErrorKind::TimedOut, ProbeReason::Timeout),
            (
                io::ErrorKind::NetworkUnreachable,
                ProbeReason::NetworkUnreachable,
            ),
            (io::ErrorKind::AddrNotAvailable, ProbeReason::LocalResources),
            (io::ErrorKind::PermissionDenied, ProbeReason::Other),
        ];
        for (kind, want) in cases {
            assert_eq!(classify(&io::Error::from(kind)), want, "{kind:?} bare");
            assert_eq!(
                classify(&wrapped(io::Error::from(kind))),
                want,
                "{kind:?} wrapped"
            );
        }
    }

    #[test]
    fn exhausted_descriptors_are_prober_side() {
        let e = io::Error::from_raw_os_error(libc::EMFILE);
        assert_eq!(classify(&wrapped(e)), ProbeReason::LocalResources);
        assert!(ProbeReason::LocalResources.is_prober_side());
        assert!(!ProbeReason::Timeout.is_prober_side());
    }

    #[test]
    fn rustls_inside_io_error_is_tls_with_its_detail() {
        let cert = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let io = io::Error::new(io::ErrorKind::InvalidData, cert);
        assert_eq!(classify(&wrapped(io)), ProbeReason::TlsUnknownIssuer);
        let at = |s| rustls::pki_types::UnixTime::since_unix_epoch(Duration::from_secs(s));
        let expired = rustls::Error::InvalidCertificate(CertificateError::ExpiredContext {
            time: at(2_000),
            not_after: at(1_000),
        });
        let io = io::Error::new(io::ErrorKind::InvalidData, expired);
        assert_eq!(classify(&wrapped(io)), ProbeReason::TlsExpired);
        let io = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(CertificateError::ExpiredContext {
                time: at(2_000),
                not_after: at(1_000),
            }),
        );
        assert_eq!(expired_not_after(&wrapped(io)), Some(Millis(1_000_000)));
        for (c, want) in [
            (CertificateError::NotValidYet, ProbeReason::TlsNotYetValid),
            (
                CertificateError::NotValidForName,
                ProbeReason::TlsNameMismatch,
            ),
            (CertificateError::BadSignature, ProbeReason::Tls),
        ] {
            let e = io::Error::other(rustls::Error::InvalidCertificate(c));
            assert_eq!(classify(&e), want);
        }
        let garbage = rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType);
        assert_eq!(classify(&io::Error::other(garbage)), ProbeReason::Tls);
    }

    #[test]
    fn dns_error_wins_over_what_it_wraps() {
        let inner =
            hickory_resolver::ResolveError::from(io::Error::from(io::ErrorKind::ConnectionRefused));
        let dns = DnsError::Lookup {
            host: "seoul.example.test".into(),
            source: inner,
        };
        assert_eq!(
            classify(&wrapped(dns)),
            ProbeReason::ResolverUnavailable,
            "the resolver itself refused: the prober's side"
        );
        let dns = DnsError::Timeout {
            host: "x.test".into(),
            timeout: Duration::from_secs(2),
        };
        assert_eq!(
            classify(&dns),
            ProbeReason::ResolverUnavailable,
            "no answer from our own resolver is the prober's side (issue 12)"
        );
        let dns = DnsError::NoNameserver {
            host: "x.test".into(),
            nameservers: vec!["127.0.0.1:5399".parse().unwrap()],
        };
        assert_eq!(classify(&wrapped(dns)), ProbeReason::ResolverUnavailable);
    }

    #[test]
    fn servfail_and_refused_are_the_resolvers_nxdomain_and_nodata_the_names() {
        use hickory_resolver::proto::op::{Query, ResponseCode};
        use hickory_resolver::proto::{ProtoError, ProtoErrorKind};
        let answered = |response_code| DnsError::Lookup {
            host: "seoul.example.test".into(),
            source: ProtoError::from(ProtoErrorKind::NoRecordsFound {
                query: Box::new(Query::default()),
                soa: None,
                ns: None,
                negative_ttl: None,
                response_code,
                trusted: false,
                authorities: None,
            })
            .into(),
        };
        for code in [ResponseCode::ServFail, ResponseCode::Refused] {
            assert_eq!(
                classify(&wrapped(answered(code))),
                ProbeReason::ResolverUnavailable,
                "{code:?}"
            );
        }
        for code in [ResponseCode::NXDomain, ResponseCode::NoError] {
            assert_eq!(
                classify(&wrapped(answered(code))),
                ProbeReason::DnsResolution,
                "{code:?}"
            );
        }
    }

    #[test]
    fn unknown_errors_are_other() {
        assert_eq!(classify(&wrapped(fmt::Error)), ProbeReason::Other);
    }

    #[tokio::test]
    async fn tokio_elapsed_is_timeout() {
        let elapsed = tokio::time::timeout(Duration::ZERO, std::future::pending::<()>())
            .await
            .unwrap_err();
        assert_eq!(classify(&wrapped(elapsed)), ProbeReason::Timeout);
    }
}
