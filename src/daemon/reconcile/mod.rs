//! The reconciler: one per provider binding, one apply in flight.
//!
//! Level-based, never edge-based: every pass reads the provider afresh, diffs it against the
//! latest decision, and writes only a non-empty plan. It never branches on why it woke (a new
//! decision, a retry, the periodic resync). A newer decision replaces an older one that is
//! still waiting (tokio `watch`): a stale decision is never applied. After a write it reads
//! again at once, so success is confirmed by read-back.
//!
//! A pass is four steps: observe (a fresh read), plan (the core's pure
//! [`gslb_core::planner::plan`], which `gslb plan` shares), report (status, metrics, logs,
//! events) and apply (only for [`Outcome::Write`]). Every refusal rule lives in the planner.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use gslb_provider::{Backoff, DesiredState, ObservedState, Plan, Provider, ProviderError, Stamp};
use tokio::sync::watch;

use crate::io::coordination::seat::Seat;
use crate::ops::health;
use crate::ops::logging::List;
use crate::ops::status::{ApplyState, ApplyStatus, Decided};
use crate::ops::telemetry::Telemetry;
use gslb_core::engine::Decision;
use gslb_core::event::Event;
use gslb_core::model::{Millis, PoolId, ServiceId};
use gslb_core::planner::{self, FightGuard, Outcome, ProviderPools, Request};

mod budget;
mod fenced;
mod follow;
mod report;
mod settled;

pub use crate::config::DEFAULT_CALLS_PER_MINUTE;
pub use budget::BUDGET_WINDOW;
pub use follow::Follow;

/// How long the reconciler and the adoption read wait for one provider call (`observe` or
/// `apply`) before it counts as failed ([`within_deadline`]): 12 s, the adapters' default
/// per-attempt timeout (10 s: `[route53]`'s `attempt_timeout` and the Cloudflare client's)
/// plus 2 s. A healthy call (a few requests, each well under a second, paced by the
/// binding's own rate limiter) fits; an attempt that times out is reported at once (issue 12:
/// `last_error`, `gslb_provider_errors_total{code="transient"}`) instead of after the
/// adapters' in-place retries (Route 53: 5 attempts of 10 s and backoff, over a minute), and
/// the reconciler retries with its own backoff, reading afresh.
pub const CALL_DEADLINE: Duration = Duration::from_secs(12);

/// First retry delay after a provider failure.
pub const BACKOFF_BASE: Duration = Duration::from_millis(250);
/// Longest retry delay (Cloudflare blocks for 5 minutes after a 429 storm; Route 53's token
/// buckets refill within seconds).
pub const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// What a reconciler steers and how: a service's pools at the provider, its mode, its resync
/// period and where the provider's own pool health goes.
#[derive(Debug, Clone)]
pub struct Steering {
    /// The service's pools as the provider names them, in priority order.
    pub pools: ProviderPools,
    /// Period of the resync pass when nothing else wakes the reconciler.
    pub resync: Duration,
    /// Shadow mode (`mode = "shadow"`): plan as usual, record what would be written, never
    /// write.
    pub shadow: bool,
    /// Where the provider's own pool health goes after each read, when the policy counts it
    /// as a vote (`quorum.provider_vote`); `None` otherwise.
    pub health_votes: Option<HealthVotes>,
    /// `[cluster]` only: the binding's seat (role, fence). With it, only the elected writer
    /// writes, each write fenced; without it (one instance alone) every plan is written. Boxed:
    /// a seat is 3.9 kB, kept by every reconciler and most of it etcd client state.
    pub seat: Option<Box<Seat>>,
    /// `[cluster]` only: where the provider's serving pool goes when another writer chose it
    /// (see [`Follow`]); `None` alone.
    pub follow: Option<Follow>,
    /// The binding's provider call budget: at most this many calls not paced by a timer (reads
    /// after a changed decision, a write or a role change; writes) in any minute, whatever the
    /// decisions do (`[reconcile] provider_calls_per_minute`, default
    /// [`DEFAULT_CALLS_PER_MINUTE`]; see the `budget` module).
    pub calls_per_minute: u32,
}

/// Called with a gslb pool and the provider's verdict of it (`true` = healthy).
pub type VoteFn = dyn Fn(&PoolId, bool) + Send + Sync;

/// A sink for the provider's own health verdict of a gslb pool.
#[derive(Clone)]
pub struct HealthVotes(pub Arc<VoteFn>);

impl std::fmt::Debug for HealthVotes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HealthVotes")
    }
}

enum Pass {
    /// Provider matches the decision (or nothing to push): wait for a change or the resync.
    Settled,
    /// Wrote: read back at once.
    Wrote,
    /// Failed in a way that may pass: back off.
    Retry(ProviderError),
    /// Failed in a way retrying will not fix, or a rule refused the plan: wait for a change
    /// or the resync.
    Fatal,
    /// Another writer keeps reverting: write nothing for this long (unless the decision
    /// changes).
    Stopped(Duration),
    /// The cluster fence refused the write: try again after this long, or when the role or
    /// the decision changes.
    Wait(Duration),
    /// The binding's provider call budget is spent: try again after this long.
    Budget(Duration),
    /// A follower refused a recent decision: read again after this long, spending the budget
    /// (not paced by a timer: see [`fenced::FOLLOW_CHECK`]).
    Follow(Duration),
}

/// Runs until the decision sender is dropped.
///
/// Liveness: its heartbeat (`reconciler:<service>`) beats at the start of each pass, which
/// must end within [`health::reconciler_bound`], and then announces its wait.
///
/// Metrics: each pass's duration in `gslb_reconcile_duration_seconds{provider}`. Every
/// label set of the binding exists from the start
/// ([`Metrics::declare_binding`](crate::ops::metrics::Metrics::declare_binding)). The apply
/// gauges follow the status it keeps ([`Telemetry::record_apply`]).
///
/// Memory: the task keeps this future for as long as the service is attached, so it holds
/// `steering` boxed (with a cluster seat it is about 4 kB, the etcd client inline) and boxes
/// each pass while it runs (issue 14; `tests/task_sizes.rs` bounds its size).
pub fn run<P: Provider>(
    provider: Arc<P>,
    steering: Steering,
    decisions: watch::Receiver<Option<Arc<Decision>>>,
    telemetry: Telemetry,
) -> impl Future<Output = ()> + Send {
    serve(provider, Box::new(steering), decisions, telemetry)
}

/// [`run`], with `steering` boxed.
async fn serve<P: Provider>(
    provider: Arc<P>,
    steering: Box<Steering>,
    mut decisions: watch::Receiver<Option<Arc<Decision>>>,
    telemetry: Telemetry,
) {
    let mut backoff = Backoff::new(BACKOFF_BASE, BACKOFF_MAX);
    let service = steering.pools.service.0.as_str();
    telemetry.board.update_apply(&steering.pools.service, |a| {
        a.provider = provider.name().to_owned()
    });
    telemetry.metrics.declare_binding(provider.name(), service);
    let took = telemetry
        .metrics
        .reconcile_duration_seconds
        .with_label_values(&[provider.name()]);
    let mut reconciler = Reconciler {
        provider: provider.as_ref(),
        steering: &steering,
        telemetry: &telemetry,
        fight: FightGuard::default(),
        announced: None,
        stamped: None,
        late: None,
        late_now: None,
        took_over: None,
        following: follow::Following::default(),
        budget: budget::CallBudget::new(steering.calls_per_minute),
        settled: None,
    };
    let bound = health::reconciler_bound(CALL_DEADLINE);
    let heartbeat = telemetry
        .health
        .register(&format!("reconciler:{service}"), bound);
    let mut roles = steering.seat.as_deref().map(Seat::roles);
    // Nothing to reconcile before the first decision: the adoption read at start is the only
    // read until then (waiting for it is readiness, not liveness).
    heartbeat.idle(Duration::MAX, bound);
    while decisions.borrow_and_update().is_none() {
        if decisions.changed().await.is_err() {
            return;
        }
    }
    // Whether the next pass is paced by a timer (the resync, a backoff, a fence's wait) rather
    // than caused by a decision, a write or a role change: only the latter spend the budget.
    let mut on_timer = false;
    loop {
        // A decision that asks what the provider was found doing needs no provider call.
        let (wait, paced) = match reconciler.unchanged(&mut decisions) {
            Some(left) => (left, true),
            None => {
                heartbeat.beat(bound);
                let started = tokio::time::Instant::now();
                // Boxed while it runs: the pass (provider calls, the plan, the write) is most
                // of the reconciler's future, and the task keeps its future for as long as the
                // service is attached; between passes only the wait stays (issue 14).
                let passed = Box::pin(reconciler.pass(&mut decisions, !on_timer)).await;
                took.observe(started.elapsed().as_secs_f64());
                let paced = !matches!(passed, Pass::Wrote | Pass::Budget(_) | Pass::Follow(_));
                let check = matches!(passed, Pass::Settled)
                    .then(|| reconciler.late_write_check())
                    .flatten();
                let wait = next_wait(passed, &mut backoff, steering.resync);
                (check.map_or(wait, |c| c.min(wait)), paced)
            }
        };
        heartbeat.idle(wait, bound);
        on_timer = tokio::select! {
            changed = decisions.changed() => if changed.is_err() { return } else { false },
            () = tokio::time::sleep(wait) => paced,
            () = role_changed(roles.as_mut()) => false,
        };
    }
}

/// How long to wait after a pass that ended as `passed`.
fn next_wait(passed: Pass, backoff: &mut Backoff, resync: Duration) -> Duration {
    match passed {
        Pass::Settled => {
            backoff.reset();
            resync
        }
        Pass::Wrote => {
            backoff.reset();
            Duration::ZERO
        }
        Pass::Retry(e) => {
            let hint = match e {
                ProviderError::RateLimited { retry_after } => retry_after,
                _ => None,
            };
            backoff.next_delay(rand::random::<f64>(), hint)
        }
        Pass::Fatal => resync,
        Pass::Stopped(d) | Pass::Wait(d) | Pass::Budget(d) | Pass::Follow(d) => d,
    }
}

/// Resolves when the seat's role changes (never without a seat, or once its election ended).
async fn role_changed(
    roles: Option<&mut watch::Receiver<crate::io::coordination::election::Role>>,
) {
    let ended = match roles {
        Some(r) => r.changed().await.is_err(),
        None => true,
    };
    if ended {
        std::future::pending::<()>().await;
    }
}

/// `call` (one provider call), bounded by [`CALL_DEADLINE`]: a call that has not answered by
/// then is dropped and fails as [`ProviderError::Transient`] (retryable), so the status's
/// `last_error` and `gslb_provider_errors_total{code="transient"}` show it at once instead of
/// when the adapter gives up. Dropping a write part-way is safe: the next pass reads afresh and
/// plans what is still missing.
///
/// # Errors
/// The call's own error, or `Transient` ("no answer within 12s ...") at the deadline.
pub async fn within_deadline<T>(
    call: impl Future<Output = Result<T, ProviderError>>,
) -> Result<T, ProviderError> {
    tokio::time::timeout(CALL_DEADLINE, call)
        .await
        .unwrap_or_else(|_| {
            Err(ProviderError::Transient(format!(
                "no answer within {} (gslb's deadline for one provider call)",
                humantime::format_duration(CALL_DEADLINE)
            )))
        })
}

/// Hands a changed `decision` to its reconciler through `tx` (the latest wins), and records on the
/// status board that it was decided, and when
/// ([`StatusBoard::record_decided`](crate::ops::status::StatusBoard::record_decided)). The engine
/// loop calls this; it writes no apply status. From this moment the status derives `pending` since
/// the decision's time until the reconciler reports on it, unless the decision pushes nothing,
/// shadow mode (`shadow`) is on, or the provider already serves its pool (see
/// [`ApplyStatus::take_up`]). The reconciler may be inside a slow provider call and see the
/// decision only when that call ends; until then the status must not say `applied` for an older
/// decision. The apply gauges follow at once ([`Telemetry::record_apply`]).
pub fn send(
    tx: &watch::Sender<Option<Arc<Decision>>>,
    decision: &Arc<Decision>,
    shadow: bool,
    telemetry: &Telemetry,
) {
    let decided = Decided::of(decision, shadow);
    telemetry.board.record_decided(&decision.service, decided);
    telemetry.record_apply(&decision.service);
    tx.send_replace(Some(Arc::clone(decision)));
}

/// Reads `provider` within [`CALL_DEADLINE`], from a read shared with other bindings of its
/// zone or account that started at most `max_age` ago ([`Provider::observe_within`];
/// `Duration::ZERO`: afresh), counted in
/// `gslb_provider_calls_total{provider,service,operation="observe"}`: the reconciler's read and
/// the adoption read at start, the same way.
///
/// # Errors
/// The provider's own, untouched, or `Transient` at the deadline; the caller reports it.
pub(crate) async fn observe<P: Provider>(
    provider: &P,
    service: &ServiceId,
    telemetry: &Telemetry,
    max_age: Duration,
) -> Result<ObservedState, ProviderError> {
    telemetry
        .metrics
        .provider_calls_total
        .with_label_values(&[provider.name(), &service.0, "observe"])
        .inc();
    within_deadline(provider.observe_within(max_age)).await
}

/// One reconciler's state across passes.
struct Reconciler<'a, P> {
    provider: &'a P,
    steering: &'a Steering,
    telemetry: &'a Telemetry,
    /// Write-fight detection over this binding's writes.
    fight: FightGuard,
    /// The decision (by its time) last announced in sync ([`Event::InSync`]).
    announced: Option<Millis>,
    /// `[cluster]`: the epoch this instance last wrote under, for late-write detection.
    stamped: Option<u64>,
    /// `[cluster]`: the older epoch last reported as a late write (each is counted once).
    late: Option<u64>,
    /// `[cluster]`: the older epoch of a late write the current pass found.
    late_now: Option<u64>,
    /// `[cluster]`: the epoch under which this instance last became the writer, and when.
    took_over: Option<(u64, tokio::time::Instant)>,
    /// `[cluster]`: what following the writer remembers between passes.
    following: follow::Following,
    /// The binding's provider call budget.
    budget: budget::CallBudget,
    /// The last pass that found the provider matching its decision, if the last pass did.
    settled: Option<settled::Settled>,
}

impl<P: Provider> Reconciler<'_, P> {
    fn service(&self) -> &ServiceId {
        &self.steering.pools.service
    }

    fn name(&self) -> &'static str {
        self.provider.name()
    }

    /// One pass: observe -> plan -> report -> apply, on the latest decision. A decision that
    /// comes while the pass reads is judged against that read: a read in flight is never
    /// discarded, so a switch is written within one read and one write of its decision.
    /// `spends`: the read spends the budget (it is not paced by a timer: the resync, a backoff
    /// or a fence's wait).
    async fn pass(
        &mut self,
        decisions: &mut watch::Receiver<Option<Arc<Decision>>>,
        spends: bool,
    ) -> Pass {
        let mut decision = decisions.borrow_and_update().clone();
        let max_age = self.read_max_age(decision.as_deref());
        self.settled = None;
        if spends && let Err(pass) = self.spend(decision.as_deref()) {
            return pass;
        }
        let read_at = tokio::time::Instant::now();
        let observed = match self.observe(decision.as_deref(), max_age).await {
            Ok(o) => o,
            Err(e) => return self.fail("observe", &e),
        };
        if decisions.has_changed().unwrap_or(false) {
            decision = decisions.borrow_and_update().clone();
        }
        let decision = decision.as_deref();
        if let Some(seat) = self.steering.seat.clone() {
            self.show_seat(&seat);
            self.check_late_write(&seat, &observed);
        }
        let observed_active = self.steering.pools.serving(&observed);
        let fallback = self.steering.pools.fallback(&observed);
        self.telemetry
            .board
            .update_apply(self.service(), |a| a.fallback_pool = fallback);
        // Following (a cluster's) and judging (planning and writing: the fence, the write)
        // are boxed, so a pass waiting for its read does not hold their futures' room.
        let followed = Box::pin(self.follow(decision, observed_active.as_ref())).await;
        if let Some(pass) = followed {
            self.status(decision, |a| a.observed_active = observed_active);
            return pass;
        }
        Box::pin(self.judge(decision, &observed, observed_active, read_at)).await
    }

    /// Plans `decision` against `observed` (read at `read_at`), reports, and writes a plan.
    async fn judge(
        &mut self,
        decision: Option<&Decision>,
        observed: &ObservedState,
        observed_active: Option<PoolId>,
        read_at: tokio::time::Instant,
    ) -> Pass {
        let request = Request {
            pools: &self.steering.pools,
            style: self.provider.style(),
            shadow: self.steering.shadow,
            decision,
            observed,
            restamp: self.restamp(),
        };
        let now = self.telemetry.clock.now();
        let planned = match planner::plan(&request, &mut self.fight, now) {
            Ok(p) => p,
            Err(e) => return self.fail("plan", &e),
        };
        if planned.outcome != Outcome::NotPushed {
            self.report_ignored_drain(decision, planned.ignored_drain);
        }
        let seen = observed_active.clone();
        let (found, pass) = match planned.outcome {
            Outcome::NotPushed => (Some(seen), self.not_pushed(decision, observed_active)),
            Outcome::InSync => {
                match decision.and_then(|d| self.steering.pools.awaiting(d, observed)) {
                    Some(why) => (None, self.awaiting(decision, observed_active, why)),
                    None => (Some(seen), self.in_sync(decision, observed_active)),
                }
            }
            Outcome::Refused(r) => (None, self.refused(decision, r)),
            Outcome::Stopped { until, declared } => (None, self.stopped(decision, until, declared)),
            Outcome::Shadow(plan) => (None, self.shadow(decision, observed_active, plan)),
            Outcome::Write {
                plan,
                desired,
                drift,
            } => (
                None,
                self.write(decision, observed_active, plan, &desired, drift)
                    .await,
            ),
        };
        self.settle(decision, read_at, found, &pass);
        pass
    }

    /// The write step of a pass: drift reported, the cluster fence passed, the budget spent,
    /// then [`Reconciler::apply`].
    async fn write(
        &mut self,
        decision: Option<&Decision>,
        observed_active: Option<PoolId>,
        plan: Plan,
        desired: &DesiredState,
        drift: bool,
    ) -> Pass {
        if drift {
            self.drifted(decision);
        }
        self.mark_pending(decision, |a| a.observed_active = observed_active);
        let stamp = match self.steering.seat.clone() {
            Some(seat) => match self.admit(&seat, decision, &plan, desired).await {
                Ok(stamp) => Some(stamp),
                Err(pass) => return pass,
            },
            None => None,
        };
        if let Err(pass) = self.spend(decision) {
            return pass;
        }
        self.apply(decision, plan, desired, stamp).await
    }

    /// Reads the provider (within [`CALL_DEADLINE`], a shared read at most `max_age` old) and
    /// hands its pool health to the health votes. A failed read while a decision waits marks
    /// it decided but not applied.
    async fn observe(
        &self,
        decision: Option<&Decision>,
        max_age: Duration,
    ) -> Result<ObservedState, ProviderError> {
        let read = observe(self.provider, self.service(), self.telemetry, max_age);
        let observed = match read.await {
            Ok(o) => o,
            Err(e) => {
                if decision.is_some_and(|d| d.rule.pushes() && d.active.is_some()) {
                    // A decision waits on a provider that cannot be read (e.g. a 429 storm):
                    // it is decided but not applied, and says so.
                    self.mark_pending(decision, |_| {});
                }
                return Err(e);
            }
        };
        if let Some(votes) = &self.steering.health_votes {
            for (pool, r) in &self.steering.pools.refs {
                if let Some(healthy) = observed.pools.get(r).and_then(|p| p.healthy) {
                    (votes.0)(pool, healthy);
                }
            }
        }
        Ok(observed)
    }

    /// Writes `plan` (towards `desired`, within [`CALL_DEADLINE`], or as a cluster writer
    /// with `stamp` within its one deadline) and reports it: the write metric, the status and
    /// [`Event::Applied`].
    async fn apply(
        &mut self,
        decision: Option<&Decision>,
        plan: Plan,
        desired: &DesiredState,
        stamp: Option<Stamp>,
    ) -> Pass {
        let (service, name) = (&self.steering.pools.service, self.provider.name());
        tracing::info!(service = %service, provider = name, plan = %List(&plan), "applying plan");
        self.telemetry
            .metrics
            .provider_calls_total
            .with_label_values(&[name, &service.0, "apply"])
            .inc();
        let written = match stamp {
            None => within_deadline(self.provider.apply(&plan)).await,
            Some(s) => {
                self.stamped = Some(s.epoch);
                tokio::time::timeout(fenced::left(&s), self.provider.apply_as(&plan, s))
                    .await
                    .unwrap_or_else(|_| {
                        Err(ProviderError::Transient(format!(
                            "no answer within the write deadline of epoch {}",
                            s.epoch
                        )))
                    })
            }
        };
        match written {
            Ok(()) => {
                self.corrected_late_write();
                self.fight.wrote(desired);
                if decision.is_some_and(|d| d.rule.pushes() && d.active.is_some()) {
                    self.provider.decided();
                }
                let at = self.telemetry.clock.now();
                let count = plan.len() as u64;
                self.telemetry
                    .metrics
                    .provider_writes_total
                    .with_label_values(&[name, service.0.as_str()])
                    .inc_by(count);
                self.status(decision, |a| {
                    a.writes += count;
                    a.last_write_at = Some(at);
                    a.last_error = None;
                    a.write_fight = None;
                    a.refused = None;
                    a.fenced = None;
                    a.awaiting = None;
                });
                let _ = self.telemetry.events.send(Event::Applied {
                    service: service.clone(),
                    provider: name.to_owned(),
                    at,
                    active: decision.and_then(|d| d.active.clone()),
                    plan,
                });
                Pass::Wrote
            }
            Err(e) => {
                if matches!(e, ProviderError::Conflict(_)) {
                    // Written, then changed under our feet (or fenced out): it counts for drift.
                    self.fight.wrote(desired);
                }
                self.fail("apply", &e)
            }
        }
    }

    /// Reports a failed provider call (or an unplannable decision) and how to go on.
    fn fail(&self, operation: &str, e: &ProviderError) -> Pass {
        self.telemetry
            .provider_failed(self.service(), self.name(), operation, e);
        if e.is_retryable() {
            Pass::Retry(e.clone())
        } else {
            Pass::Fatal
        }
    }

    /// Updates the reconciler's apply status of the service, reporting on `decision` (see
    /// [`ApplyStatus::take_up`]), and the apply gauges with it ([`Telemetry::record_apply`]).
    fn status(&self, decision: Option<&Decision>, f: impl FnOnce(&mut ApplyStatus)) {
        let shadow = self.steering.shadow;
        self.telemetry.board.update_apply(self.service(), |a| {
            if let Some(d) = decision {
                a.take_up(&Decided::of(d, shadow));
            }
            f(a);
        });
        self.telemetry.record_apply(self.service());
    }

    /// Records "decided but not applied": the status `pending` (since the first such pass),
    /// after `also` updated the status.
    fn mark_pending(&self, decision: Option<&Decision>, also: impl FnOnce(&mut ApplyStatus)) {
        let now = self.telemetry.clock.now();
        self.status(decision, |a| {
            also(a);
            a.state = ApplyState::Pending;
            a.pending_since.get_or_insert(now);
        });
    }
}
