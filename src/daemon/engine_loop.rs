//! The engine loop: the one task that owns the [`Engine`]. It takes the [`Message`]s of its
//! inbox (probe results, adoption reads, provider health, operators' drills, reloads) as
//! recorded [`Step`]s, feeds them to the engine in arrival order, ticks it (staleness,
//! expiries, holds running out), and publishes what comes out: decisions to each service's
//! reconciler (`watch`: the latest wins), metrics, status, events, the journal (observation
//! recording, audit log, drill state file).
//!
//! It never talks to a provider and never waits on one: a slow reconciler cannot delay a
//! decision. The one thing it waits for is the drill store (the state file, written off the
//! runtime threads, or etcd in a cluster), written before a new drill takes effect.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::daemon::inbox::{Inbox, Message, Reload};
use crate::daemon::outputs::Outputs;
use crate::daemon::reconcile;
use crate::io::journal::Journal;
use crate::io::probe::Wakers;
use crate::ops::health;
use crate::ops::logging::List;
use crate::ops::telemetry::Telemetry;
use gslb_core::engine::{
    Decision, Engine, Input, Output, OverrideChange, OverrideError, Reply, ServiceEngine,
    ServiceHandle, Step,
};
use gslb_core::event::Event;
use gslb_core::model::{EndpointId, Millis, ServiceId, VantageId};
use gslb_core::policy::{Mode, Policy};

/// Each service's decision channel, to its reconciler.
type Decisions = BTreeMap<ServiceId, watch::Sender<Option<Arc<Decision>>>>;

/// Where a step's output goes besides telemetry and the journal: changed decisions to each
/// service's reconciler, and confirmation requests ([`Output::confirm`]) to the probe loops of
/// the pool a switch waits for.
struct Outlets {
    decisions: Decisions,
    wakers: Wakers,
    /// Services shown at the next tick (see [`Behind`]).
    behind: Behind,
    /// What a cluster member's tasks are handed ([`Outputs`]); none alone.
    cluster: Option<Outputs>,
}

/// Services whose status and decision gauges lag their engine by probe results that changed
/// no decision: shown at the next tick (at most `tick` later, at most 1 s), so a probe result
/// does not rebuild its service's status (O(endpoints of the service)) and re-set its pool
/// gauges; a changed decision shows at once. One [`Lag`] per service, by its place among the
/// engine's services ([`ServiceHandle::slot`]), sized once per policy set: under steady
/// probing every service is behind at every tick, and a set of names copied each time cost
/// an allocation per service per tick.
#[derive(Debug, Default)]
struct Behind(Vec<Lag>);

/// What of a service's telemetry waits for the next tick, least first.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Lag {
    /// Nothing.
    #[default]
    None,
    /// Its status and service gauges: its evidence moved, its decision was not evaluated (the
    /// pool gauges already show it).
    Status,
    /// Its decision's gauges too: it was evaluated again, unchanged, or the policy set was
    /// (re)loaded ([`Behind::reset`]).
    Decision,
}

impl Behind {
    /// The service at `slot` lags by at least `lag` until the next tick.
    fn raise(&mut self, slot: Option<usize>, lag: Lag) {
        if let Some(l) = slot.and_then(|i| self.0.get_mut(i)) {
            *l = (*l).max(lag);
        }
    }

    /// The service at `slot` is shown now: it no longer lags.
    fn clear(&mut self, slot: Option<usize>) {
        if let Some(l) = slot.and_then(|i| self.0.get_mut(i)) {
            *l = Lag::None;
        }
    }

    /// Follows the engine's services after a start or a reload (their places moved): every
    /// service is shown whole at the next tick when `all`, else none.
    fn reset(&mut self, engine: &Engine, all: bool) {
        let lag = if all { Lag::Decision } else { Lag::None };
        self.0 = vec![lag; engine.services().count()];
    }
}

/// Runs until [`Message::Stop`] or until every sender of the main lane is dropped; takes the
/// priority lane's messages first ([`Inbox::recv`]). `tick` is how often every
/// service whose decision can change by time alone is re-evaluated without new input. A
/// switch waiting for a probe of its target wakes that pool's probe loops through `wakers`. Its heartbeat (`engine_loop`) beats at every
/// input and tick, bound by [`health::engine_bound`]; it tells `/readyz` which services await
/// their provider at start and after each reload, and takes a service off at its adoption.
/// In a cluster, it hands its verdicts, safety states and drill changes to `cluster`.
pub(super) async fn run(
    mut engine: Engine,
    mut messages: Inbox,
    decisions: Decisions,
    telemetry: Telemetry,
    (tick, wakers): (Duration, Wakers),
    mut journal: Journal,
    cluster: Option<Outputs>,
) {
    for s in engine.services() {
        telemetry.metrics.declare_service(s.policy());
        telemetry
            .board
            .update_service(s, engine.overrides().all(), telemetry.clock.now());
    }
    let start = Step {
        at: telemetry.clock.now(),
        input: Input::Start,
    };
    journal.record(&start);
    let bound = health::engine_bound(tick);
    let heartbeat = telemetry.health.register("engine_loop", bound);
    record_readiness(&engine, &telemetry);
    if let Some(c) = &cluster {
        c.safety_of(&engine);
    }
    let mut outlets = Outlets {
        decisions,
        wakers,
        behind: Behind::default(),
        cluster,
    };
    outlets.behind.reset(&engine, false);
    let mut ticker = tokio::time::interval(tick);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        heartbeat.beat(bound);
        let (input, reply) = tokio::select! {
            m = messages.recv() => match m {
                None | Some(Message::Stop) => break,
                Some(Message::Input { input, reply }) => (input, reply),
                Some(Message::ListOverrides(tx)) => {
                    let _ = tx.send(engine.overrides().all().cloned().collect());
                    continue;
                }
                Some(Message::Reload(r)) => {
                    reload(&mut engine, r, &mut outlets, &telemetry, &mut journal).await;
                    record_readiness(&engine, &telemetry);
                    continue;
                }
            },
            _ = ticker.tick() => (Input::Tick, None),
        };
        let step = Step {
            at: telemetry.clock.now(),
            input,
        };
        // A probe result's service, searched for by name once: the step, its pool and its lag
        // flag go through the handle (an evaluation still finds it by name).
        let handle = match &step.input {
            Input::Observe { service, .. } => engine.handle(service),
            _ => None,
        };
        received(&step, &engine, handle, &telemetry);
        let stepped = (&step, handle);
        let answer = apply(&mut engine, stepped, &mut outlets, &telemetry, &mut journal).await;
        if let Input::Adopt { service, .. } = &step.input
            && engine.service(service).is_some_and(ServiceEngine::ready)
        {
            telemetry.health.adopted(service);
        }
        if let Some(tx) = reply {
            tx.send(answer);
        }
    }
    journal.flush().await;
}

/// Tells `/readyz` how many services run and which await their provider's state.
fn record_readiness(engine: &Engine, telemetry: &Telemetry) {
    let awaiting = engine
        .services()
        .filter(|s| !s.ready())
        .map(|s| s.policy().service.clone())
        .collect();
    telemetry
        .health
        .set_awaiting(engine.services().count(), awaiting);
}

/// What shows as soon as an input arrives: a probe result in the metrics, the status and the
/// events (when its endpoint is in a policy); an adopted pool in the log.
fn received(step: &Step, engine: &Engine, handle: Option<ServiceHandle>, telemetry: &Telemetry) {
    match &step.input {
        Input::Observe {
            service,
            observation,
        } => {
            let Some(pool) = engine
                .service_handled(service, handle)
                .and_then(|s| s.pool_of(&observation.endpoint))
            else {
                return;
            };
            telemetry
                .metrics
                .record_probe(service, &pool.0, observation);
            telemetry.board.record_probe(service, pool, observation);
            let _ = telemetry.events.send(Event::Probe {
                service: service.clone(),
                pool: pool.clone(),
                observation: observation.clone(),
            });
        }
        Input::Adopt {
            service,
            pool: Some(p),
        } => {
            tracing::info!(service = %service, pool = %p, "adopted the provider's serving pool");
        }
        _ => {}
    }
}

/// Steps the engine with one input, keeps the drills when the step changed them, then records
/// the step and publishes its output; returns the engine's answer for the operator.
///
/// A new drill is refused unless the drill store holds it: it is stored before the step
/// ([`Engine::check_override`], [`Journal::store`]: nothing moves for a drill a restart, or
/// the other instances of a cluster, would not know), and when it cannot be, the step is not
/// taken nor recorded. `handle`: that of the service a probe result names
/// ([`Engine::step_handled`]).
async fn apply(
    engine: &mut Engine,
    (step, handle): (&Step, Option<ServiceHandle>),
    outlets: &mut Outlets,
    telemetry: &Telemetry,
    journal: &mut Journal,
) -> Option<Reply> {
    let adding = matches!(step.input, Input::AddOverride(_));
    if let Input::AddOverride(req) = &step.input
        && let Ok((added, all)) = engine.check_override(req, step.at)
        && let Err(e) = journal.store(&added, &all, step.at).await
    {
        let refused = OverrideError::NotSaved(e);
        journal.refused(step.at, req, &refused);
        return Some(Reply::Override(Err(refused)));
    }
    let out = engine.step_handled(step.at, &step.input, handle);
    // A new drill was stored before the step; any other change of the drills after it.
    let saved = if adding {
        Ok(())
    } else {
        save(engine, &out, journal).await
    };
    journal.record(step);
    publish(engine, (step, handle), &out, outlets, telemetry, journal);
    match (saved, out.reply) {
        // An ended drill stays ended in memory; the operator learns the file still lists it.
        (Err(e), Some(Reply::Override(Ok(_)))) => {
            Some(Reply::Override(Err(OverrideError::NotSaved(e))))
        }
        (_, reply) => reply,
    }
}

/// Keeps the active drills when `out` changed them: once per step, off the runtime threads
/// ([`Journal::save`]).
async fn save(engine: &Engine, out: &Output, journal: &Journal) -> Result<(), String> {
    if out.overrides.is_empty() {
        return Ok(());
    }
    journal.save(engine.overrides()).await
}

/// Swaps in a reloaded policy set, records it (an [`Input::Reload`] step) and publishes what
/// changed: status and metrics of reset and removed services are dropped (their gauges
/// removed), reset and added services are declared afresh and show as awaiting the provider.
/// Answers [`Reload::done`] once that is done.
async fn reload(
    engine: &mut Engine,
    reload: Reload,
    outlets: &mut Outlets,
    telemetry: &Telemetry,
    journal: &mut Journal,
) {
    let Reload {
        diff,
        decisions: new,
        done,
    } = reload;
    outlets.decisions.extend(new);
    // What the outgoing services' gauges are labelled with, before their state goes.
    let outgoing: Vec<(Policy, Vec<(EndpointId, VantageId)>)> = engine
        .services()
        .filter(|s| diff.resets(&s.policy().service) || diff.removed.contains(&s.policy().service))
        .map(|s| {
            let seen = s
                .evidence()
                .flat_map(|(e, _, m)| m.keys().map(|v| (e.clone(), v.clone())))
                .collect();
            (s.policy().clone(), seen)
        })
        .collect();
    let at = telemetry.clock.now();
    let (input, out) = engine.reload(at, &diff);
    outlets.behind.reset(engine, true);
    for (policy, seen) in &outgoing {
        telemetry.metrics.forget_service(policy, seen);
        telemetry.board.remove_service(&policy.service);
    }
    for id in &diff.removed {
        outlets.decisions.remove(id);
    }
    for s in diff.changed.iter().filter_map(|id| engine.service(id)) {
        telemetry.metrics.declare_service(s.policy());
        telemetry
            .board
            .update_service(s, engine.overrides().all(), at);
    }
    tracing::info!(changed = %List(&diff.changed), removed = %List(&diff.removed), "policies reloaded; unchanged services keep their state");
    if let Err(e) = save(engine, &out, journal).await {
        tracing::error!(error = %e, "the drills could not be stored after a reload");
    }
    let step = Step { at, input };
    journal.record(&step);
    publish(engine, (&step, None), &out, outlets, telemetry, journal);
    let _ = done.send(());
}

/// The audit log's part of one step: a re-arm, the override changes, a refused drill request.
fn audit(step: &Step, out: &Output, journal: &mut Journal) {
    if let Input::Rearm {
        service,
        actor,
        reason,
    } = &step.input
    {
        journal.rearmed(step.at, service.as_ref(), actor, reason, out.reply.as_ref());
    }
    if !out.overrides.is_empty() {
        journal.overrides(step.at, &out.overrides);
    }
    match (&step.input, &out.reply) {
        (Input::AddOverride(req), Some(Reply::Override(Err(e)))) => {
            journal.refused(step.at, req, e)
        }
        (Input::EndOverride { id, actor, reason }, Some(Reply::Override(Err(e)))) => {
            journal.end_refused(step.at, id, actor, reason, e);
        }
        _ => {}
    }
}

/// The log and the events of one step's endpoint verdict and override changes.
fn announce(step: &Step, out: &Output, telemetry: &Telemetry) {
    for t in &out.transitions {
        if let Input::Observe { service, .. } = &step.input {
            tracing::info!(service = %service, pool = %t.pool, endpoint = %t.endpoint, vantage = %t.vantage, verdict = %t.verdict, "endpoint verdict changed");
            let _ = telemetry.events.send(Event::EndpointVerdict {
                service: service.clone(),
                pool: t.pool.clone(),
                endpoint: t.endpoint.clone(),
                verdict: t.verdict,
                at: step.at,
            });
        }
    }
    for c in &out.overrides {
        log_override(c);
        let _ = telemetry.events.send(Event::Override(c.clone()));
    }
    for f in &out.flaps {
        telemetry.metrics.record_pool_flap(f);
    }
}

/// Publishes one step's output (its drills already saved): audit, log and events, status,
/// metrics, and changed decisions to their reconcilers. A probe result that changed no
/// decision only marks the services it concerns [`Behind`]; a tick shows each lagging service
/// as far as it lags ([`Lag`]).
fn publish(
    engine: &Engine,
    (step, handle): (&Step, Option<ServiceHandle>),
    out: &Output,
    outlets: &mut Outlets,
    telemetry: &Telemetry,
    journal: &mut Journal,
) {
    audit(step, out, journal);
    announce(step, out, telemetry);
    if let Some(c) = &outlets.cluster {
        c.stepped(step, out);
        if matches!(step.input, Input::Tick | Input::Reload { .. }) {
            c.safety_of(engine);
        }
    }
    let observed = match &step.input {
        Input::Observe { service, .. } => Some(service),
        _ => None,
    };
    // A service's place: the probe result's through its handle (taken in this loop pass: no
    // reload came between, the places stand), another's by name.
    let slot = |service: &ServiceId| match (observed, handle) {
        (Some(o), Some(h)) if o == service => Some(h.slot()),
        _ => engine.handle(service).map(ServiceHandle::slot),
    };
    if let (Some(service), true) = (observed, out.decisions.is_empty()) {
        // Before adoption there is no decision, but the probes' evidence shows already.
        outlets.behind.raise(slot(service), Lag::Status);
    }
    for (decision, changed) in &out.decisions {
        if observed.is_some() && !*changed {
            outlets.behind.raise(slot(&decision.service), Lag::Decision);
            continue;
        }
        outlets.behind.clear(slot(&decision.service));
        let service = engine.service(&decision.service);
        let mode = service.map_or(Mode::Enforce, |s| s.policy().mode);
        show(engine, service, decision, *changed, step.at, telemetry);
        if *changed {
            tracing::info!(
                service = %decision.service,
                rule = decision.rule.as_str(),
                active = decision.active.as_ref().map(|p| p.0.as_str()),
                blocked = decision.blocked.as_ref().map(|b| b.to.0.as_str()),
                blocked_rule = decision.blocked.as_ref().map(|b| b.rule.as_str()),
                reasons = %List(&decision.reasons),
                "decision"
            );
            journal.decision(decision);
            let _ = telemetry
                .events
                .send(Event::Decision(Decision::clone(decision)));
            if let Some(tx) = outlets.decisions.get(&decision.service) {
                reconcile::send(tx, decision, mode == Mode::Shadow, telemetry);
            }
        }
    }
    for c in &out.confirm {
        let woken = outlets.wakers.wake(&c.service, &c.pool);
        tracing::debug!(service = %c.service, pool = %c.pool, loops = woken, "a switch waits for a probe of its target: probing it now");
    }
    if let Some(cluster) = engine.cluster() {
        telemetry.board.refresh_cluster(cluster, step.at);
        telemetry.metrics.record_cluster(cluster, step.at);
    }
    if matches!(step.input, Input::Tick) {
        on_tick(engine, step.at, &mut outlets.behind, telemetry);
    }
}

/// What a tick at `at` shows: each lagging service as far as it lags ([`Lag`]), the vantage
/// points' and drills' gauges, and each service's unapplied age.
fn on_tick(engine: &Engine, at: Millis, behind: &mut Behind, telemetry: &Telemetry) {
    for (s, lag) in engine.services().zip(behind.0.iter_mut()) {
        match (std::mem::take(lag), s.last_decision()) {
            (Lag::None, _) => {}
            (_, None) => telemetry
                .board
                .update_service(s, engine.overrides().all(), at),
            (Lag::Status, Some(_)) => show_service(engine, s, at, telemetry),
            (Lag::Decision, Some(d)) => show(engine, Some(s), d, false, at, telemetry),
        }
    }
    telemetry
        .metrics
        .record_vantage_points(&engine.vantage_points(at));
    telemetry.metrics.record_overrides(
        engine.services().map(|s| &s.policy().service),
        engine.overrides(),
        at,
    );
    // Here too, not only in the reconcilers: one blocked in a provider call cannot refresh
    // the unapplied age.
    for s in engine.services() {
        telemetry.record_apply(&s.policy().service);
    }
}

/// Shows `decision` in the metrics (counted when `changed`) and, with its service's engine
/// `s`, in the status with its velocity budget at `at`.
fn show(
    engine: &Engine,
    s: Option<&ServiceEngine>,
    decision: &Decision,
    changed: bool,
    at: Millis,
    telemetry: &Telemetry,
) {
    let mode = s.map_or(Mode::Enforce, |s| s.policy().mode);
    telemetry.metrics.record_decision(decision, changed, mode);
    if engine.cluster().is_some() {
        telemetry.metrics.record_fresh_voters(decision);
    }
    if let Some(s) = s {
        show_service(engine, s, at, telemetry);
    }
}

/// Shows service `s` at `at` in the status and in its own gauges (velocity budget, stale
/// evidence); its decision's gauges are [`show`]'s part.
fn show_service(engine: &Engine, s: &ServiceEngine, at: Millis, telemetry: &Telemetry) {
    let service = &s.policy().service;
    telemetry
        .board
        .update_service(s, engine.overrides().all(), at);
    telemetry
        .metrics
        .record_velocity(service, s.velocity_available(at));
    telemetry
        .metrics
        .record_stale_evidence(service, s.stale_evidence());
}

fn log_override(c: &OverrideChange) {
    match c {
        OverrideChange::Added(o) => {
            tracing::warn!(id = %o.id, service = %o.service, action = %o.action, pool = %o.pool, actor = %o.actor, reason = %o.reason, expires = %o.expires.rfc3339(), "drill override started");
        }
        OverrideChange::Ended {
            ended,
            actor,
            reason,
        } => {
            tracing::warn!(id = %ended.id, service = %ended.service, actor, reason, "drill override ended");
        }
        OverrideChange::Expired(o) => {
            tracing::warn!(id = %o.id, service = %o.service, action = %o.action, pool = %o.pool, "drill override expired");
        }
        OverrideChange::Completed(o) => {
            tracing::info!(id = %o.id, service = %o.service, pool = %o.pool, "restore complete: the pool serves again");
        }
        OverrideChange::Skipped(o) => {
            let why = gslb_core::engine::Overrides::skip_reason(o);
            tracing::warn!(id = %o.id, service = %o.service, pool = %o.pool, "saved override skipped: {why}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Behind, Lag};

    #[test]
    fn a_service_lags_by_the_most_that_waits_until_it_is_shown() {
        let mut behind = Behind(vec![Lag::None; 3]);
        behind.raise(Some(1), Lag::Decision);
        // A later probe result that evaluated nothing must not hide the unshown decision.
        behind.raise(Some(1), Lag::Status);
        behind.raise(Some(2), Lag::Status);
        behind.raise(Some(7), Lag::Decision);
        behind.raise(None, Lag::Decision);
        assert_eq!(behind.0, [Lag::None, Lag::Decision, Lag::Status]);
        behind.clear(Some(1));
        assert_eq!(behind.0, [Lag::None, Lag::None, Lag::Status]);
    }
}
