//! The reconciler: one per provider binding, one apply in flight.
//!
//! Level-based, never edge-based: every pass reads the provider afresh, diffs it against the
//! latest decision, and writes only a non-empty plan. It never branches on why it woke (a new
//! decision, a retry, the periodic resync). A newer decision replaces an older one that is
//! still waiting (tokio `watch`): a stale decision is never applied. After a write it reads
//! again at once, so success is confirmed by read-back.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use gslb_provider::{
    Backoff, DesiredState, FailoverStyle, ObservedState, PoolRef, Provider, ProviderError, diff,
};
use tokio::sync::watch;

use crate::daemon::guards::{FightCheck, FightGuard, fallback_refusal};
use crate::io::clock::Clock;
use crate::ops::events::EventSender;
use crate::ops::metrics::Metrics;
use crate::ops::status::{ApplyState, ApplyStatus, StatusBoard};
use gslb_core::engine::Decision;
use gslb_core::event::Event;
use gslb_core::model::{Millis, PoolId, ServiceId};

/// First retry delay after a provider failure.
pub const BACKOFF_BASE: Duration = Duration::from_millis(250);
/// Longest retry delay (Cloudflare blocks for 5 minutes after a 429 storm; Route 53's token
/// buckets refill within seconds).
pub const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// What a reconciler steers: a service's pools as the provider names them.
#[derive(Debug, Clone)]
pub struct Binding {
    /// The service.
    pub service: ServiceId,
    /// Provider pool refs in the policy's priority order.
    pub priority: Vec<PoolRef>,
    /// gslb pool -> provider pool ref.
    pub refs: BTreeMap<PoolId, PoolRef>,
    /// Period of the resync pass when nothing else wakes the reconciler.
    pub resync: Duration,
    /// Shadow mode (`mode = "shadow"`): plan as usual, record what would be written, never
    /// write.
    pub shadow: bool,
    /// Where the provider's own pool health goes after each read, when the policy counts it
    /// as a vote (`quorum.provider_vote`); `None` otherwise.
    pub health_votes: Option<HealthVotes>,
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

impl Binding {
    /// The gslb pool the provider serves in `observed`, judged as the provider does.
    pub fn serving(&self, observed: &ObservedState) -> Option<PoolId> {
        let r = observed.active(&self.priority)?;
        self.refs
            .iter()
            .find(|(_, v)| *v == r)
            .map(|(k, _)| k.clone())
    }
}

/// Shared handles a reconciler reports to.
#[derive(Debug, Clone)]
pub struct Sinks {
    /// Status board.
    pub board: Arc<StatusBoard>,
    /// Metrics.
    pub metrics: Metrics,
    /// Events.
    pub events: EventSender,
    /// Wall clock for timestamps.
    pub clock: Clock,
}

impl Sinks {
    /// Records a failed provider call of `service` in one place: the error metric by class,
    /// a warning log, and the status board's `last_error` (starting `pending_since` when a
    /// decision is waiting).
    pub fn provider_failed(
        &self,
        service: &ServiceId,
        provider: &str,
        operation: &str,
        e: &ProviderError,
    ) {
        self.metrics
            .provider_errors_total
            .with_label_values(&[provider, operation, e.code()])
            .inc();
        tracing::warn!(service = %service, provider, operation, error = %e, "provider call failed");
        let now = self.clock.now();
        let message = e.to_string();
        self.board.update_apply(service, |a| {
            a.last_error = Some(message);
            if a.state == ApplyState::Pending {
                a.pending_since.get_or_insert(now);
            }
        });
    }
}

enum Pass {
    /// Provider matches the decision (or nothing to push): wait for a change or the resync.
    Settled,
    /// Wrote: read back at once.
    Wrote,
    /// Failed in a way that may pass: back off.
    Retry(ProviderError),
    /// Failed in a way retrying will not fix, or a guard refused the plan: wait for a change
    /// or the resync.
    Fatal,
    /// Another writer keeps reverting: write nothing for this long (unless the decision
    /// changes).
    Stopped(Duration),
}

/// Runs until the decision sender is dropped.
///
/// Metrics: each pass's duration in `gslb_reconcile_duration_seconds{provider,service}`.
/// Every label set of the binding exists from the start ([`Metrics::declare_binding`]). The
/// status it keeps (`pending_since` included) is what [`record_unapplied_age`] reads.
pub async fn run<P: Provider>(
    provider: Arc<P>,
    binding: Binding,
    mut decisions: watch::Receiver<Option<Decision>>,
    sinks: Sinks,
) {
    let mut backoff = Backoff::new(BACKOFF_BASE, BACKOFF_MAX);
    let mut fight = FightGuard::default();
    // The decision (by its time) last announced in sync ([`Event::InSync`]).
    let mut announced = None;
    let service = binding.service.0.as_str();
    sinks.board.update_apply(&binding.service, |a| {
        a.provider = provider.name().to_owned()
    });
    sinks.metrics.declare_binding(provider.name(), service);
    let took = sinks
        .metrics
        .reconcile_duration_seconds
        .with_label_values(&[provider.name(), service]);
    // Nothing to reconcile before the first decision: the adoption read at start is the only
    // read until then.
    while decisions.borrow_and_update().is_none() {
        if decisions.changed().await.is_err() {
            return;
        }
    }
    loop {
        let decision = decisions.borrow_and_update().clone();
        let started = tokio::time::Instant::now();
        let passed = pass(
            provider.as_ref(),
            &binding,
            decision.as_ref(),
            &sinks,
            &mut fight,
            &mut announced,
            &decisions,
        )
        .await;
        took.observe(started.elapsed().as_secs_f64());
        let wait = match passed {
            Pass::Settled => {
                backoff.reset();
                binding.resync
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
            Pass::Fatal => binding.resync,
            Pass::Stopped(d) => d,
        };
        tokio::select! {
            changed = decisions.changed() => if changed.is_err() { return },
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// Hands a changed `decision` to its reconciler through `tx` (the latest wins), and marks it
/// decided but not applied from this moment: the status `pending` since the decision's time,
/// `gslb_decision_applied{service}` 0. The reconciler may be inside a slow provider call and
/// see the decision only when that call ends; until then the status must not say `applied`
/// for an older decision. Not marked: a decision that pushes nothing (a hold: the status keeps
/// what the reconciler last saw), shadow mode (`shadow`: nothing is ever applied; the
/// reconciler reports `shadow` or `applied`), and a decision whose pool the provider already
/// serves per the status (`applied` or `not_pushed` with that `observed_active`: the
/// reconciler confirms or corrects it at its next read). The engine loop calls this.
pub fn send(
    tx: &watch::Sender<Option<Decision>>,
    decision: &Decision,
    shadow: bool,
    sinks: &Sinks,
) {
    let wanted = decision.active.as_ref().filter(|_| decision.rule.pushes());
    if let (false, Some(wanted)) = (shadow, wanted) {
        let mut marked = false;
        sinks.board.update_apply(&decision.service, |a| {
            let served = matches!(a.state, ApplyState::Applied | ApplyState::NotPushed)
                && a.observed_active.as_ref() == Some(wanted);
            if !served {
                a.state = ApplyState::Pending;
                // Unapplied since the decision, not since an older one started waiting.
                a.pending_since = Some(decision.at);
                marked = true;
            }
        });
        if marked {
            sinks
                .metrics
                .decision_applied
                .with_label_values(&[decision.service.0.as_str()])
                .set(0.0);
        }
    }
    tx.send_replace(Some(decision.clone()));
}

/// Sets `gslb_decision_unapplied_age_seconds{service}` from the status board: now minus
/// `pending_since` while the status says `pending`, 0 otherwise (applied, not pushed, shadow
/// mode). `pending_since` is the decision's time when [`send`] marked it, or when the provider
/// was found not matching a decision it had matched (a drift), or reads failing. The engine
/// loop calls this at every tick, so the age keeps rising while the reconciler waits inside a
/// provider call or between retries.
pub fn record_unapplied_age(sinks: &Sinks, service: &ServiceId) {
    let age = sinks
        .board
        .pending_since(service)
        .map_or(0.0, |s| sinks.clock.now().since(s).as_secs_f64());
    sinks
        .metrics
        .decision_unapplied_age_seconds
        .with_label_values(&[service.0.as_str()])
        .set(age);
}

async fn pass<P: Provider>(
    provider: &P,
    binding: &Binding,
    decision: Option<&Decision>,
    sinks: &Sinks,
    fight: &mut FightGuard,
    announced: &mut Option<Millis>,
    decisions: &watch::Receiver<Option<Decision>>,
) -> Pass {
    let name = provider.name();
    let service = &binding.service;
    let fail = |op: &str, e: ProviderError| {
        sinks.provider_failed(service, name, op, &e);
        if e.is_retryable() {
            Pass::Retry(e)
        } else {
            Pass::Fatal
        }
    };

    sinks
        .metrics
        .provider_calls_total
        .with_label_values(&[name, "observe"])
        .inc();
    let observed = match provider.observe().await {
        Ok(o) => o,
        Err(e) => {
            if decision.is_some_and(|d| d.rule.pushes() && d.active.is_some()) {
                // A decision waits on a provider that cannot be read (e.g. a 429 storm): it is
                // decided but not applied, and says so.
                mark_pending(sinks, service, |_| {});
            }
            return fail("observe", e);
        }
    };
    if let Some(votes) = &binding.health_votes {
        for (pool, r) in &binding.refs {
            if let Some(healthy) = observed.pools.get(r).and_then(|p| p.healthy) {
                (votes.0)(pool, healthy);
            }
        }
    }
    let observed_active = binding.serving(&observed);
    if decisions.has_changed().unwrap_or(false) {
        // A newer decision came while this pass read (and shows `pending` since it was made,
        // see [`send`]): this pass's verdict on the older one would hide it. The next pass,
        // at once, judges the newer one.
        sinks
            .board
            .update_apply(service, |a| a.observed_active = observed_active);
        return Pass::Settled;
    }
    let desired = match desired(binding, provider.style(), decision, &observed) {
        Ok(Some((desired, dropped))) => {
            keep_fallback_enabled(binding, dropped.as_ref(), sinks, name);
            desired
        }
        Ok(None) => {
            sinks.board.update_apply(service, |a| {
                a.observed_active = observed_active;
                a.state = ApplyState::NotPushed;
                a.last_error = None;
            });
            return Pass::Settled;
        }
        Err(e) => return fail("plan", e),
    };
    let plan = match diff(&desired, &observed) {
        Ok(p) => p,
        Err(e) => return fail("plan", e),
    };
    if plan.is_empty() {
        sinks
            .metrics
            .decision_applied
            .with_label_values(&[service.0.as_str()])
            .set(1.0);
        let mut reached = false;
        sinks.board.update_apply(service, |a| {
            reached = a.state != ApplyState::Applied;
            a.observed_active = observed_active;
            a.state = ApplyState::Applied;
            a.pending_since = None;
            a.last_error = None;
            a.would_write = None;
            a.write_fight = None;
            a.refused = None;
        });
        // Announced when the provider comes to match, and once for each new decision it
        // already matches (a switch that needs no write is in sync all the same).
        // `desired` plans only for a pushed decision with an active pool.
        let fresh = decision.map(|d| d.at) != *announced;
        let target = decision.and_then(|d| Some((d.at, d.active.clone()?)));
        if let (true, Some((decided, active))) = (reached || fresh, target) {
            *announced = Some(decided);
            let _ = sinks.events.send(Event::InSync {
                service: service.clone(),
                provider: name.to_owned(),
                at: sinks.clock.now(),
                active,
            });
        }
        return Pass::Settled;
    }
    if let Some(held) = guard(binding, decision, &desired, &observed, sinks, fight, name) {
        return held;
    }
    if binding.shadow {
        return shadow(binding, name, observed_active, plan, sinks);
    }
    mark_pending(sinks, service, |a| a.observed_active = observed_active);
    tracing::info!(service = %service, provider = name, ?plan, "applying plan");
    sinks
        .metrics
        .provider_calls_total
        .with_label_values(&[name, "apply"])
        .inc();
    match provider.apply(&plan).await {
        Ok(()) => {
            fight.wrote(&desired);
            let at = sinks.clock.now();
            let count = plan.len() as u64;
            sinks
                .metrics
                .provider_writes_total
                .with_label_values(&[name, service.0.as_str()])
                .inc_by(count);
            sinks.board.update_apply(service, |a| {
                a.writes += count;
                a.last_write_at = Some(at);
                a.last_error = None;
                a.write_fight = None;
                a.refused = None;
            });
            let _ = sinks.events.send(Event::Applied {
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
                fight.wrote(&desired);
            }
            fail("apply", e)
        }
    }
}

/// What applying `decision` asks of the provider, whose state is `observed`: `Ok(None)` when
/// the decision pushes nothing (a hold, or no serving pool). The decision's drains leave out
/// the provider's fallback pool, which gslb never disables (see [`crate::daemon::guards`]); its ref
/// is returned with the state when such a drain was dropped. Pure; the reconciler and
/// `gslb plan` share it.
///
/// # Errors
/// [`ProviderError::Invalid`] when the decision's pool has no provider binding.
pub fn desired(
    binding: &Binding,
    style: FailoverStyle,
    decision: Option<&Decision>,
    observed: &ObservedState,
) -> Result<Option<(DesiredState, Option<PoolRef>)>, ProviderError> {
    let target = decision
        .filter(|d| d.rule.pushes())
        .and_then(|d| d.active.as_ref());
    let Some(active) = target else {
        return Ok(None);
    };
    let Some(active_ref) = binding.refs.get(active) else {
        return Err(ProviderError::Invalid(format!(
            "pool {active} has no provider binding"
        )));
    };
    let mut drained: BTreeSet<PoolRef> = decision
        .into_iter()
        .flat_map(|d| &d.drained)
        .filter_map(|p| binding.refs.get(p).cloned())
        .collect();
    let dropped = observed.fallback.clone().filter(|f| drained.remove(f));
    let desired = DesiredState::for_active(style, &binding.priority, active_ref, &drained);
    Ok(Some((desired, dropped)))
}

/// The safety guards of [`crate::daemon::guards`] for a non-empty plan towards `desired`: the
/// fallback-pool refusal, then write-fight detection. `Some` when nothing may be written now.
fn guard(
    binding: &Binding,
    decision: Option<&Decision>,
    desired: &DesiredState,
    observed: &ObservedState,
    sinks: &Sinks,
    fight: &mut FightGuard,
    provider: &str,
) -> Option<Pass> {
    let service = &binding.service;
    let now = sinks.clock.now();
    let verdicts = decision
        .map(|d| {
            d.pools
                .iter()
                .filter_map(|(pool, v)| binding.refs.get(pool).map(|r| (r.clone(), v.verdict)))
                .collect()
        })
        .unwrap_or_default();
    if let Some(r) = fallback_refusal(desired, observed, &verdicts) {
        sinks
            .metrics
            .plans_refused_total
            .with_label_values(&[service.0.as_str(), r.code])
            .inc();
        tracing::warn!(service = %service, provider, reason = %r.reason, "plan refused");
        sinks.board.update_apply(service, |a| {
            a.state = ApplyState::Pending;
            a.pending_since.get_or_insert(now);
            a.refused = Some(r.reason);
        });
        return Some(Pass::Fatal);
    }
    let at = tokio::time::Instant::now();
    match fight.before_apply(desired, at) {
        FightCheck::Apply { drift: false } => None,
        FightCheck::Apply { drift: true } => {
            sinks
                .metrics
                .provider_drift_total
                .with_label_values(&[provider, service.0.as_str()])
                .inc();
            tracing::info!(service = %service, provider, "another writer changed what gslb wrote; re-applying");
            sinks.board.update_apply(service, |a| a.drift += 1);
            None
        }
        FightCheck::Stop { until, declared } => {
            let left = until.saturating_duration_since(at);
            if declared {
                sinks
                    .metrics
                    .provider_write_fights_total
                    .with_label_values(&[provider, service.0.as_str()])
                    .inc();
                tracing::warn!(
                    service = %service, provider, pause = ?left,
                    "write fight: another writer keeps reverting gslb's change; not writing until the window passes"
                );
            }
            let message = format!(
                "another writer reverted gslb's change more than {} times within {}; not writing for {}",
                crate::daemon::guards::WRITE_FIGHT_LIMIT,
                humantime::format_duration(crate::daemon::guards::WRITE_FIGHT_WINDOW),
                humantime::format_duration(Duration::from_secs(left.as_secs())),
            );
            sinks.board.update_apply(service, |a| {
                a.state = ApplyState::Pending;
                a.pending_since.get_or_insert(now);
                a.write_fight = Some(message);
            });
            Some(Pass::Stopped(left))
        }
    }
}

/// The provider's fallback pool is never disabled (see [`crate::daemon::guards`]): a drain of it is
/// dropped by [`desired`] (`dropped`), so the rest of the plan (e.g. a failover order) still
/// applies, and reported here: the status `ignored_drain`, a warning and
/// `gslb_plans_refused_total{reason="fallback_drain_ignored"}`, each once when it starts
/// (the status stays set while the drain lasts).
fn keep_fallback_enabled(
    binding: &Binding,
    dropped: Option<&PoolRef>,
    sinks: &Sinks,
    provider: &str,
) {
    let service = &binding.service;
    let note = dropped.map(|f| {
        let pool = binding
            .refs
            .iter()
            .find(|(_, r)| *r == f)
            .map_or_else(|| f.clone(), |(p, _)| p.0.clone());
        format!(
            "drain of pool {pool} ignored: it is the load balancer's fallback pool, which \
             gslb never disables (with every other pool down, nothing would answer); \
             the rest of the decision is applied"
        )
    });
    let mut fresh = false;
    sinks.board.update_apply(service, |a| {
        fresh = note.is_some() && a.ignored_drain != note;
        a.ignored_drain.clone_from(&note);
    });
    if let (true, Some(note)) = (fresh, note) {
        sinks
            .metrics
            .plans_refused_total
            .with_label_values(&[service.0.as_str(), "fallback_drain_ignored"])
            .inc();
        tracing::warn!(service = %service, provider, reason = %note, "drain ignored");
    }
}

/// Records "decided but not applied": the applied gauge at 0 and the status `pending` (since
/// the first such pass), after `also` updated the status.
fn mark_pending(sinks: &Sinks, service: &ServiceId, also: impl FnOnce(&mut ApplyStatus)) {
    let now = sinks.clock.now();
    sinks
        .metrics
        .decision_applied
        .with_label_values(&[service.0.as_str()])
        .set(0.0);
    sinks.board.update_apply(service, |a| {
        also(a);
        a.state = ApplyState::Pending;
        a.pending_since.get_or_insert(now);
    });
}

/// Shadow mode: records the plan that would have been written, once per distinct plan.
fn shadow(
    binding: &Binding,
    provider: &str,
    observed_active: Option<PoolId>,
    plan: gslb_provider::Plan,
    sinks: &Sinks,
) -> Pass {
    let service = &binding.service;
    let mut fresh = false;
    sinks.board.update_apply(service, |a| {
        a.observed_active = observed_active;
        a.state = ApplyState::Shadow;
        a.last_error = None;
        if a.would_write.as_ref() != Some(&plan) {
            a.would_write = Some(plan.clone());
            fresh = true;
        }
    });
    sinks
        .metrics
        .decision_applied
        .with_label_values(&[service.0.as_str()])
        .set(0.0);
    if fresh {
        sinks
            .metrics
            .shadow_plans_total
            .with_label_values(&[service.0.as_str()])
            .inc();
        tracing::info!(service = %service, provider, ?plan, "shadow mode: would apply plan (not written)");
        let _ = sinks.events.send(Event::ShadowPlan {
            service: service.clone(),
            provider: provider.to_owned(),
            at: sinks.clock.now(),
            plan,
        });
    }
    Pass::Settled
}
