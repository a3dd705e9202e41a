//! Route 53 data-plane mode, this instance's side: per service a [`VoteBoard`] (the provider
//! the reconciler writes this instance's decisions to, in memory), read by the vote listener
//! (`crate::admin::votes`) that answers each pool's vote URL from it. A failover therefore changes only
//! what this instance's URLs answer; Route 53's health checks count the instances' votes.
//!
//! No Route 53 API call and no etcd call is made here: the mode works with both unreachable.
//! With `[cluster]`, a vote follows the engine's decision while coordination through etcd
//! holds, and this instance's own rise/fall verdicts ([`OwnView`]) while it is lost (the
//! engine then fails static, and its frozen decisions must not freeze the votes).
//! See `docs/route53-data-plane.md`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use gslb_core::engine::pool_verdict;
use gslb_core::model::{EndpointId, ServiceId, Verdict};
use gslb_core::policy::{Failback, Mode, Policy, Target};
use gslb_provider::{
    FailoverStyle, MemoryProvider, ObservedState, Plan, PoolRef, Provider, ProviderError, Served,
};

use crate::config::Route53Settings;
use crate::config::dataplane::{ABSTAIN_TEXT, Vote, drain_text, serve_text};
use crate::daemon::tally::{self, TallyPool, TallySpec};
use crate::io::coordination::LocalVerdicts;
use crate::ops::telemetry::Telemetry;

/// This instance's votes for one service: per pool (by set identifier) whether it may serve.
/// Starts with every pool serving. A [`Provider`] ([`VOTES`]) that writes nothing
/// outside this process and is not [`Provider::elected`]: in a cluster every instance votes
/// its own view.
///
/// The votes are given only once the reconciler has found the board holding a decision that
/// pushes a pool ([`Provider::decided`]: the state the board starts with is no decision, so a
/// restarted instance does not vote before its engine has decided), and only while it reads
/// the board (`observe`, done on every decision and every `[reconcile] resync`): once it has
/// not read it for `stale_after`, every pool gets [`Vote::Abstain`]. An instance whose
/// controller stopped deciding then counts as a dead one: no vote either way.
///
/// Its reads carry what Route 53's tally serves ([`ObservedState::served`]) once the tally
/// reader ([`crate::daemon::tally`]) has read the instances' vote URLs.
#[derive(Debug)]
pub struct VoteBoard {
    votes: MemoryProvider,
    read: Mutex<Option<Instant>>,
    stale_after: Duration,
    served: Arc<watch::Sender<Option<Served>>>,
    /// Whether a pushed decision was found on the board since the start.
    decided: AtomicBool,
    /// Whether a tally reader reports into `served` (reads then wait for its first report).
    tallied: AtomicBool,
}

/// The vote board's provider name, in status and metrics.
pub const VOTES: &str = "route53-votes";

/// How long a read of a tallied board waits for the tally's first report: the tally's read
/// timeout ([`tally::READ_TIMEOUT`]) and a second.
const FIRST_TALLY_WAIT: Duration = Duration::from_secs(7);

impl VoteBoard {
    /// A board of the pools `set_identifiers`, every one serving, whose drain votes go stale
    /// `stale_after` after the last read.
    pub fn new(set_identifiers: &[PoolRef], stale_after: Duration) -> Self {
        Self {
            votes: MemoryProvider::new(FailoverStyle::Enablement, set_identifiers),
            read: Mutex::new(None),
            stale_after,
            served: Arc::new(watch::Sender::new(None)),
            decided: AtomicBool::new(false),
            tallied: AtomicBool::new(false),
        }
    }

    /// This instance's vote on `pool` (a set identifier): [`Vote::Drain`] when the last
    /// decision disabled it, [`Vote::Serve`] otherwise, [`Vote::Abstain`] before a pushed
    /// decision was found on the board or unless it was read within `stale_after`. `None` for
    /// a pool the board does not have.
    pub fn vote(&self, pool: &PoolRef) -> Option<Vote> {
        let fresh = self.fresh() && self.decided.load(Ordering::Relaxed);
        let snapshot = self.votes.snapshot();
        snapshot.pools.get(pool).map(|p| match (fresh, p.enabled) {
            (false, _) => Vote::Abstain,
            (true, true) => Vote::Serve,
            (true, false) => Vote::Drain,
        })
    }

    /// Whether the reconciler read the board within `stale_after`.
    fn fresh(&self) -> bool {
        let read = *self.read.lock().unwrap_or_else(PoisonError::into_inner);
        read.is_some_and(|at| at.elapsed() <= self.stale_after)
    }

    fn mark_read(&self) {
        *self.read.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
    }

    fn pools(&self) -> Vec<PoolRef> {
        self.votes.snapshot().pools.into_keys().collect()
    }
}

impl Provider for VoteBoard {
    fn name(&self) -> &'static str {
        VOTES
    }

    fn style(&self) -> FailoverStyle {
        FailoverStyle::Enablement
    }

    /// This instance's votes, with what Route 53's tally serves. Until the tally's first
    /// report, waits for it (at most [`FIRST_TALLY_WAIT`]), so the engine's adoption at start
    /// takes what Route 53 serves, not the board's initial state.
    async fn observe(&self) -> Result<ObservedState, ProviderError> {
        self.mark_read();
        if self.tallied.load(Ordering::Relaxed) {
            let mut first = self.served.subscribe();
            let _ = tokio::time::timeout(FIRST_TALLY_WAIT, first.wait_for(Option::is_some)).await;
        }
        let mut state = self.votes.observe().await?;
        state.served = self.served.borrow().clone();
        Ok(state)
    }

    async fn apply(&self, plan: &Plan) -> Result<(), ProviderError> {
        self.mark_read();
        self.votes.apply(plan).await
    }

    fn elected(&self) -> bool {
        false
    }

    fn decided(&self) {
        self.decided.store(true, Ordering::Relaxed);
    }
}

/// One pool's vote: its set identifier, the strings its URL answers while serving and
/// draining, and the pool's endpoints (for this instance's own view).
#[derive(Debug, Clone)]
struct Ballot {
    set_identifier: PoolRef,
    serve: String,
    drain: String,
    endpoints: Vec<EndpointId>,
}

impl Ballot {
    /// What the vote URL answers for `vote`.
    fn text(&self, vote: Vote) -> String {
        match vote {
            Vote::Serve => self.serve.clone(),
            Vote::Drain => self.drain.clone(),
            Vote::Abstain => ABSTAIN_TEXT.to_owned(),
        }
    }
}

/// One service's board and ballots by pool name; `own_view`: whether this instance's own
/// verdicts may vote (the policy enforces), and `latch` for `failback = "manual"`.
#[derive(Debug, Clone)]
struct Entry {
    board: Arc<VoteBoard>,
    ballots: BTreeMap<String, Ballot>,
    own_view: bool,
    manual_failback: bool,
    /// The pool this instance's own view drained while coordination was lost, kept drained
    /// with `failback = "manual"` until coordination is back. One at most: a pool drained
    /// later replaces it, so the latch never drains every pool.
    latched: Option<String>,
    /// The service's tally reader, stopped when the entry is replaced.
    _reader: Option<Arc<Reader>>,
}

/// A tally reader's task, aborted when dropped.
#[derive(Debug)]
struct Reader(tokio::task::AbortHandle);

impl Drop for Reader {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What a registry's tally readers need: the client they read with and where they report.
#[derive(Debug, Clone)]
struct Readers {
    client: reqwest::Client,
    telemetry: Telemetry,
}

/// With `[cluster]`: whether coordination through etcd holds, and this instance's own
/// rise/fall verdicts per endpoint (the engine loop keeps them, with or without etcd).
#[derive(Debug, Clone)]
pub struct OwnView {
    /// `true` while coordinated ([`crate::daemon::cluster::Cluster::coordinated`]).
    pub coordinated: watch::Receiver<bool>,
    /// This instance's verdicts ([`crate::ops::telemetry::Telemetry::verdicts`]).
    pub verdicts: watch::Receiver<LocalVerdicts>,
}

/// Every data-plane service's board, shared by the binder (which fills it) and the vote
/// listener (which reads it). Cloning shares it.
#[derive(Debug, Clone)]
pub struct VoteRegistry {
    entries: Arc<Mutex<BTreeMap<String, Entry>>>,
    stale_after: Duration,
    own: Option<OwnView>,
    readers: Option<Readers>,
}

impl VoteRegistry {
    /// An empty registry whose boards' drain votes go stale after `stale_after` without a
    /// read (see [`VoteBoard`]; `gslb run` uses [`stale_after`]). `own`: with `[cluster]`,
    /// the source of the votes while coordination is lost; `None` without `[cluster]` (the
    /// engine's decisions are then this instance's own view).
    pub fn new(stale_after: Duration, own: Option<OwnView>) -> Self {
        Self {
            entries: Arc::default(),
            stale_after,
            own,
            readers: None,
        }
    }

    /// This registry, starting a tally reader ([`crate::daemon::tally`]) for each board it
    /// makes, which reports to `telemetry`.
    ///
    /// # Errors
    /// The reader's HTTP client cannot be set up (its TLS back end).
    pub fn with_tally(mut self, telemetry: Telemetry) -> reqwest::Result<Self> {
        self.readers = Some(Readers {
            client: tally::client()?,
            telemetry,
        });
        Ok(self)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Entry>> {
        // A poisoned lock only means a panic elsewhere; the map itself is always whole.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What `service`'s `pool` vote URL answers: `Some(body)`, the text of this instance's
    /// vote ([`serve_text`], [`drain_text`] or [`ABSTAIN_TEXT`]); `None` for an unknown
    /// service or pool. The vote is the engine's decision ([`VoteBoard::vote`]), or, with
    /// `[cluster]` while coordination is lost, this instance's own view ([`own_drains`]).
    pub fn answer(&self, service: &str, pool: &str) -> Option<String> {
        let mut map = self.lock();
        let entry = map.get_mut(service)?;
        let ballot = entry.ballots.get(pool)?;
        let engine = entry.board.vote(&ballot.set_identifier)?;
        let vote = match &self.own {
            Some(own) if !*own.coordinated.borrow() && engine != Vote::Abstain => {
                if entry.own_view && own.drains(service, pool, entry) {
                    Vote::Drain
                } else {
                    Vote::Serve
                }
            }
            _ => {
                entry.latched = None;
                engine
            }
        };
        Some(entry.ballots.get(pool)?.text(vote))
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
        let mut pools = Vec::new();
        for p in &t.pools {
            let secret = dp.secret(&policy.service.0, &p.pool.0)?;
            pools.push(TallyPool {
                pool: p.pool.clone(),
                set_identifier: p.set_identifier.clone(),
                serve: serve_text(&secret),
                drain: drain_text(&secret),
            });
            let endpoints = policy
                .pools
                .iter()
                .filter(|pool| pool.id == p.pool)
                .flat_map(|pool| pool.endpoints.iter().map(|e| e.id.clone()))
                .collect();
            ballots.insert(
                p.pool.0.clone(),
                Ballot {
                    set_identifier: p.set_identifier.clone(),
                    serve: serve_text(&secret),
                    drain: drain_text(&secret),
                    endpoints,
                },
            );
        }
        let ids: Vec<PoolRef> = t.pools.iter().map(|p| p.set_identifier.clone()).collect();
        let mut map = self.lock();
        let board = match map.get(&policy.service.0) {
            Some(e) if e.board.pools() == sorted(&ids) => e.board.clone(),
            _ => Arc::new(VoteBoard::new(&ids, self.stale_after)),
        };
        let (checkers, aggregation) = dp.checker_delay();
        let spec = TallySpec {
            service: policy.service.clone(),
            pools,
            instances: dp
                .instances
                .iter()
                .map(|i| (i.name.clone(), i.url.clone()))
                .collect(),
            lag: checkers.saturating_add(aggregation),
            period: dp.request_interval / 3,
        };
        map.insert(
            policy.service.0.clone(),
            Entry {
                board: board.clone(),
                ballots,
                own_view: policy.mode == Mode::Enforce,
                manual_failback: policy.failback == Failback::Manual,
                latched: None,
                _reader: self.read_tally(spec, &board),
            },
        );
        Ok(board)
    }

    /// Forgets `service` (removed by a reload): its vote URLs answer `404 gslb-unknown` (no
    /// vote), its tally reader stops and its data-plane gauges go.
    pub fn remove(&self, service: &str) {
        if self.lock().remove(service).is_some()
            && let Some(r) = &self.readers
        {
            r.telemetry.metrics.forget_voters(service);
        }
    }

    /// Starts the tally reader of `spec` reporting into `board`, when this registry has
    /// readers ([`Self::with_tally`]).
    fn read_tally(&self, spec: TallySpec, board: &VoteBoard) -> Option<Arc<Reader>> {
        let r = self.readers.as_ref()?;
        board.tallied.store(true, Ordering::Relaxed);
        let task = tokio::spawn(tally::run(
            spec,
            r.client.clone(),
            board.served.clone(),
            r.telemetry.clone(),
        ));
        Some(Arc::new(Reader(task.abort_handle())))
    }
}

impl OwnView {
    /// Whether this instance's own view drains `pool` of `service` ([`own_drains`] on its
    /// pools' verdicts), keeping a pool drained once it was with `failback = "manual"`.
    fn drains(&self, service: &str, pool: &str, entry: &mut Entry) -> bool {
        let verdicts = self.verdicts.borrow();
        let service = ServiceId(service.to_owned());
        let pools: BTreeMap<&str, Verdict> = entry
            .ballots
            .iter()
            .map(|(name, b)| {
                let of = b.endpoints.iter().map(|e| {
                    let key = (service.clone(), e.clone());
                    verdicts.get(&key).copied().unwrap_or(Verdict::Unknown)
                });
                (name.as_str(), pool_verdict(of))
            })
            .collect();
        let latch = entry.manual_failback.then_some(&mut entry.latched);
        own_vote(pool, &pools, latch)
    }
}

/// [`own_drains`] for `pool` with `failback = "manual"`'s `latch` (`None` with `auto`): the
/// pool drained last stays drained, and draining a pool moves the latch to it.
fn own_vote(
    pool: &str,
    pools: &BTreeMap<&str, Verdict>,
    latch: Option<&mut Option<String>>,
) -> bool {
    let latched = latch.as_deref().is_some_and(|l| l.as_deref() == Some(pool));
    let drains = own_drains(pool, pools, latched);
    if drains && let Some(l) = latch {
        *l = Some(pool.to_owned());
    }
    drains
}

/// This instance's own vote for `pool`, from its own pool verdicts `pools` (by pool name):
/// drain while the pool is unhealthy (or `latched`: drained before, `failback = "manual"`)
/// and another pool is healthy; never every pool (Route 53 answers the PRIMARY when every
/// record is unhealthy, and the engine fails static rather than drain every pool).
pub fn own_drains(pool: &str, pools: &BTreeMap<&str, Verdict>, latched: bool) -> bool {
    let down = latched || pools.get(pool) == Some(&Verdict::Unhealthy);
    let elsewhere = pools
        .iter()
        .any(|(name, v)| *name != pool && *v == Verdict::Healthy);
    down && elsewhere
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
    async fn votes_are_given_only_once_decided_and_while_the_board_is_read() {
        let board = VoteBoard::new(&["seoul".into(), "tokyo".into()], Duration::from_secs(30));
        assert_eq!(
            board.vote(&"seoul".into()),
            Some(Vote::Abstain),
            "not read yet"
        );
        let state = board.observe().await.expect("observe");
        assert_eq!(
            board.vote(&"seoul".into()),
            Some(Vote::Abstain),
            "read (the adoption at start) but nothing decided yet"
        );
        board.decided();
        assert_eq!(board.vote(&"seoul".into()), Some(Vote::Serve));
        let version = state.pools["seoul"].version.clone();
        let plan: Plan = vec![Change::SetEnabled {
            pool: "seoul".into(),
            enabled: false,
            expected_version: version,
        }];
        board.apply(&plan).await.expect("apply");
        assert_eq!(board.vote(&"seoul".into()), Some(Vote::Drain));
        assert_eq!(board.vote(&"tokyo".into()), Some(Vote::Serve));
        assert_eq!(board.vote(&"osaka".into()), None);
        tokio::time::advance(Duration::from_secs(31)).await;
        assert_eq!(board.vote(&"seoul".into()), Some(Vote::Abstain), "stale");
        assert_eq!(board.vote(&"tokyo".into()), Some(Vote::Abstain), "stale");
        board.observe().await.expect("observe");
        assert_eq!(board.vote(&"seoul".into()), Some(Vote::Drain), "read again");
        assert!(!board.elected());
    }

    #[test]
    fn the_own_view_drains_a_down_pool_only_while_another_is_healthy() {
        use Verdict::{Healthy, Unhealthy, Unknown};
        let of = |s: Verdict, t: Verdict| BTreeMap::from([("seoul", s), ("tokyo", t)]);
        assert!(own_drains("seoul", &of(Unhealthy, Healthy), false));
        assert!(!own_drains("tokyo", &of(Unhealthy, Healthy), false));
        assert!(
            !own_drains("seoul", &of(Unhealthy, Unhealthy), false),
            "never every pool"
        );
        assert!(!own_drains("seoul", &of(Unhealthy, Unknown), false));
        assert!(!own_drains("seoul", &of(Unknown, Healthy), false));
        assert!(!own_drains("seoul", &of(Healthy, Healthy), false));
        assert!(
            own_drains("seoul", &of(Healthy, Healthy), true),
            "manual failback latch"
        );
        assert!(!own_drains("seoul", &of(Healthy, Unhealthy), true));
    }

    #[test]
    fn the_manual_failback_latch_never_drains_every_pool() {
        use Verdict::{Healthy, Unhealthy};
        let of = |s: Verdict, t: Verdict| BTreeMap::from([("seoul", s), ("tokyo", t)]);
        let mut latch = None;
        assert!(own_vote("seoul", &of(Unhealthy, Healthy), Some(&mut latch)));
        assert!(
            own_vote("seoul", &of(Healthy, Healthy), Some(&mut latch)),
            "held"
        );
        assert!(own_vote("tokyo", &of(Healthy, Unhealthy), Some(&mut latch)));
        let both = of(Healthy, Healthy);
        let votes = [
            own_vote("seoul", &both, Some(&mut latch)),
            own_vote("tokyo", &both, Some(&mut latch)),
        ];
        assert_eq!(
            votes,
            [false, true],
            "only the pool drained last stays drained"
        );
        assert!(!own_vote("seoul", &both, None), "auto failback: no latch");
    }
}
