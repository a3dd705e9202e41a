//! The one reconciler harness: a reconciler running alone against a provider, handed
//! decisions through [`reconcile::send`] (what the engine loop calls), with sinks whose status
//! board knows the service, and the events to await instead of sleeping.

use std::sync::Arc;
use std::time::Duration;

use gslb::daemon::reconcile::{self, Steering};
use gslb::io::clock::Clock;
use gslb::ops::status::ApplyStatus;
use gslb::ops::telemetry::Telemetry;
use gslb_core::engine::{Decision, ServiceEngine};
use gslb_core::event::Event;
use gslb_core::model::{Millis, PoolId, ServiceId};
use gslb_provider::Provider;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;

/// Telemetry at simulated time 0 whose status board knows the service of `policy` (TOML text):
/// the board only tracks services it has seen, so register one from its engine.
pub fn sinks(policy: &str) -> Telemetry {
    let telemetry = Telemetry::new(Clock::anchored_at(Millis(0)), 64);
    let policy =
        gslb_core::policy::parse(std::path::Path::new("policy.toml"), policy).expect("policy");
    telemetry
        .board
        .update_service(&ServiceEngine::new(policy), std::iter::empty(), Millis(0));
    telemetry
}

/// A running reconciler and what a test reads of it.
pub struct Harness<P> {
    /// The provider it steers.
    pub provider: Arc<P>,
    /// Its sinks.
    pub sinks: Telemetry,
    /// Its events, subscribed before it started.
    pub events: broadcast::Receiver<Event>,
    /// The decision channel; dropping it ends the reconciler.
    pub decisions: watch::Sender<Option<std::sync::Arc<Decision>>>,
    /// The reconciler task.
    pub task: JoinHandle<()>,
    service: ServiceId,
    shadow: bool,
}

/// Spawns a reconciler of `steering` against `provider` reporting to `sinks`, and hands it
/// `decision` as the engine loop does; it first runs when the test next yields. The apply
/// gauges are refreshed every [`gslb::daemon::controller::MAX_TICK`], as the engine loop's tick
/// does.
pub fn start<P: Provider>(
    provider: Arc<P>,
    steering: Steering,
    sinks: Telemetry,
    decision: &Decision,
) -> Harness<P> {
    let events = sinks.events.subscribe();
    let (decisions, rx) = watch::channel(None);
    let (service, shadow) = (steering.pools.service.clone(), steering.shadow);
    let task = tokio::spawn(reconcile::run(
        provider.clone(),
        steering,
        rx,
        sinks.clone(),
    ));
    let h = Harness {
        provider,
        sinks,
        events,
        decisions,
        task,
        service,
        shadow,
    };
    h.decide(decision);
    let (sinks, service) = (h.sinks.clone(), h.service.clone());
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(gslb::daemon::controller::MAX_TICK);
        loop {
            tick.tick().await;
            sinks.record_apply(&service);
        }
    });
    h
}

impl<P> Harness<P> {
    /// Hands the reconciler a changed decision, as the engine loop does.
    pub fn decide(&self, decision: &Decision) {
        reconcile::send(
            &self.decisions,
            &std::sync::Arc::new(decision.clone()),
            self.shadow,
            &self.sinks,
        );
    }

    /// The service's apply status as `GET /v1/status` shows it.
    pub fn status(&self) -> ApplyStatus {
        self.sinks.board.snapshot()[&self.service].apply.clone()
    }

    /// Refreshes the apply gauges now, as the engine loop's next tick would.
    pub fn tick(&self) {
        self.sinks.record_apply(&self.service);
    }

    /// Waits for the next `Applied` event: the provider accepted a plan.
    pub async fn next_applied(&mut self) {
        loop {
            if let Ok(Event::Applied { .. }) = self.events.recv().await {
                return;
            }
        }
    }

    /// The next `InSync` event (a pass found the provider matching the decision), if one
    /// comes within `within` (paused time).
    pub async fn next_in_sync(&mut self, within: Duration) -> Option<(Millis, PoolId)> {
        tokio::time::timeout(within, async {
            loop {
                if let Ok(Event::InSync { at, active, .. }) = self.events.recv().await {
                    return (at, active);
                }
            }
        })
        .await
        .ok()
    }

    /// Waits for the read-back pass after a write to find the provider in sync.
    pub async fn read_back(&mut self) {
        self.next_in_sync(Duration::from_secs(3_600))
            .await
            .expect("the read-back pass finds the provider in sync");
    }
}
