//! The engine loop: the one task that owns the [`Engine`]. It turns probe results, adoption
//! reads, provider health and operator commands into recorded [`Step`]s, feeds them to the
//! engine in arrival order, ticks it (staleness, expiries, holds running out), and publishes
//! what comes out: decisions to each service's reconciler (`watch`: the latest wins), metrics,
//! status, events, the journal (observation recording, audit log, drill state file).
//!
//! It never talks to a provider and never waits on one: a slow reconciler cannot delay a
//! decision.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};

use crate::daemon::control::Command;
use crate::daemon::reconcile::{self, Sinks};
use crate::io::journal::Journal;
use gslb_core::engine::{
    Decision, Engine, Input, Output, Override, OverrideChange, OverrideError, Reply, Step,
};
use gslb_core::event::Event;
use gslb_core::model::{EndpointId, Observation, PoolId, ServiceId, VantageId};
use gslb_core::policy::{Mode, Policy, PolicyDiff};

/// Buffered messages before probe loops wait for the engine loop.
pub const MESSAGE_BUFFER: usize = 4096;

/// One message to the engine loop.
#[derive(Debug)]
pub enum Message {
    /// A probe result of a service's endpoint.
    Observation {
        /// The service.
        service: ServiceId,
        /// The result.
        observation: Observation,
    },
    /// A canary probe result.
    Canary(Observation),
    /// The provider's serving pool, read at start.
    Adopted {
        /// The service.
        service: ServiceId,
        /// The pool, or none of the policy's pools.
        pool: Option<PoolId>,
    },
    /// The provider's own health signal for a pool.
    ProviderHealth {
        /// The service.
        service: ServiceId,
        /// The pool.
        pool: PoolId,
        /// What the provider says.
        healthy: bool,
        /// How long the vote counts.
        fresh_for: Duration,
    },
    /// Overrides read back from the drill state file at start.
    LoadOverrides(Vec<Override>),
    /// An operator command.
    Command(Command),
    /// A reloaded, validated policy set (see [`Engine::reload`]), with the decision channels
    /// of its changed and added services (their reconcilers are new).
    Reload {
        /// The new set and what changed, computed once by the caller.
        diff: PolicyDiff,
        /// A decision channel for each changed or added service.
        decisions: BTreeMap<ServiceId, watch::Sender<Option<Decision>>>,
        /// Answered once the new set is in force (the reset services' status and gauges are
        /// fresh), so their new tasks start after that and nothing they record is reset.
        done: oneshot::Sender<()>,
    },
}

/// The sending side, cloned into probe loops, adoption reads and the admin API.
pub type MessageSender = mpsc::Sender<Message>;

/// Where an operator's answer goes.
enum Answer {
    Override(oneshot::Sender<Result<Override, OverrideError>>),
    Rearmed(oneshot::Sender<Result<Vec<ServiceId>, OverrideError>>),
}

/// Runs until every sender is dropped. `tick` is how often every service is re-evaluated
/// without new input.
pub async fn run(
    mut engine: Engine,
    mut messages: mpsc::Receiver<Message>,
    mut decisions: BTreeMap<ServiceId, watch::Sender<Option<Decision>>>,
    sinks: Sinks,
    tick: Duration,
    mut journal: Journal,
) {
    for s in engine.services() {
        sinks.metrics.declare_service(s.policy());
        sinks
            .board
            .update_service(s, engine.overrides().all(), sinks.clock.now());
    }
    let start = Step {
        at: sinks.clock.now(),
        input: Input::Start,
    };
    journal.record(&start);
    let mut ticker = tokio::time::interval(tick);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let (input, answer) = tokio::select! {
            m = messages.recv() => {
                let m = match m {
                    None => {
                        journal.flush().await;
                        return;
                    }
                    Some(Message::Reload { diff, decisions: new, done }) => {
                        decisions.extend(new);
                        reload(&mut engine, &diff, &mut decisions, &sinks, &mut journal);
                        let _ = done.send(());
                        continue;
                    }
                    Some(m) => m,
                };
                match into_input(m, &engine, &sinks) {
                    Some(x) => x,
                    None => continue,
                }
            }
            _ = ticker.tick() => (Input::Tick, None),
        };
        let step = Step {
            at: sinks.clock.now(),
            input,
        };
        // A new drill is refused unless the state file can hold it: it is written before the
        // engine sees the drill, so nothing moves for a drill a restart would forget.
        if let Input::AddOverride(req) = &step.input {
            if let Err(e) = saves_with(&engine, req, step.at, &mut journal) {
                let refused = OverrideError::NotSaved(e);
                journal.refused(step.at, req, &refused);
                if let Some(Answer::Override(tx)) = answer {
                    let _ = tx.send(Err(refused));
                }
                continue;
            }
        }
        journal.record(&step);
        let out = engine.step(step.at, &step.input);
        let saved = publish(&engine, &step, &out, &decisions, &sinks, &mut journal);
        let reply = match (saved, out.reply) {
            // An ended drill stays ended in memory; the operator learns the file still lists it.
            (Err(e), Some(Reply::Override(Ok(_)))) => {
                Some(Reply::Override(Err(OverrideError::NotSaved(e))))
            }
            (_, reply) => reply,
        };
        match (answer, reply) {
            (Some(Answer::Override(tx)), Some(Reply::Override(r))) => {
                let _ = tx.send(r);
            }
            (Some(Answer::Rearmed(tx)), Some(Reply::Rearmed(r))) => {
                let _ = tx.send(r);
            }
            _ => {}
        }
    }
}

/// Turns a message into an engine input (and where its answer goes). Read-only commands are
/// answered here and produce no input.
fn into_input(m: Message, engine: &Engine, sinks: &Sinks) -> Option<(Input, Option<Answer>)> {
    Some(match m {
        Message::Observation {
            service,
            observation,
        } => {
            if let Some(pool) = engine
                .service(&service)
                .and_then(|s| s.pool_of(&observation.endpoint))
            {
                sinks
                    .metrics
                    .record_probe(&service.0, &pool.0, &observation);
                sinks.board.record_probe(&service, pool, &observation);
                let _ = sinks.events.send(Event::Probe {
                    service: service.clone(),
                    pool: pool.clone(),
                    observation: observation.clone(),
                });
            }
            (
                Input::Observe {
                    service,
                    observation,
                },
                None,
            )
        }
        Message::Canary(observation) => (Input::Canary { observation }, None),
        Message::LoadOverrides(overrides) => (Input::LoadOverrides { overrides }, None),
        Message::Adopted { service, pool } => {
            if let Some(p) = &pool {
                tracing::info!(service = %service, pool = %p, "adopted the provider's serving pool");
            }
            (Input::Adopt { service, pool }, None)
        }
        Message::ProviderHealth {
            service,
            pool,
            healthy,
            fresh_for,
        } => (
            Input::ProviderHealth {
                service,
                pool,
                healthy,
                fresh_for,
            },
            None,
        ),
        Message::Reload { .. } => return None,
        Message::Command(c) => match c {
            Command::AddOverride { request, reply } => {
                (Input::AddOverride(request), Some(Answer::Override(reply)))
            }
            Command::EndOverride {
                id,
                actor,
                reason,
                reply,
            } => (
                Input::EndOverride { id, actor, reason },
                Some(Answer::Override(reply)),
            ),
            Command::Rearm {
                service,
                actor,
                reason,
                reply,
            } => (
                Input::Rearm {
                    service,
                    actor,
                    reason,
                },
                Some(Answer::Rearmed(reply)),
            ),
            Command::ListOverrides { reply } => {
                let _ = reply.send(engine.overrides().all().cloned().collect());
                return None;
            }
        },
    })
}

/// Swaps in a reloaded policy set, records it (an [`Input::Reload`] step) and publishes what
/// changed: status and metrics of reset and removed services are dropped (their gauges
/// removed), reset and added services are declared afresh and show as awaiting the provider.
fn reload(
    engine: &mut Engine,
    diff: &PolicyDiff,
    decisions: &mut BTreeMap<ServiceId, watch::Sender<Option<Decision>>>,
    sinks: &Sinks,
    journal: &mut Journal,
) {
    // What the outgoing services' gauges are labelled with, before their state goes.
    let outgoing: Vec<(Policy, Vec<(EndpointId, VantageId)>)> = engine
        .services()
        .filter(|s| {
            let id = &s.policy().service;
            diff.resets(id) || diff.removed.contains(id)
        })
        .map(|s| {
            let seen = s
                .evidence()
                .flat_map(|(e, _, m)| m.keys().map(|v| (e.clone(), v.clone())))
                .collect();
            (s.policy().clone(), seen)
        })
        .collect();
    let at = sinks.clock.now();
    let (input, out) = engine.reload(at, diff);
    for (policy, seen) in &outgoing {
        sinks.metrics.forget_service(policy, seen);
        sinks.board.remove_service(&policy.service);
    }
    for id in &diff.removed {
        decisions.remove(id);
    }
    for s in diff.changed.iter().filter_map(|id| engine.service(id)) {
        sinks.metrics.declare_service(s.policy());
        sinks.board.update_service(s, engine.overrides().all(), at);
    }
    tracing::info!(reset = ?diff.changed, removed = ?diff.removed, "policies reloaded; unchanged services keep their state");
    let step = Step { at, input };
    journal.record(&step);
    if let Err(e) = publish(engine, &step, &out, decisions, sinks, journal) {
        tracing::error!(error = %e, "the drill state file could not be saved after a reload");
    }
}

/// Writes the state file as it will be once `req` is added at `at` (when the engine would
/// accept it; a request it refuses is answered by the engine as usual).
fn saves_with(
    engine: &Engine,
    req: &gslb_core::engine::OverrideRequest,
    at: gslb_core::model::Millis,
    journal: &mut Journal,
) -> Result<(), String> {
    let Some(policy) = engine.service(&req.service).map(|s| s.policy()) else {
        return Ok(());
    };
    let mut trial = engine.overrides().clone();
    trial.expire(at);
    match trial.add(policy, req, at) {
        Ok(_) => journal.save(&trial),
        Err(_) => Ok(()),
    }
}

/// Publishes one step's output; the error is the state file's when it could not be saved.
fn publish(
    engine: &Engine,
    step: &Step,
    out: &Output,
    decisions: &BTreeMap<ServiceId, watch::Sender<Option<Decision>>>,
    sinks: &Sinks,
    journal: &mut Journal,
) -> Result<(), String> {
    let mut saved = Ok(());
    for t in &out.transitions {
        if let Input::Observe { service, .. } = &step.input {
            tracing::info!(service = %service, pool = %t.pool, endpoint = %t.endpoint, vantage = %t.vantage, verdict = %t.verdict, "endpoint verdict changed");
            let _ = sinks.events.send(Event::EndpointVerdict {
                service: service.clone(),
                pool: t.pool.clone(),
                endpoint: t.endpoint.clone(),
                verdict: t.verdict,
                at: step.at,
            });
        }
    }
    if let Input::Rearm {
        service,
        actor,
        reason,
    } = &step.input
    {
        journal.rearmed(step.at, service.as_ref(), actor, reason, out.reply.as_ref());
    }
    for c in &out.overrides {
        log_override(c);
        let _ = sinks.events.send(Event::Override(c.clone()));
    }
    if !out.overrides.is_empty() {
        saved = journal.overrides(step.at, &out.overrides, engine.overrides());
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
    if out.decisions.is_empty() {
        // Before adoption there is no decision, but the probes' evidence shows already.
        if let Input::Observe { service, .. } = &step.input {
            if let Some(s) = engine.service(service) {
                sinks
                    .board
                    .update_service(s, engine.overrides().all(), step.at);
            }
        }
    }
    for (decision, changed) in &out.decisions {
        let mode = engine
            .service(&decision.service)
            .map_or(Mode::Enforce, |s| s.policy().mode);
        sinks.metrics.record_decision(decision, *changed, mode);
        if let Some(s) = engine.service(&decision.service) {
            sinks
                .board
                .update_service(s, engine.overrides().all(), step.at);
            sinks
                .metrics
                .record_velocity(&decision.service, s.velocity_available(step.at));
        }
        if *changed {
            tracing::info!(service = %decision.service, rule = decision.rule.as_str(), active = ?decision.active, blocked = ?decision.blocked, reasons = ?decision.reasons, "decision");
            journal.decision(decision);
            let _ = sinks.events.send(Event::Decision(decision.clone()));
            if let Some(tx) = decisions.get(&decision.service) {
                reconcile::send(tx, decision, mode == Mode::Shadow, sinks);
            }
        }
    }
    if matches!(step.input, Input::Tick) {
        sinks
            .metrics
            .record_vantage_points(&engine.vantage_points(step.at));
        sinks.metrics.record_overrides(
            engine.services().map(|s| &s.policy().service),
            engine.overrides(),
            step.at,
        );
        // Here, not in the reconcilers: one blocked in a provider call cannot refresh it.
        for s in engine.services() {
            reconcile::record_unapplied_age(sinks, &s.policy().service);
        }
    }
    saved
}

fn log_override(c: &OverrideChange) {
    match c {
        OverrideChange::Added(o) => {
            tracing::warn!(id = %o.id, service = %o.service, action = %o.action, pool = %o.pool, actor = %o.actor, reason = %o.reason, expires = o.expires.0, "drill override started");
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
            tracing::warn!(id = %o.id, service = %o.service, pool = %o.pool, "saved override skipped: its service or pool is not in the policies");
        }
    }
}
