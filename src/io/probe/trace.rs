//! What a probe learns on its way (HTTP status, name lookup time, certificate expiry), kept
//! outside the check's future so a probe cut off by its timeout still reports it.
//!
//! Must not: decide anything (the check's [`ProbeReason`](gslb_core::model::ProbeReason) does).

use std::future::Future;
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
    /// Whether the name lookup ended without an answer within its limit.
    lookup_timed_out: bool,
    /// The earliest `notAfter` of the certificates the peer presented, for HTTPS.
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
        self.lookup_timed_out = found.as_ref().is_err_and(DnsError::no_answer_in_time);
        found
    }

    /// Whether the name lookup got no answer in time ([`DnsError::no_answer_in_time`]): a
    /// wait, like a probe's timeout, that starvation can cause.
    pub(crate) fn lookup_timed_out(&self) -> bool {
        self.lookup_timed_out
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

/// Runs `check` for at most `timeout` from now. `Err` when the timeout won, with how late
/// after its deadline this task saw it: the scheduler's own lateness at that moment (near
/// zero in a process that gets its CPU; a CPU-starved process, whose tasks wait in the run
/// queue, sees it late by about that wait). [`timed_out`](super::classify::timed_out) judges
/// it.
pub(crate) async fn within<F: Future>(timeout: Duration, check: F) -> Result<F::Output, Duration> {
    let deadline = Instant::now() + timeout;
    match tokio::time::timeout_at(deadline, check).await {
        Ok(done) => Ok(done),
        Err(_) => Err(Instant::now().saturating_duration_since(deadline)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn within_reports_how_late_the_timeout_was_seen() {
        let ms = Duration::from_millis;
        assert_eq!(within(ms(200), async { 7 }).await, Ok(7));
        // A process that gets its CPU sees the timeout at its deadline.
        assert_eq!(
            within(ms(200), std::future::pending::<()>()).await,
            Err(ms(0))
        );
        // Starved: the task is not run until 300 ms past its deadline (the clock moves on while
        // it waits in the run queue).
        let check = tokio::spawn(within(ms(200), std::future::pending::<()>()));
        tokio::task::yield_now().await;
        tokio::time::advance(ms(500)).await;
        assert_eq!(check.await.expect("the check ran"), Err(ms(300)));
    }
}
