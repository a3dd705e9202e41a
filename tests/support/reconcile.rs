//! Running a reconciler alone: sinks whose status board knows the service, and waiting for
//! the provider to accept a plan.

use std::sync::Arc;

use gslb::daemon::reconcile::Sinks;
use gslb::io::clock::Clock;
use gslb::ops::events;
use gslb::ops::metrics::Metrics;
use gslb::ops::status::StatusBoard;
use gslb_core::engine::ServiceEngine;
use gslb_core::event::Event;
use gslb_core::model::Millis;

/// Sinks at simulated time 0 whose status board knows the service of `policy` (TOML text):
/// the board only tracks services it has seen, so register one from its engine.
pub fn sinks(policy: &str) -> Sinks {
    let board = Arc::new(StatusBoard::default());
    let policy =
        gslb_core::policy::parse(std::path::Path::new("policy.toml"), policy).expect("policy");
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

/// Stands in for the engine loop's tick ([`gslb::daemon::controller::MAX_TICK`], 1 s): records
/// `gslb_decision_unapplied_age_seconds` of `service` from the status board, forever.
pub fn tick_unapplied_age(sinks: &Sinks, service: &str) {
    let (sinks, service) = (sinks.clone(), gslb_core::model::ServiceId(service.into()));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(gslb::daemon::controller::MAX_TICK);
        loop {
            tick.tick().await;
            gslb::daemon::reconcile::record_unapplied_age(&sinks, &service);
        }
    });
}
