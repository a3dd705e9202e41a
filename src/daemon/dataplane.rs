//! Route 53 data-plane mode, this instance's side: per service a [`VoteBoard`] (the provider
//! the reconciler writes this instance's decisions to, in memory), read by the vote listener
//! (`crate::admin::votes`) that answers each pool's vote URL from it. A failover therefore changes only
//! what this instance's URLs answer; Route 53's health checks count the instances' votes.
//!
//! No Route 53 API call and no etcd call is made here: the mode works with both unreachable.
//! See `docs/route53-data-plane.md`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use gslb_core::policy::{Policy, Target};
use gslb_provider::{
    FailoverStyle, MemoryProvider, ObservedState, Plan, PoolRef, Provider, ProviderError,
};

use crate::config::Route53Settings;
use crate::config::dataplane::{SERVE_TEXT, drain_text};

/// This instance's votes for one service: per pool (by set identifier) whether it may serve.
/// Starts with every pool serving. A [`Provider`] (`"route53-votes"`) that writes nothing
/// outside this process and is not [`Provider::elected`]: in a cluster every instance votes
/// its own view.
///
/// A vote to drain is *stale*, and no longer given, once the reconciler has not read the
/// board (`observe`, done on every decision and every `[reconcile] resync`) for `stale_after`:
/// an instance whose controller stopped deciding then counts as "no vote to drain".
#[derive(Debug)]
pub struct VoteBoard {
    votes: MemoryProvider,
    read: Mutex<Instant>,
    stale_after: Duration,
}

impl VoteBoard {
    /// A board of the pools `set_identifiers`, every one serving, whose drain votes go stale
    /// `stale_after` after the last read.
    pub fn new(set_identifiers: &[PoolRef], stale_after: Duration) -> Self {
        Self {
            votes: MemoryProvider::new(FailoverStyle::Enablement, set_identifiers),
            read: Mutex::new(Instant::now()),
            stale_after,
        }
    }

    /// Whether this instance currently votes to drain `pool` (a set identifier): disabled by
    /// the last decision and read within `stale_after`. `None` for a pool the board does not
    /// have.
    pub fn drains(&self, pool: &PoolRef) -> Option<bool> {
        let fresh = self.read_at().elapsed() <= self.stale_after;
        let snapshot = self.votes.snapshot();
        snapshot.pools.get(pool).map(|p| !p.enabled && fresh)
    }

    fn read_at(&self) -> Instant {
        *self.read.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn mark_read(&self) {
        *self.read.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    fn pools(&self) -> Vec<PoolRef> {
        self.votes.snapshot().pools.into_keys().collect()
    }
}

impl Provider for VoteBoard {
    fn name(&self) -> &'static str {
        "route53-votes"
    }

    fn style(&self) -> FailoverStyle {
        FailoverStyle::Enablement
    }

    async fn observe(&self) -> Result<ObservedState, ProviderError> {
        self.mark_read();
        self.votes.observe().await
    }

    async fn apply(&self, plan: &Plan) -> Result<(), ProviderError> {
        self.mark_read();
        self.votes.apply(plan).await
    }

    fn elected(&self) -> bool {
        false
    }
}

/// One pool's vote: its set identifier and the string its URL answers while draining.
#[derive(Debug, Clone)]
struct Ballot {
    set_identifier: PoolRef,
    drain: String,
}

/// One service's board and ballots by pool name.
#[derive(Debug, Clone)]
struct Entry {
    board: Arc<VoteBoard>,
    ballots: BTreeMap<String, Ballot>,
}

/// Every data-plane service's board, shared by the binder (which fills it) and the vote
/// listener (which reads it). Cloning shares it.
#[derive(Debug, Clone)]
pub struct VoteRegistry(Arc<Mutex<BTreeMap<String, Entry>>>, Duration);

impl VoteRegistry {
    /// An empty registry whose boards' drain votes go stale after `stale_after` without a
    /// read (see [`VoteBoard`]; `gslb run` uses [`stale_after`]).
    pub fn new(stale_after: Duration) -> Self {
        Self(Arc::default(), stale_after)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Entry>> {
        // A poisoned lock only means a panic elsewhere; the map itself is always whole.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What `service`'s `pool` vote URL answers: `Some(body)` ([`drain_text`] while this
    /// instance votes drain, else [`SERVE_TEXT`]), `None` for an unknown service or pool.
    pub fn answer(&self, service: &str, pool: &str) -> Option<String> {
        let map = self.lock();
        let entry = map.get(service)?;
        let ballot = entry.ballots.get(pool)?;
        let drains = entry.board.drains(&ballot.set_identifier)?;
        Some(if drains {
            ballot.drain.clone()
        } else {
            SERVE_TEXT.to_owned()
        })
    }

    /// The board of a data-plane `policy` (Route 53 target), its secrets read: the board
    /// already registered for the service when it has the same pools (a reload keeps this
    /// instance's votes), else a new one, all serving.
    ///
    /// # Errors
    /// A pool's vote secret cannot be read (see
    /// [`crate::config::dataplane::DataPlaneSettings::secret`]), or the policy's target is not
    /// Route 53.
    pub fn board(
        &self,
        policy: &Policy,
        settings: &Route53Settings,
    ) -> Result<Arc<VoteBoard>, String> {
        let (Target::Route53(t), Some(dp)) =
            (&policy.target, settings.data_plane_of(&policy.service.0))
        else {
            return Err(format!(
                "service {}: data_plane mode is for Route 53 targets with [route53.data_plane]",
                policy.service
            ));
        };
        let mut ballots = BTreeMap::new();
        for p in &t.pools {
            let secret = dp.secret(&policy.service.0, &p.pool.0)?;
            ballots.insert(
                p.pool.0.clone(),
                Ballot {
                    set_identifier: p.set_identifier.clone(),
                    drain: drain_text(&secret),
                },
            );
        }
        let ids: Vec<PoolRef> = t.pools.iter().map(|p| p.set_identifier.clone()).collect();
        let mut map = self.lock();
        let board = match map.get(&policy.service.0) {
            Some(e) if e.board.pools() == sorted(&ids) => e.board.clone(),
            _ => Arc::new(VoteBoard::new(&ids, self.1)),
        };
        map.insert(
            policy.service.0.clone(),
            Entry {
                board: board.clone(),
                ballots,
            },
        );
        Ok(board)
    }
}

/// How long a drain vote lasts without a read: 3 reconciler resyncs, at least 30 s (a loaded
/// host's late resync must not withdraw a vote; one Route 53 interval is 10 or 30 s).
pub fn stale_after(resync: Duration) -> Duration {
    resync.saturating_mul(3).max(Duration::from_secs(30))
}

fn sorted(ids: &[PoolRef]) -> Vec<PoolRef> {
    let mut v = ids.to_vec();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use gslb_provider::{Change, Plan};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_drain_vote_goes_stale_without_reads() {
        let board = VoteBoard::new(&["seoul".into(), "tokyo".into()], Duration::from_secs(30));
        assert_eq!(board.drains(&"seoul".into()), Some(false));
        let state = board.observe().await.expect("observe");
        let version = state.pools["seoul"].version.clone();
        let plan: Plan = vec![Change::SetEnabled {
            pool: "seoul".into(),
            enabled: false,
            expected_version: version,
        }];
        board.apply(&plan).await.expect("apply");
        assert_eq!(board.drains(&"seoul".into()), Some(true));
        assert_eq!(board.drains(&"tokyo".into()), Some(false));
        assert_eq!(board.drains(&"osaka".into()), None);
        tokio::time::advance(Duration::from_secs(31)).await;
        assert_eq!(board.drains(&"seoul".into()), Some(false), "stale");
        board.observe().await.expect("observe");
        assert_eq!(board.drains(&"seoul".into()), Some(true), "read again");
        assert!(!board.elected());
    }
}
