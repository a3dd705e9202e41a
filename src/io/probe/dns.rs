//! Name resolution for probes: one hickory resolver per [`Prober`](super::Prober), used by the
//! probe's own timed lookup, and as reqwest's `dns_resolver` by the failover observers.
//!
//! One resolver per `Prober`, so one cache per vantage point, sized by
//! [`DnsSettings::cache_size`].
//!
//! Must not: fall back to the operating system's resolver (`getaddrinfo`), cache beyond record
//! TTLs (hickory's cache honours them; no minimum TTL is set), or wait longer than
//! [`DnsSettings::timeout`] per name (plus [`REFUSAL_WAIT`] to tell a dead nameserver from a
//! slow answer).

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use hickory_resolver::config::{NameServerConfig, ResolverConfig, ResolverOpts};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::proto::xfer::Protocol;
use hickory_resolver::{ResolveError, TokioResolver};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use serde::Deserialize;

/// How probes resolve endpoint hostnames.
///
/// Strict: unknown keys are rejected. Example (TOML): `nameservers = ["10.0.0.2:53"]`,
/// `timeout = "2s"`, `cache_size = 20000`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DnsSettings {
    /// Nameservers to query, as `ip:port` (UDP, and TCP for truncated answers), in order.
    /// Default empty: the system configuration (`/etc/resolv.conf`: its nameservers, search
    /// list and `ndots`; its `timeout` and `attempts` are replaced by [`Self::timeout`]).
    /// `/etc/hosts` is consulted in both cases, and `localhost` is always answered locally.
    #[serde(default = "default_dns_nameservers")]
    pub nameservers: Vec<SocketAddr>,
    /// Limit for resolving one name, all nameservers, retries and both address families
    /// included. Default 2 s. A probe's own lookup is further limited to half its probe
    /// timeout, so a resolver that does not answer is always reported as
    /// `resolver_unavailable` (the prober's side), never as a `timeout` of the origin.
    #[serde(default = "default_dns_timeout", with = "gslb_core::policy::duration")]
    pub timeout: Duration,
    /// Answers the resolver caches (one entry per name and record type), each for its TTL.
    /// Default 20,000: an A and an AAAA answer for each of 10,000 endpoint names (issue 6's
    /// scale); hickory's own default of 32 makes a controller with more names than that query
    /// its nameserver on nearly every probe. Entries take memory only when used.
    #[serde(default = "default_dns_cache_size")]
    pub cache_size: usize,
}

/// Default for [`DnsSettings::nameservers`]: empty, i.e. the system configuration.
pub fn default_dns_nameservers() -> Vec<SocketAddr> {
    Vec::new()
}

/// Default for [`DnsSettings::timeout`]: 2 s.
pub fn default_dns_timeout() -> Duration {
    Duration::from_secs(2)
}

/// Default for [`DnsSettings::cache_size`]: 20,000 answers.
pub fn default_dns_cache_size() -> usize {
    20_000
}

impl Default for DnsSettings {
    fn default() -> Self {
        Self {
            nameservers: default_dns_nameservers(),
            timeout: default_dns_timeout(),
            cache_size: default_dns_cache_size(),
        }
    }
}

/// A failed name resolution. The classifier maps a `Lookup` that is an answer about the name
/// (NXDOMAIN, NODATA) to `dns_resolution` (the origin's side), everything else to
/// `resolver_unavailable` (the prober's side).
#[derive(Debug, thiserror::Error)]
pub enum DnsError {
    /// The resolver answered with an error (NXDOMAIN, no records, SERVFAIL, unreachable
    /// nameservers).
    #[error("resolving {host}")]
    Lookup {
        /// The name looked up.
        host: String,
        /// hickory's error.
        #[source]
        source: ResolveError,
    },
    /// No answer within the lookup's limit ([`DnsSettings::timeout`], or less for a probe).
    #[error("resolving {host}: no answer within {}", humantime::format_duration(*.timeout))]
    Timeout {
        /// The name looked up.
        host: String,
        /// The limit that passed.
        timeout: Duration,
    },
    /// No answer within the lookup's limit, and every configured nameserver refuses (nothing
    /// listens on its port): the resolver is down, not the name.
    #[error(
        "resolving {host}: no nameserver listening ({} refuse)",
        list(nameservers)
    )]
    NoNameserver {
        /// The name looked up.
        host: String,
        /// The configured nameservers, every one of which refused.
        nameservers: Vec<SocketAddr>,
    },
}

impl DnsError {
    /// Whether the lookup ended for want of an answer in time: our own limit
    /// ([`DnsError::Timeout`]) or hickory's per-query timeout, rather than an answer (an error
    /// code, NXDOMAIN, NODATA) or a refusal.
    pub(crate) fn no_answer_in_time(&self) -> bool {
        use hickory_resolver::proto::ProtoErrorKind;
        match self {
            Self::Timeout { .. } => true,
            Self::Lookup { source, .. } => source
                .proto()
                .is_some_and(|p| matches!(p.kind(), ProtoErrorKind::Timeout)),
            Self::NoNameserver { .. } => false,
        }
    }
}

/// `a, b` for an error message.
fn list(addrs: &[SocketAddr]) -> String {
    addrs
        .iter()
        .map(SocketAddr::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// How long a check of a silent nameserver waits for the refusal (ICMP port unreachable) after
/// a lookup timed out. 100 ms: a loopback or LAN resolver refuses within a millisecond; a
/// remote one that only drops packets is indistinguishable from a slow answer anyway.
pub const REFUSAL_WAIT: Duration = Duration::from_millis(100);

/// The shared resolver.
#[derive(Clone)]
pub(crate) struct Dns {
    resolver: Arc<TokioResolver>,
    timeout: Duration,
    /// The configured nameservers; empty with the system configuration.
    nameservers: Arc<[SocketAddr]>,
}

impl std::fmt::Debug for Dns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dns")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Dns {
    /// Builds the resolver. With no nameservers, reads the system configuration.
    pub(crate) fn new(settings: &DnsSettings) -> Result<Self, ResolveError> {
        let mut builder = if settings.nameservers.is_empty() {
            TokioResolver::builder_tokio()?
        } else {
            let mut servers = Vec::with_capacity(settings.nameservers.len() * 2);
            for &addr in &settings.nameservers {
                servers.push(NameServerConfig::new(addr, Protocol::Udp));
                servers.push(NameServerConfig::new(addr, Protocol::Tcp));
            }
            TokioResolver::builder_with_config(
                ResolverConfig::from_parts(None, Vec::new(), servers),
                TokioConnectionProvider::default(),
            )
        };
        let opts: &mut ResolverOpts = builder.options_mut();
        // Two tries per query fit in the overall limit that `lookup` enforces.
        opts.attempts = 2;
        opts.timeout = (settings.timeout / 2).max(Duration::from_millis(1));
        opts.cache_size = settings.cache_size;
        Ok(Self {
            resolver: Arc::new(builder.build()),
            timeout: settings.timeout,
            nameservers: settings.nameservers.clone().into(),
        })
    }

    /// Resolves `host` (a name, or an IP literal which is returned as is) within the timeout.
    pub(crate) async fn lookup(&self, host: &str) -> Result<Vec<IpAddr>, DnsError> {
        self.lookup_within(host, self.timeout).await
    }

    /// [`Dns::lookup`] within `limit` when that is shorter than [`DnsSettings::timeout`] (a
    /// probe passes a share of its own timeout); [`DnsError::Timeout`] names the limit used.
    pub(crate) async fn lookup_within(
        &self,
        host: &str,
        limit: Duration,
    ) -> Result<Vec<IpAddr>, DnsError> {
        let limit = limit.min(self.timeout);
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(vec![ip]);
        }
        match tokio::time::timeout(limit, self.resolver.lookup_ip(host)).await {
            Ok(Ok(found)) => Ok(found.iter().collect()),
            Ok(Err(source)) => Err(DnsError::Lookup {
                host: host.to_owned(),
                source,
            }),
            // hickory uses unconnected UDP sockets, so a nameserver port where nothing listens
            // looks like a slow one to it; a connected socket hears the refusal.
            Err(_) if self.nameservers_refuse().await => Err(DnsError::NoNameserver {
                host: host.to_owned(),
                nameservers: self.nameservers.to_vec(),
            }),
            Err(_) => Err(DnsError::Timeout {
                host: host.to_owned(),
                timeout: limit,
            }),
        }
    }

    /// Whether nameservers are configured and every one refuses a query right now.
    async fn nameservers_refuse(&self) -> bool {
        if self.nameservers.is_empty() {
            return false;
        }
        for ns in self.nameservers.iter() {
            if !refuses(*ns).await {
                return false;
            }
        }
        true
    }
}

/// Sends a query for the root's NS records to `ns` on a connected UDP socket and reports
/// whether it is refused (`ECONNREFUSED`, from an ICMP port unreachable) within
/// [`REFUSAL_WAIT`]. An answer, silence or any other error is not a refusal.
async fn refuses(ns: SocketAddr) -> bool {
    // Header: id 0, flags RD, one question; then the root name, type NS (2), class IN (1).
    const QUERY: [u8; 17] = [0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 1];
    let local: SocketAddr = if ns.is_ipv4() {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let Ok(socket) = tokio::net::UdpSocket::bind(local).await else {
        return false;
    };
    if socket.connect(ns).await.is_err() {
        return false;
    }
    let refused = |e: &io::Error| e.kind() == io::ErrorKind::ConnectionRefused;
    if let Err(e) = socket.send(&QUERY).await {
        return refused(&e);
    }
    let mut buf = [0u8; 512];
    matches!(
        tokio::time::timeout(REFUSAL_WAIT, socket.recv(&mut buf)).await,
        Ok(Err(e)) if refused(&e)
    )
}

impl Resolve for Dns {
    fn resolve(&self, name: Name) -> Resolving {
        let dns = self.clone();
        Box::pin(async move {
            let ips = dns.lookup(name.as_str()).await?;
            // Port 0: reqwest substitutes the URL's port.
            let addrs: Addrs = Box::new(ips.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_missing_answer_is_a_wait_starvation_can_cause() {
        use hickory_resolver::proto::{ProtoError, ProtoErrorKind};
        let host = || "origin.test".to_owned();
        let timeout = Duration::from_millis(300);
        assert!(
            DnsError::Timeout {
                host: host(),
                timeout
            }
            .no_answer_in_time()
        );
        let hickory_timeout = ResolveError::from(ProtoError::from(ProtoErrorKind::Timeout));
        let lookup = DnsError::Lookup {
            host: host(),
            source: hickory_timeout,
        };
        assert!(
            lookup.no_answer_in_time(),
            "hickory's own per-query timeout"
        );
        let refused = ResolveError::from(io::Error::from(io::ErrorKind::ConnectionRefused));
        let answered = DnsError::Lookup {
            host: host(),
            source: refused,
        };
        assert!(!answered.no_answer_in_time());
        let down = DnsError::NoNameserver {
            host: host(),
            nameservers: vec!["127.0.0.1:53".parse().unwrap()],
        };
        assert!(!down.no_answer_in_time(), "a refusal is an answer");
    }

    #[test]
    fn builds_outside_a_runtime() {
        let settings = DnsSettings {
            nameservers: vec!["127.0.0.1:9".parse().unwrap()],
            timeout: Duration::from_millis(50),
            ..DnsSettings::default()
        };
        assert!(crate::io::probe::Prober::new(&settings).is_ok());
    }

    #[test]
    fn settings_defaults_and_strictness() {
        let s: DnsSettings = serde_json::from_str("{}").unwrap();
        assert_eq!(s, DnsSettings::default());
        assert_eq!(s.timeout, Duration::from_secs(2));
        assert_eq!(s.cache_size, 20_000);
        let s: DnsSettings = serde_json::from_str(
            r#"{"nameservers":["127.0.0.1:5353"],"timeout":"300ms","cache_size":64}"#,
        )
        .unwrap();
        assert_eq!(s.cache_size, 64);
        assert_eq!(
            s.nameservers,
            vec!["127.0.0.1:5353".parse::<SocketAddr>().unwrap()]
        );
        assert_eq!(s.timeout, Duration::from_millis(300));
        assert!(serde_json::from_str::<DnsSettings>(r#"{"servers":[]}"#).is_err());
    }

    #[tokio::test]
    async fn ip_literals_skip_queries() {
        // A nameserver nobody answers on: any real query would time out.
        let dns = Dns::new(&DnsSettings {
            nameservers: vec!["127.0.0.1:9".parse().unwrap()],
            timeout: Duration::from_millis(50),
            ..DnsSettings::default()
        })
        .unwrap();
        assert_eq!(
            dns.lookup("127.0.0.1").await.unwrap(),
            vec![IpAddr::from([127, 0, 0, 1])]
        );
        assert_eq!(
            dns.lookup("::1").await.unwrap(),
            vec![IpAddr::from(std::net::Ipv6Addr::LOCALHOST)]
        );
    }
}
