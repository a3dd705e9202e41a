//! Every metric gslb exports, declared once with its help text.
//!
//! Probe metrics use blackbox_exporter's names; controller metrics are prefixed `gslb_`. Labels
//! take only bounded values: names from policies, rule and reason enums, provider error codes.

use prometheus::{Encoder, GaugeVec, IntCounterVec, Opts, Registry, TextEncoder};

use crate::engine::{Decision, Rule};
use crate::model::{Observation, Verdict};

/// The metric set of one controller process.
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Registry,
    /// `probe_success{service,pool,endpoint,vantage}`: 1 when the last probe passed.
    pub probe_success: GaugeVec,
    /// `probe_duration_seconds{...}`: duration of the last probe.
    pub probe_duration_seconds: GaugeVec,
    /// `probe_http_status_code{...}`: HTTP status of the last probe, 0 without a response.
    pub probe_http_status_code: GaugeVec,
    /// `gslb_probes_total{service,pool,endpoint,reason}`: probes by outcome reason.
    pub probes_total: IntCounterVec,
    /// `gslb_pool_verdict{service,pool,verdict}`: 1 for the pool's current verdict, 0 for the others.
    pub pool_verdict: GaugeVec,
    /// `gslb_active_pool{service,pool}`: 1 for the pool the engine wants serving.
    pub active_pool: GaugeVec,
    /// `gslb_decisions_total{service,rule}`: decisions that changed the rule or the active pool.
    pub decisions_total: IntCounterVec,
    /// `gslb_decision_applied{service}`: 1 when the provider matches the latest decision.
    pub decision_applied: GaugeVec,
    /// `gslb_provider_calls_total{provider,operation}`: observe and apply calls.
    pub provider_calls_total: IntCounterVec,
    /// `gslb_provider_errors_total{provider,operation,code}`: failed calls by error class.
    pub provider_errors_total: IntCounterVec,
    /// `gslb_provider_writes_total{provider,service}`: changes written to a provider.
    pub provider_writes_total: IntCounterVec,
    /// `gslb_provider_drift_total{provider,service}`: re-applies of a state gslb had already
    /// written, because another writer changed it.
    pub provider_drift_total: IntCounterVec,
    /// `gslb_provider_write_fights_total{provider,service}`: write fights declared (drift over
    /// the limit per window); gslb stops writing for the window.
    pub provider_write_fights_total: IntCounterVec,
    /// `gslb_plans_refused_total{service,reason}`: plans a safety guard refused
    /// (`fallback_disabled`, `fallback_unhealthy`), counted per reconcile pass.
    pub plans_refused_total: IntCounterVec,
}

const PROBE_LABELS: &[&str] = &["service", "pool", "endpoint", "vantage"];

impl Metrics {
    /// A fresh registry with every metric registered.
    ///
    /// # Panics
    /// Never in practice: names are static and unique (checked by a unit test).
    pub fn new() -> Self {
        let registry = Registry::new();
        let gauge = |name: &str, help: &str, labels: &[&str]| {
            let g = GaugeVec::new(Opts::new(name, help), labels).expect("static metric definition");
            registry
                .register(Box::new(g.clone()))
                .expect("unique metric name");
            g
        };
        let counter = |name: &str, help: &str, labels: &[&str]| {
            let c = IntCounterVec::new(Opts::new(name, help), labels)
                .expect("static metric definition");
            registry
                .register(Box::new(c.clone()))
                .expect("unique metric name");
            c
        };
        Self {
            probe_success: gauge(
                "probe_success",
                "Whether the last probe of the endpoint succeeded (1) or not (0).",
                PROBE_LABELS,
            ),
            probe_duration_seconds: gauge(
                "probe_duration_seconds",
                "Duration of the last probe in seconds.",
                PROBE_LABELS,
            ),
            probe_http_status_code: gauge(
                "probe_http_status_code",
                "HTTP status of the last probe; 0 when no response arrived.",
                PROBE_LABELS,
            ),
            probes_total: counter(
                "gslb_probes_total",
                "Probes by outcome reason.",
                &["service", "pool", "endpoint", "reason"],
            ),
            pool_verdict: gauge(
                "gslb_pool_verdict",
                "1 for the pool's current verdict (healthy, unhealthy, unknown), 0 otherwise.",
                &["service", "pool", "verdict"],
            ),
            active_pool: gauge(
                "gslb_active_pool",
                "1 for the pool the engine wants serving the service, 0 otherwise.",
                &["service", "pool"],
            ),
            decisions_total: counter(
                "gslb_decisions_total",
                "Decisions that changed the rule or the serving pool, by rule.",
                &["service", "rule"],
            ),
            decision_applied: gauge(
                "gslb_decision_applied",
                "1 when the provider state matches the latest decision, 0 while decided but not applied.",
                &["service"],
            ),
            provider_calls_total: counter(
                "gslb_provider_calls_total",
                "Provider calls by operation (observe, apply).",
                &["provider", "operation"],
            ),
            provider_errors_total: counter(
                "gslb_provider_errors_total",
                "Failed provider calls by operation and error class.",
                &["provider", "operation", "code"],
            ),
            provider_writes_total: counter(
                "gslb_provider_writes_total",
                "Changes written to a provider.",
                &["provider", "service"],
            ),
            provider_drift_total: counter(
                "gslb_provider_drift_total",
                "Re-applies of a state gslb had already written, because another writer changed it.",
                &["provider", "service"],
            ),
            provider_write_fights_total: counter(
                "gslb_provider_write_fights_total",
                "Write fights declared: another writer kept reverting gslb, which stopped writing for a window.",
                &["provider", "service"],
            ),
            plans_refused_total: counter(
                "gslb_plans_refused_total",
                "Plans refused by a safety guard, by reason, per reconcile pass.",
                &["service", "reason"],
            ),
            registry,
        }
    }

    /// Records one probe result of `pool` in `service`.
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
        self.probes_total
            .with_label_values(&[service, pool, obs.endpoint.0.as_str(), o.reason.as_str()])
            .inc();
    }

    /// Sets pool verdict and active pool gauges from a decision.
    pub fn record_decision(&self, d: &Decision, counted: bool) {
        let service = d.service.0.as_str();
        for (pool, v) in &d.pools {
            for verdict in [Verdict::Healthy, Verdict::Unhealthy, Verdict::Unknown] {
                let on = f64::from(u8::from(v.verdict == verdict));
                self.pool_verdict
                    .with_label_values(&[service, pool.0.as_str(), verdict.as_str()])
                    .set(on);
            }
            let active = f64::from(u8::from(d.active.as_ref() == Some(pool)));
            self.active_pool
                .with_label_values(&[service, pool.0.as_str()])
                .set(active);
        }
        if counted {
            self.decisions_total
                .with_label_values(&[service, d.rule.as_str()])
                .inc();
        }
    }

    /// Pre-creates the per-rule decision counters of a service so they read 0, not absent.
    pub fn declare_service(&self, service: &str) {
        for rule in [
            Rule::Failover,
            Rule::Failback,
            Rule::FailStatic,
            Rule::HoldUnknown,
            Rule::FailbackManual,
        ] {
            self.decisions_total
                .with_label_values(&[service, rule.as_str()]);
        }
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        // Encoding into a Vec cannot fail for well-formed metric families.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut buf);
        String::from_utf8(buf).unwrap_or_default()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_metric_registers_once() {
        let m = super::Metrics::new();
        m.declare_service("api");
        assert!(m.render().contains("gslb_decisions_total"));
    }
}
