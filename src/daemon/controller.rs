//! Wiring: one engine loop for every service, and per service its probe loops, the adoption
//! read and the reconciler. Probes of every service feed the one engine loop, so what is
//! controller-wide (suspect vantage points, the controller-wide velocity limit, drills) is
//! decided in one place, in order.
//!
//! Generic over the provider: only the binary (`src/main.rs`, `src/adapters.rs`) names
//! concrete providers.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use gslb_provider::{Backoff, Provider};
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinSet};

use crate::daemon::engine_loop;
use crate::daemon::inbox::{Inbox, Message, MessageSender, Reload};
use crate::daemon::outputs::Outputs;
use crate::daemon::reconcile::{self, BACKOFF_BASE, BACKOFF_MAX, HealthVotes, Steering};
use crate::io::journal::Journal;
use crate::io::probe::{ProbeError, ProbeNow, ProbeTarget, Prober, Wakers};
use crate::ops::health;
use crate::ops::telemetry::Telemetry;
use gslb_core::engine::{Decision, Engine, EngineSettings, Input, Override};
use gslb_core::model::{ServiceId, VantageId};
use gslb_core::planner::ProviderPools;
use gslb_core::policy::{Policy, PolicyDiff};

/// Longest time between two evaluations of a service without new input: 1 s, so expiries,
/// staleness and holds are noticed promptly even with long probe intervals.
pub const MAX_TICK: Duration = Duration::from_secs(1);

/// What a reconciler of `policy` steers: its target's pools in priority order, its mode, and
/// `resync` as the resync period (no health votes;
/// [`Daemon::attach`](super::builder::Daemon::attach) adds them).
pub fn steering(policy: &Policy, resync: Duration) -> Steering {
    Steering {
        pools: ProviderPools::of(policy),
        resync,
        shadow: policy.mode == gslb_core::policy::Mode::Shadow,
        health_votes: None,
        seat: None,
        follow: None,
        calls_per_minute: reconcile::DEFAULT_CALLS_PER_MINUTE,
    }
}

/// A running engine loop, to which services are attached. Started and stopped only through
/// the [`Builder`](super::builder::Builder) and its [`Daemon`](super::builder::Daemon); callers
/// reach it for the policy set in force and reloads ([`super::builder::Daemon::controller`]).
#[derive(Debug)]
pub struct Controller {
    engine_loop: tokio::task::JoinHandle<()>,
    /// Adoption reads: they end by themselves, so they are kept apart from the tasks whose end
    /// means trouble.
    adoptions: std::sync::Mutex<JoinSet<()>>,
    messages: MessageSender,
    /// The engine loop's priority lane: saved drills, adoptions, provider-health votes.
    priority: MessageSender,
    decisions: std::sync::Mutex<BTreeMap<ServiceId, watch::Receiver<Option<Arc<Decision>>>>>,
    /// Each service's probe loops, adoption read and reconciler, so a reload can stop them.
    services: std::sync::Mutex<BTreeMap<ServiceId, Vec<AbortHandle>>>,
    policies: watch::Sender<Arc<Vec<Policy>>>,
    telemetry: Telemetry,
    /// Each service's probe loops' "probe now" handles, which the engine loop wakes.
    wakers: Wakers,
}

/// Every probe target of `policy`.
///
/// # Errors
/// A probe target that cannot be built (e.g. an invalid TLS server name).
pub fn probe_targets(policy: &Policy, prober: &Prober) -> Result<Vec<ProbeTarget>, ProbeError> {
    let mut targets = Vec::new();
    for pool in policy.pools.iter() {
        for endpoint in &pool.endpoints {
            targets.push(prober.target(&policy.probe, endpoint)?);
        }
    }
    Ok(targets)
}

impl Controller {
    /// Starts the engine loop for `policies`; [`Controller::stop`] ends it. `saved` overrides
    /// (from the drill state file) are loaded first, through the loop, so they are recorded like
    /// any input.
    pub(super) fn start(
        policies: &[Policy],
        settings: &EngineSettings,
        telemetry: Telemetry,
        journal: Journal,
        saved: Vec<Override>,
        cluster: Option<Outputs>,
    ) -> Self {
        let engine = Engine::new(policies.iter().cloned(), settings);
        let (inbox, tx, priority) = Inbox::new();
        let mut senders = BTreeMap::new();
        let mut decisions = BTreeMap::new();
        for p in policies {
            let (dtx, drx) = watch::channel(None);
            senders.insert(p.service.clone(), dtx);
            decisions.insert(p.service.clone(), drx);
        }
        let tick = policies
            .iter()
            .map(|p| p.probe.interval)
            .min()
            .unwrap_or(MAX_TICK)
            .min(MAX_TICK);
        if !saved.is_empty() {
            // The lane is empty: this cannot fail for lack of room. On the priority lane, as
            // the adoptions: the drills are in force before any adoption's first decision.
            let _ = priority.try_send(Input::LoadOverrides { overrides: saved }.into());
        }
        let wakers = Wakers::default();
        let engine_loop = tokio::spawn(engine_loop::run(
            engine,
            inbox,
            senders,
            telemetry.clone(),
            (tick, wakers.clone()),
            journal,
            cluster,
        ));
        Self {
            engine_loop,
            adoptions: std::sync::Mutex::new(JoinSet::new()),
            messages: tx,
            priority,
            decisions: std::sync::Mutex::new(decisions),
            services: std::sync::Mutex::new(BTreeMap::new()),
            policies: watch::Sender::new(Arc::new(policies.to_vec())),
            telemetry,
            wakers,
        }
    }

    /// The policy set in force, updated by every applied reload.
    pub fn policies(&self) -> watch::Receiver<Arc<Vec<Policy>>> {
        self.policies.subscribe()
    }

    /// How `policies` (a whole reloaded, validated set) differs from the set in force: the
    /// one comparison a reload makes, handed to [`Controller::reload`].
    pub fn diff(&self, policies: Vec<Policy>) -> PolicyDiff {
        PolicyDiff::new(&self.policies.borrow(), policies)
    }

    /// Applies a reloaded policy set ([`Controller::diff`]): stops the tasks of changed and
    /// removed services and hands the diff to the engine loop, ordered with the probe results
    /// before it ([`Message::Reload`]), returns once the engine loop applied it, and publishes
    /// the new set ([`Controller::policies`]). Unchanged services keep their engine state and their
    /// tasks. The caller then attaches [`PolicyDiff::changed_policies`] (fresh probe loops,
    /// adoption read and reconciler: a changed service re-adopts the provider's serving pool,
    /// so a reload does not move traffic by itself).
    ///
    /// A reconciler stopped mid-write may leave that write to finish at the provider; its
    /// successor reads the provider afresh before planning, as always.
    pub async fn reload(&self, diff: &PolicyDiff) {
        let mut senders = BTreeMap::new();
        {
            let mut services = lock(&self.services);
            let mut decisions = lock(&self.decisions);
            for id in diff.changed.iter().chain(&diff.removed) {
                for task in services.remove(id).into_iter().flatten() {
                    task.abort();
                }
                self.telemetry.health.forget_service(id);
                decisions.remove(id);
            }
            for id in &diff.changed {
                let (dtx, drx) = watch::channel(None);
                senders.insert(id.clone(), dtx);
                decisions.insert(id.clone(), drx);
            }
        }
        let (done, applied) = tokio::sync::oneshot::channel();
        let sent = self
            .messages
            .send(Message::Reload(Reload {
                diff: diff.clone(),
                decisions: senders,
                done,
            }))
            .await;
        if sent.is_ok() {
            // The engine loop resets the changed services' status and gauges: the caller's
            // new tasks must start after that, or what they record first is wiped.
            let _ = applied.await;
        }
        self.policies.send_replace(Arc::new(diff.policies.clone()));
    }

    /// Stops every task on `tasks` (probes, reconcilers), then lets the engine loop finish
    /// what it has received and flush its journal. Senders still held elsewhere (the admin
    /// API's) get an error from then on.
    pub(super) async fn stop(self, tasks: &mut JoinSet<()>) {
        tasks.shutdown().await;
        let mut adoptions = self
            .adoptions
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        adoptions.shutdown().await;
        let _ = self.messages.send(Message::Stop).await;
        let _ = self.engine_loop.await;
    }

    /// Where operators' inputs go (the admin API's side): the engine loop's own inbox.
    pub(super) fn commands(&self) -> MessageSender {
        self.messages.clone()
    }

    /// Starts probing `policy`'s endpoints from `vantage`, the adoption read and the
    /// reconciler that pushes its decisions to `provider`.
    ///
    /// # Errors
    /// A probe target that cannot be built (e.g. an invalid TLS server name).
    pub(super) fn attach<P: Provider>(
        &self,
        tasks: &mut JoinSet<()>,
        policy: &Policy,
        provider: Arc<P>,
        steering: Steering,
        prober: &Arc<Prober>,
        vantage: &VantageId,
    ) -> Result<(), ProbeError> {
        let targets = probe_targets(policy, prober)?;
        let mut handles = Vec::new();
        // One heartbeat for the service's probe loops: each result is progress.
        let bound = health::probe_bound(policy.probe.interval, policy.probe.timeout);
        let heartbeat = self
            .telemetry
            .health
            .register(&format!("probes:{}", policy.service), bound);
        let pools = policy
            .pools
            .iter()
            .flat_map(|p| p.endpoints.iter().map(|_| p.id.clone()));
        let mut wakers = Vec::new();
        for (target, pool) in targets.into_iter().zip(pools) {
            let service = policy.service.clone();
            let heartbeat = heartbeat.clone();
            let now = ProbeNow::default();
            wakers.push((pool, now.clone()));
            handles.push(tasks.spawn(crate::io::probe::run_endpoint_woken(
                prober.clone(),
                target,
                vantage.clone(),
                self.telemetry.clock,
                self.messages.clone(),
                now,
                move |observation| {
                    heartbeat.beat(bound);
                    Input::Observe {
                        service: service.clone(),
                        observation,
                    }
                    .into()
                },
            )));
        }
        self.wakers.set(&policy.service, wakers);
        let mut adoptions = lock(&self.adoptions);
        // Reap finished reads, so reloads do not pile them up.
        while adoptions.try_join_next().is_some() {}
        // Boxed: a finished task's cell stays allocated until it is reaped (at the next
        // attach) and its abort handle dropped, and an unboxed cell keeps the room of the
        // whole read's future (kilobytes per service) long after the read.
        handles.push(adoptions.spawn(Box::pin(adopt(
            provider.clone(),
            steering.pools.clone(),
            steering.resync,
            self.priority.clone(),
            self.telemetry.clone(),
        ))));
        drop(adoptions);
        let decisions = lock(&self.decisions).get(&policy.service).cloned();
        let Some(decisions) = decisions else {
            lock(&self.services).insert(policy.service.clone(), handles);
            return Ok(());
        };
        let steering = self.link_to_engine(policy, steering);
        handles.push(tasks.spawn(reconcile::run(
            provider,
            steering,
            decisions,
            self.telemetry.clone(),
        )));
        lock(&self.services).insert(policy.service.clone(), handles);
        Ok(())
    }

    /// `steering` with what its reconciler hands the engine loop: in a cluster, the serving
    /// pool another writer chose ([`reconcile::Follow`]); with `quorum.provider_vote`, the
    /// provider's own pool health after each read.
    fn link_to_engine(&self, policy: &Policy, mut steering: Steering) -> Steering {
        if steering.seat.is_some() {
            steering.follow = Some(reconcile::Follow::new(
                self.priority.clone(),
                policy.service.clone(),
            ));
        }
        if policy.quorum.provider_vote {
            let (messages, service) = (self.priority.clone(), policy.service.clone());
            // Two resync periods: one missed read does not drop the vote.
            let fresh_for = steering.resync * 2;
            steering.health_votes = Some(HealthVotes(Arc::new(move |pool, healthy| {
                // A full priority lane drops a vote rather than stall the reconciler; the next
                // read votes again.
                let _ = messages.try_send(
                    Input::ProviderHealth {
                        service: service.clone(),
                        pool: pool.clone(),
                        healthy,
                        fresh_for,
                    }
                    .into(),
                );
            })));
        }
        steering
    }

    /// Stops `task` with `service`'s other tasks on a reload that changes or removes it (e.g.
    /// its binding's election).
    pub(super) fn track(&self, service: &ServiceId, task: AbortHandle) {
        lock(&self.services)
            .entry(service.clone())
            .or_default()
            .push(task);
    }

    /// Starts probing the vantage point's canary targets (see
    /// [`EngineSettings::canaries`]).
    pub(super) fn attach_canaries(
        &self,
        tasks: &mut JoinSet<()>,
        targets: Vec<ProbeTarget>,
        prober: &Arc<Prober>,
        vantage: &VantageId,
    ) {
        // One heartbeat (`canaries`) for every canary's probe loop, as for a service's.
        let Some(bound) = targets
            .iter()
            .map(|t| health::probe_bound(t.interval(), t.timeout()))
            .max()
        else {
            return;
        };
        let heartbeat = self.telemetry.health.register("canaries", bound);
        for target in targets {
            let heartbeat = heartbeat.clone();
            tasks.spawn(crate::io::probe::run_endpoint(
                prober.clone(),
                target,
                vantage.clone(),
                self.telemetry.clock,
                self.messages.clone(),
                move |observation| {
                    heartbeat.beat(bound);
                    Input::Canary { observation }.into()
                },
            ));
        }
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Reads the provider until it answers, then reports which of `pools` it serves. Writes
/// nothing. Failed reads (a read unanswered within [`reconcile::CALL_DEADLINE`] included) are
/// recorded like the reconciler's, so the status shows why no decision is made yet; a read that
/// retrying will not fix is tried again after `resync`. Takes only the pools, not the whole
/// [`Steering`] (with a cluster seat about 4 kB): every service's read runs at once at start.
async fn adopt<P: Provider>(
    provider: Arc<P>,
    pools: ProviderPools,
    resync: Duration,
    tx: MessageSender,
    telemetry: Telemetry,
) {
    let mut backoff = Backoff::new(BACKOFF_BASE, BACKOFF_MAX);
    while !tx.is_closed() {
        // A read shared with the other bindings of the zone or account, at most half a resync
        // old (as a resync's): at start every binding's adoption shares the first read instead
        // of queueing for fresh ones, which under CPU starvation outlasted the call deadline
        // and never adopted (issue 14's overload run). Nothing was written before it (a write
        // drops the shared read), and the reconciler reads afresh for its first write.
        let service = &pools.service;
        let max_age = resync / 2;
        match reconcile::observe(provider.as_ref(), service, &telemetry, max_age).await {
            Ok(observed) => {
                let _ = tx
                    .send(
                        Input::Adopt {
                            service: pools.service.clone(),
                            pool: pools.serving(&observed),
                        }
                        .into(),
                    )
                    .await;
                return;
            }
            Err(e) => {
                telemetry.provider_failed(&pools.service, provider.name(), "observe", &e);
                let delay = if e.is_retryable() {
                    backoff.next_delay(rand::random::<f64>(), None)
                } else {
                    resync
                };
                tokio::time::sleep(delay).await;
            }
        }
    }
}
