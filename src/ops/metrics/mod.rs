//! Every metric gslb exports, declared once with its help text.
//!
//! Probe metrics use blackbox_exporter's names; controller metrics are prefixed `gslb_`. Labels
//! take only bounded values: names from policies, rule and reason enums, provider error codes.
//! The probe loops' own metrics (lateness, late and skipped probes) are in `probing`.

mod probing;

use std::sync::{Arc, Mutex};

use prometheus::core::Collector;
use prometheus::proto::MetricType;
use prometheus::{
    Encoder, Gauge, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry,
    TextEncoder,
};

use gslb_core::engine::{Decision, OverrideAction, Overrides, Rule, Suspicion};
use gslb_core::model::{EndpointId, Millis, Observation, VantageId, Verdict};
use gslb_core::policy::{Mode, Policy};

/// The metric set of one controller process.
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Registry,
    /// Name and type of every family registered, in registration order.
    declared: Arc<Mutex<Vec<(String, MetricType)>>>,
    /// `probe_success{service,pool,endpoint,vantage}`: 1 when the last probe passed.
    pub probe_success: GaugeVec,
    /// `probe_duration_seconds{...}`: duration of the last probe.
    pub probe_duration_seconds: GaugeVec,
    /// `probe_http_status_code{...}`: HTTP status of the last probe, 0 without a response.
    pub probe_http_status_code: GaugeVec,
    /// `probe_ssl_earliest_cert_expiry{...}`: Unix time (seconds) the peer's leaf certificate
    /// of the last TLS handshake expires (reqwest exposes only the leaf, so an intermediate
    /// expiring first is not seen, unlike blackbox_exporter); absent for endpoints without TLS.
    pub probe_ssl_earliest_cert_expiry: GaugeVec,
    /// `probe_dns_lookup_time_seconds{...}`: time the last probe spent resolving the endpoint's
    /// name; 0 for IP literals.
    pub probe_dns_lookup_time_seconds: GaugeVec,
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
    /// `gslb_holds_total{service,rule}`: decisions that entered a hold, by rule.
    pub holds_total: IntCounterVec,
    /// `gslb_velocity_limited_total{service}`: switches blocked by a velocity limit.
    pub velocity_limited_total: IntCounterVec,
    /// `gslb_velocity_available{service}`: automatic switches left in the budget.
    pub velocity_available: GaugeVec,
    /// `gslb_rail_holds_total{service,rule}`: switches refused by a safety rail.
    pub rail_holds_total: IntCounterVec,
    /// `gslb_pool_flap_percent{service,pool}`: weighted state-change percentage.
    pub pool_flap_percent: GaugeVec,
    /// `gslb_pool_flapping{service,pool}`: 1 while the pool flaps.
    pub pool_flapping: GaugeVec,
    /// `gslb_pool_damping_penalty{service,pool}`: flap-damping penalty.
    pub pool_damping_penalty: GaugeVec,
    /// `gslb_pool_suppressed{service,pool}`: 1 while flap damping suppresses the pool.
    pub pool_suppressed: GaugeVec,
    /// `gslb_vantage_suspect{vantage,reason}`: 1 while the vantage point is suspect.
    pub vantage_suspect: GaugeVec,
    /// `gslb_overrides_active{service,action}`: active drill overrides.
    pub overrides_active: GaugeVec,
    /// `gslb_override_oldest_age_seconds{service}`: age of the oldest active override.
    pub override_oldest_age_seconds: GaugeVec,
    /// `gslb_shadow_plans_total{service}`: plans shadow mode did not write.
    pub shadow_plans_total: IntCounterVec,
    /// `gslb_provider_drift_total{provider,service}`: re-applies of a state gslb had already
    /// written, because another writer changed it.
    pub provider_drift_total: IntCounterVec,
    /// `gslb_provider_write_fights_total{provider,service}`: write fights declared (drift over
    /// the limit per window); gslb stops writing for the window.
    pub provider_write_fights_total: IntCounterVec,
    /// `gslb_plans_refused_total{service,reason}`: plans a safety guard refused
    /// (`fallback_disabled`, `fallback_unhealthy`), counted per reconcile pass; and
    /// `fallback_drain_ignored`: a drain of the fallback pool dropped from an otherwise
    /// applied plan, counted once when it starts.
    pub plans_refused_total: IntCounterVec,
    /// `gslb_switches_total{service,kind}`: changes of the serving pool, `kind` = `automatic`
    /// or `drill`.
    pub switches_total: IntCounterVec,
    /// `gslb_decision_unapplied_age_seconds{service}`: how long the latest decision has waited
    /// for the provider; 0 while the provider matches it.
    pub decision_unapplied_age_seconds: GaugeVec,
    /// `gslb_reconcile_duration_seconds{provider,service}`: duration of one reconcile pass
    /// (read, plan, write when needed).
    pub reconcile_duration_seconds: HistogramVec,
    /// `gslb_failover_phase_seconds{service,phase}`: time from the start of a switch (first
    /// failed probe, or the drill's decision) to each timeline phase.
    pub failover_phase_seconds: HistogramVec,
    /// `gslb_policy_reload_success`: 1 when the last policy (re)load succeeded, 0 when it failed
    /// and the previous set is still in use.
    pub policy_reload_success: Gauge,
    /// `gslb_policy_reload_timestamp_seconds`: Unix time of the last successful policy load.
    pub policy_reload_timestamp_seconds: Gauge,
    /// `gslb_policy_reloads_total{result}`: reload attempts, `result` = `ok` or `error`.
    pub policy_reloads_total: IntCounterVec,
    /// `gslb_webhook_deliveries_total{sink,result}`: webhook attempts, `result` = `delivered`,
    /// `retried`, `failed` (gave up), `dropped` (pushed out of a full queue) or `lagged`
    /// (broadcast events the sink's reader missed, mostly probe results).
    pub webhook_deliveries_total: IntCounterVec,
    /// `gslb_build_info{version}`: always 1; the running version.
    pub build_info: GaugeVec,
}

/// Buckets of the failover phase histograms, in seconds: 1 s to 30 min, covering TTLs of
/// 60 s and Route 53's change propagation (typically under 60 s).
pub const PHASE_BUCKETS: &[f64] = &[
    1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 90.0, 120.0, 180.0, 300.0, 600.0, 1800.0,
];

/// Buckets of the reconcile duration histogram, in seconds: 5 ms to 2 min (Route 53's
/// change wait is bounded by `[route53] change_timeout`).
pub const RECONCILE_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

const PROBE_LABELS: &[&str] = &["service", "pool", "endpoint", "vantage"];

/// The `kind` label values of `gslb_switches_total`.
const SWITCH_KINDS: [&str; 2] = ["automatic", "drill"];

/// `automatic` for the engine's own switches ([`Rule::is_automatic`], the split the velocity
/// limit and the failover timeline use), else `drill` (drain, force, restore).
fn switch_kind(rule: Rule) -> &'static str {
    if rule.is_automatic() {
        SWITCH_KINDS[0]
    } else {
        SWITCH_KINDS[1]
    }
}

impl Metrics {
    /// A fresh registry with every metric registered.
    ///
    /// # Panics
    /// Never in practice: names are static and unique (checked by a unit test).
    pub fn new() -> Self {
        let registry = Registry::new();
        let declared = Arc::new(Mutex::new(Vec::new()));
        let register = |c: Box<dyn Collector>| {
            register_named(&registry, &declared, c).expect("unique metric name");
        };
        let gauge = |name: &str, help: &str, labels: &[&str]| {
            let g = GaugeVec::new(Opts::new(name, help), labels).expect("static metric definition");
            register(Box::new(g.clone()));
            g
        };
        let counter = |name: &str, help: &str, labels: &[&str]| {
            let c = IntCounterVec::new(Opts::new(name, help), labels)
                .expect("static metric definition");
            register(Box::new(c.clone()));
            c
        };
        let histogram = |name: &str, help: &str, labels: &[&str], buckets: &[f64]| {
            let h = HistogramVec::new(
                HistogramOpts::new(name, help).buckets(buckets.to_vec()),
                labels,
            )
            .expect("static metric definition");
            register(Box::new(h.clone()));
            h
        };
        let plain_gauge = |name: &str, help: &str| {
            let g = Gauge::new(name, help).expect("static metric definition");
            register(Box::new(g.clone()));
            g
        };
        let build_info = gauge(
            "gslb_build_info",
            "Always 1; labelled with the running version.",
            &["version"],
        );
        build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION")])
            .set(1.0);
        let policy_reloads_total = counter(
            "gslb_policy_reloads_total",
            "Policy reload attempts by result (ok, error).",
            &["result"],
        );
        for result in ["ok", "error"] {
            policy_reloads_total.with_label_values(&[result]);
        }
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
            probe_ssl_earliest_cert_expiry: gauge(
                "probe_ssl_earliest_cert_expiry",
                "Unix time the peer's leaf certificate in the last TLS handshake expires.",
                PROBE_LABELS,
            ),
            probe_dns_lookup_time_seconds: gauge(
                "probe_dns_lookup_time_seconds",
                "Seconds the last probe spent resolving the endpoint's name (0 for IP literals).",
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
            holds_total: counter(
                "gslb_holds_total",
                "Decisions that entered a hold (fail static, unknown, suspect, velocity, rails, ...), by rule.",
                &["service", "rule"],
            ),
            velocity_limited_total: counter(
                "gslb_velocity_limited_total",
                "Automatic switches blocked by the service's or the controller's velocity limit.",
                &["service"],
            ),
            velocity_available: gauge(
                "gslb_velocity_available",
                "Automatic switches left in the service's velocity budget.",
                &["service"],
            ),
            rail_holds_total: counter(
                "gslb_rail_holds_total",
                "Switches refused by a safety rail (rail_hold: no serving pool or not healthy; dwell: spacing).",
                &["service", "rule"],
            ),
            pool_flap_percent: gauge(
                "gslb_pool_flap_percent",
                "Weighted state-change percentage over the last 21 results of the pool's most flapping endpoint.",
                &["service", "pool"],
            ),
            pool_flapping: gauge(
                "gslb_pool_flapping",
                "1 while the pool flaps (above flapping.high until below flapping.low).",
                &["service", "pool"],
            ),
            pool_damping_penalty: gauge(
                "gslb_pool_damping_penalty",
                "Flap-damping penalty of the pool.",
                &["service", "pool"],
            ),
            pool_suppressed: gauge(
                "gslb_pool_suppressed",
                "1 while flap damping suppresses automatic failback to the pool.",
                &["service", "pool"],
            ),
            vantage_suspect: gauge(
                "gslb_vantage_suspect",
                "1 while the vantage point is suspect (its down votes are discounted), by reason.",
                &["vantage", "reason"],
            ),
            overrides_active: gauge(
                "gslb_overrides_active",
                "Active drill overrides by action.",
                &["service", "action"],
            ),
            override_oldest_age_seconds: gauge(
                "gslb_override_oldest_age_seconds",
                "Age of the service's oldest active drill override; 0 without one.",
                &["service"],
            ),
            shadow_plans_total: counter(
                "gslb_shadow_plans_total",
                "Plans that shadow mode recorded instead of writing.",
                &["service"],
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
                "Plans refused by a safety guard, by reason, per reconcile pass (fallback_drain_ignored: a fallback-pool drain dropped, once when it starts).",
                &["service", "reason"],
            ),
            switches_total: counter(
                "gslb_switches_total",
                "Changes of the serving pool, by kind (automatic, drill).",
                &["service", "kind"],
            ),
            decision_unapplied_age_seconds: gauge(
                "gslb_decision_unapplied_age_seconds",
                "Seconds the latest decision has waited for the provider (decided but not applied); 0 when applied.",
                &["service"],
            ),
            reconcile_duration_seconds: histogram(
                "gslb_reconcile_duration_seconds",
                "Duration of one reconcile pass: read the provider, plan, write when needed.",
                &["provider", "service"],
                RECONCILE_BUCKETS,
            ),
            failover_phase_seconds: histogram(
                "gslb_failover_phase_seconds",
                "Seconds from the start of a switch (first failed probe, or a drill's decision) to each timeline phase.",
                &["service", "phase"],
                PHASE_BUCKETS,
            ),
            policy_reload_success: plain_gauge(
                "gslb_policy_reload_success",
                "1 when the last policy load succeeded; 0 when it failed and the last good set is kept.",
            ),
            policy_reload_timestamp_seconds: plain_gauge(
                "gslb_policy_reload_timestamp_seconds",
                "Unix time of the last successful policy load.",
            ),
            policy_reloads_total,
            webhook_deliveries_total: counter(
                "gslb_webhook_deliveries_total",
                "Webhook delivery attempts by sink and result (delivered, retried, failed, dropped: pushed out of a full queue, lagged: events the reader missed).",
                &["sink", "result"],
            ),
            build_info,
            registry,
            declared,
        }
    }

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

    /// Sets pool verdict and active pool gauges from a decision; when `counted` (the decision
    /// changed), counts it by rule, and as a switch when it moved the serving pool and `mode`
    /// is `enforce`: a shadow service's switch is one gslb would make, not one that happened
    /// (it shows in `gslb_decisions_total` and, as its plan, `gslb_shadow_plans_total`).
    pub fn record_decision(&self, d: &Decision, counted: bool, mode: Mode) {
        let service = d.service.0.as_str();
        for (pool, v) in &d.pools {
            for verdict in [Verdict::Healthy, Verdict::Unhealthy, Verdict::Unknown] {
                let on = f64::from(u8::from(v.verdict == verdict));
                self.pool_verdict
                    .with_label_values(&[service, pool.0.as_str(), verdict.as_str()])
                    .set(on);
            }
            let labels = [service, pool.0.as_str()];
            let active = f64::from(u8::from(d.active.as_ref() == Some(pool)));
            self.active_pool.with_label_values(&labels).set(active);
            self.pool_flap_percent
                .with_label_values(&labels)
                .set(f64::from(v.flap_percent));
            self.pool_flapping
                .with_label_values(&labels)
                .set(f64::from(u8::from(v.flapping)));
            self.pool_damping_penalty
                .with_label_values(&labels)
                .set(f64::from(v.penalty));
            self.pool_suppressed
                .with_label_values(&labels)
                .set(f64::from(u8::from(v.suppressed)));
        }
        if counted {
            self.decisions_total
                .with_label_values(&[service, d.rule.as_str()])
                .inc();
            if d.switched() && mode == Mode::Enforce {
                self.switches_total
                    .with_label_values(&[service, switch_kind(d.rule)])
                    .inc();
            }
            if d.rule.is_hold() {
                self.holds_total
                    .with_label_values(&[service, d.rule.as_str()])
                    .inc();
            }
            match d.rule {
                Rule::VelocityLimited => self
                    .velocity_limited_total
                    .with_label_values(&[service])
                    .inc(),
                Rule::RailHold | Rule::Dwell if d.blocked.is_some() => self
                    .rail_holds_total
                    .with_label_values(&[service, d.rule.as_str()])
                    .inc(),
                _ => {}
            }
        }
    }

    /// Sets the velocity budget gauge of a service.
    pub fn record_velocity(&self, service: &gslb_core::model::ServiceId, available: u32) {
        self.velocity_available
            .with_label_values(&[service.0.as_str()])
            .set(f64::from(available));
    }

    /// Sets the suspect gauges: 1 for each suspect vantage point's reason, 0 for the others.
    pub fn record_vantage_points(&self, points: &[(VantageId, Option<Suspicion>)]) {
        for (v, s) in points {
            for reason in ["all_pools_down", "canaries_down", "prober_side_failures"] {
                let on = s.as_ref().is_some_and(|s| s.as_str() == reason);
                self.vantage_suspect
                    .with_label_values(&[v.0.as_str(), reason])
                    .set(f64::from(u8::from(on)));
            }
        }
    }

    /// Sets the override gauges from the active set at `now`.
    pub fn record_overrides<'a>(
        &self,
        services: impl IntoIterator<Item = &'a gslb_core::model::ServiceId>,
        overrides: &Overrides,
        now: Millis,
    ) {
        let actions = [
            OverrideAction::Drain,
            OverrideAction::Restore,
            OverrideAction::Force,
        ];
        for service in services {
            let mine: Vec<_> = overrides.for_service(service).collect();
            let s = service.0.as_str();
            for action in actions {
                let n = mine.iter().filter(|o| o.action == action).count();
                self.overrides_active
                    .with_label_values(&[s, action.as_str()])
                    .set(n as f64);
            }
            let oldest = mine
                .iter()
                .map(|o| now.since(o.created).as_secs_f64())
                .fold(0.0, f64::max);
            self.override_oldest_age_seconds
                .with_label_values(&[s])
                .set(oldest);
        }
    }

    /// Removes the gauges of a service that a reload removed or changed (its pools', its
    /// endpoints' as seen from `seen` vantage points), so none reads a stale value. Counters
    /// stay: they are history.
    pub fn forget_service(&self, policy: &Policy, seen: &[(EndpointId, VantageId)]) {
        let service = policy.service.0.as_str();
        for pool in &policy.pools {
            let p = pool.id.0.as_str();
            for verdict in [Verdict::Healthy, Verdict::Unhealthy, Verdict::Unknown] {
                let _ = self
                    .pool_verdict
                    .remove_label_values(&[service, p, verdict.as_str()]);
            }
            for g in [
                &self.active_pool,
                &self.pool_flap_percent,
                &self.pool_flapping,
                &self.pool_damping_penalty,
                &self.pool_suppressed,
            ] {
                let _ = g.remove_label_values(&[service, p]);
            }
            for (e, v) in seen
                .iter()
                .filter(|(e, _)| pool.endpoints.iter().any(|x| &x.id == e))
            {
                let labels = [service, p, e.0.as_str(), v.0.as_str()];
                for g in [
                    &self.probe_success,
                    &self.probe_duration_seconds,
                    &self.probe_http_status_code,
                    &self.probe_ssl_earliest_cert_expiry,
                    &self.probe_dns_lookup_time_seconds,
                ] {
                    let _ = g.remove_label_values(&labels);
                }
            }
        }
        for g in [
            &self.velocity_available,
            &self.override_oldest_age_seconds,
            &self.decision_applied,
            &self.decision_unapplied_age_seconds,
        ] {
            let _ = g.remove_label_values(&[service]);
        }
        for action in [
            OverrideAction::Drain,
            OverrideAction::Restore,
            OverrideAction::Force,
        ] {
            let _ = self
                .overrides_active
                .remove_label_values(&[service, action.as_str()]);
        }
    }

    /// Pre-creates a service's counters and gauges so they read 0, not absent.
    pub fn declare_service(&self, policy: &Policy) {
        let service = policy.service.0.as_str();
        for rule in [
            Rule::Failover,
            Rule::Failback,
            Rule::FailStatic,
            Rule::HoldUnknown,
            Rule::FailbackManual,
            Rule::VelocityLimited,
        ] {
            self.decisions_total
                .with_label_values(&[service, rule.as_str()]);
        }
        for rule in [
            Rule::FailStatic,
            Rule::VelocityLimited,
            Rule::RailHold,
            Rule::ProberSuspect,
        ] {
            self.holds_total
                .with_label_values(&[service, rule.as_str()]);
        }
        self.velocity_limited_total.with_label_values(&[service]);
        self.shadow_plans_total.with_label_values(&[service]);
        for kind in SWITCH_KINDS {
            self.switches_total.with_label_values(&[service, kind]);
        }
        for rule in [Rule::RailHold, Rule::Dwell] {
            self.rail_holds_total
                .with_label_values(&[service, rule.as_str()]);
        }
        for action in [
            OverrideAction::Drain,
            OverrideAction::Restore,
            OverrideAction::Force,
        ] {
            self.overrides_active
                .with_label_values(&[service, action.as_str()]);
        }
        self.override_oldest_age_seconds
            .with_label_values(&[service]);
    }

    /// Pre-creates the label sets of a reconciler for `service` on `provider` so they read 0,
    /// not absent: calls (observe, apply), errors by operation (observe, apply) and every
    /// [`ProviderError::CODES`](gslb_provider::ProviderError::CODES), writes, drift, write
    /// fights, refused plans by reason, the reconcile duration histogram and the unapplied
    /// age (set to 0).
    pub fn declare_binding(&self, provider: &str, service: &str) {
        for operation in ["observe", "apply"] {
            self.provider_calls_total
                .with_label_values(&[provider, operation]);
            for code in gslb_provider::ProviderError::CODES {
                self.provider_errors_total
                    .with_label_values(&[provider, operation, code]);
            }
        }
        let labels = [provider, service];
        self.provider_writes_total.with_label_values(&labels);
        self.provider_drift_total.with_label_values(&labels);
        self.provider_write_fights_total.with_label_values(&labels);
        self.reconcile_duration_seconds.with_label_values(&labels);
        for reason in [
            "fallback_disabled",
            "fallback_unhealthy",
            "fallback_drain_ignored",
        ] {
            self.plans_refused_total
                .with_label_values(&[service, reason]);
        }
        self.decision_unapplied_age_seconds
            .with_label_values(&[service])
            .set(0.0);
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

    /// Name and type of every metric family registered, in registration order: each metric
    /// declared here plus those of [`Metrics::register_prober`] once called. A histogram `x`
    /// is exported as `x_bucket`, `x_sum` and `x_count`.
    pub fn families(&self) -> Vec<(String, MetricType)> {
        self.declared
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Exports `prober`'s loop statistics: `gslb_probe_lateness_seconds` (histogram),
    /// `gslb_probes_started_total`, `gslb_probes_late_total`, `gslb_probes_skipped_total`,
    /// `gslb_probes_in_flight`, `gslb_probe_max_in_flight`. Call once per registry; a second
    /// call is refused.
    ///
    /// # Errors
    /// These metrics are already registered.
    pub fn register_prober(&self, prober: &crate::io::probe::Prober) -> prometheus::Result<()> {
        let collector =
            probing::ProbeStatsCollector::new(prober.stats().clone(), prober.max_in_flight())?;
        register_named(&self.registry, &self.declared, Box::new(collector))
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        // Encoding into a Vec cannot fail for well-formed metric families.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut buf);
        String::from_utf8(buf).unwrap_or_default()
    }
}

/// Registers `c` and records its families' names and types in `declared` (a vector without
/// label values still collects as an empty family, so the type is known before any sample).
fn register_named(
    registry: &Registry,
    declared: &Mutex<Vec<(String, MetricType)>>,
    c: Box<dyn Collector>,
) -> prometheus::Result<()> {
    let names: Vec<_> = c
        .collect()
        .iter()
        .map(|f| (f.name().to_owned(), f.get_field_type()))
        .collect();
    registry.register(c)?;
    declared
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .extend(names);
    Ok(())
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod recording_tests;

#[cfg(test)]
mod tests {
    /// The demo policy with placeholder origins.
    fn demo_policy() -> gslb_core::policy::Policy {
        gslb_core::policy::parse(
            std::path::Path::new("demo.toml"),
            &include_str!("../../cli/demo_policy.toml")
                .replace("{seoul}", "127.0.0.1:1")
                .replace("{tokyo}", "127.0.0.1:2"),
        )
        .expect("the demo policy is valid")
    }

    #[test]
    fn every_metric_registers_once() {
        let m = super::Metrics::new();
        let policy = demo_policy();
        m.declare_service(&policy);
        assert!(m.render().contains("gslb_decisions_total"));
    }

    #[test]
    fn override_gauges_count_active_drills_and_fall_back_to_zero() {
        use gslb_core::engine::{OverrideAction, OverrideId, OverrideRequest, Overrides};
        use gslb_core::model::{Millis, PoolId};
        let m = super::Metrics::new();
        let policy = demo_policy();
        let mut overrides = Overrides::default();
        let req = OverrideRequest {
            id: OverrideId("d-1".into()),
            service: policy.service.clone(),
            action: OverrideAction::Drain,
            pool: PoolId("seoul".into()),
            reason: "drill".into(),
            actor: "alice".into(),
            duration: None,
        };
        overrides
            .add(&policy, &req, Millis(0))
            .expect("valid drill");
        m.record_overrides([&policy.service], &overrides, Millis(90_000));
        let text = m.render();
        assert!(
            text.contains(r#"gslb_overrides_active{action="drain",service="demo-api"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"gslb_overrides_active{action="force",service="demo-api"} 0"#),
            "{text}"
        );
        assert!(
            text.contains(r#"gslb_override_oldest_age_seconds{service="demo-api"} 90"#),
            "{text}"
        );
        overrides.end(&req.id).expect("ends");
        m.record_overrides([&policy.service], &overrides, Millis(91_000));
        let text = m.render();
        assert!(
            text.contains(r#"gslb_overrides_active{action="drain",service="demo-api"} 0"#),
            "{text}"
        );
        assert!(
            text.contains(r#"gslb_override_oldest_age_seconds{service="demo-api"} 0"#),
            "{text}"
        );
    }

    #[test]
    fn policy_loads_and_forgotten_services() {
        use gslb_core::model::{
            EndpointId, Millis, Observation, ProbeOutcome, ProbeReason, VantageId,
        };
        let m = super::Metrics::new();
        m.record_policy_load(true, 1_000.0);
        let text = m.render();
        assert!(text.contains("gslb_policy_reload_success 1"), "{text}");
        assert!(
            text.contains(r#"gslb_policy_reloads_total{result="error"} 0"#),
            "{text}"
        );
        m.record_policy_load(false, 2_000.0);
        let text = m.render();
        assert!(text.contains("gslb_policy_reload_success 0"), "{text}");
        assert!(
            text.contains("gslb_policy_reload_timestamp_seconds 1000"),
            "{text}"
        );
        assert!(
            text.contains(r#"gslb_policy_reloads_total{result="error"} 1"#),
            "{text}"
        );
        m.record_policy_load(true, 3_000.0);
        let text = m.render();
        assert!(
            text.contains("gslb_policy_reload_timestamp_seconds 3000"),
            "{text}"
        );
        assert!(
            text.contains(r#"gslb_policy_reloads_total{result="ok"} 2"#),
            "{text}"
        );

        let policy = demo_policy();
        m.declare_service(&policy);
        let endpoint: EndpointId = policy.pools[0].endpoints[0].id.clone();
        let vantage = VantageId("here".into());
        let obs = Observation {
            endpoint: endpoint.clone(),
            vantage: vantage.clone(),
            at: Millis(0),
            outcome: ProbeOutcome {
                success: true,
                duration: std::time::Duration::from_millis(1),
                http_status: Some(200),
                reason: ProbeReason::Ok,
                dns_lookup: None,
                cert_expiry: None,
            },
        };
        m.record_probe("demo-api", policy.pools[0].id.0.as_str(), &obs);
        m.record_velocity(&policy.service, 3);
        assert!(m.render().contains(r#"probe_success{"#), "recorded");
        m.forget_service(&policy, &[(endpoint, vantage)]);
        let text = m.render();
        for gone in [
            "probe_success{",
            "gslb_velocity_available{",
            "gslb_overrides_active{",
        ] {
            assert!(!text.contains(gone), "{gone} left:\n{text}");
        }
        assert!(
            text.contains("gslb_decisions_total{"),
            "counters stay: {text}"
        );
    }

    #[test]
    fn prober_stats_are_exported() {
        let m = super::Metrics::new();
        let prober = crate::io::probe::Prober::with_limits(
            &crate::io::probe::DnsSettings {
                nameservers: vec!["127.0.0.1:9".parse().expect("addr")],
                ..crate::io::probe::DnsSettings::default()
            },
            &crate::io::probe::ProbingSettings {
                max_in_flight: 16,
                ..crate::io::probe::ProbingSettings::default()
            },
        )
        .expect("prober");
        m.register_prober(&prober).expect("first registration");
        prober
            .stats()
            .started(std::time::Duration::from_millis(30), false);
        prober
            .stats()
            .started(std::time::Duration::from_millis(80), true);
        assert!(m.register_prober(&prober).is_err(), "registered once");
        let text = m.render();
        for line in [
            "gslb_probe_lateness_seconds_bucket{le=\"0.025\"} 0",
            "gslb_probe_lateness_seconds_bucket{le=\"0.05\"} 1",
            "gslb_probe_lateness_seconds_bucket{le=\"0.1\"} 2",
            "gslb_probe_lateness_seconds_bucket{le=\"+Inf\"} 2",
            "gslb_probe_lateness_seconds_count 2",
            "gslb_probes_started_total 2",
            "gslb_probes_late_total 1",
            "gslb_probes_skipped_total 0",
            "gslb_probes_in_flight 0",
            "gslb_probe_max_in_flight 16",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
        assert!(text.contains("# TYPE gslb_probe_lateness_seconds histogram"));
    }
}
