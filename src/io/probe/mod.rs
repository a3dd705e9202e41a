//! Probes: the I/O edge that turns endpoints into [`Observation`](gslb_core::model::Observation)s.
//!
//! A [`Prober`] holds what is expensive to build (one hickory resolver, the TLS configurations);
//! [`Prober::target`] prepares an endpoint once, at policy load; [`Prober::probe`] runs one
//! check under a hard timeout and returns a [`ProbeOutcome`], never an error; [`run_endpoint`]
//! is the per-endpoint loop.
//!
//! Must not: know about providers, the engine or policies beyond [`ProbeSpec`] and
//! [`Endpoint`]; decide health (one failed probe is data, rise/fall is the engine's job).
//!
//! Files: `dns` (resolver, [`DnsSettings`]), `http` (GET check, redirects), `wire` (HTTP/1.1
//! request and response bytes), `tls` (client configurations, handshake), `tcp` (connect check,
//! the connect HTTP shares),
//! `classify` (error → [`ProbeReason`]), `family` (unprobeable from here: an address family
//! this host has no route for), `schedule` (the loop, phase and jitter), `limits`
//! (`[probing]`: in-flight bound, late threshold, open-file limit), `stats` (lateness, late,
//! skipped and timed-out probes), `starvation` (time the process loses to CPU starvation),
//! `trace` (status, lookup time and certificate expiry seen on
//! the way, kept past a timeout).

mod classify;
mod dns;
mod family;
mod http;
mod limits;
mod schedule;
mod starvation;
mod stats;
mod tcp;
mod tls;
mod trace;
mod wire;

use std::net::IpAddr;
use std::time::Duration;

use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::time::Instant;

use gslb_core::model::{EndpointId, ProbeOutcome, ProbeReason};
use gslb_core::policy::{Endpoint, EndpointKind, ProbeSpec};

pub use classify::{classify, error_chain};
pub(crate) use dns::Dns;
pub use dns::{
    DnsError, DnsSettings, default_dns_cache_size, default_dns_nameservers, default_dns_timeout,
};
pub use family::{family_routable, route_to};
pub use http::MAX_REDIRECTS;
pub use limits::{
    ProbingSettings, default_late_after, default_max_in_flight, effective_max_in_flight,
    open_file_limit, raise_open_file_limit,
};
pub use schedule::{
    MAX_JITTER, MAX_START_PHASE, ProbeNow, Schedule, Wakers, jittered, run_endpoint,
    run_endpoint_woken, start_phase,
};
pub use stats::{LatenessSnapshot, ProbeStats, StatsSnapshot};
pub use wire::{BODY_LIMIT, USER_AGENT};

use http::HttpTarget;

/// Errors building a [`Prober`] or a [`ProbeTarget`]: configuration problems, reported at
/// start-up or policy load. A failing probe is never an error.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The system DNS configuration (`/etc/resolv.conf`) could not be read; only when
    /// [`DnsSettings::nameservers`] is empty.
    #[error("reading the system DNS configuration")]
    SystemDns(#[source] hickory_resolver::ResolveError),
    /// The TLS client configuration could not be built (no usable trust store).
    #[error("building the TLS configuration of HTTPS probes")]
    Tls(#[source] rustls::Error),
    /// The endpoint cannot be probed with these settings.
    #[error("endpoint {endpoint}: {reason}")]
    InvalidTarget {
        /// The endpoint.
        endpoint: EndpointId,
        /// What is wrong, e.g. `host_header is not a valid header value`.
        reason: String,
    },
}

/// Runs probes. Build one per process (one vantage point) and share it (`Arc<Prober>`) between
/// probe loops.
///
/// Holds one hickory resolver (so one DNS cache per vantage point; it honours record TTLs), the
/// two TLS client configurations (certificates verified or not) every HTTPS target shares, the
/// bound on probes in flight ([`ProbingSettings::max_in_flight`]) and the loops'
/// [`ProbeStats`].
#[derive(Debug)]
pub struct Prober {
    dns: dns::Dns,
    tls: tls::TlsConfigs,
    room: Semaphore,
    max_in_flight: usize,
    late_after: Duration,
    /// [`ProbingSettings::source_address`].
    source: Option<IpAddr>,
    stats: ProbeStats,
    /// Time lost to CPU starvation, watched once a probe loop runs.
    starvation: starvation::Starvation,
}

/// An endpoint prepared for probing by [`Prober::target`]: cheap to clone, immutable.
#[derive(Debug, Clone)]
pub struct ProbeTarget {
    endpoint: EndpointId,
    interval: Duration,
    timeout: Duration,
    kind: TargetKind,
}

#[derive(Debug, Clone)]
enum TargetKind {
    Http(Box<HttpTarget>),
    Tcp { host: String, port: u16 },
}

impl ProbeTarget {
    /// The endpoint probed.
    pub fn endpoint(&self) -> &EndpointId {
        &self.endpoint
    }

    /// Time between two probes ([`ProbeSpec::interval`]).
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Hard limit for one probe ([`ProbeSpec::timeout`]).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
}

impl Prober {
    /// [`Prober::with_limits`] with the default [`ProbingSettings`].
    ///
    /// # Errors
    /// See [`Prober::with_limits`].
    pub fn new(settings: &DnsSettings) -> Result<Prober, ProbeError> {
        Self::with_limits(settings, &ProbingSettings::default())
    }

    /// Builds the resolver and the TLS configurations (reads the system trust store: a few ms
    /// of CPU, do it once). The in-flight bound is [`effective_max_in_flight`] of
    /// `probing.max_in_flight` and the process's open-file limit.
    ///
    /// # Errors
    /// [`ProbeError::SystemDns`] when `settings.nameservers` is empty and the system
    /// configuration cannot be read; [`ProbeError::Tls`] when the trust store is unusable.
    pub fn with_limits(
        settings: &DnsSettings,
        probing: &ProbingSettings,
    ) -> Result<Prober, ProbeError> {
        let dns = dns::Dns::new(settings).map_err(ProbeError::SystemDns)?;
        let tls = tls::TlsConfigs::new().map_err(ProbeError::Tls)?;
        let max_in_flight = effective_max_in_flight(probing.max_in_flight, open_file_limit())
            .min(Semaphore::MAX_PERMITS);
        Ok(Prober {
            dns,
            tls,
            room: Semaphore::new(max_in_flight),
            max_in_flight,
            late_after: probing.late_after,
            source: probing.source_address,
            stats: ProbeStats::default(),
            starvation: starvation::Starvation::default(),
        })
    }

    /// The bound on probes in flight in force (see [`Prober::with_limits`]).
    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight
    }

    /// The probe loops' counters and lateness histogram.
    pub fn stats(&self) -> &ProbeStats {
        &self.stats
    }

    /// Waits for room among the probes in flight; the room is held until the permit drops.
    /// Permits are handed out first come, first served.
    pub(crate) async fn room(&self) -> Option<SemaphorePermit<'_>> {
        // The semaphore is never closed; `None` would only mean it was.
        self.room.acquire().await.ok()
    }

    /// Starts watching how much time the process loses to CPU starvation (once; the probe
    /// loops call it): from then on a probe that lost more than
    /// [`ProbingSettings::late_after`] of its time while it waited for an answer is
    /// [`ProbeReason::Late`]. Must be called from within a tokio runtime.
    pub fn watch_starvation(&self) {
        self.starvation.watch();
    }

    /// Records that the probe planned at `plan` starts at `now`.
    pub(crate) fn started(&self, plan: Instant, now: Instant) {
        let lateness = now.saturating_duration_since(plan);
        self.stats.started(lateness, lateness > self.late_after);
    }

    /// Prepares `endpoint` for probing with `spec`. Call once per endpoint at policy load,
    /// not per probe: the request's bytes are built here.
    ///
    /// `tls_server_name` applies to `https://` URLs only: SNI and certificate checks use that
    /// name while the connection goes to the URL host's addresses; the `Host` header stays the
    /// URL's authority unless `host_header` is set.
    ///
    /// # Errors
    /// [`ProbeError::InvalidTarget`] for a URL without a host, an invalid `host_header` or
    /// `tls_server_name`.
    pub fn target(&self, spec: &ProbeSpec, endpoint: &Endpoint) -> Result<ProbeTarget, ProbeError> {
        let invalid = |reason: &str| ProbeError::InvalidTarget {
            endpoint: endpoint.id.clone(),
            reason: reason.to_owned(),
        };
        let kind = match &endpoint.kind {
            EndpointKind::Tcp { host, port } => TargetKind::Tcp {
                host: host.clone(),
                port: *port,
            },
            EndpointKind::Http(url) => TargetKind::Http(Box::new(
                HttpTarget::new(spec, url, &self.tls).map_err(invalid)?,
            )),
        };
        Ok(ProbeTarget {
            endpoint: endpoint.id.clone(),
            interval: spec.interval,
            timeout: spec.timeout,
            kind,
        })
    }

    /// Runs one probe of `target`, from name resolution to the last body byte read, under a
    /// hard `timeout`. Uses a fresh connection.
    ///
    /// HTTP: resolve the URL's host name (IP literals skip this; `localhost` is answered
    /// locally) within half the timeout (or [`DnsSettings::timeout`] when shorter; a lookup
    /// that runs out, or is still running at the timeout, is `resolver_unavailable`), GET, then the status must be in `expected_status` (a 3xx counts when
    /// redirects are not followed) and, when `body_contains` is set, the first
    /// [`BODY_LIMIT`] bytes of the body must contain it. TCP: resolve, then connect.
    ///
    /// Never fails: every failure is a [`ProbeOutcome`] with `success = false` and a reason
    /// (see [`classify()`]); `http_status` is set whenever a response arrived; `duration` and
    /// `dns_lookup` (host names only) are measured on tokio's clock; `cert_expiry` is the
    /// earliest `notAfter` of the certificates the peer presented in the last TLS handshake
    /// (its leaf and intermediates; blackbox_exporter takes the earliest of the verified chain,
    /// which adds the root).
    ///
    /// A probe that waited for an answer (its timeout, or a name lookup that got none in time)
    /// and lost more than [`ProbingSettings::late_after`] of its time to CPU starvation is
    /// [`ProbeReason::Late`], not `timeout` or `resolver_unavailable`: its steps waited in the
    /// run queue and the origin (or resolver) was never given its time, so it is not evidence
    /// either way. Time lost is the larger of how late this task saw its timeout and what the
    /// starvation watch counted during the probe ([`Prober::watch_starvation`]; see
    /// `classify::timed_out` and `classify::judged`).
    ///
    /// At the timeout the probe's future is dropped, and with it its socket: nothing of the
    /// probe stays in flight past it (the client keeps no idle connections and runs no
    /// background work per request). Calling this directly does not wait for room among the
    /// probes in flight; [`run_endpoint`] does.
    pub async fn probe(&self, target: &ProbeTarget) -> ProbeOutcome {
        let _in_flight = self.stats.in_flight();
        let start = Instant::now();
        let lost_before = self.starvation.lost();
        let mut trace = trace::Trace::default();
        // The lookup gets at most half the probe's time: past it the resolver, not the origin,
        // is what failed, and the origin keeps the other half.
        let lookup = target.timeout / 2;
        let checked = trace::within(target.timeout, async {
            match &target.kind {
                TargetKind::Http(t) => {
                    http::check(&self.dns, self.source, t, &mut trace, lookup).await
                }
                TargetKind::Tcp { host, port } => {
                    let to = tcp::Target {
                        host,
                        port: *port,
                        source: self.source,
                    };
                    tcp::check(&self.dns, to, &mut trace, lookup).await
                }
            }
        })
        .await;
        let lost = self.starvation.lost().saturating_sub(lost_before);
        let reason = match checked {
            Ok(reason) => classify::judged(reason, trace.lookup_timed_out(), lost, self.late_after),
            Err(late_by) => {
                self.stats.timed_out();
                let late_by = late_by.max(lost);
                let reason = classify::timed_out(late_by, self.late_after, trace.lookup_running());
                let timeout = humantime::format_duration(target.timeout);
                tracing::debug!(endpoint = %target.endpoint, %timeout, ?late_by, %reason, "probe timed out");
                reason
            }
        };
        ProbeOutcome {
            success: reason == ProbeReason::Ok,
            duration: start.elapsed(),
            http_status: trace.http_status,
            reason,
            dns_lookup: trace.dns_lookup(),
            cert_expiry: trace.cert_expiry,
        }
    }
}
