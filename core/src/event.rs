//! Controller events: what happened, as plain data. The daemon broadcasts them (its
//! `ops::events` channel) to whoever listens: the failover timeline's recorder
//! (`timeline::Recorder`, which reads this module; this one never reads it), the webhooks, the
//! demo's drill report, tests.

use serde::Serialize;

use gslb_provider::Plan;

use crate::engine::{Decision, OverrideChange};
use crate::model::{EndpointId, Millis, Observation, PoolId, ServiceId, Verdict};

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
    /// A failover observer saw a timeline phase from the outside (see the `timeline` module).
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
