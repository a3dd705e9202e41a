//! HTTP(S) probes: one GET on a fresh connection, spoken by `wire` over TCP (`tcp`) or TLS
//! (`tls`), redirects followed when asked.
//!
//! Our own client, not reqwest: a probe needs one request per connection and none of a
//! general client's pool, connector stack or spawned connection task, which cost about 30
//! allocations per probe (two thirds of the daemon's at 10,000 probes a second) and a task
//! wake-up each way (docs/benchmarks.md, "Round 7").
//!
//! Must not: keep or reuse a connection (a kept-alive connection hides connect failures),
//! follow redirects unless asked, or read more than [`BODY_LIMIT`](wire::BODY_LIMIT) bytes of a body.

use std::borrow::Cow;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use url::Url;

use gslb_core::model::{Millis, ProbeReason};
use gslb_core::policy::ProbeSpec;

use super::classify::{classify, error_chain, expired_not_after};
use super::dns::Dns;
use super::tls::{self, TlsConfigs};
use super::trace::Trace;
use super::wire;
use super::{family, tcp};

/// Redirects followed when `follow_redirects` is on: 10, reqwest's default limit (the probes'
/// client before), kept so a policy's behaviour did not change.
pub const MAX_REDIRECTS: usize = 10;

/// An HTTP check, ready to run: the request's bytes are built once, here.
#[derive(Debug, Clone)]
pub(crate) struct HttpTarget {
    /// The URL requested; its host is the `tls_server_name` when one is set.
    url: Url,
    /// The URL host's name to resolve (the real host, not `tls_server_name`), or its address.
    connect_to: Host,
    /// `https://`: the configuration for `tls_verify` and the name checked (SNI).
    tls: Option<ServerName<'static>>,
    config: Arc<ClientConfig>,
    /// The `Host` header's value: `host_header`, else the URL's authority (the real host's when
    /// `tls_server_name` is set); kept on redirects that stay on the URL's host and port.
    host_header: String,
    request: Box<[u8]>,
    expected_status: Vec<u16>,
    body_contains: Option<String>,
    follow_redirects: bool,
}

#[derive(Debug, Clone)]
enum Host {
    Name(String),
    Ip(IpAddr),
}

impl HttpTarget {
    /// Prepares `url` for probing with `spec`: see [`Prober::target`](super::Prober::target).
    /// `Err` is the reason the target is invalid.
    pub(crate) fn new(spec: &ProbeSpec, url: &Url, tls: &TlsConfigs) -> Result<Self, &'static str> {
        let connect_to = match url.host() {
            None => return Err("the URL has no host"),
            Some(url::Host::Domain(name)) => Host::Name(name.to_owned()),
            Some(url::Host::Ipv4(ip)) => Host::Ip(ip.into()),
            Some(url::Host::Ipv6(ip)) => Host::Ip(ip.into()),
        };
        let mut host_header = match &spec.host_header {
            Some(h) if !h.bytes().all(|b| b == b'\t' || (0x20..0x7f).contains(&b)) => {
                return Err("host_header is not a valid header value");
            }
            Some(h) => Some(h.clone()),
            None => None,
        };
        let mut url = url.clone();
        if let (Some(sni), "https") = (&spec.tls_server_name, url.scheme()) {
            host_header.get_or_insert_with(|| authority(&url));
            url.set_host(Some(sni))
                .map_err(|_| "tls_server_name is not a valid host name")?;
            if !matches!(url.host(), Some(url::Host::Domain(_))) {
                return Err("tls_server_name must be a DNS name");
            }
        }
        let tls_name = match url.scheme() {
            "https" => Some(server_name(&url).ok_or("the URL host is not a valid TLS name")?),
            _ => None,
        };
        let host_header = host_header.unwrap_or_else(|| authority(&url));
        Ok(Self {
            request: wire::request(&target_of(&url), &host_header),
            host_header,
            url,
            connect_to,
            tls: tls_name,
            config: tls.get(spec.tls_verify).clone(),
            expected_status: spec.expected_status.clone(),
            body_contains: spec.body_contains.clone(),
            follow_redirects: spec.follow_redirects,
        })
    }
}

/// One request of a check: the first, or one after a redirect.
struct Hop<'t> {
    url: Cow<'t, Url>,
    addrs: Cow<'t, [IpAddr]>,
    tls: Option<ServerName<'static>>,
    request: Cow<'t, [u8]>,
}

/// What a response means for the check.
enum Answer {
    Done(ProbeReason),
    /// Follow to this `http(s)://` URL.
    Redirect(Url),
}

/// Runs one check from `source` when set; records in `trace` the lookup time, the status as
/// soon as a response head arrives and the earliest `notAfter` of the certificates presented
/// as soon as a handshake ends (so a timeout while reading the body still reports them), or the expired
/// certificate's `notAfter` when the handshake failed on it. The lookup of the URL's host name
/// (and of a redirect's) is limited to `lookup`.
pub(crate) async fn check(
    dns: &Dns,
    source: Option<IpAddr>,
    t: &HttpTarget,
    trace: &mut Trace,
    lookup: Duration,
) -> ProbeReason {
    let addrs = match &t.connect_to {
        Host::Ip(ip) => vec![*ip],
        Host::Name(name) => match trace.lookup(dns, name, lookup).await {
            Ok(addrs) => addrs,
            Err(e) => return failed(&t.url, &e),
        },
    };
    let mut hop = Hop {
        url: Cow::Borrowed(&t.url),
        addrs: Cow::Borrowed(&addrs),
        tls: t.tls.clone(),
        request: Cow::Borrowed(&t.request),
    };
    for _ in 0..=MAX_REDIRECTS {
        match exchange(&hop, source, t, trace).await {
            Ok(Answer::Done(reason)) => return reason,
            Ok(Answer::Redirect(url)) => {
                hop = match redirected(dns, url, (t, &addrs), lookup).await {
                    Ok(next) => next,
                    Err(reason) => return reason,
                };
            }
            Err(e) => {
                let reason = failed(&hop.url, &e);
                if reason == ProbeReason::TlsExpired {
                    trace.cert_expiry = expired_not_after(&e);
                }
                return family::refine(reason, &hop.addrs, family::family_routable);
            }
        }
    }
    tracing::debug!(url = %t.url, "probe failed: more than {MAX_REDIRECTS} redirects");
    ProbeReason::Other
}

/// Connects, runs the TLS handshake for `https://`, sends the request and reads the answer.
/// What `trace` saw of an earlier hop (its 3xx, its certificate) is cleared first: the
/// outcome reports the last request's.
async fn exchange(
    hop: &Hop<'_>,
    source: Option<IpAddr>,
    t: &HttpTarget,
    trace: &mut Trace,
) -> std::io::Result<Answer> {
    trace.http_status = None;
    trace.cert_expiry = None;
    let port = hop.url.port_or_known_default().unwrap_or(80);
    let tcp = tcp::connect_any(&hop.addrs, port, source).await?;
    match &hop.tls {
        None => answer(tcp, hop, t, trace).await,
        Some(name) => {
            let tls = tls::handshake(&t.config, name.clone(), tcp).await?;
            trace.cert_expiry = tls::chain(&tls)
                .iter()
                .filter_map(|der| not_after(der))
                .min();
            answer(tls, hop, t, trace).await
        }
    }
}

/// Sends the hop's request on `stream` and judges the response: a redirect to follow (a 3xx
/// whose `Location` is a valid `http(s)://` URL; else the 3xx is judged by its status, as
/// reqwest did), the status, then (when the status is expected) the body, read to its end or
/// [`BODY_LIMIT`](wire::BODY_LIMIT).
async fn answer<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    hop: &Hop<'_>,
    t: &HttpTarget,
    trace: &mut Trace,
) -> std::io::Result<Answer> {
    stream.write_all(&hop.request).await?;
    // TLS may hold the encrypted request in its buffer until flushed.
    stream.flush().await?;
    let mut response = wire::Response::new(&mut stream);
    let head = response.head().await?;
    trace.http_status = Some(head.status);
    if t.follow_redirects
        && matches!(head.status, 301 | 302 | 303 | 307 | 308)
        && let Some(url) = head.location.and_then(|l| redirect_url(&hop.url, &l))
    {
        return Ok(Answer::Redirect(url));
    }
    if !t.expected_status.contains(&head.status) {
        return Ok(Answer::Done(ProbeReason::HttpStatus));
    }
    let body = response
        .body(head.framing, t.body_contains.is_some())
        .await?;
    Ok(Answer::Done(match &t.body_contains {
        Some(needle) if !contains(&body, needle.as_bytes()) => ProbeReason::BodyMismatch,
        _ => ProbeReason::Ok,
    }))
}

/// `location` resolved against `from`, when it is an `http(s)://` URL with a valid host.
fn redirect_url(from: &Url, location: &str) -> Option<Url> {
    let url = from.join(location).ok()?;
    let valid = match url.scheme() {
        "http" => url.host().is_some(),
        "https" => server_name(&url).is_some(),
        _ => false,
    };
    if !valid {
        tracing::debug!(url = %from, location, "redirect not followed: not an http(s) URL");
    }
    valid.then_some(url)
}

/// The request after a redirect to `url`. On the first URL's host (the `tls_server_name`
/// when set), whatever the port or scheme, it goes to the first request's addresses, so a
/// `tls_server_name` probe keeps going to the URL host; else to the new host's, resolved within
/// `lookup`. On the first URL's host and port it keeps the first request's `Host` header (a
/// `host_header` included); else the header is the new URL's authority.
async fn redirected<'t>(
    dns: &Dns,
    url: Url,
    (t, first): (&'t HttpTarget, &[IpAddr]),
    lookup: Duration,
) -> Result<Hop<'t>, ProbeReason> {
    let same_host = url.host() == t.url.host();
    let addrs = match url.host() {
        _ if same_host => first.to_vec(),
        Some(url::Host::Domain(name)) => dns
            .lookup_within(name, lookup)
            .await
            .map_err(|e| failed(&url, &e))?,
        Some(url::Host::Ipv4(ip)) => vec![ip.into()],
        Some(url::Host::Ipv6(ip)) => vec![ip.into()],
        // `redirect_url` lets no URL without a host through.
        None => return Err(ProbeReason::Other),
    };
    let host = if same_host && url.port_or_known_default() == t.url.port_or_known_default() {
        t.host_header.clone()
    } else {
        authority(&url)
    };
    Ok(Hop {
        request: Cow::Owned(wire::request(&target_of(&url), &host).into_vec()),
        tls: (url.scheme() == "https")
            .then(|| server_name(&url))
            .flatten(),
        url: Cow::Owned(url),
        addrs: Cow::Owned(addrs),
    })
}

/// The URL's path and query, e.g. `/health?deep=1`.
fn target_of(url: &Url) -> String {
    match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_owned(),
    }
}

/// The URL's authority for a `Host` header: the host, and the port when not the scheme's
/// default (`seoul.example.test`, `[::1]:8080`).
fn authority(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    }
}

/// The name TLS checks for the URL's host: a DNS name or an IP address.
fn server_name(url: &Url) -> Option<ServerName<'static>> {
    match url.host()? {
        url::Host::Domain(name) => ServerName::try_from(name.to_owned()).ok(),
        url::Host::Ipv4(ip) => Some(ServerName::IpAddress(IpAddr::from(ip).into())),
        url::Host::Ipv6(ip) => Some(ServerName::IpAddress(IpAddr::from(ip).into())),
    }
}

fn failed(url: &Url, e: &(dyn std::error::Error + 'static)) -> ProbeReason {
    let reason = classify(e);
    tracing::debug!(%url, %reason, error = %error_chain(e), "probe failed");
    reason
}

/// The `notAfter` of a DER certificate; `None` (logged) when it does not parse.
fn not_after(der: &[u8]) -> Option<Millis> {
    use x509_cert::der::Decode;
    match x509_cert::Certificate::from_der(der) {
        Ok(cert) => {
            let at = cert
                .tbs_certificate()
                .validity()
                .not_after
                .to_unix_duration();
            Some(Millis(u64::try_from(at.as_millis()).unwrap_or(u64::MAX)))
        }
        Err(e) => {
            tracing::debug!(error = %e, "peer certificate does not parse; no expiry reported");
            None
        }
    }
}

/// `haystack` contains `needle` (an empty needle is always contained).
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_that_does_not_parse_has_no_expiry() {
        assert_eq!(not_after(b""), None);
        assert_eq!(not_after(b"\x30\x03\x02\x01\x01"), None);
    }

    #[test]
    fn substring_search() {
        assert!(contains(b"ok region=seoul\n", b"region=seoul"));
        assert!(!contains(b"ok region=tokyo\n", b"region=seoul"));
        assert!(contains(b"", b""));
        assert!(!contains(b"ok", b"ok region"));
    }

    #[test]
    fn the_host_header_names_the_port_only_when_not_the_default() {
        let url = |s: &str| Url::parse(s).unwrap();
        assert_eq!(
            authority(&url("https://seoul.example.test/h")),
            "seoul.example.test"
        );
        assert_eq!(authority(&url("http://[::1]:8080/h")), "[::1]:8080");
        assert_eq!(authority(&url("http://10.0.0.1:80/h")), "10.0.0.1");
        assert_eq!(target_of(&url("http://h/health?deep=1")), "/health?deep=1");
        assert_eq!(target_of(&url("http://h")), "/");
    }
}
