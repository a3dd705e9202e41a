//! Priority failover: which pool should serve, and why. Pure.
//!
//! [`choose`] applies the rules (drills, failover, fail static, failback) to quorum verdicts and
//! returns a candidate. The service engine then passes a switching candidate through the safety
//! rails and the velocity limit, which may turn it into a hold.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Serialize;

use crate::model::{Millis, PoolId, ServiceId, Verdict};
use crate::policy::{Failback, Policy};

use super::quorum::Tally;

/// The rule a decision followed. Holds keep the current pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// No pool is serving yet and the evidence to pick one is incomplete: nothing is pushed.
    AwaitingEvidence,
    /// No pool was serving; the most preferred healthy pool is chosen.
    ServePreferred,
    /// The serving pool is healthy and no better pool is: stay.
    Stay,
    /// The serving pool is down by quorum: move to the most preferred healthy pool.
    Failover,
    /// A more preferred pool is healthy again and failback is `auto`: return to it.
    Failback,
    /// Fail static: the serving pool is down but no pool is healthy, so nothing changes.
    FailStatic,
    /// Hold: the serving pool is down and a healthy pool is ready, but no probe of that pool
    /// has passed since the serving pool went down. Waiting for one (at most one interval)
    /// confirms the prober still reaches the regions: a prober that lost its network sees the
    /// standby fail next, and never moves traffic.
    ConfirmTarget,
    /// Hold: the serving pool's verdict is unknown (no or stale evidence). Unknown never switches.
    HoldUnknown,
    /// Hold: the serving pool looks down only from suspect vantage points ("everything looks
    /// down from here"); their down votes are discounted and nothing is pushed.
    ProberSuspect,
    /// Hold: a more preferred pool is healthy again, but failback is `manual`.
    FailbackManual,
    /// Hold: an automatic failback waits until the preferred pool has been healthy for the
    /// failback hold (`failback_hold × consecutive failovers`, capped).
    FailbackHold,
    /// Hold: an automatic failback is blocked because the preferred pool is flap-suppressed.
    Suppressed,
    /// Hold: the spacing rail: the previous change to the record is less than
    /// `max(2 × TTL, min_dwell)` ago.
    Dwell,
    /// Hold: the service's (or the controller's) velocity budget of automatic switches is
    /// spent; the blocked decision is recorded. An operator re-arm releases it.
    VelocityLimited,
    /// Hold: a safety rail refused the plan (it would leave no serving pool, or switch to a
    /// pool that is not healthy by quorum).
    RailHold,
    /// Drill: traffic leaves a drained pool.
    Drain,
    /// Drill: traffic is pinned to a forced pool.
    Force,
    /// Drill: traffic returns to a restored pool (the operator's failback).
    Restore,
}

impl Rule {
    /// The label value, e.g. `fail_static`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AwaitingEvidence => "awaiting_evidence",
            Self::ServePreferred => "serve_preferred",
            Self::Stay => "stay",
            Self::Failover => "failover",
            Self::Failback => "failback",
            Self::FailStatic => "fail_static",
            Self::ConfirmTarget => "confirm_target",
            Self::HoldUnknown => "hold_unknown",
            Self::ProberSuspect => "prober_suspect",
            Self::FailbackManual => "failback_manual",
            Self::FailbackHold => "failback_hold",
            Self::Suppressed => "suppressed",
            Self::Dwell => "dwell",
            Self::VelocityLimited => "velocity_limited",
            Self::RailHold => "rail_hold",
            Self::Drain => "drain",
            Self::Force => "force",
            Self::Restore => "restore",
        }
    }

    /// Whether the decision may be pushed to a provider. Fail static, unknown or suspect
    /// evidence and awaiting evidence push nothing: the provider keeps what it has.
    pub fn pushes(self) -> bool {
        !matches!(
            self,
            Self::AwaitingEvidence | Self::FailStatic | Self::HoldUnknown | Self::ProberSuspect
        )
    }

    /// Whether the rule is a hold (the engine wanted to, or could not, act).
    pub fn is_hold(self) -> bool {
        matches!(
            self,
            Self::FailStatic
                | Self::ConfirmTarget
                | Self::HoldUnknown
                | Self::ProberSuspect
                | Self::FailbackManual
                | Self::FailbackHold
                | Self::Suppressed
                | Self::Dwell
                | Self::VelocityLimited
                | Self::RailHold
        )
    }

    /// Whether a switch by this rule is automatic (counted by the velocity limit). Drills are
    /// operator actions and are not.
    pub fn is_automatic(self) -> bool {
        matches!(self, Self::Failover | Self::Failback)
    }
}

/// One pool's state as the decision saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolVerdict {
    /// The quorum verdict.
    pub verdict: Verdict,
    /// When the pool entered this verdict (as far as this engine has seen).
    pub since: Millis,
    /// The fresh votes behind it.
    pub votes: Tally,
    /// The flap-damping penalty, rounded.
    pub penalty: u32,
    /// Whether flap damping suppresses the pool (no automatic failback to it).
    pub suppressed: bool,
    /// The weighted state-change percentage of its most flapping endpoint, rounded.
    pub flap_percent: u32,
    /// Whether any of its endpoints is flapping (above `flapping.high`, until below `low`).
    pub flapping: bool,
    /// When a probe of it last passed (from a vantage point that is not suspect).
    pub last_ok: Option<Millis>,
}

impl PoolVerdict {
    /// An unknown pool as of `since`.
    pub fn unknown(since: Millis) -> Self {
        Self {
            verdict: Verdict::Unknown,
            since,
            votes: Tally::default(),
            penalty: 0,
            suppressed: false,
            flap_percent: 0,
            flapping: false,
            last_ok: None,
        }
    }
}

/// A switch that a hold blocked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Blocked {
    /// The rule the blocked decision followed.
    pub rule: Rule,
    /// The pool it would have switched to.
    pub to: PoolId,
}

/// The outcome of one evaluation: deterministic and self-explaining.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// The service.
    pub service: ServiceId,
    /// When it was made.
    pub at: Millis,
    /// The pool that should serve; `None` only while awaiting evidence with nothing adopted.
    pub active: Option<PoolId>,
    /// The pool that served before this decision, when it switched.
    pub previous: Option<PoolId>,
    /// The rule followed.
    pub rule: Rule,
    /// The switch a hold blocked (velocity limit, rails, spacing), if any.
    pub blocked: Option<Blocked>,
    /// Pools a drill drains (never the active pool): providers that can disable a pool do.
    pub drained: BTreeSet<PoolId>,
    /// Human-readable reasons: which endpoints, votes, thresholds, rule.
    pub reasons: Vec<String>,
    /// Every pool's state, by pool.
    pub pools: BTreeMap<PoolId, PoolVerdict>,
}

impl Decision {
    /// Whether this decision moved traffic.
    pub fn switched(&self) -> bool {
        self.previous.is_some() && self.previous != self.active
    }
}

/// What the rules see besides the policy.
#[derive(Debug)]
pub struct RuleInput<'a> {
    /// The pool serving now (adopted from the provider or chosen earlier).
    pub current: Option<&'a PoolId>,
    /// Each pool's state.
    pub pools: &'a BTreeMap<PoolId, PoolVerdict>,
    /// Pools drained by a drill.
    pub drained: &'a BTreeSet<PoolId>,
    /// The pool a drill forces, if any.
    pub forced: Option<&'a PoolId>,
    /// Pools a drill restores (failback authorised by an operator).
    pub restored: &'a BTreeSet<PoolId>,
    /// The automatic failback hold now (grows with consecutive failovers).
    pub failback_hold: Duration,
    /// Now.
    pub now: Millis,
}

/// A rule's choice, before rails and velocity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The rule.
    pub rule: Rule,
    /// The pool it wants serving.
    pub active: Option<PoolId>,
    /// Why, for the decision's reasons (the last one names the rule).
    pub reasons: Vec<String>,
}

/// Applies the failover rules, in this order: drills (force, drain), then the serving pool's
/// quorum verdict (failover, fail static, unknown, suspect), then failback (restore drills,
/// manual, auto with hold and damping). `explain(pool)` describes a pool's evidence.
pub fn choose(
    policy: &Policy,
    input: &RuleInput<'_>,
    explain: &dyn Fn(&PoolId) -> String,
) -> Candidate {
    let state = |p: &PoolId| input.pools.get(p);
    let verdict = |p: &PoolId| state(p).map_or(Verdict::Unknown, |v| v.verdict);
    let eligible = |p: &PoolId| !input.drained.contains(p);
    let rank = |p: &PoolId| policy.pools.iter().position(|x| &x.id == p);
    let best = policy
        .pools
        .iter()
        .map(|p| &p.id)
        .find(|p| eligible(p) && verdict(p) == Verdict::Healthy);
    // A real outage outranks a drill: when only a drained pool is healthy, a failover may use it.
    let best_drained = policy
        .pools
        .iter()
        .map(|p| &p.id)
        .find(|p| !eligible(p) && verdict(p) == Verdict::Healthy);
    let mut reasons = Vec::new();
    let done = |rule: Rule, active: Option<&PoolId>, why: String, reasons: &mut Vec<String>| {
        reasons.push(format!("rule: {why}"));
        Candidate {
            rule,
            active: active.cloned(),
            reasons: std::mem::take(reasons),
        }
    };

    if let Some(f) = input.forced {
        match verdict(f) {
            Verdict::Healthy => {
                reasons.push(explain(f));
                return done(
                    Rule::Force,
                    Some(f),
                    format!("a drill forces {f}, which is healthy"),
                    &mut reasons,
                );
            }
            v => reasons.push(format!(
                "a drill forces {f}, but it is {v}: a drill never outranks the evidence"
            )),
        }
    }

    let Some(cur) = input.current else {
        let first_unknown = policy
            .pools
            .iter()
            .position(|p| eligible(&p.id) && verdict(&p.id) == Verdict::Unknown);
        return match best {
            Some(b) if first_unknown.is_none_or(|u| Some(u) > rank(b)) => {
                reasons.push(explain(b));
                done(
                    Rule::ServePreferred,
                    Some(b),
                    format!("serve the most preferred healthy pool ({b})"),
                    &mut reasons,
                )
            }
            _ => done(
                Rule::AwaitingEvidence,
                None,
                "wait until every more preferred pool has a verdict".into(),
                &mut reasons,
            ),
        };
    };

    if !eligible(cur) {
        reasons.push(explain(cur));
        return match best {
            Some(b) => {
                reasons.push(explain(b));
                done(
                    Rule::Drain,
                    Some(b),
                    format!("a drill drains {cur}: move to the most preferred healthy pool {b}"),
                    &mut reasons,
                )
            }
            None => done(
                Rule::RailHold,
                Some(cur),
                format!(
                    "a drill drains {cur} but no other pool is healthy: keeping {cur} (never zero serving pools)"
                ),
                &mut reasons,
            ),
        };
    }

    let discounted = state(cur).is_some_and(|s| s.votes.discounted > 0);
    if verdict(cur) == Verdict::Unhealthy {
        if let Some(t) = best.or(best_drained) {
            reasons.push(explain(cur));
            reasons.push(explain(t));
            let unconfirmed = state(t)
                .and_then(|s| s.last_ok)
                .is_none_or(|ok| state(cur).is_some_and(|c| ok < c.since));
            let (rule, active, why) = if unconfirmed {
                (
                    Rule::ConfirmTarget,
                    cur,
                    format!(
                        "failover from {cur} to {t} waits for a probe of {t} to pass after {cur} went down (confirms the prober still reaches the regions)"
                    ),
                )
            } else if best.is_none() {
                (
                    Rule::Failover,
                    t,
                    format!(
                        "failover from {cur} to {t}, which a drill drains: a real outage outranks the drill"
                    ),
                )
            } else {
                (
                    Rule::Failover,
                    t,
                    format!("failover from {cur} to the most preferred healthy pool {t}"),
                )
            };
            return done(rule, Some(active), why, &mut reasons);
        }
    }
    match (verdict(cur), best) {
        (Verdict::Unhealthy, _) => {
            reasons.extend(policy.pools.iter().map(|p| explain(&p.id)));
            done(
                Rule::FailStatic,
                Some(cur),
                format!("fail static: no pool is healthy, keeping {cur} and writing nothing"),
                &mut reasons,
            )
        }
        (Verdict::Unknown, None) if discounted => {
            reasons.extend(policy.pools.iter().map(|p| explain(&p.id)));
            done(
                Rule::FailStatic,
                Some(cur),
                format!(
                    "fail static: no pool is healthy, keeping {cur} and writing nothing (down votes of suspect vantage points are discounted)"
                ),
                &mut reasons,
            )
        }
        (Verdict::Unknown, Some(_)) if discounted => {
            reasons.push(explain(cur));
            done(
                Rule::ProberSuspect,
                Some(cur),
                format!(
                    "{cur} looks down only from suspect vantage points: the evidence points at the prober, not the region, so hold"
                ),
                &mut reasons,
            )
        }
        (Verdict::Unknown, _) => {
            reasons.push(explain(cur));
            done(
                Rule::HoldUnknown,
                Some(cur),
                format!("evidence for {cur} is unknown; unknown never causes a switch"),
                &mut reasons,
            )
        }
        (Verdict::Healthy, _) => {
            let better =
                |p: &&PoolId| rank(p) < rank(cur) && eligible(p) && verdict(p) == Verdict::Healthy;
            if let Some(r) = policy
                .pools
                .iter()
                .map(|p| &p.id)
                .filter(|p| input.restored.contains(*p))
                .find(better)
            {
                reasons.push(explain(r));
                return done(
                    Rule::Restore,
                    Some(r),
                    format!("a drill restores {r}: return from {cur}"),
                    &mut reasons,
                );
            }
            let Some(b) = best.filter(better) else {
                reasons.push(explain(cur));
                return done(
                    Rule::Stay,
                    Some(cur),
                    format!("{cur} is healthy and no more preferred pool is: stay"),
                    &mut reasons,
                );
            };
            reasons.push(explain(b));
            let healthy_for = input.now.since(state(b).map_or(input.now, |s| s.since));
            match policy.failback {
                Failback::Manual => done(
                    Rule::FailbackManual,
                    Some(cur),
                    format!(
                        "failback is manual: {b} is healthy again but {cur} keeps serving until an operator restores {b}"
                    ),
                    &mut reasons,
                ),
                Failback::Auto if state(b).is_some_and(|s| s.suppressed) => done(
                    Rule::Suppressed,
                    Some(cur),
                    format!(
                        "failback to {b} is suppressed by flap damping (penalty {} above reuse {})",
                        state(b).map_or(0, |s| s.penalty),
                        policy.damping.reuse
                    ),
                    &mut reasons,
                ),
                Failback::Auto if healthy_for < input.failback_hold => done(
                    Rule::FailbackHold,
                    Some(cur),
                    format!(
                        "failback to {b} waits until it has been healthy for {} (healthy for {})",
                        humantime::format_duration(input.failback_hold),
                        humantime::format_duration(healthy_for)
                    ),
                    &mut reasons,
                ),
                Failback::Auto => done(
                    Rule::Failback,
                    Some(b),
                    format!("failback (auto) from {cur} to {b}"),
                    &mut reasons,
                ),
            }
        }
    }
}
