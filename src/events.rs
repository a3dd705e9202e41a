//! Controller events, broadcast to whoever listens (the failover timeline, the demo's drill
//! report, tests). Sending never blocks a loop: slow listeners miss events, never delay them.

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
        /// The pool the write makes serve: the decision's (always set for a write).
        active: Option<PoolId>,
        /// What was written.
        plan: Plan,
    },
    /// A provider read back the state the latest decision wants, after it did not have it (after
    /// a write, or at the first read), or for the first time since a new decision (one the
    /// provider already matched needs no write, and is in sync all the same). For Route 53 this
    /// is the read-back of the updated verdict checks; for Cloudflare the read-back of the load
    /// balancer.
    InSync {
        /// The service.
        service: ServiceId,
        /// The provider.
        provider: String,
        /// When the read that matched finished.
        at: Millis,
        /// The pool the provider serves now.
        active: PoolId,
    },
    /// A failover observer saw a timeline phase from the outside (see [`crate::timeline`]).
    Observed {
        /// The service.
        service: ServiceId,
        /// The timeline's id.
        timeline: String,
        /// What was seen.
        phase: ObservedPhase,
        /// When.
        at: Millis,
        /// What exactly, e.g. `api.example.com A 192.0.2.2` or `X-Served-By: tokyo`.
        detail: String,
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

/// A timeline phase an observer sees from the outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ObservedPhase {
    /// A DNS answer for the public name names the new pool.
    Dns,
    /// A response through the public name was served by the new pool.
    ServedBy,
}

/// The sending side; cloned into every loop.
pub type EventSender = tokio::sync::broadcast::Sender<Event>;

/// Room of the daemon's event channel: 16,384 events (a power of two, as tokio's broadcast
/// rounds up to one), about 1.6 s of issue 6's target load of 10,000 endpoints probed every
/// second, each probe one [`Event::Probe`]. A listener that falls further behind misses the
/// oldest events, decisions among them, so a listener counts what it missed (e.g. the webhook
/// sinks' `result="lagged"`). Memory: one slot per event, allocated at start.
pub const CAPACITY: usize = 16_384;

/// A channel with room for `capacity` events per listener before the oldest are dropped.
pub fn channel(capacity: usize) -> EventSender {
    tokio::sync::broadcast::channel(capacity).0
}
