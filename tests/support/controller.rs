//! Running a controller in-process: sinks on the system clock, a controller started with the
//! default engine settings, a service attached (probes from vantage point `test`, a 200 ms
//! resync) against the in-process provider of a two-pool (`seoul`, `tokyo`) policy.

use std::sync::Arc;
use std::time::Duration;

use gslb::daemon::controller::{self, Controller};
use gslb::daemon::reconcile::Sinks;
use gslb::io::clock::Clock;
use gslb::io::journal::Journal;
use gslb::io::probe::{DnsSettings, Prober};
use gslb::ops::events;
use gslb::ops::metrics::Metrics;
use gslb::ops::status::StatusBoard;
use gslb_core::engine::{EngineSettings, Override};
use gslb_core::model::VantageId;
use gslb_core::policy::Policy;
use gslb_provider::{FailoverStyle, MemoryProvider};
use tokio::task::JoinSet;

/// Sinks on the system clock with an event channel of `events` messages.
pub fn sinks(events: usize) -> Sinks {
    Sinks {
        board: Arc::new(StatusBoard::default()),
        metrics: Metrics::new(),
        events: events::channel(events),
        clock: Clock::system(),
    }
}

/// A controller for `policies` with the default engine settings, `saved` drills loaded first.
pub fn start(
    policies: &[Policy],
    sinks: &Sinks,
    journal: Journal,
    saved: Vec<Override>,
) -> Controller {
    Controller::start(
        policies,
        &EngineSettings::default(),
        sinks.clone(),
        journal,
        saved,
    )
}

/// The in-process provider of a `seoul`/`tokyo` policy (enablement style), serving seoul.
pub fn provider() -> Arc<MemoryProvider> {
    Arc::new(MemoryProvider::new(
        FailoverStyle::Enablement,
        &["seoul".into(), "tokyo".into()],
    ))
}

/// Attaches `policy`'s probes (vantage point `test`), adoption read and reconciler (resync
/// 200 ms) against `provider`.
pub fn attach(
    controller: &Controller,
    tasks: &mut JoinSet<()>,
    policy: &Policy,
    provider: &Arc<MemoryProvider>,
) {
    let prober = Arc::new(Prober::new(&DnsSettings::default()).expect("prober"));
    controller
        .attach(
            tasks,
            policy,
            provider.clone(),
            controller::binding(policy, Duration::from_millis(200)),
            &prober,
            &VantageId("test".into()),
        )
        .expect("attach");
}
