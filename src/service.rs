//! The service loop: feeds probe results to one service's [`Engine`], evaluates it on every
//! result and on a tick, and publishes decisions to the reconciler through a `watch` channel.
//!
//! It never talks to a provider; it only learns, once, which pool the provider serves at start
//! (adoption), and makes no decision before that.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};

use crate::engine::{Decision, Engine};
use crate::events::Event;
use crate::model::{EndpointId, Observation, PoolId};
use crate::reconcile::Sinks;

/// Runs one service until the observation channel closes.
///
/// `adopted` delivers the pool the provider serves at start (`None` when the provider serves
/// none of the policy's pools); until it arrives, observations are recorded but no decision is
/// made. `tick` is how often the engine is re-evaluated without new results (staleness,
/// dwell expiry).
pub async fn run(
    mut engine: Engine,
    mut observations: mpsc::Receiver<Observation>,
    adopted: oneshot::Receiver<Option<PoolId>>,
    decisions: watch::Sender<Option<Decision>>,
    sinks: Sinks,
    tick: Duration,
) {
    let service = engine.policy().service.clone();
    let pools: BTreeMap<EndpointId, PoolId> = engine
        .endpoints()
        .map(|(e, p, _)| (e.clone(), p.clone()))
        .collect();
    sinks.metrics.declare_service(&service.0);
    sinks.board.update_engine(&engine, None);
    let mut adopted = Some(adopted);
    let mut ready = false;
    let mut last: Option<Decision> = None;
    let mut ticker = tokio::time::interval(tick);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            obs = observations.recv() => {
                let Some(obs) = obs else { return };
                let Some(pool) = pools.get(&obs.endpoint) else { continue };
                sinks.metrics.record_probe(&service.0, &pool.0, &obs);
                if let Some(t) = engine.observe(&obs) {
                    tracing::info!(service = %service, pool = %t.pool, endpoint = %t.endpoint, verdict = %t.verdict, "endpoint verdict changed");
                    let _ = sinks.events.send(Event::EndpointVerdict {
                        service: service.clone(), pool: t.pool, endpoint: t.endpoint, verdict: t.verdict, at: obs.at,
                    });
                }
                let _ = sinks.events.send(Event::Probe { service: service.clone(), pool: pool.clone(), observation: obs });
            }
            pool = async { adopted.as_mut().expect("polled only while pending").await }, if adopted.is_some() => {
                adopted = None;
                ready = true;
                if let Ok(Some(pool)) = pool {
                    tracing::info!(service = %service, pool = %pool, "adopted the provider's serving pool");
                    engine.adopt(pool);
                }
            }
            _ = ticker.tick() => {}
        }
        if !ready {
            sinks.board.update_engine(&engine, None);
            continue;
        }
        let decision = engine.decide(sinks.clock.now());
        let changed = last
            .as_ref()
            .is_none_or(|l| l.rule != decision.rule || l.active != decision.active);
        sinks.metrics.record_decision(&decision, changed);
        sinks.board.update_engine(&engine, Some(&decision));
        if changed {
            tracing::info!(service = %service, rule = decision.rule.as_str(), active = ?decision.active, reasons = ?decision.reasons, "decision");
            let _ = sinks.events.send(Event::Decision(decision.clone()));
            decisions.send_replace(Some(decision.clone()));
        }
        last = Some(decision);
    }
}
