//! The policy engine. PURE: no I/O, no clock reads, no await. Time is an argument.
//!
//! [`Engine`] keeps one service's evidence (per-endpoint rise/fall state) and its serving
//! pool; [`Engine::observe`] feeds it probe results and [`Engine::decide`] evaluates the policy
//! at a given instant into a [`Decision`] with its reasons.

mod decide;
mod health;
mod overrides;

use std::collections::BTreeMap;
use std::time::Duration;

pub use decide::{DecideInput, Decision, PoolVerdict, Rule, decide};
pub use health::{EndpointHealth, pool_verdict};
pub use overrides::{
    DEFAULT_OVERRIDE_TTL, MAX_OVERRIDE_TTL, Override, OverrideAction, OverrideError, OverrideId,
    OverrideRequest, Overrides,
};

use crate::model::{EndpointId, Millis, Observation, PoolId, Verdict};
use crate::policy::Policy;

/// How many probe intervals without a result make an endpoint's evidence stale (unknown).
pub const STALE_INTERVALS: u32 = 3;

/// What changed when an observation was recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointTransition {
    /// The pool of the endpoint.
    pub pool: PoolId,
    /// The endpoint.
    pub endpoint: EndpointId,
    /// Its new verdict.
    pub verdict: Verdict,
}

/// One service's engine state.
#[derive(Debug, Clone)]
pub struct Engine {
    policy: Policy,
    endpoints: BTreeMap<EndpointId, (PoolId, EndpointHealth)>,
    pools: BTreeMap<PoolId, PoolVerdict>,
    active: Option<PoolId>,
    last_switch: Option<Millis>,
}

impl Engine {
    /// An engine with every endpoint `unknown` and no serving pool.
    pub fn new(policy: Policy) -> Self {
        let endpoints = policy
            .pools
            .iter()
            .flat_map(|p| {
                p.endpoints
                    .iter()
                    .map(|e| (e.id.clone(), (p.id.clone(), EndpointHealth::default())))
            })
            .collect();
        let pools = policy
            .pools
            .iter()
            .map(|p| {
                (
                    p.id.clone(),
                    PoolVerdict {
                        verdict: Verdict::Unknown,
                        since: Millis(0),
                    },
                )
            })
            .collect();
        Self {
            policy,
            endpoints,
            pools,
            active: None,
            last_switch: None,
        }
    }

    /// The policy this engine evaluates.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Adopts the pool the provider serves now (read at start), so a restarted controller
    /// continues from the provider's state instead of its own preference.
    pub fn adopt(&mut self, active: PoolId) {
        self.active = Some(active);
    }

    /// The pool serving now, as far as the engine knows.
    pub fn active(&self) -> Option<&PoolId> {
        self.active.as_ref()
    }

    /// Every endpoint's state, with its pool.
    pub fn endpoints(&self) -> impl Iterator<Item = (&EndpointId, &PoolId, &EndpointHealth)> {
        self.endpoints.iter().map(|(id, (pool, h))| (id, pool, h))
    }

    /// Records one probe result. Observations of endpoints the policy does not name are ignored.
    pub fn observe(&mut self, obs: &Observation) -> Option<EndpointTransition> {
        let th = self.policy.thresholds;
        let (pool, health) = self.endpoints.get_mut(&obs.endpoint)?;
        health
            .record(&obs.outcome, obs.at, th)
            .map(|verdict| EndpointTransition {
                pool: pool.clone(),
                endpoint: obs.endpoint.clone(),
                verdict,
            })
    }

    /// Evidence older than this is stale: `STALE_INTERVALS × interval + timeout`.
    pub fn stale_after(&self) -> Duration {
        self.policy.probe.interval * STALE_INTERVALS + self.policy.probe.timeout
    }

    /// Evaluates the policy at `now`, updates the serving pool when the decision switches,
    /// and returns the decision.
    pub fn decide(&mut self, now: Millis) -> Decision {
        let stale = self.stale_after();
        let th = self.policy.thresholds;
        let mut explain = BTreeMap::new();
        for pool in &self.policy.pools {
            let members: Vec<_> = self
                .endpoints
                .values()
                .filter(|(p, _)| *p == pool.id)
                .map(|(_, h)| h)
                .collect();
            let verdict = pool_verdict(members.iter().map(|h| h.verdict_at(now, stale)));
            let slot = self.pools.entry(pool.id.clone()).or_insert(PoolVerdict {
                verdict,
                since: now,
            });
            if slot.verdict != verdict {
                *slot = PoolVerdict {
                    verdict,
                    since: now,
                };
            }
            let text = pool
                .endpoints
                .iter()
                .filter_map(|e| self.endpoints.get(&e.id).map(|(_, h)| (e, h)))
                .map(|(e, h)| match h.verdict_at(now, stale) {
                    Verdict::Unknown if h.last_at.is_some() && h.verdict != Verdict::Unknown => {
                        format!(
                            "endpoint {} stale (no result for over {})",
                            e.id,
                            humantime::format_duration(stale)
                        )
                    }
                    _ => format!("endpoint {} {}", e.id, h.explain(th)),
                })
                .collect::<Vec<_>>()
                .join("; ");
            explain.insert(pool.id.clone(), text);
        }
        let decision = decide(
            &self.policy,
            &DecideInput {
                current: self.active.as_ref(),
                last_switch: self.last_switch,
                pools: &self.pools,
                explain: &explain,
                now,
            },
        );
        if decision.switched() {
            self.last_switch = Some(now);
        }
        if decision.active.is_some() {
            self.active = decision.active.clone();
        }
        decision
    }
}
