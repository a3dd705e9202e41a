//! Priority failover: which pool should serve, and why. Pure.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::{Millis, PoolId, ServiceId, Verdict};
use crate::policy::{Failback, Policy};

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
    /// The serving pool is down by `fall`: move to the most preferred healthy pool.
    Failover,
    /// A more preferred pool is healthy again and failback is `auto`: return to it.
    Failback,
    /// Fail static: the serving pool is down but no pool is healthy, so nothing changes.
    FailStatic,
    /// Hold: the serving pool's verdict is unknown (no or stale evidence). Unknown never switches.
    HoldUnknown,
    /// Hold: a more preferred pool is healthy again, but failback is `manual`.
    FailbackManual,
    /// Hold: a failback is due but `min_dwell` has not passed since the last switch.
    Dwell,
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
            Self::HoldUnknown => "hold_unknown",
            Self::FailbackManual => "failback_manual",
            Self::Dwell => "dwell",
        }
    }

    /// Whether the decision may be pushed to a provider. Fail static, unknown evidence and
    /// awaiting evidence push nothing: the provider keeps what it has.
    pub fn pushes(self) -> bool {
        !matches!(
            self,
            Self::AwaitingEvidence | Self::FailStatic | Self::HoldUnknown
        )
    }

    /// Whether the rule is a hold (the engine wanted to, or could not, act).
    pub fn is_hold(self) -> bool {
        matches!(
            self,
            Self::FailStatic | Self::HoldUnknown | Self::FailbackManual | Self::Dwell
        )
    }
}

/// One pool's verdict as the decision saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolVerdict {
    /// The verdict.
    pub verdict: Verdict,
    /// When the pool entered this verdict (as far as this engine has seen).
    pub since: Millis,
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
    /// Human-readable reasons: which endpoints, which thresholds, which rule.
    pub reasons: Vec<String>,
    /// Every pool's verdict, by pool.
    pub pools: BTreeMap<PoolId, PoolVerdict>,
}

impl Decision {
    /// Whether this decision moved traffic.
    pub fn switched(&self) -> bool {
        self.previous.is_some() && self.previous != self.active
    }
}

/// Inputs to [`decide`] besides the policy.
#[derive(Debug, Clone)]
pub struct DecideInput<'a> {
    /// The pool serving now (adopted from the provider or chosen earlier).
    pub current: Option<&'a PoolId>,
    /// When traffic last switched, if ever (for `min_dwell`).
    pub last_switch: Option<Millis>,
    /// Each pool's verdict and since when.
    pub pools: &'a BTreeMap<PoolId, PoolVerdict>,
    /// Per pool, an explanation of its verdict (from its endpoints).
    pub explain: &'a BTreeMap<PoolId, String>,
    /// Now.
    pub now: Millis,
}

/// Priority failover with rise/fall verdicts, failback rule, minimum dwell and fail static.
pub fn decide(policy: &Policy, input: &DecideInput<'_>) -> Decision {
    let verdict = |p: &PoolId| input.pools.get(p).map_or(Verdict::Unknown, |v| v.verdict);
    let best = policy
        .pools
        .iter()
        .map(|p| &p.id)
        .find(|p| verdict(p) == Verdict::Healthy);
    let why = |p: &PoolId| {
        format!(
            "pool {p} {}: {}",
            verdict(p),
            input.explain.get(p).map_or("", String::as_str)
        )
    };
    let mut reasons = Vec::new();
    let (rule, active) = match input.current {
        None => {
            let first_unknown = policy
                .pools
                .iter()
                .position(|p| verdict(&p.id) == Verdict::Unknown);
            let best_rank = best.and_then(|b| policy.pools.iter().position(|p| &p.id == b));
            match (best, best_rank, first_unknown) {
                (Some(b), Some(r), u) if u.is_none_or(|u| u > r) => {
                    reasons.push(why(b));
                    reasons.push(format!("rule: serve the most preferred healthy pool ({b})"));
                    (Rule::ServePreferred, Some(b.clone()))
                }
                _ => {
                    reasons.push("rule: wait until every more preferred pool has a verdict".into());
                    (Rule::AwaitingEvidence, None)
                }
            }
        }
        Some(cur) => {
            let rank = |p: &PoolId| policy.pools.iter().position(|x| &x.id == p);
            match (verdict(cur), best) {
                (Verdict::Unhealthy, Some(b)) => {
                    reasons.push(why(cur));
                    reasons.push(why(b));
                    reasons.push(format!(
                        "rule: failover from {cur} to the most preferred healthy pool {b}"
                    ));
                    (Rule::Failover, Some(b.clone()))
                }
                (Verdict::Unhealthy, None) => {
                    reasons.extend(policy.pools.iter().map(|p| why(&p.id)));
                    reasons.push(format!(
                        "rule: fail static: no pool is healthy, keeping {cur} and writing nothing"
                    ));
                    (Rule::FailStatic, Some(cur.clone()))
                }
                (Verdict::Unknown, _) => {
                    reasons.push(why(cur));
                    reasons.push(format!(
                        "rule: evidence for {cur} is unknown; unknown never causes a switch"
                    ));
                    (Rule::HoldUnknown, Some(cur.clone()))
                }
                (Verdict::Healthy, Some(b)) if rank(b) < rank(cur) => {
                    reasons.push(why(b));
                    match policy.failback {
                        Failback::Manual => {
                            reasons.push(format!(
                                "rule: failback is manual: {b} is healthy again but {cur} keeps serving until an operator moves it"
                            ));
                            (Rule::FailbackManual, Some(cur.clone()))
                        }
                        Failback::Auto => {
                            let since = input.last_switch.map(|t| input.now.since(t));
                            match since {
                                Some(s) if s < policy.min_dwell => {
                                    reasons.push(format!(
                                        "rule: failback to {b} waits for min_dwell {} (last switch {} ago)",
                                        humantime::format_duration(policy.min_dwell),
                                        humantime::format_duration(s)
                                    ));
                                    (Rule::Dwell, Some(cur.clone()))
                                }
                                _ => {
                                    reasons
                                        .push(format!("rule: failback (auto) from {cur} to {b}"));
                                    (Rule::Failback, Some(b.clone()))
                                }
                            }
                        }
                    }
                }
                (Verdict::Healthy, _) => {
                    reasons.push(why(cur));
                    reasons.push(format!(
                        "rule: {cur} is healthy and no more preferred pool is: stay"
                    ));
                    (Rule::Stay, Some(cur.clone()))
                }
            }
        }
    };
    let previous = input
        .current
        .filter(|c| Some(*c) != active.as_ref())
        .cloned();
    Decision {
        service: policy.service.clone(),
        at: input.now,
        active,
        previous,
        rule,
        reasons,
        pools: input.pools.clone(),
    }
}
