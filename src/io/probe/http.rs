//! HTTP(S) probes: building reqwest clients (once per distinct setting) and running one GET.
//!
//! Must not: build a client per probe (about 5 ms of CPU each, see `probing.md`), keep idle
//! connections (a kept-alive connection hides connect failures), follow redirects unless asked,
//! or read more than [`BODY_LIMIT`] bytes of a body.

use std::time::Duration;

use reqwest::header::HeaderValue;
use reqwest::redirect;
use url::Url;

use gslb_core::model::{Millis, ProbeReason};

use super::classify::{classify, expired_not_after};
use super::dns::Dns;
use super::family;
use super::trace::Trace;

/// Bytes of the body read and searched for `body_contains`: 64 KiB (the limit documented on
/// `ProbeSpec::body_contains`; Route 53 string matching looks at only the first 5,120 bytes).
pub const BODY_LIMIT: usize = 64 * 1024;

/// Redirects followed when `follow_redirects` is on: 10 (reqwest's default limit).
pub const MAX_REDIRECTS: usize = 10;

/// The `User-Agent` probes send, e.g. `gslb-probe/0.1.0`.
pub const USER_AGENT: &str = concat!("gslb-probe/", env!("CARGO_PKG_VERSION"));

/// What makes two HTTP targets need different clients.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ClientKey {
    pub(crate) tls_verify: bool,
    pub(crate) follow_redirects: bool,
    /// `(tls_server_name, URL host)`: the client resolves the first to the second's addresses.
    pub(crate) alias: Option<(String, String)>,
}

impl ClientKey {
    /// The settings of the shared default client.
    pub(crate) const DEFAULT: Self = Self {
        tls_verify: true,
        follow_redirects: false,
        alias: None,
    };
}

/// Builds a client: no idle pool, our resolver, no proxy from the environment, TLS details
/// (the peer certificate) on responses, connections from `source` when set.
///
/// No TCP keepalive and no `TCP_USER_TIMEOUT` (reqwest's defaults set both, five
/// `setsockopt` calls per connection): a probe's connection lives less than its timeout, which
/// bounds it already, and is never kept idle. `TCP_NODELAY` stays (hyper always sets it).
pub(crate) fn build_client(
    dns: &Dns,
    key: &ClientKey,
    source: Option<std::net::IpAddr>,
) -> Result<reqwest::Client, reqwest::Error> {
    let resolver = match &key.alias {
        Some((name, real)) => dns.aliased(name, real),
        None => dns.clone(),
    };
    let redirects = if key.follow_redirects {
        redirect::Policy::limited(MAX_REDIRECTS)
    } else {
        redirect::Policy::none()
    };
    let builder = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .redirect(redirects)
        .tls_danger_accept_invalid_certs(!key.tls_verify)
        .dns_resolver(resolver)
        .no_proxy()
        .user_agent(USER_AGENT)
        .tls_info(true)
        .local_address(source)
        .tcp_keepalive(None)
        .tcp_keepalive_interval(None)
        .tcp_keepalive_retries(None);
    #[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
    let builder = builder.tcp_user_timeout(None);
    builder.build()
}

/// An HTTP check, ready to run.
#[derive(Debug, Clone)]
pub(crate) struct HttpTarget {
    pub(crate) client: reqwest::Client,
    /// The URL requested; its host is the `tls_server_name` when one is set.
    pub(crate) url: Url,
    /// The URL's host when it is a name: resolved (and timed) before the request.
    pub(crate) resolve: Option<String>,
    pub(crate) host_header: Option<HeaderValue>,
    pub(crate) expected_status: Vec<u16>,
    pub(crate) body_contains: Option<String>,
}

/// Runs one check; records in `trace` the lookup time, and the status and certificate expiry
/// as soon as a response arrives (so a timeout while reading the body still reports them), or
/// the expired certificate's `notAfter` when the handshake failed on it.
/// The lookup of the URL's host name is limited to `lookup`.
pub(crate) async fn check(
    dns: &Dns,
    t: &HttpTarget,
    trace: &mut Trace,
    lookup: Duration,
) -> ProbeReason {
    let addrs = match &t.resolve {
        Some(host) => match trace.lookup(dns, host, lookup).await {
            Ok(addrs) => addrs,
            Err(e) => {
                // The resolver failing is the prober's side, an answer without records the
                // origin's: `classify` tells them apart.
                let reason = classify(&e);
                tracing::debug!(url = %t.url, %reason, error = %error_chain(&e), "probe failed");
                return reason;
            }
        },
        None => Vec::new(),
    };
    let mut request = t.client.get(t.url.clone());
    if let Some(host) = &t.host_header {
        request = request.header(reqwest::header::HOST, host.clone());
    }
    let mut response = match request.send().await {
        Ok(r) => r,
        Err(e) => {
            let reason = failed(&t.url, &e);
            if reason == ProbeReason::TlsExpired {
                trace.cert_expiry = expired_not_after(&e);
            }
            return family::refine(reason, &literal_or(&t.url, addrs), family::family_routable);
        }
    };
    trace.cert_expiry = response
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(reqwest::tls::TlsInfo::peer_certificate)
        .and_then(not_after);
    let code = response.status().as_u16();
    trace.http_status = Some(code);
    if !t.expected_status.contains(&code) {
        return ProbeReason::HttpStatus;
    }
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                let room = BODY_LIMIT - body.len();
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                if body.len() == BODY_LIMIT {
                    break;
                }
            }
            Ok(None) => break,
            Err(e) => return failed(&t.url, &e),
        }
    }
    match &t.body_contains {
        Some(needle) if !contains(&body, needle.as_bytes()) => ProbeReason::BodyMismatch,
        _ => ProbeReason::Ok,
    }
}

fn failed(url: &Url, e: &reqwest::Error) -> ProbeReason {
    let reason = classify(e);
    tracing::debug!(%url, %reason, error = %error_chain(e), "probe failed");
    reason
}

/// The URL host's address when it is an IP literal, else `resolved` (the names' addresses).
fn literal_or(url: &Url, resolved: Vec<std::net::IpAddr>) -> Vec<std::net::IpAddr> {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => vec![ip.into()],
        Some(url::Host::Ipv6(ip)) => vec![ip.into()],
        _ => resolved,
    }
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

/// `outer: inner: innermost`, for logs.
pub(crate) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
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
}
