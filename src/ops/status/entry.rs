//! What the status board keeps per service ([`Entry`]): the few facts the engine's policy and
//! shared last decision do not hold, in place of a whole [`ServiceStatus`]; names, pool verdicts
//! and the `holding` text are read from the policy and the decision when the status is read
//! ([`Entry::status`]).

use std::sync::Arc;

use gslb_core::engine::{Decision, Override, PoolVerdict, ServiceEngine};
use gslb_core::model::{EndpointId, Millis, Observation, PoolId, ServiceId, VantageId, Verdict};
use gslb_core::policy::Policy;

use super::recent::Ring;
use super::{ApplyStatus, Decided, EndpointStatus, PoolStatus, ServiceStatus};

/// The `holding` text of a service not adopted yet.
const AWAITING_PROVIDER: &str =
    "awaiting_provider: waiting to read the provider's current state; no decision until it answers";

/// One endpoint as one vantage point sees it ([`EndpointStatus`] without the names): the
/// endpoint as its rank by name (and its pool's number), the vantage point as its number on
/// the board.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Health {
    rank: u32,
    pool: u16,
    vantage: u16,
    verdict: Verdict,
    consecutive_ok: u32,
    consecutive_fail: u32,
    flap_percent: u32,
    flapping: bool,
    unprobeable_since: Option<Millis>,
}

/// A service on the board.
#[derive(Debug)]
pub(super) struct Entry {
    /// The engine's policy, shared.
    policy: Arc<Policy>,
    /// The policy's endpoints by name: (pool number, number in the pool); an endpoint's
    /// position here is its rank ([`Ring::endpoint`]).
    by_name: Box<[(u16, u16)]>,
    /// The engine's last decision, shared.
    decision: Option<Arc<Decision>>,
    ready: bool,
    active: Option<PoolId>,
    velocity_available: u32,
    stale_evidence: u32,
    overrides: Vec<Override>,
    /// In the order shown: by pool, then as the engine lists its evidence.
    health: Vec<Health>,
    /// Each endpoint's recent probes per vantage point, by (rank, vantage point).
    recent: Vec<Ring>,
    /// The reconciler's record.
    pub apply: ApplyStatus,
    /// The engine loop's record of what it handed to the reconciler.
    pub decided: Option<Decided>,
}

/// The policy's endpoints sorted by name: (pool number, number in the pool).
fn by_name(policy: &Policy) -> Box<[(u16, u16)]> {
    let mut all: Vec<(&EndpointId, (u16, u16))> = policy
        .pools
        .iter()
        .enumerate()
        .flat_map(|(p, pool)| {
            pool.endpoints
                .iter()
                .enumerate()
                .map(move |(e, ep)| (&ep.id, (number(p), number(e))))
        })
        .collect();
    all.sort_by(|a, b| a.0.cmp(b.0));
    all.into_iter().map(|(_, at)| at).collect()
}

/// `i` as a number on the board (a policy has far fewer than 65,535 pools or endpoints per
/// pool; saturates).
fn number(i: usize) -> u16 {
    u16::try_from(i).unwrap_or(u16::MAX)
}

/// `rank` as a [`Ring::endpoint`] (saturates).
fn rank_number(rank: usize) -> u32 {
    u32::try_from(rank).unwrap_or(u32::MAX)
}

/// `vantage`'s number in `vantages`, added when missing.
pub(super) fn vantage_number(vantages: &mut Vec<VantageId>, vantage: &VantageId) -> u16 {
    match vantages.iter().position(|v| v == vantage) {
        Some(i) => number(i),
        None => {
            vantages.push(vantage.clone());
            number(vantages.len() - 1)
        }
    }
}

impl Entry {
    /// A service's entry as of its engine; `update` fills it.
    pub fn new(engine: &ServiceEngine) -> Self {
        let policy = engine.shared_policy().clone();
        Self {
            by_name: by_name(&policy),
            policy,
            decision: None,
            ready: false,
            active: None,
            velocity_available: 0,
            stale_evidence: 0,
            overrides: Vec::new(),
            health: Vec::new(),
            recent: Vec::new(),
            apply: ApplyStatus::default(),
            decided: None,
        }
    }

    /// The service's mode.
    pub fn mode(&self) -> gslb_core::policy::Mode {
        self.policy.mode
    }

    /// The pool serving now, as far as the engine knows.
    pub fn active(&self) -> Option<&PoolId> {
        self.active.as_ref()
    }

    /// Refreshes from the engine, in place: nothing is copied that did not change.
    pub fn update<'a>(
        &mut self,
        engine: &ServiceEngine,
        overrides: impl Iterator<Item = &'a Override>,
        vantages: &mut Vec<VantageId>,
        now: Millis,
    ) {
        if !Arc::ptr_eq(&self.policy, engine.shared_policy()) {
            self.policy = engine.shared_policy().clone();
            let by_name = by_name(&self.policy);
            if by_name != self.by_name {
                self.by_name = by_name;
                self.recent.clear();
            }
        }
        if self.active.as_ref() != engine.active() {
            self.active = engine.active().cloned();
        }
        self.decision = engine.last_decision().cloned();
        self.ready = engine.ready();
        self.velocity_available = engine.velocity_available(now);
        self.stale_evidence = engine.stale_evidence();
        let service = &self.policy.service;
        let mut overrides = overrides.filter(|o| &o.service == service).peekable();
        if overrides.peek().is_some() || !self.overrides.is_empty() {
            self.overrides = overrides.cloned().collect();
        }
        self.update_health(engine, vantages);
    }

    /// Refreshes each endpoint's health per vantage point, in the list's room when the count
    /// did not change.
    fn update_health(&mut self, engine: &ServiceEngine, vantages: &mut Vec<VantageId>) {
        let count = engine
            .evidence()
            .map(|(_, _, m)| m.into_iter().count())
            .sum();
        self.health.clear();
        if self.health.capacity() != count {
            self.health = Vec::with_capacity(count);
        }
        for (e, _, by_vantage) in engine.evidence() {
            let Some(rank) = self.rank(e) else { continue };
            for (v, h) in by_vantage {
                self.health.push(Health {
                    rank: rank_number(rank),
                    pool: self.by_name[rank].0,
                    vantage: vantage_number(vantages, v),
                    verdict: h.verdict,
                    consecutive_ok: h.consecutive_ok,
                    consecutive_fail: h.consecutive_fail,
                    flap_percent: h.flap.percent().round() as u32,
                    flapping: h.flap.flapping(),
                    unprobeable_since: h.unprobeable_since,
                });
            }
        }
        // By pool, each pool's in the engine's order (a stable sort).
        self.health.sort_by_key(|h| h.pool);
    }

    /// The rank of `endpoint` by name in the policy.
    fn rank(&self, endpoint: &EndpointId) -> Option<usize> {
        let pools = &self.policy.pools;
        self.by_name
            .binary_search_by(|&(p, e)| {
                pools[usize::from(p)].endpoints[usize::from(e)]
                    .id
                    .cmp(endpoint)
            })
            .ok()
    }

    /// Keeps `obs` among its endpoint's recent probes from its vantage point (numbered in
    /// `vantages`); an endpoint not in the policy is ignored.
    pub fn record_probe(&mut self, obs: &Observation, vantages: &mut Vec<VantageId>) {
        let Some(rank) = self.rank(&obs.endpoint) else {
            return;
        };
        let key = (rank_number(rank), vantage_number(vantages, &obs.vantage));
        match self
            .recent
            .binary_search_by_key(&key, |r| (r.endpoint, r.vantage))
        {
            Ok(i) => self.recent[i].push(obs.at, &obs.outcome),
            Err(i) => {
                if self.recent.capacity() == 0 {
                    // One vantage point usually: room for one ring per endpoint, once.
                    self.recent.reserve_exact(self.by_name.len());
                } else if self.recent.len() == self.recent.capacity() {
                    self.recent.reserve_exact(1);
                }
                let ring = Ring::first(key.0, key.1, obs.at, &obs.outcome);
                self.recent.insert(i, ring);
            }
        }
    }

    /// The service's status as [`super::StatusBoard::snapshot_of`] shows it: pools with their
    /// endpoints and recent probes when `endpoints`.
    pub fn status(
        &self,
        service: &ServiceId,
        vantages: &[VantageId],
        endpoints: bool,
    ) -> ServiceStatus {
        let policy = &*self.policy;
        let decision = self.decision.as_deref();
        ServiceStatus {
            service: service.clone(),
            hostname: policy.hostname.clone(),
            mode: policy.mode,
            active: self.active.clone(),
            pools: (policy.pools.iter().enumerate())
                .map(|(i, pool)| PoolStatus {
                    pool: pool.id.clone(),
                    priority: pool.priority,
                    region: pool.region.clone(),
                    state: decision
                        .and_then(|d| d.pools.get(&pool.id))
                        .map(|v| self.with_current_flap(number(i), v)),
                    endpoints: if endpoints {
                        self.endpoints(number(i), vantages)
                    } else {
                        Vec::new()
                    },
                })
                .collect(),
            holding: match decision {
                _ if !self.ready => Some(AWAITING_PROVIDER.into()),
                Some(d) if d.rule.is_hold() => Some(format!(
                    "{}: {}",
                    d.rule.as_str(),
                    d.reasons.last().map_or("", String::as_str)
                )),
                _ => None,
            },
            velocity_available: self.velocity_available,
            stale_evidence: self.stale_evidence,
            overrides: self.overrides.clone(),
            last_decision: self.decision.clone(),
            apply: self.apply.clone(),
            decided: self.decided.clone(),
        }
    }

    /// Pool `pool`'s verdict `v` as decided, with its flap figures as they stand now (from
    /// its endpoints' evidence: the highest percentage, flapping while any endpoint is): a
    /// pool that flaps below `fall` is never re-decided, and its status must not wait for it.
    fn with_current_flap(&self, pool: u16, v: &PoolVerdict) -> PoolVerdict {
        let of_pool = || self.health.iter().filter(|h| h.pool == pool);
        PoolVerdict {
            flap_percent: of_pool().map(|h| h.flap_percent).max().unwrap_or(0),
            flapping: of_pool().any(|h| h.flapping),
            ..v.clone()
        }
    }

    /// Pool `pool`'s endpoints per vantage point, with their recent probes.
    fn endpoints(&self, pool: u16, vantages: &[VantageId]) -> Vec<EndpointStatus> {
        let endpoints = &self.policy.pools[usize::from(pool)].endpoints;
        self.health
            .iter()
            .filter(|h| h.pool == pool)
            .map(|h| {
                let key = (h.rank, h.vantage);
                let recent = self
                    .recent
                    .binary_search_by_key(&key, |r| (r.endpoint, r.vantage))
                    .map(|i| self.recent[i].probes().collect())
                    .unwrap_or_default();
                let (_, endpoint) = self.by_name[h.rank as usize];
                EndpointStatus {
                    endpoint: endpoints[usize::from(endpoint)].id.clone(),
                    vantage: vantages[usize::from(h.vantage)].clone(),
                    verdict: h.verdict,
                    consecutive_ok: h.consecutive_ok,
                    consecutive_fail: h.consecutive_fail,
                    flap_percent: h.flap_percent,
                    unprobeable_since: h.unprobeable_since,
                    recent,
                }
            })
            .collect()
    }
}
