//! Running a controller in-process through the daemon builder: telemetry on the system
//! clock, the default engine settings, probes from vantage point `test`, a 200 ms resync, and
//! the in-process provider of a two-pool (`seoul`, `tokyo`) policy.

use std::sync::Arc;
use std::time::Duration;

use gslb::daemon::builder::{Builder, Daemon};
use gslb::io::clock::Clock;
use gslb::io::journal::Journal;
use gslb::ops::telemetry::Telemetry;
use gslb_core::engine::Override;
use gslb_core::model::VantageId;
use gslb_core::policy::Policy;
use gslb_provider::{FailoverStyle, MemoryProvider};

/// Telemetry on the system clock with an event channel of `events` messages.
pub fn sinks(events: usize) -> Telemetry {
    Telemetry::new(Clock::system(), events)
}

/// A controller for `policies` reporting to `sinks`, `saved` drills loaded first; attach
/// services with [`Daemon::attach`].
pub fn start(
    policies: &[Policy],
    sinks: &Telemetry,
    journal: Journal,
    saved: Vec<Override>,
) -> Daemon {
    Builder::new(policies.to_vec())
        .vantage(VantageId("test".into()))
        .resync(Duration::from_millis(200))
        .journal(journal, saved)
        .telemetry(sinks.clone())
        .start()
        .expect("the default prober")
}

/// The in-process provider of a `seoul`/`tokyo` policy (enablement style), serving seoul.
pub fn provider() -> Arc<MemoryProvider> {
    Arc::new(MemoryProvider::new(
        FailoverStyle::Enablement,
        &["seoul".into(), "tokyo".into()],
    ))
}
