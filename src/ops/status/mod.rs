//! The status board behind `GET /v1/status`: each service's pools, verdicts, last probes, the
//! last decision and whether the provider has applied it.
//!
//! Written by the service loops and reconcilers, read by the admin API. Plain data, no I/O.
//!
//! One writer per fact: the engine loop writes a service's pools, decision and what it handed
//! to the reconciler and when ([`Decided`], via [`StatusBoard::record_decided`]); the
//! reconciler writes what it saw and did ([`ApplyStatus`], via [`StatusBoard::update_apply`]);
//! in Route 53 data-plane mode the vote tally reader writes what Route 53's tally serves
//! ([`ApplyStatus::route53_tally`]).
//! Whether the latest decision is `pending`, and since when, is derived when read
//! ([`StatusBoard::snapshot`], [`StatusBoard::pending_since`]) from those two.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, RwLock};

use serde::Serialize;

use gslb_provider::Plan;

use gslb_core::engine::{Decision, Override, PoolVerdict, ServiceEngine};
use gslb_core::model::{
    EndpointId, Millis, Observation, PoolId, ProbeOutcome, ServiceId, VantageId, Verdict,
};
use gslb_core::policy::Mode;

mod entry;
mod recent;
mod tally;

pub use tally::{PoolTally, TallyView};

use entry::Entry;

/// How many recent probes each endpoint keeps in the status.
pub const RECENT_PROBES: usize = 5;

/// Services [`StatusBoard::for_each_of`] copies per hold of the board's lock: 64 (a few
/// hundred kB at two endpoints per service, instead of a copy of the whole board).
pub const SNAPSHOT_BATCH: usize = 64;

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
    /// Shadow mode: the provider differs from the decision and `would_write` says how; nothing
    /// is written.
    Shadow,
}

impl ApplyState {
    /// The status JSON value, e.g. `not_pushed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotPushed => "not_pushed",
            Self::Applied => "applied",
            Self::Pending => "pending",
            Self::Shadow => "shadow",
        }
    }
}

/// A binding's cluster writer as this instance sees it (status `cluster`, `gslb plan`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct SeatView {
    /// This instance's role: `writer`, `follower`, or `unknown` (etcd not readable yet).
    pub role: &'static str,
    /// The writer's vantage point, when one leads.
    pub writer: Option<String>,
    /// The writer's epoch (fencing token), when one leads.
    pub epoch: Option<u64>,
}

/// What the reconciler last saw and did. As read ([`StatusBoard::snapshot`]), it also shows a
/// decision the reconciler has not reported on yet as `pending` (see [`ApplyStatus::take_up`]).
#[derive(Debug, Clone, Serialize, Default)]
pub struct ApplyStatus {
    /// See [`ApplyState`].
    pub state: ApplyState,
    /// The provider the decision goes to.
    pub provider: String,
    /// The pool the provider serves, from the last successful observe.
    pub observed_active: Option<PoolId>,
    /// Since when the decision has waited while `pending`: its time when it was made (a new
    /// decision the provider does not serve yet, see [`ApplyStatus::take_up`]), or when the
    /// provider was found not matching it (a drift, failed reads, a refused plan).
    /// `gslb_decision_unapplied_age_seconds` counts from it.
    pub pending_since: Option<Millis>,
    /// The last provider error, cleared on success.
    pub last_error: Option<String>,
    /// When the last write was accepted.
    pub last_write_at: Option<Millis>,
    /// Changes written since start.
    pub writes: u64,
    /// Shadow mode: the plan that would be written now.
    pub would_write: Option<Plan>,
    /// Re-applies since start of a state gslb had already written (another writer changed it).
    pub drift: u64,
    /// Set while gslb has stopped writing because another writer keeps reverting it: what and
    /// until when. Cleared once the provider matches or a write is accepted.
    pub write_fight: Option<String>,
    /// Set while a safety guard refuses the plan (e.g. traffic would land on an unhealthy
    /// fallback pool): the reason. The decision stays `pending`.
    pub refused: Option<String>,
    /// Set while the decision drains the provider's fallback pool, which gslb never disables:
    /// the drain is ignored (the rest of the decision is applied) and this says so.
    pub ignored_drain: Option<String>,
    /// `[cluster]` only: this instance's role for the binding and the binding's writer. Not
    /// shown without `[cluster]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<SeatView>,
    /// `[cluster]` only: why this instance did not write the latest plan (it is a follower,
    /// or the fence refused it: the reason); the decision stays `pending` ("decided but not
    /// applied"). Cleared when it writes or the provider matches. Not shown when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fenced: Option<String>,
    /// Set while the binding has spent its provider call budget for the minute (`[reconcile]
    /// provider_calls_per_minute`): how many calls and when the next is allowed. The decision
    /// stays `pending` ("decided but not applied"). Cleared at the next call. Not shown when
    /// unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<String>,
    /// Set while the provider holds the decision but does not serve it yet (Route 53
    /// data-plane mode: this instance votes for it, and Route 53's tally serves another pool,
    /// or its checkers have not had time to follow): why. The decision stays `pending`
    /// ("decided but not applied"). Cleared once it serves it. Not shown when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub awaiting: Option<String>,
    /// Route 53 data-plane mode only: what Route 53's tally of every instance's votes serves,
    /// as this instance reads their vote URLs ([`TallyView`]). Not shown otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route53_tally: Option<TallyView>,
    /// The provider's fallback pool as of the last successful observe (Cloudflare
    /// `fallback_pool`): a drain of it is ignored. Not shown.
    #[serde(skip)]
    pub fallback_pool: Option<PoolId>,
    /// The time of the decision this status reports on; `None` before the first. Not shown.
    #[serde(skip)]
    pub decision_at: Option<Millis>,
}

impl ApplyStatus {
    /// Makes this status report on `decided` when it reports on an older decision: a decision
    /// to be applied that the provider does not already serve (per this status: `applied` or
    /// `not_pushed` with `observed_active` its pool) is `pending` since [`Decided::since`]: the
    /// decision's time, or that of the earlier decision still unapplied that awaited the same
    /// pool (a `failback_manual` hold after an unapplied failover does not restart the
    /// unapplied age).
    /// Returns whether it was marked so. Used when the status is read (the engine loop has
    /// decided, the reconciler has not reported yet) and by the reconciler before it reports,
    /// so both agree.
    pub fn take_up(&mut self, decided: &Decided) -> bool {
        let marks = self.marks(decided);
        self.decision_at = Some(decided.at);
        if marks {
            self.state = ApplyState::Pending;
            // Unapplied since the decision (or the earlier one awaiting the same pool), not
            // since an older one started waiting for another pool.
            self.pending_since = Some(decided.since);
        }
        marks
    }

    /// Whether [`ApplyStatus::take_up`] marks `decided` pending.
    fn marks(&self, decided: &Decided) -> bool {
        let Some(wanted) = &decided.awaits else {
            return false;
        };
        let served = matches!(self.state, ApplyState::Applied | ApplyState::NotPushed)
            && self.observed_active.as_ref() == Some(wanted);
        self.decision_at != Some(decided.at) && !served
    }
}

/// A decision the engine loop handed to the reconciler: when, and what it awaits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    /// The decision's time.
    pub at: Millis,
    /// The pool the provider is to serve, when the decision is to be applied; `None` for a
    /// decision that pushes nothing (a hold, or no serving pool) and in shadow mode (nothing
    /// is ever applied).
    pub awaits: Option<PoolId>,
    /// Since when the provider has been awaited to serve [`Decided::awaits`]: the decision's
    /// time, or, when the decision before it awaited the same pool and is still unapplied,
    /// that one's `since` ([`StatusBoard::record_decided`] carries it over).
    pub since: Millis,
}

impl Decided {
    /// `decision` as handed to a reconciler in `shadow` mode or not.
    pub fn of(decision: &Decision, shadow: bool) -> Self {
        Self {
            at: decision.at,
            since: decision.at,
            awaits: decision
                .active
                .clone()
                .filter(|_| decision.rule.pushes() && !shadow),
        }
    }
}

/// One endpoint as one vantage point sees it.
#[derive(Debug, Clone, Serialize)]
pub struct EndpointStatus {
    /// The endpoint.
    pub endpoint: EndpointId,
    /// The vantage point.
    pub vantage: VantageId,
    /// Its thresholded verdict from that vantage point.
    pub verdict: Verdict,
    /// Consecutive successes.
    pub consecutive_ok: u32,
    /// Consecutive failures.
    pub consecutive_fail: u32,
    /// Weighted state-change percentage of its last 21 results.
    pub flap_percent: u32,
    /// Since when this vantage point cannot probe it at all (no route for its address
    /// family: reason `unprobeable`, never counted); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unprobeable_since: Option<Millis>,
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
    /// Its quorum verdict, votes and damping at the last decision.
    pub state: Option<PoolVerdict>,
    /// Its endpoints, one entry per endpoint and vantage point.
    pub endpoints: Vec<EndpointStatus>,
}

/// One service in the status.
#[derive(Debug, Clone, Serialize)]
pub struct ServiceStatus {
    /// The service.
    pub service: ServiceId,
    /// Its public hostname.
    pub hostname: String,
    /// `enforce` or `shadow`.
    pub mode: Mode,
    /// The pool the engine wants serving.
    pub active: Option<PoolId>,
    /// Pools in priority order.
    pub pools: Vec<PoolStatus>,
    /// Set while the engine holds (fail static, unknown evidence, velocity, rails, ...): the
    /// rule and why.
    pub holding: Option<String>,
    /// Automatic switches left in the velocity budget.
    pub velocity_available: u32,
    /// Results of its endpoints (per vantage point) older than the freshness window at the last
    /// decision: probes running late. While the serving pool's are, the last decision stands
    /// (its reasons say `stale evidence holds`).
    pub stale_evidence: u32,
    /// Active drill overrides.
    pub overrides: Vec<Override>,
    /// The last decision with its reasons, shared with the engine and the reconciler.
    #[serde(serialize_with = "shared")]
    pub last_decision: Option<Arc<Decision>>,
    /// Whether the provider has applied it.
    pub apply: ApplyStatus,
    /// The latest decision handed to the reconciler; the engine loop's fact. Not shown.
    #[serde(skip)]
    pub decided: Option<Decided>,
}

/// Serializes a shared decision as the decision itself.
fn shared<S: serde::Serializer>(d: &Option<Arc<Decision>>, s: S) -> Result<S::Ok, S::Error> {
    d.as_deref().serialize(s)
}

/// Every service's status.
#[derive(Debug, Default)]
pub struct StatusBoard {
    services: RwLock<Services>,
    cluster: RwLock<Option<crate::ops::cluster::ClusterStatus>>,
}

/// The services on the board and the vantage points their results came from (numbered in
/// order of first sight: an entry names one by its number). Entries are boxed: a map's node
/// keeps room for eleven values whatever it holds: 8 bytes each, not an entry's 648.
#[derive(Debug, Default)]
struct Services {
    by_name: BTreeMap<ServiceId, Box<Entry>>,
    vantages: Vec<VantageId>,
}

impl StatusBoard {
    /// A snapshot of every service, by name.
    pub fn snapshot(&self) -> BTreeMap<ServiceId, ServiceStatus> {
        self.snapshot_of(None, true)
    }

    /// A snapshot of `only` that service (every service when `None`; empty when no service
    /// has that name), each pool with its endpoints and their recent probes when `endpoints`,
    /// with none otherwise (`GET /v1/status?endpoints=false`).
    pub fn snapshot_of(
        &self,
        only: Option<&ServiceId>,
        endpoints: bool,
    ) -> BTreeMap<ServiceId, ServiceStatus> {
        let mut services = BTreeMap::new();
        let _ = self.for_each_of(only, endpoints, |s| {
            services.insert(s.service.clone(), s);
            Ok::<(), std::convert::Infallible>(())
        });
        services
    }

    /// Hands `f` each service of [`StatusBoard::snapshot_of`] (same selection, same content) in
    /// name order, without a copy of the whole board: [`SNAPSHOT_BATCH`] services are read at a
    /// time under the board's lock, then handed to `f` with the lock released (so a large
    /// answer neither holds the lock probe results are recorded under while it is written nor
    /// needs a second board in memory). Each service is read whole at one moment; two services
    /// may be read moments apart.
    ///
    /// # Errors
    /// The first error of `f`, which stops the walk.
    pub fn for_each_of<E>(
        &self,
        only: Option<&ServiceId>,
        endpoints: bool,
        mut f: impl FnMut(ServiceStatus) -> Result<(), E>,
    ) -> Result<(), E> {
        use std::ops::Bound::{Excluded, Unbounded};
        let mut after: Option<ServiceId> = None;
        loop {
            let (last, batch): (Option<ServiceId>, Vec<ServiceStatus>) = {
                let services = read(&self.services);
                let all = &services.by_name;
                let picked: Box<dyn Iterator<Item = (&ServiceId, &Box<Entry>)>> =
                    match (only, &after) {
                        (Some(_), Some(_)) => break,
                        (Some(id), None) => Box::new(all.get_key_value(id).into_iter()),
                        (None, None) => Box::new(all.iter()),
                        (None, Some(last)) => Box::new(all.range((Excluded(last), Unbounded))),
                    };
                let batch: Vec<_> = picked.take(SNAPSHOT_BATCH).collect();
                let last = batch.last().map(|(id, _)| (*id).clone());
                let copies = batch
                    .into_iter()
                    .map(|(id, e)| e.status(id, &services.vantages, endpoints));
                (last, copies.collect())
            };
            let Some(last) = last else { break };
            after = Some(last);
            for mut s in batch {
                // As read: the reconciler's status taking up the latest decision handed to it.
                if let Some(d) = &s.decided {
                    s.apply.take_up(d);
                }
                f(s)?;
            }
        }
        Ok(())
    }

    /// The cluster's status; `None` alone.
    pub fn cluster(&self) -> Option<crate::ops::cluster::ClusterStatus> {
        read(&self.cluster).clone()
    }

    /// Sets the cluster's status (when joining a cluster).
    pub fn set_cluster(&self, status: crate::ops::cluster::ClusterStatus) {
        *write(&self.cluster) = Some(status);
    }

    /// Refreshes the cluster's status from the engine's view, when this instance is in one.
    pub fn refresh_cluster(&self, view: &gslb_core::engine::ClusterView, now: Millis) {
        if let Some(c) = write(&self.cluster).as_mut() {
            c.refresh(view, now);
        }
    }

    /// Keeps the last [`RECENT_PROBES`] results of an endpoint per vantage point, in a ring
    /// allocated at the endpoint's first result. A result of a service not on the board yet
    /// ([`StatusBoard::update_service`] puts it there) or of an endpoint not in its policy is
    /// not kept.
    pub fn record_probe(&self, service: &ServiceId, _pool: &PoolId, obs: &Observation) {
        let mut services = write(&self.services);
        let Services { by_name, vantages } = &mut *services;
        if let Some(entry) = by_name.get_mut(service) {
            entry.record_probe(obs, vantages);
        }
    }

    /// Refreshes a service's pools, decision, budget and overrides from its engine (puts the
    /// service on the board the first time).
    pub fn update_service<'a>(
        &self,
        engine: &ServiceEngine,
        overrides: impl Iterator<Item = &'a Override>,
        now: Millis,
    ) {
        let mut services = write(&self.services);
        let Services { by_name, vantages } = &mut *services;
        let service = &engine.policy().service;
        if !by_name.contains_key(service) {
            by_name.insert(service.clone(), Box::new(Entry::new(engine)));
        }
        if let Some(entry) = by_name.get_mut(service) {
            entry.update(engine, overrides, vantages, now);
        }
    }

    /// A service's `mode` as of its last status update; `None` before its first one.
    pub fn mode(&self, service: &ServiceId) -> Option<Mode> {
        read(&self.services).by_name.get(service).map(|e| e.mode())
    }

    /// Since when a service's latest decision has waited for the provider: `pending_since`
    /// while its apply state is `pending` (both as read, see [`StatusBoard::snapshot`]), else
    /// `None` (also for an unknown service).
    pub fn pending_since(&self, service: &ServiceId) -> Option<Millis> {
        self.apply_gauges(service).1
    }

    /// What the apply gauges show, from one read of the board: whether the provider serves a
    /// service's latest decision, as read (see [`StatusBoard::snapshot`]): its apply state is
    /// `applied`, or `not_pushed` (a hold) with the provider last read serving the pool the
    /// engine wants serving; `false` while `pending` (a new decision, failed reads or writes, a
    /// refused plan, a write-fight pause), in `shadow` mode, and for an unknown service
    /// (`gslb_decision_applied`). And [`StatusBoard::pending_since`]. Refreshed for every
    /// service at every engine tick.
    pub fn apply_gauges(&self, service: &ServiceId) -> (bool, Option<Millis>) {
        self.derived(service, |active, apply| {
            let applied = match apply.state {
                ApplyState::Applied => true,
                ApplyState::NotPushed => {
                    apply.observed_active.is_some() && apply.observed_active.as_ref() == active
                }
                ApplyState::Pending | ApplyState::Shadow => false,
            };
            let pending = apply.state == ApplyState::Pending;
            (applied, apply.pending_since.filter(|_| pending))
        })
        .unwrap_or((false, None))
    }

    /// `f` of a service's serving pool as the engine knows it and its apply status as read:
    /// the reconciler's, taking up the latest decision handed to it ([`ApplyStatus::take_up`]).
    /// `None` for an unknown service.
    fn derived<T>(
        &self,
        service: &ServiceId,
        f: impl FnOnce(Option<&PoolId>, &ApplyStatus) -> T,
    ) -> Option<T> {
        let services = read(&self.services);
        let s = services.by_name.get(service)?;
        let mut apply = s.apply.clone();
        if let Some(d) = &s.decided {
            apply.take_up(d);
        }
        Some(f(s.active(), &apply))
    }

    /// Records that the engine loop handed `decided` to the service's reconciler (the engine
    /// loop's only apply-related fact). When the status reads `pending` for the decision before
    /// it and that one awaited the same pool, `decided` keeps its `since`. Returns whether the
    /// status now reads `pending` for `decided`.
    pub fn record_decided(&self, service: &ServiceId, mut decided: Decided) -> bool {
        let mut services = write(&self.services);
        let Some(s) = services.by_name.get_mut(service) else {
            return false;
        };
        if let Some(before) = &s.decided {
            let mut view = s.apply.clone();
            view.take_up(before);
            if view.state == ApplyState::Pending && before.awaits == decided.awaits {
                decided.since = view
                    .pending_since
                    .unwrap_or(decided.since)
                    .min(decided.since);
            }
        }
        let pending = s.apply.marks(&decided);
        s.decided = Some(decided);
        pending
    }

    /// Drops a service and its recent probes (its policy was removed or changed by a reload).
    pub fn remove_service(&self, service: &ServiceId) {
        write(&self.services).by_name.remove(service);
    }

    /// Updates a service's apply status: the reconciler's (and the adoption read's) record.
    pub fn update_apply(&self, service: &ServiceId, f: impl FnOnce(&mut ApplyStatus)) {
        if let Some(entry) = write(&self.services).by_name.get_mut(service) {
            f(&mut entry.apply);
        }
    }
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn board() -> (StatusBoard, ServiceId) {
        let text = include_str!("../../../policies/api-seoul-tokyo.toml");
        let policy = gslb_core::policy::parse(std::path::Path::new("api.toml"), text).expect("ok");
        let board = StatusBoard::default();
        board.update_service(&ServiceEngine::new(policy), std::iter::empty(), Millis(0));
        (board, ServiceId("api".into()))
    }

    fn decided(at: u64, awaits: Option<&str>) -> Decided {
        Decided {
            at: Millis(at),
            awaits: awaits.map(PoolId::from),
            since: Millis(at),
        }
    }

    /// The reconciler reports the provider serving `pool` for `decided`.
    fn applied(board: &StatusBoard, service: &ServiceId, decided: &Decided, pool: &str) {
        board.update_apply(service, |a| {
            a.take_up(decided);
            a.state = ApplyState::Applied;
            a.pending_since = None;
            a.observed_active = Some(PoolId::from(pool));
        });
    }

    fn read(board: &StatusBoard, service: &ServiceId) -> ApplyStatus {
        board.snapshot()[service].apply.clone()
    }

    /// More services than one batch: every one is handed over once, in name order; one named
    /// service alone (without endpoints when asked); an error stops the walk.
    #[test]
    fn the_walk_hands_over_every_service_once_in_batches() {
        let text = include_str!("../../../policies/api-seoul-tokyo.toml");
        let policy = gslb_core::policy::parse(std::path::Path::new("api.toml"), text).expect("ok");
        let board = StatusBoard::default();
        let count = SNAPSHOT_BATCH * 2 + 3;
        for i in 0..count {
            let mut p = policy.clone();
            p.service = ServiceId(format!("svc-{i:03}"));
            board.update_service(&ServiceEngine::new(p), std::iter::empty(), Millis(0));
        }
        let named = ServiceId(format!("svc-{:03}", SNAPSHOT_BATCH + 1));
        let mut seen = Vec::new();
        let walked = board.for_each_of(None, true, |s| {
            seen.push(s.service.0);
            Ok::<(), ()>(())
        });
        assert_eq!(walked, Ok(()));
        let names: Vec<String> = (0..count).map(|i| format!("svc-{i:03}")).collect();
        assert_eq!(seen, names, "every service once, in name order");
        let mut one = Vec::new();
        let _ = board.for_each_of(Some(&named), false, |s| {
            one.push((
                s.service.clone(),
                s.pools.iter().map(|p| p.endpoints.len()).sum::<usize>(),
            ));
            Ok::<(), ()>(())
        });
        assert_eq!(one, [(named.clone(), 0)]);
        let mut calls = 0;
        let stopped = board.for_each_of(None, true, |_| {
            calls += 1;
            if calls == 2 { Err("stop") } else { Ok(()) }
        });
        assert_eq!((stopped, calls), (Err("stop"), 2));
    }

    #[test]
    fn a_new_decision_reads_pending_until_the_reconciler_reports_on_it() {
        let (board, api) = board();
        applied(&board, &api, &decided(0, Some("seoul")), "seoul");
        let failover = decided(65_000, Some("tokyo"));
        assert!(board.record_decided(&api, failover.clone()));
        let status = read(&board, &api);
        assert_eq!(status.state, ApplyState::Pending);
        assert_eq!(status.pending_since, Some(Millis(65_000)));
        assert_eq!(board.pending_since(&api), Some(Millis(65_000)));
        // The reconciler's own record is untouched by the engine loop.
        board.update_apply(&api, |a| assert_eq!(a.state, ApplyState::Applied));
        applied(&board, &api, &failover, "tokyo");
        assert_eq!(read(&board, &api).state, ApplyState::Applied);
        assert_eq!(board.pending_since(&api), None);
    }

    #[test]
    fn apply_states_read_as_in_the_status_json() {
        for state in [
            ApplyState::NotPushed,
            ApplyState::Applied,
            ApplyState::Pending,
            ApplyState::Shadow,
        ] {
            assert_eq!(serde_json::to_value(state).expect("json"), state.as_str());
        }
    }

    #[test]
    fn a_newer_decision_awaiting_the_same_unapplied_pool_keeps_the_unapplied_age() {
        let (board, api) = board();
        applied(&board, &api, &decided(0, Some("seoul")), "seoul");
        // A failover the provider never applies (a hanging call), then a failback_manual hold
        // still wanting tokyo: the age counts from the failover.
        board.record_decided(&api, decided(65_000, Some("tokyo")));
        board.record_decided(&api, decided(125_000, Some("tokyo")));
        assert_eq!(board.pending_since(&api), Some(Millis(65_000)));
        assert_eq!(read(&board, &api).pending_since, Some(Millis(65_000)));
        // A decision wanting another pool starts its own age.
        board.record_decided(&api, decided(200_000, Some("seoul")));
        assert_eq!(board.pending_since(&api), None, "the provider serves seoul");
        board.record_decided(&api, decided(260_000, Some("tokyo")));
        assert_eq!(board.pending_since(&api), Some(Millis(260_000)));
    }

    #[test]
    fn a_decision_already_served_a_hold_or_shadow_mode_reads_as_the_reconciler_left_it() {
        let (board, api) = board();
        applied(&board, &api, &decided(0, Some("seoul")), "seoul");
        for d in [decided(2_000, Some("seoul")), decided(3_000, None)] {
            assert!(!board.record_decided(&api, d));
            assert_eq!(read(&board, &api).state, ApplyState::Applied);
            assert_eq!(board.pending_since(&api), None);
        }
    }
}

#[cfg(test)]
mod golden;
