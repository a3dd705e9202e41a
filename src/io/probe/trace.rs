//! What a probe learns on its way (HTTP status, name lookup time, certificate expiry), kept
//! outside the check's future so a probe cut off by its timeout still reports it.
//!
//! Must not: decide anything (the check's [`ProbeReason`](gslb_core::model::ProbeReason) does).

use std::net::IpAddr;
use std::time::Duration;

use tokio::time::Instant;

use gslb_core::model::Millis;

use super::dns::{Dns, DnsError};

/// Filled in by a running check; read by [`Prober::probe`](super::Prober::probe).
#[derive(Debug, Default)]
pub(crate) struct Trace {
    /// The HTTP status, as soon as a response arrived.
    pub(crate) http_status: Option<u16>,
    /// When the name lookup started, and how long it took once it ended.
    dns: Option<(Instant, Option<Duration>)>,
    /// The peer's leaf certificate `notAfter`, for HTTPS responses.
    pub(crate) cert_expiry: Option<Millis>,
}

impl Trace {
    /// Resolves `host` with `dns` within `limit` (see [`Dns::lookup_within`]), timing the
    /// lookup.
    pub(crate) async fn lookup(
        &mut self,
        dns: &Dns,
        host: &str,
        limit: Duration,
    ) -> Result<Vec<IpAddr>, DnsError> {
        let start = Instant::now();
        self.dns = Some((start, None));
        let found = dns.lookup_within(host, limit).await;
        self.dns = Some((start, Some(start.elapsed())));
        found
    }

    /// Whether a name lookup started and has not ended (the probe's timeout cut it off).
    pub(crate) fn lookup_running(&self) -> bool {
        matches!(self.dns, Some((_, None)))
    }

    /// Time spent resolving: the finished lookup's, or until now for one still running (the
    /// probe timed out during it); `None` when nothing was resolved.
    pub(crate) fn dns_lookup(&self) -> Option<Duration> {
        self.dns
            .map(|(start, took)| took.unwrap_or_else(|| start.elapsed()))
    }
}
