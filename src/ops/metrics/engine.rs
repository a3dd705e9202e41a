//! Engine metrics: what each decision says (pool verdicts, the serving pool, the rule), holds,
//! the velocity budget, safety rails, flapping and damping, suspect vantage points, drill
//! overrides and switches by kind. Written by the engine loop only.

use gslb_core::engine::{Decision, OverrideAction, Overrides, PoolFlap, Rule, Suspicion};
use gslb_core::model::{Millis, ServiceId, VantageId, Verdict};
use gslb_core::policy::{Mode, Policy};

use super::{Family, Metrics};

pub(super) const POOL_VERDICT: Family = Family {
    name: "gslb_pool_verdict",
    help: "1 for the pool's current verdict (healthy, unhealthy, unknown), 0 otherwise.",
    labels: &["service", "pool", "verdict"],
};
pub(super) const ACTIVE_POOL: Family = Family {
    name: "gslb_active_pool",
    help: "1 for the pool the engine wants serving the service, 0 otherwise.",
    labels: &["service", "pool"],
};
pub(super) const DECISIONS_TOTAL: Family = Family {
    name: "gslb_decisions_total",
    help: "Decisions that changed the rule or the serving pool, by rule.",
    labels: &["service", "rule"],
};
pub(super) const HOLDS_TOTAL: Family = Family {
    name: "gslb_holds_total",
    help: "Decisions that entered a hold (fail static, unknown, suspect, velocity, rails, ...), by rule.",
    labels: &["service", "rule"],
};
pub(super) const VELOCITY_LIMITED_TOTAL: Family = Family {
    name: "gslb_velocity_limited_total",
    help: "Automatic switches blocked by the service's or the controller's velocity limit.",
    labels: &["service"],
};
pub(super) const VELOCITY_AVAILABLE: Family = Family {
    name: "gslb_velocity_available",
    help: "Automatic switches left in the service's velocity budget.",
    labels: &["service"],
};
pub(super) const STALE_EVIDENCE: Family = Family {
    name: "gslb_stale_evidence",
    help: "Results of the service's endpoints (per vantage point) older than the freshness window at its last decision: probes running late; the last decision stands.",
    labels: &["service"],
};
pub(super) const RAIL_HOLDS_TOTAL: Family = Family {
    name: "gslb_rail_holds_total",
    help: "Switches refused by a safety rail (rail_hold: no serving pool or not healthy, or a drain of the serving pool with no other healthy pool; dwell: spacing).",
    labels: &["service", "rule"],
};
pub(super) const POOL_FLAP_PERCENT: Family = Family {
    name: "gslb_pool_flap_percent",
    help: "Weighted state-change percentage over the last 21 results of the pool's most flapping endpoint.",
    labels: &["service", "pool"],
};
pub(super) const POOL_FLAPPING: Family = Family {
    name: "gslb_pool_flapping",
    help: "1 while the pool flaps (above flapping.high until below flapping.low).",
    labels: &["service", "pool"],
};
pub(super) const POOL_DAMPING_PENALTY: Family = Family {
    name: "gslb_pool_damping_penalty",
    help: "Flap-damping penalty of the pool.",
    labels: &["service", "pool"],
};
pub(super) const POOL_SUPPRESSED: Family = Family {
    name: "gslb_pool_suppressed",
    help: "1 while flap damping suppresses automatic failback to the pool.",
    labels: &["service", "pool"],
};
pub(super) const VANTAGE_SUSPECT: Family = Family {
    name: "gslb_vantage_suspect",
    help: "1 while the vantage point is suspect (its down votes are discounted), by reason.",
    labels: &["vantage", "reason"],
};
pub(super) const OVERRIDES_ACTIVE: Family = Family {
    name: "gslb_overrides_active",
    help: "Active drill overrides by action.",
    labels: &["service", "action"],
};
pub(super) const OVERRIDE_OLDEST_AGE_SECONDS: Family = Family {
    name: "gslb_override_oldest_age_seconds",
    help: "Age of the service's oldest active drill override; 0 without one.",
    labels: &["service"],
};
pub(super) const SWITCHES_TOTAL: Family = Family {
    name: "gslb_switches_total",
    help: "Changes of the serving pool, by kind (automatic, drill).",
    labels: &["service", "kind"],
};

/// The `kind` label values of `gslb_switches_total`.
const SWITCH_KINDS: [&str; 2] = ["automatic", "drill"];

/// Every override action, the `action` label values of `gslb_overrides_active`.
pub(super) const OVERRIDE_ACTIONS: [OverrideAction; 3] = [
    OverrideAction::Drain,
    OverrideAction::Restore,
    OverrideAction::Force,
];

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
    /// Sets a pool's flap gauges (`gslb_pool_flap_percent`, `gslb_pool_flapping`) as an
    /// observation left them, without waiting for a decision ([`PoolFlap`]).
    pub fn record_pool_flap(&self, f: &PoolFlap) {
        let labels = [f.service.0.as_str(), f.pool.0.as_str()];
        self.set_pool_flap(&labels, f.flap_percent, f.flapping);
    }

    fn set_pool_flap(&self, labels: &[&str; 2], percent: u32, flapping: bool) {
        self.pool_flap_percent
            .with_label_values(labels)
            .set(f64::from(percent));
        self.pool_flapping
            .with_label_values(labels)
            .set(f64::from(u8::from(flapping)));
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
            self.set_pool_flap(&labels, v.flap_percent, v.flapping);
            self.pool_damping_penalty
                .with_label_values(&labels)
                .set(f64::from(v.penalty));
            self.pool_suppressed
                .with_label_values(&labels)
                .set(f64::from(u8::from(v.suppressed)));
        }
        if counted {
            self.count_decision(d, mode);
        }
    }

    /// Counts a changed decision by rule, as a switch (enforce mode only), as a hold, and as a
    /// velocity or rail refusal. Every `rail_hold` and `dwell` decision is a rail hold: a switch
    /// a rail refused (`blocked`), or a drill's drain of the serving pool that the
    /// never-zero-serving-pools rail keeps serving (nothing blocked).
    fn count_decision(&self, d: &Decision, mode: Mode) {
        let service = d.service.0.as_str();
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
            Rule::RailHold | Rule::Dwell => self
                .rail_holds_total
                .with_label_values(&[service, d.rule.as_str()])
                .inc(),
            _ => {}
        }
    }

    /// Sets the velocity budget gauge of a service.
    pub fn record_velocity(&self, service: &ServiceId, available: u32) {
        self.velocity_available
            .with_label_values(&[service.0.as_str()])
            .set(f64::from(available));
    }

    /// Sets `gslb_stale_evidence{service}`: results older than the freshness window at the
    /// service's last decision ([`ServiceEngine::stale_evidence`](gslb_core::engine::ServiceEngine::stale_evidence)).
    pub fn record_stale_evidence(&self, service: &ServiceId, stale: u32) {
        self.stale_evidence
            .with_label_values(&[service.0.as_str()])
            .set(f64::from(stale));
    }

    /// Sets the suspect gauges: 1 for each suspect vantage point's reason, 0 for the others.
    pub fn record_vantage_points(&self, points: &[(VantageId, Option<Suspicion>)]) {
        for (v, s) in points {
            for reason in Suspicion::REASONS {
                let on = s.as_ref().is_some_and(|s| s.as_str() == reason);
                self.vantage_suspect
                    .with_label_values(&[v.0.as_str(), reason])
                    .set(f64::from(u8::from(on)));
            }
        }
    }

    /// Sets the override gauges from the active set at `now`. The oldest age counts from when
    /// each drill started ([`Overrides::started`]): the restore reverting an expired or ended
    /// drill keeps that drill's age until traffic is back, so `OverrideOutstanding` does not
    /// restart its clock.
    pub fn record_overrides<'a>(
        &self,
        services: impl IntoIterator<Item = &'a ServiceId>,
        overrides: &Overrides,
        now: Millis,
    ) {
        for service in services {
            let mine: Vec<_> = overrides.for_service(service).collect();
            let s = service.0.as_str();
            for action in OVERRIDE_ACTIONS {
                let n = mine.iter().filter(|o| o.action == action).count();
                self.overrides_active
                    .with_label_values(&[s, action.as_str()])
                    .set(n as f64);
            }
            let oldest = mine
                .iter()
                .map(|o| now.since(overrides.started(o)).as_secs_f64())
                .fold(0.0, f64::max);
            self.override_oldest_age_seconds
                .with_label_values(&[s])
                .set(oldest);
        }
    }

    /// Pre-creates the service's series that an alert reads with `increase()` (or that
    /// show a state), so they read 0, not absent, and a first increment is seen: velocity
    /// limited, switches by kind, the drill override gauges (7 series), and shadow plans for a
    /// service in shadow mode only (an enforce-mode service never plans in shadow, so the
    /// series would always read 0; a reload into shadow mode declares it). Counters
    /// read only by dashboards (`gslb_decisions_total`, `gslb_holds_total`,
    /// `gslb_rail_holds_total`, by rule) start at their first count: declaring every rule of
    /// every service made 12 more series per service (issue 14).
    pub fn declare_service(&self, policy: &Policy) {
        let service = policy.service.0.as_str();
        self.velocity_limited_total.with_label_values(&[service]);
        if policy.mode == Mode::Shadow {
            self.shadow_plans_total.with_label_values(&[service]);
        }
        for kind in SWITCH_KINDS {
            self.switches_total.with_label_values(&[service, kind]);
        }
        for action in OVERRIDE_ACTIONS {
            self.overrides_active
                .with_label_values(&[service, action.as_str()]);
        }
        self.override_oldest_age_seconds
            .with_label_values(&[service]);
    }
}
