//! What the [`Recorder`](super::Recorder) keeps of one service between its switches: what its
//! timelines wait for, the holds since its last decision that was not a hold, and the probe
//! history that dates a failover's first failed probe. Small sorted vectors, not maps: a
//! service has a few pools and endpoints, and a `BTreeMap` node keeps room for eleven entries
//! whatever it holds (at 5,000 services of 2 pools the recorder kept about 1 kB per service,
//! now about a quarter of that).

use crate::model::{EndpointId, Millis, PoolId};
use crate::policy::Policy;

use super::Expect;

/// One service's state. Vantage points are indices into the recorder's list of them.
#[derive(Debug, Clone, Default)]
pub(super) struct History {
    /// What the service's timelines wait for, once its policy said so.
    pub(super) expect: Option<Expect>,
    /// The hold rules since the last decision that was not a hold, in order, each once.
    pub(super) holds: Vec<&'static str>,
    /// Start of each endpoint's current run of failed probes, sorted by pool, endpoint and
    /// vantage point; usually empty.
    pub(super) failing: Vec<Run>,
    /// Latest successful probe of any endpoint of each pool, sorted by pool and vantage point.
    pub(super) last_ok: Vec<Pass>,
}

/// A run of failed probes of one endpoint from one vantage point.
#[derive(Debug, Clone)]
pub(super) struct Run {
    pub(super) pool: PoolId,
    pub(super) endpoint: EndpointId,
    pub(super) vantage: usize,
    pub(super) since: Millis,
}

/// The latest success of a pool from one vantage point.
#[derive(Debug, Clone)]
pub(super) struct Pass {
    pub(super) pool: PoolId,
    pub(super) vantage: usize,
    pub(super) at: Millis,
}

impl History {
    /// Notes a probe that counts toward health: a success ends the endpoint's run of failures
    /// and moves its pool's last success; a failure starts a run unless one is going on.
    pub(super) fn probe(
        &mut self,
        pool: &PoolId,
        endpoint: &EndpointId,
        vantage: usize,
        at: Millis,
        success: bool,
    ) {
        let run = self.failing.binary_search_by(|r| {
            (&r.pool, &r.endpoint, r.vantage).cmp(&(pool, endpoint, vantage))
        });
        match (run, success) {
            (Ok(i), true) => {
                self.failing.remove(i);
                if self.failing.is_empty() {
                    self.failing = Vec::new();
                }
            }
            (Err(i), false) => {
                self.failing.reserve_exact(1);
                self.failing.insert(
                    i,
                    Run {
                        pool: pool.clone(),
                        endpoint: endpoint.clone(),
                        vantage,
                        since: at,
                    },
                );
            }
            _ => {}
        }
        if success {
            match self.pass(pool, vantage) {
                Ok(i) => self.last_ok[i].at = self.last_ok[i].at.max(at),
                Err(i) => {
                    self.last_ok.reserve_exact(1);
                    self.last_ok.insert(
                        i,
                        Pass {
                            pool: pool.clone(),
                            vantage,
                            at,
                        },
                    );
                }
            }
        }
    }

    fn pass(&self, pool: &PoolId, vantage: usize) -> Result<usize, usize> {
        self.last_ok
            .binary_search_by(|p| (&p.pool, p.vantage).cmp(&(pool, vantage)))
    }

    /// The earliest start, at or before `by`, of a run of failures of `pool`'s endpoints that
    /// began after the pool's last success from the same vantage point.
    pub(super) fn first_failure(&self, pool: &PoolId, by: Millis) -> Option<Millis> {
        let stale = |r: &Run| {
            self.pass(pool, r.vantage)
                .is_ok_and(|i| r.since < self.last_ok[i].at)
        };
        self.failing
            .iter()
            .filter(|r| &r.pool == pool && r.since <= by && !stale(r))
            .map(|r| r.since)
            .min()
    }

    /// Notes a decision that did not switch: a hold `rule` is added once; any other rule
    /// (`None`) starts over.
    pub(super) fn hold(&mut self, rule: Option<&'static str>) {
        match rule {
            None => self.holds = Vec::new(),
            Some(r) if !self.holds.contains(&r) => self.holds.push(r),
            Some(_) => {}
        }
    }

    /// Follows the service's reloaded `policy`: forgets the runs of endpoints and the
    /// successes of pools (with no endpoint left) it no longer has; without a policy (the
    /// service was removed) forgets the probe history and the expectations, keeping the holds.
    pub(super) fn retain(&mut self, policy: Option<&Policy>) {
        let Some(p) = policy else {
            self.failing = Vec::new();
            self.last_ok = Vec::new();
            self.expect = None;
            return;
        };
        let pool = |id: &PoolId| p.pools.iter().find(|x| &x.id == id);
        self.failing.retain(|r| {
            pool(&r.pool).is_some_and(|x| x.endpoints.iter().any(|e| e.id == r.endpoint))
        });
        self.last_ok
            .retain(|o| pool(&o.pool).is_some_and(|x| !x.endpoints.is_empty()));
    }

    /// Whether nothing is kept.
    pub(super) fn is_empty(&self) -> bool {
        self.expect.is_none()
            && self.holds.is_empty()
            && self.failing.is_empty()
            && self.last_ok.is_empty()
    }
}
