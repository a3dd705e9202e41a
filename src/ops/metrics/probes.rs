//! Probe result metrics, named after blackbox_exporter's (`probe_success`,
//! `probe_duration_seconds`, ...), and the reason counter: one series per service, pool,
//! endpoint and vantage point. The probe loops' own statistics are in `probing`.

use gslb_core::model::Observation;

use super::{Family, Metrics};

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

impl Metrics {
    /// Records one probe result of `pool` in `service`: success, duration, HTTP status (0
    /// without a response), DNS lookup time (0 for IP literals), the reason counter, and the
    /// certificate expiry when the probe saw one (the last value seen stays otherwise).
    pub fn record_probe(&self, service: &str, pool: &str, obs: &Observation) {
        let labels = [
            service,
            pool,
            obs.endpoint.0.as_str(),
            obs.vantage.0.as_str(),
        ];
        let o = &obs.outcome;
        self.probe_success
            .with_label_values(&labels)
            .set(f64::from(u8::from(o.success)));
        self.probe_duration_seconds
            .with_label_values(&labels)
            .set(o.duration.as_secs_f64());
        self.probe_http_status_code
            .with_label_values(&labels)
            .set(f64::from(o.http_status.unwrap_or(0)));
        self.probe_dns_lookup_time_seconds
            .with_label_values(&labels)
            .set(o.dns_lookup.unwrap_or_default().as_secs_f64());
        if let Some(expiry) = o.cert_expiry {
            // Kept at the last value seen while later probes fail before a response, so an
            // expiry alert does not go quiet while the endpoint is down.
            self.probe_ssl_earliest_cert_expiry
                .with_label_values(&labels)
                .set(expiry.0 as f64 / 1000.0);
        }
        self.probes_total
            .with_label_values(&[service, pool, obs.endpoint.0.as_str(), o.reason.as_str()])
            .inc();
    }
}
