//! Metrics of the controller's own operation: the running version, policy loads, webhook
//! deliveries, and the failover timelines' phase durations.

use gslb_core::model::ServiceId;
use gslb_core::timeline::Phase;

use super::{Family, Metrics};

/// Buckets of the failover phase histograms, in seconds: 1 s to 30 min, covering TTLs of
/// 60 s and Route 53's change propagation (typically under 60 s).
pub const PHASE_BUCKETS: &[f64] = &[
    1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 90.0, 120.0, 180.0, 300.0, 600.0, 1800.0,
];

pub(super) const BUILD_INFO: Family = Family {
    name: "gslb_build_info",
    help: "Always 1; labelled with the running version.",
    labels: &["version"],
};
pub(super) const POLICY_RELOADS_TOTAL: Family = Family {
    name: "gslb_policy_reloads_total",
    help: "Policy reload attempts by result (ok, error).",
    labels: &["result"],
};
pub(super) const FAILOVER_PHASE_SECONDS: Family = Family {
    name: "gslb_failover_phase_seconds",
    help: "Seconds from the start of a switch (first failed probe, or a drill's decision) to each timeline phase.",
    labels: &["service", "phase"],
};
pub(super) const POLICY_RELOAD_SUCCESS: Family = Family {
    name: "gslb_policy_reload_success",
    help: "1 when the last policy load succeeded; 0 when it failed and the last good set is kept.",
    labels: &[],
};
pub(super) const POLICY_RELOAD_TIMESTAMP_SECONDS: Family = Family {
    name: "gslb_policy_reload_timestamp_seconds",
    help: "Unix time of the last successful policy load.",
    labels: &[],
};
pub(super) const WEBHOOK_DELIVERIES_TOTAL: Family = Family {
    name: "gslb_webhook_deliveries_total",
    help: "Webhook delivery attempts by sink and result (delivered, retried, failed, dropped: pushed out of a full queue, lagged: events the reader missed).",
    labels: &["sink", "result"],
};

pub(super) const LOG_LINES_DROPPED_TOTAL: Family = Family {
    name: "gslb_log_lines_dropped_total",
    help: "Lines of the audit log or the observation recording that never reached the file: the queue to the disk was full (a slow or stuck disk) or the write failed (a full disk).",
    labels: &["log"],
};

/// The `log` label values of `gslb_log_lines_dropped_total`.
pub const LOGS: [&str; 2] = ["audit", "recording"];

/// The `result` label values of `gslb_policy_reloads_total`.
const RELOAD_RESULTS: [&str; 2] = ["ok", "error"];

impl Metrics {
    /// Sets `gslb_build_info{version}` to 1 and pre-creates both reload results, at start.
    pub(super) fn declare_process(&self) {
        self.build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION")])
            .set(1.0);
        for result in RELOAD_RESULTS {
            self.policy_reloads_total.with_label_values(&[result]);
        }
        for log in LOGS {
            self.log_lines_dropped_total.with_label_values(&[log]);
        }
    }

    /// Records a policy load (the initial one at start or a reload): on success
    /// `gslb_policy_reload_success` 1 and `gslb_policy_reload_timestamp_seconds` =
    /// `at_unix_secs`; on failure the success gauge 0 and the timestamp left at the last
    /// good load. Either way `gslb_policy_reloads_total{result}` counts it (`ok` or `error`).
    pub fn record_policy_load(&self, ok: bool, at_unix_secs: f64) {
        self.policy_reload_success.set(f64::from(u8::from(ok)));
        if ok {
            self.policy_reload_timestamp_seconds.set(at_unix_secs);
        }
        self.policy_reloads_total
            .with_label_values(&[if ok { "ok" } else { "error" }])
            .inc();
    }

    /// Creates `service`'s `gslb_failover_phase_seconds` series (every phase after the start,
    /// reading 0) when its first failover timeline opens, so phases a switch never reaches
    /// read 0 rather than absent. Before a service's first switch it has none: 13 buckets x 7
    /// phases per service would otherwise be most of a scrape (issue 14). Idempotent.
    pub fn declare_failover_phases(&self, service: &ServiceId) {
        for phase in &Phase::ALL[1..] {
            self.failover_phase_seconds
                .with_label_values(&[service.0.as_str(), phase.as_str()]);
        }
    }
}
