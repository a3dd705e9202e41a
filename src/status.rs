//! The status board behind `GET /v1/status`: each service's pools, verdicts, last probes, the
//! last decision and whether the provider has applied it.
//!
//! Written by the service loops and reconcilers, read by the admin API. Plain data, no I/O.

use std::collections::{BTreeMap, VecDeque};
use std::sync::RwLock;

use serde::Serialize;

use crate::engine::{Decision, Engine, pool_verdict};
use crate::model::{EndpointId, Millis, PoolId, ProbeOutcome, ServiceId, Verdict};

/// How many recent probes each endpoint keeps in the status.
pub const RECENT_PROBES: usize = 5;

/// Whether the provider matches the latest decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ApplyState {
    /// No pushable decision yet (awaiting evidence, or holding without writing).
    #[default]
    NotPushed,
    /// The provider state matches the latest decision.
    Applied,
    /// Decided but not applied: the reconciler is still trying (see `last_error`).
    Pending,
}

/// What the reconciler last saw and did.
#[derive(Debug, Clone, Serialize, Default)]
pub struct ApplyStatus {
    /// See [`ApplyState`].
    pub state: ApplyState,
    /// The provider the decision goes to.
    pub provider: String,
    /// The pool the provider serves, from the last successful observe.
    pub observed_active: Option<PoolId>,
    /// Since when the state has been `pending`.
    pub pending_since: Option<Millis>,
    /// The last provider error, cleared on success.
    pub last_error: Option<String>,
    /// When the last write was accepted.
    pub last_write_at: Option<Millis>,
    /// Changes written since start.
    pub writes: u64,
    /// Re-applies since start of a state gslb had already written (another writer changed it).
    pub drift: u64,
    /// Set while gslb has stopped writing because another writer keeps reverting it: what and
    /// until when. Cleared once the provider matches or a write is accepted.
    pub write_fight: Option<String>,
    /// Set while a safety guard refuses the plan (e.g. traffic would land on an unhealthy
    /// fallback pool): the reason. The decision stays `pending`.
    pub refused: Option<String>,
}

/// One endpoint in the status.
#[derive(Debug, Clone, Serialize)]
pub struct EndpointStatus {
    /// The endpoint.
    pub endpoint: EndpointId,
    /// Its thresholded verdict.
    pub verdict: Verdict,
    /// Consecutive successes.
    pub consecutive_ok: u32,
    /// Consecutive failures.
    pub consecutive_fail: u32,
    /// The last probes, newest last.
    pub recent: VecDeque<RecentProbe>,
}

/// One recent probe.
#[derive(Debug, Clone, Serialize)]
pub struct RecentProbe {
    /// When it finished.
    pub at: Millis,
    /// What it saw.
    #[serde(flatten)]
    pub outcome: ProbeOutcome,
}

/// One pool in the status.
#[derive(Debug, Clone, Serialize)]
pub struct PoolStatus {
    /// The pool.
    pub pool: PoolId,
    /// Its priority (1 = most preferred).
    pub priority: u32,
    /// Its region label.
    pub region: String,
    /// Its verdict at the last decision.
    pub verdict: Verdict,
    /// Its endpoints.
    pub endpoints: Vec<EndpointStatus>,
}

/// One service in the status.
#[derive(Debug, Clone, Serialize)]
pub struct ServiceStatus {
    /// The service.
    pub service: ServiceId,
    /// Its public hostname.
    pub hostname: String,
    /// The pool the engine wants serving.
    pub active: Option<PoolId>,
    /// Pools in priority order.
    pub pools: Vec<PoolStatus>,
    /// Set while the engine holds (fail static, unknown evidence, manual failback, dwell):
    /// the rule and why.
    pub holding: Option<String>,
    /// The last decision with its reasons.
    pub last_decision: Option<Decision>,
    /// Whether the provider has applied it.
    pub apply: ApplyStatus,
}

/// Every service's status.
#[derive(Debug, Default)]
pub struct StatusBoard {
    services: RwLock<BTreeMap<ServiceId, ServiceStatus>>,
}

impl StatusBoard {
    /// A snapshot of every service, by name.
    pub fn snapshot(&self) -> BTreeMap<ServiceId, ServiceStatus> {
        self.services
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Refreshes a service's pools and decision from its engine.
    pub fn update_engine(&self, engine: &Engine, decision: Option<&Decision>) {
        let policy = engine.policy();
        let mut guard = self
            .services
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let entry = guard
            .entry(policy.service.clone())
            .or_insert_with(|| ServiceStatus {
                service: policy.service.clone(),
                hostname: policy.hostname.clone(),
                active: None,
                pools: Vec::new(),
                holding: None,
                last_decision: None,
                apply: ApplyStatus::default(),
            });
        let mut previous: BTreeMap<EndpointId, VecDeque<RecentProbe>> = entry
            .pools
            .drain(..)
            .flat_map(|p| p.endpoints.into_iter().map(|e| (e.endpoint, e.recent)))
            .collect();
        entry.pools = policy
            .pools
            .iter()
            .map(|pool| PoolStatus {
                pool: pool.id.clone(),
                priority: pool.priority,
                region: pool.region.clone(),
                verdict: decision.and_then(|d| d.pools.get(&pool.id)).map_or_else(
                    || {
                        pool_verdict(
                            engine
                                .endpoints()
                                .filter(|(_, p, _)| **p == pool.id)
                                .map(|(_, _, h)| h.verdict),
                        )
                    },
                    |v| v.verdict,
                ),
                endpoints: engine
                    .endpoints()
                    .filter(|(_, p, _)| **p == pool.id)
                    .map(|(id, _, h)| {
                        let mut recent = previous.remove(id).unwrap_or_default();
                        if let (Some(at), Some(o)) = (h.last_at, &h.last) {
                            if recent.back().is_none_or(|r| r.at != at) {
                                recent.push_back(RecentProbe {
                                    at,
                                    outcome: o.clone(),
                                });
                                if recent.len() > RECENT_PROBES {
                                    recent.pop_front();
                                }
                            }
                        }
                        EndpointStatus {
                            endpoint: id.clone(),
                            verdict: h.verdict,
                            consecutive_ok: h.consecutive_ok,
                            consecutive_fail: h.consecutive_fail,
                            recent,
                        }
                    })
                    .collect(),
            })
            .collect();
        if decision.is_none() {
            entry.holding = Some(
                "awaiting_provider: waiting to read the provider's current state; no decision until it answers".into(),
            );
        }
        if let Some(d) = decision {
            entry.active = d.active.clone();
            entry.holding = d.rule.is_hold().then(|| {
                format!(
                    "{}: {}",
                    d.rule.as_str(),
                    d.reasons.last().map_or("", String::as_str)
                )
            });
            entry.last_decision = Some(d.clone());
        }
    }

    /// Updates a service's apply status.
    pub fn update_apply(&self, service: &ServiceId, f: impl FnOnce(&mut ApplyStatus)) {
        let mut guard = self
            .services
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(entry) = guard.get_mut(service) {
            f(&mut entry.apply);
        }
    }
}
