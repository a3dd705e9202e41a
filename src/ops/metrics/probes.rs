//! Probe result metrics, named after blackbox_exporter's (`probe_success`,
//! `probe_duration_seconds`, ...), and the reason counter: one series per service, pool,
//! endpoint and vantage point. The probe loops' own statistics are in `probing`.

use gslb_core::model::{Observation, ProbeReason, ServiceId};

use super::{CounterCell, Family, GaugeCell, Metrics};
use crate::ops::endpoints::EndpointTable;

/// The labels of the per-probe gauges.
const PROBE_LABELS: &[&str] = &["service", "pool", "endpoint", "vantage"];

pub(super) const PROBE_SUCCESS: Family = Family {
    name: "probe_success",
    help: "Whether the last probe of the endpoint succeeded (1) or not (0).",
    labels: PROBE_LABELS,
};
pub(super) const PROBE_DURATION_SECONDS: Family = Family {
    name: "probe_duration_seconds",
    help: "Duration of the last probe in seconds.",
    labels: PROBE_LABELS,
};
pub(super) const PROBE_HTTP_STATUS_CODE: Family = Family {
    name: "probe_http_status_code",
    help: "HTTP status of the last probe; 0 when no response arrived.",
    labels: PROBE_LABELS,
};
pub(super) const PROBE_SSL_EARLIEST_CERT_EXPIRY: Family = Family {
    name: "probe_ssl_earliest_cert_expiry",
    help: "Unix time the peer's leaf certificate in the last TLS handshake expires.",
    labels: PROBE_LABELS,
};
pub(super) const PROBE_DNS_LOOKUP_TIME_SECONDS: Family = Family {
    name: "probe_dns_lookup_time_seconds",
    help: "Seconds the last probe spent resolving the endpoint's name (0 for IP literals).",
    labels: PROBE_LABELS,
};
pub(super) const PROBES_TOTAL: Family = Family {
    name: "gslb_probes_total",
    help: "Probes by outcome reason.",
    labels: &["service", "pool", "endpoint", "reason"],
};

/// One endpoint's probe series as seen from one vantage point, resolved from the vectors once
/// (at its first result) instead of hashing the four label values per series per probe.
#[derive(Debug)]
pub(super) struct ProbeSeries {
    success: GaugeCell,
    duration: GaugeCell,
    http_status: GaugeCell,
    dns_lookup: GaugeCell,
    /// Created at the first probe that saw a certificate (absent for endpoints without TLS).
    cert_expiry: Option<GaugeCell>,
    /// `gslb_probes_total` by reason, each created at the first probe with that reason.
    reasons: Vec<(ProbeReason, CounterCell)>,
}

impl Metrics {
    /// Records one probe result of `pool` in `service`: success, duration, HTTP status (0
    /// without a response), DNS lookup time (0 for IP literals), the reason counter, and the
    /// certificate expiry when the probe saw one (the last value seen stays otherwise).
    ///
    /// The endpoint's series are looked up in the vectors at its first result (and again
    /// after [`Metrics::forget_service`]); later results only find them by name.
    pub fn record_probe(&self, service: &ServiceId, pool: &str, obs: &Observation) {
        let mut table = self.lock_probe_series();
        let labels = || {
            [
                service.0.as_str(),
                pool,
                obs.endpoint.0.as_str(),
                obs.vantage.0.as_str(),
            ]
        };
        let s = table.get_or_insert_with(service, &obs.endpoint, &obs.vantage, || ProbeSeries {
            success: self.probe_success.with_label_values(&labels()),
            duration: self.probe_duration_seconds.with_label_values(&labels()),
            http_status: self.probe_http_status_code.with_label_values(&labels()),
            dns_lookup: self
                .probe_dns_lookup_time_seconds
                .with_label_values(&labels()),
            cert_expiry: None,
            reasons: Vec::new(),
        });
        let o = &obs.outcome;
        s.success.set(f64::from(u8::from(o.success)));
        s.duration.set(o.duration.as_secs_f64());
        s.http_status.set(f64::from(o.http_status.unwrap_or(0)));
        s.dns_lookup
            .set(o.dns_lookup.unwrap_or_default().as_secs_f64());
        if let Some(expiry) = o.cert_expiry {
            // Kept at the last value seen while later probes fail before a response, so an
            // expiry alert does not go quiet while the endpoint is down.
            s.cert_expiry
                .get_or_insert_with(|| {
                    self.probe_ssl_earliest_cert_expiry
                        .with_label_values(&labels())
                })
                .set(expiry.0 as f64 / 1000.0);
        }
        match s.reasons.iter().find(|(r, _)| *r == o.reason) {
            Some((_, c)) => c.inc(),
            None => {
                let [service, pool, endpoint, _] = labels();
                let c = self.probes_total.with_label_values(&[
                    service,
                    pool,
                    endpoint,
                    o.reason.as_str(),
                ]);
                c.inc();
                s.reasons.push((o.reason, c));
            }
        }
    }

    /// How many endpoints (per vantage point) have their probe series resolved.
    pub fn probe_series_resolved(&self) -> usize {
        self.lock_probe_series().len()
    }

    pub(super) fn lock_probe_series(
        &self,
    ) -> std::sync::MutexGuard<'_, EndpointTable<ProbeSeries>> {
        self.probe_series
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
