//! Running a reconciler alone: sinks whose status board knows the service, and waiting for
//! the provider to accept a plan.

use std::sync::Arc;

use gslb::clock::Clock;
use gslb::engine::ServiceEngine;
use gslb::events::{self, Event};
use gslb::metrics::Metrics;
use gslb::model::Millis;
use gslb::reconcile::Sinks;
use gslb::status::StatusBoard;

/// Sinks at simulated time 0 whose status board knows the service of `policy` (TOML text):
/// the board only tracks services it has seen, so register one from its engine.
pub fn sinks(policy: &str) -> Sinks {
    let board = Arc::new(StatusBoard::default());
    let policy = gslb::policy::parse(std::path::Path::new("policy.toml"), policy).expect("policy");
    board.update_service(&ServiceEngine::new(policy), std::iter::empty(), Millis(0));
    Sinks {
        board,
        metrics: Metrics::new(),
        events: events::channel(64),
        clock: Clock::anchored_at(Millis(0)),
    }
}

/// Waits for the next `Applied` event.
pub async fn next_applied(rx: &mut tokio::sync::broadcast::Receiver<Event>) {
    loop {
        if let Ok(Event::Applied { .. }) = rx.recv().await {
            return;
        }
    }
}

/// Stands in for the engine loop's tick ([`gslb::controller::MAX_TICK`], 1 s): records
/// `gslb_decision_unapplied_age_seconds` of `service` from the status board, forever.
pub fn tick_unapplied_age(sinks: &Sinks, service: &str) {
    let (sinks, service) = (sinks.clone(), gslb::model::ServiceId(service.into()));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(gslb::controller::MAX_TICK);
        loop {
            tick.tick().await;
            gslb::reconcile::record_unapplied_age(&sinks, &service);
        }
    });
}
