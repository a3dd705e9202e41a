//! Reconciler metrics, one label set per provider binding: provider calls, errors by class,
//! writes, drift and write fights, refused and shadow plans, the reconcile duration, and
//! whether (and for how long not) the provider matches the latest decision.

use super::{Family, Metrics};

/// Buckets of the reconcile duration histogram, in seconds: 5 ms to 2 min (Route 53's
/// change wait is bounded by `[route53] change_timeout`).
pub const RECONCILE_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

pub(super) const DECISION_APPLIED: Family = Family {
    name: "gslb_decision_applied",
    help: "1 when the status reads the latest decision applied (or a hold the provider serves), 0 while it reads pending (any cause) or shadow.",
    labels: &["service"],
};
pub(super) const PROVIDER_CALLS_TOTAL: Family = Family {
    name: "gslb_provider_calls_total",
    help: "Provider calls by service and operation (observe, apply).",
    labels: &["provider", "service", "operation"],
};
pub(super) const PROVIDER_ERRORS_TOTAL: Family = Family {
    name: "gslb_provider_errors_total",
    help: "Failed provider calls by service, operation and error class.",
    labels: &["provider", "service", "operation", "code"],
};
pub(super) const PROVIDER_WRITES_TOTAL: Family = Family {
    name: "gslb_provider_writes_total",
    help: "Changes written to a provider.",
    labels: &["provider", "service"],
};
pub(super) const SHADOW_PLANS_TOTAL: Family = Family {
    name: "gslb_shadow_plans_total",
    help: "Plans that shadow mode recorded instead of writing.",
    labels: &["service"],
};
pub(super) const PROVIDER_DRIFT_TOTAL: Family = Family {
    name: "gslb_provider_drift_total",
    help: "Re-applies of a state gslb had already written, because another writer changed it.",
    labels: &["provider", "service"],
};
pub(super) const PROVIDER_BUDGET_EXHAUSTED_TOTAL: Family = Family {
    name: "gslb_provider_budget_exhausted_total",
    help: "Reconcile passes held back because the binding spent its provider call budget for the minute.",
    labels: &["provider", "service"],
};
pub(super) const PROVIDER_WRITE_FIGHTS_TOTAL: Family = Family {
    name: "gslb_provider_write_fights_total",
    help: "Write fights declared: another writer kept reverting gslb, which stopped writing for a window.",
    labels: &["provider", "service"],
};
pub(super) const PLANS_REFUSED_TOTAL: Family = Family {
    name: "gslb_plans_refused_total",
    help: "Plans refused by a safety guard, by reason, per reconcile pass (fallback_drain_ignored: a fallback-pool drain dropped, once when it starts).",
    labels: &["service", "reason"],
};
pub(super) const DECISION_UNAPPLIED_AGE_SECONDS: Family = Family {
    name: "gslb_decision_unapplied_age_seconds",
    help: "Seconds the latest decision has waited for the provider (decided but not applied); 0 when applied.",
    labels: &["service"],
};
pub(super) const RECONCILE_DURATION_SECONDS: Family = Family {
    name: "gslb_reconcile_duration_seconds",
    help: "Duration of one reconcile pass: read the provider, plan, write when needed.",
    // Per provider, not per service (as controller-runtime's reconcile time is per controller,
    // not per object): 17 series per service were a third of a service's lines (issue 14).
    labels: &["provider"],
};

impl Metrics {
    /// Pre-creates the label sets of a reconciler for `service` on `provider` so they read 0,
    /// not absent: calls (observe, apply; the denominator of the provider-errors alert),
    /// writes, drift, write fights and the unapplied age (set to 0): 6 series; and the
    /// provider's reconcile duration histogram (one per provider, not per service). Errors by operation and code and refused
    /// plans by reason start at their first count: declaring 2 operations x 7 codes and 3
    /// reasons made 17 more series per service (issue 14); the alert on errors is a ratio
    /// over 10 minutes, which a first error not seen by `rate()` does not change.
    pub fn declare_binding(&self, provider: &str, service: &str) {
        for operation in ["observe", "apply"] {
            self.provider_calls_total
                .with_label_values(&[provider, service, operation]);
        }
        let labels = [provider, service];
        self.provider_writes_total.with_label_values(&labels);
        self.provider_drift_total.with_label_values(&labels);
        self.provider_write_fights_total.with_label_values(&labels);
        self.provider_budget_exhausted_total
            .with_label_values(&labels);
        self.reconcile_duration_seconds
            .with_label_values(&[provider]);
        self.decision_unapplied_age_seconds
            .with_label_values(&[service])
            .set(0.0);
    }
}
