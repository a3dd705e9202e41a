//! Name resolution for probes: one hickory resolver per [`Prober`](super::Prober), used both by
//! the probe's own timed lookup and, as reqwest's `dns_resolver`, by the HTTP connector.
//!
//! One resolver per `Prober`, so one cache per vantage point, sized by
//! [`DnsSettings::cache_size`].
//!
//! Must not: fall back to the operating system's resolver (`getaddrinfo`), cache beyond record
//! TTLs (hickory's cache honours them; no minimum TTL is set), or wait longer than
//! [`DnsSettings::timeout`] per name.

use std::net::{IpAddr, SocketAddr};
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
    /// included. Default 2 s: below the default 5 s probe timeout, so a dead resolver is
    /// reported as `dns_resolution`, not as `timeout`.
    #[serde(default = "default_dns_timeout", with = "humantime_serde")]
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

/// A failed name resolution. The classifier maps every variant to `dns_resolution`.
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
    /// No answer within [`DnsSettings::timeout`].
    #[error("resolving {host}: no answer within {timeout:?}")]
    Timeout {
        /// The name looked up.
        host: String,
        /// The limit that passed.
        timeout: Duration,
    },
}

/// The shared resolver, optionally with one alias: a name that resolves to another host's
/// addresses (used to send TLS SNI for a `tls_server_name` to the URL host's addresses).
#[derive(Clone)]
pub(crate) struct Dns {
    resolver: Arc<TokioResolver>,
    timeout: Duration,
    alias: Option<Arc<Alias>>,
}

struct Alias {
    /// Lower-case name reqwest asks for.
    name: String,
    /// The host whose addresses it gets (a name or an IP literal, no brackets).
    real: String,
}

impl std::fmt::Debug for Dns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dns")
            .field("timeout", &self.timeout)
            .field("alias", &self.alias.as_ref().map(|a| (&a.name, &a.real)))
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
            alias: None,
        })
    }

    /// The same resolver, where `name` resolves to `real`'s addresses.
    pub(crate) fn aliased(&self, name: &str, real: &str) -> Self {
        let real = real
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        Self {
            alias: Some(Arc::new(Alias {
                name: name.to_ascii_lowercase(),
                real,
            })),
            ..self.clone()
        }
    }

    /// Resolves `host` (a name, or an IP literal which is returned as is) within the timeout.
    pub(crate) async fn lookup(&self, host: &str) -> Result<Vec<IpAddr>, DnsError> {
        let host = match &self.alias {
            Some(a) if host.eq_ignore_ascii_case(&a.name) => a.real.as_str(),
            _ => host,
        };
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(vec![ip]);
        }
        match tokio::time::timeout(self.timeout, self.resolver.lookup_ip(host)).await {
            Ok(Ok(found)) => Ok(found.iter().collect()),
            Ok(Err(source)) => Err(DnsError::Lookup {
                host: host.to_owned(),
                source,
            }),
            Err(_) => Err(DnsError::Timeout {
                host: host.to_owned(),
                timeout: self.timeout,
            }),
        }
    }
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
    fn builds_outside_a_runtime() {
        let settings = DnsSettings {
            nameservers: vec!["127.0.0.1:9".parse().unwrap()],
            timeout: Duration::from_millis(50),
            ..DnsSettings::default()
        };
        assert!(crate::probe::Prober::new(&settings).is_ok());
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
    async fn ip_literals_and_aliases_skip_queries() {
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
        let aliased = dns.aliased("Seoul.Example.test", "[::1]");
        assert_eq!(
            aliased.lookup("seoul.example.test").await.unwrap(),
            vec![IpAddr::from(std::net::Ipv6Addr::LOCALHOST)]
        );
    }
}
