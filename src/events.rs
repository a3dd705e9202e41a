//! Controller events, broadcast to whoever listens (the demo's drill report, tests, later the
//! failover timeline). Sending never blocks a loop: slow listeners miss events, never delay them.

use serde::Serialize;

use crate::engine::{Decision, OverrideChange};
use crate::model::{EndpointId, Millis, Observation, PoolId, ServiceId, Verdict};
use gslb_provider::Plan;

/// One thing that happened in the controller.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A probe finished.
    Probe {
        /// The service.
        service: ServiceId,
        /// The endpoint's pool.
        pool: PoolId,
        /// The result.
        observation: Observation,
    },
    /// An endpoint's rise/fall verdict changed.
    EndpointVerdict {
        /// The service.
        service: ServiceId,
        /// The pool.
        pool: PoolId,
        /// The endpoint.
        endpoint: EndpointId,
        /// The new verdict.
        verdict: Verdict,
        /// When (the probe that tipped it).
        at: Millis,
    },
    /// The engine's decision changed rule or serving pool.
    Decision(Decision),
    /// A drill override started, ended, expired or completed.
    Override(OverrideChange),
    /// A provider accepted a plan.
    Applied {
        /// The service.
        service: ServiceId,
        /// The provider.
        provider: String,
        /// When the provider accepted it.
        at: Millis,
        /// What was written.
        plan: Plan,
    },
    /// Shadow mode: a plan that would have been written, but was not.
    ShadowPlan {
        /// The service.
        service: ServiceId,
        /// The provider.
        provider: String,
        /// When it was planned.
        at: Millis,
        /// What would have been written.
        plan: Plan,
    },
}

/// The sending side; cloned into every loop.
pub type EventSender = tokio::sync::broadcast::Sender<Event>;

/// A channel with room for `capacity` events per listener before the oldest are dropped.
pub fn channel(capacity: usize) -> EventSender {
    tokio::sync::broadcast::channel(capacity).0
}
