//! Everything the engine is fed, as recordable data: one [`Step`] per input, with the time the
//! engine evaluated it. Recording the steps of a live controller (JSON lines) and feeding them
//! to a fresh engine reproduces its decisions exactly; `gslb replay` does that with a policy
//! of the team's choosing.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::model::{EndpointId, Millis, Observation, PoolId, ServiceId, VantageId, Verdict};

use super::decide::{Decision, PoolFlap};
use super::overrides::{Override, OverrideError, OverrideId, OverrideRequest};
use super::safety::SafetyState;
use super::service::EndpointTransition;

/// One input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "input", rename_all = "snake_case")]
pub enum Input {
    /// A controller started with an empty engine (the first step of every run in a
    /// recording). The engine ignores it; a replay starts a fresh engine here, as the live
    /// controller did.
    Start,
    /// A probe result of one of a service's endpoints.
    Observe {
        /// The service.
        service: ServiceId,
        /// The result.
        observation: Observation,
    },
    /// A probe result of a vantage point's canary target.
    Canary {
        /// The result.
        observation: Observation,
    },
    /// The provider's own health signal for a pool (counted when `quorum.provider_vote`).
    ProviderHealth {
        /// The service.
        service: ServiceId,
        /// The pool.
        pool: PoolId,
        /// What the provider says.
        healthy: bool,
        /// How long the vote counts (the reconciler reads every resync period).
        #[serde(with = "crate::model::wire::seconds")]
        fresh_for: std::time::Duration,
    },
    /// The provider's serving pool, read at start; decisions for the service start here.
    Adopt {
        /// The service.
        service: ServiceId,
        /// The pool, or `None` when the provider serves none of the policy's pools.
        pool: Option<PoolId>,
    },
    /// Re-evaluate every service (staleness, expiries, holds running out).
    Tick,
    /// This controller is one of several (`[cluster]`), recorded at start after
    /// [`Input::Start`]: the configured vantage points, the votes a pool needs, and how long
    /// a heartbeat keeps a vantage point's votes counting. Coordination starts lost.
    Cluster {
        /// This instance's vantage point.
        local: VantageId,
        /// Every configured vantage point, this instance's included.
        vantages: Vec<VantageId>,
        /// Counted vantage-point votes a pool's verdict needs.
        min_voters: u32,
        /// How long after its last heartbeat a vantage point's votes count.
        #[serde(with = "crate::policy::duration")]
        fresh_for: std::time::Duration,
    },
    /// Coordination through etcd holds (lease alive, peers' votes watched) or is lost (then
    /// every pool is unknown: fail static).
    Coordination {
        /// Whether it holds.
        coordinated: bool,
    },
    /// Another vantage point published (or withdrew: `unknown`) its rise/fall verdict of an
    /// endpoint.
    RemoteVerdict {
        /// The vantage point.
        vantage: VantageId,
        /// The service.
        service: ServiceId,
        /// The endpoint.
        endpoint: EndpointId,
        /// Its verdict.
        verdict: Verdict,
    },
    /// A heartbeat of another vantage point was seen now (its votes count for
    /// [`Input::Cluster`]'s `fresh_for` from this step's time).
    Heartbeat {
        /// The vantage point.
        vantage: VantageId,
    },
    /// Start a drill override.
    AddOverride(OverrideRequest),
    /// End an override before its expiry.
    EndOverride {
        /// Which one.
        id: OverrideId,
        /// Who.
        actor: String,
        /// Why.
        reason: String,
    },
    /// Refill velocity budgets: one service's, or every service's and the controller's.
    Rearm {
        /// The service, or all.
        service: Option<ServiceId>,
        /// Who.
        actor: String,
        /// Why.
        reason: String,
    },
    /// Overrides read back from the state file at start.
    LoadOverrides {
        /// The saved overrides.
        overrides: Vec<Override>,
    },
    /// A service's safety state as kept in etcd (`[cluster]`): merged into the engine's
    /// conservatively ([`SafetyState::merge`]), so a new writer or a restarted cluster
    /// continues the velocity budget, damping, last switch and failback hold.
    RestoreSafety {
        /// The service.
        service: ServiceId,
        /// Its saved state.
        safety: SafetyState,
    },
    /// The policy set was reloaded. Services not named kept every bit of their state. The
    /// live engine swaps in the new policies (`Engine::reload`); a replay, which uses
    /// the policies of its command line, resets the `reset` services with those.
    Reload {
        /// Services whose policy changed or was added: fresh state, not ready until the
        /// provider's serving pool is adopted again.
        reset: Vec<ServiceId>,
        /// Services whose policy was removed: gone, with their overrides (reported as
        /// skipped).
        removed: Vec<ServiceId>,
    },
}

/// One input at the time the engine evaluated it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// When (Unix ms).
    pub at: Millis,
    /// What.
    #[serde(flatten)]
    pub input: Input,
}

/// What happened to an override in a step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum OverrideChange {
    /// Created.
    Added(Override),
    /// Ended by an operator, or (a drain) by a restore of its pool.
    Ended {
        /// The override.
        #[serde(rename = "override")]
        ended: Override,
        /// Who ended it.
        actor: String,
        /// Why.
        reason: String,
    },
    /// Reached its expiry.
    Expired(Override),
    /// A restore whose pool serves again: done.
    Completed(Override),
    /// Skipped when loading the state file (unknown service or pool, duplicate id).
    Skipped(Override),
}

/// The answer to an operator command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// The created or ended override, or why not.
    Override(Result<Override, OverrideError>),
    /// The services re-armed, or why not.
    Rearmed(Result<Vec<ServiceId>, OverrideError>),
}

/// What one step produced.
#[derive(Debug, Clone, Default)]
pub struct Output {
    /// Every decision evaluated, with whether it changed (only changed ones are published).
    /// Shared with the engine's own last decision ([`super::ServiceEngine::last_decision`]):
    /// handing it on copies a pointer, not the decision.
    pub decisions: Vec<(Arc<Decision>, bool)>,
    /// Endpoint verdict changes from the observation.
    pub transitions: Vec<EndpointTransition>,
    /// Override changes.
    pub overrides: Vec<OverrideChange>,
    /// The answer to a command.
    pub reply: Option<Reply>,
    /// Pools to probe at once, out of schedule: a switch waits for a probe of its target to
    /// pass (`confirm_target`). Asked once, when the decision starts waiting; the prober
    /// rate-limits it and its results are ordinary observations.
    pub confirm: Vec<Confirm>,
    /// A pool whose flap figures changed with the observation, decided or not: a pool that
    /// flaps below `fall` is never re-decided, and its flap gauges must not wait for that.
    pub flaps: Vec<PoolFlap>,
}

/// A request to probe a pool's endpoints now, out of schedule ([`Output::confirm`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirm {
    /// The service.
    pub service: ServiceId,
    /// The pool whose endpoints to probe.
    pub pool: PoolId,
}

impl Output {
    /// The decisions that changed, in evaluation order.
    pub fn changed(&self) -> impl Iterator<Item = &Decision> {
        self.decisions.iter().filter(|(_, c)| *c).map(|(d, _)| &**d)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::engine::overrides::OverrideAction;
    use crate::model::{ProbeOutcome, ProbeReason};

    /// Every input kind survives the recording format, so a replay sees every step.
    #[test]
    fn every_input_round_trips_through_json() {
        let o = Override {
            id: OverrideId("d-1".into()),
            service: ServiceId("api".into()),
            action: OverrideAction::Drain,
            pool: PoolId("seoul".into()),
            reason: "drill".into(),
            actor: "alice".into(),
            created: Millis(1),
            expires: Millis(2),
        };
        let observation = Observation {
            endpoint: EndpointId("tcp://192.0.2.1:443".into()),
            vantage: VantageId("v".into()),
            at: Millis(5),
            outcome: ProbeOutcome {
                success: false,
                duration: Duration::from_millis(3),
                http_status: None,
                dns_lookup: None,
                cert_expiry: None,
                reason: ProbeReason::LocalResources,
            },
        };
        let inputs = [
            Input::Start,
            Input::Observe {
                service: o.service.clone(),
                observation: observation.clone(),
            },
            Input::Canary { observation },
            Input::ProviderHealth {
                service: o.service.clone(),
                pool: o.pool.clone(),
                healthy: true,
                fresh_for: Duration::from_secs(120),
            },
            Input::Adopt {
                service: o.service.clone(),
                pool: None,
            },
            Input::Tick,
            Input::AddOverride(OverrideRequest {
                id: o.id.clone(),
                service: o.service.clone(),
                action: OverrideAction::Force,
                pool: o.pool.clone(),
                reason: "r".into(),
                actor: "a".into(),
                duration: Some(Duration::from_secs(60)),
            }),
            Input::EndOverride {
                id: o.id.clone(),
                actor: "a".into(),
                reason: "r".into(),
            },
            Input::Rearm {
                service: None,
                actor: "a".into(),
                reason: "r".into(),
            },
            Input::LoadOverrides { overrides: vec![o] },
            Input::Reload {
                reset: vec![ServiceId("api".into())],
                removed: vec![ServiceId("web".into())],
            },
            Input::Cluster {
                local: VantageId("a".into()),
                vantages: vec![VantageId("a".into()), VantageId("b".into())],
                min_voters: 2,
                fresh_for: Duration::from_secs(6),
            },
            Input::Coordination { coordinated: true },
            Input::RemoteVerdict {
                vantage: VantageId("b".into()),
                service: ServiceId("api".into()),
                endpoint: EndpointId("tcp://192.0.2.1:443".into()),
                verdict: Verdict::Unhealthy,
            },
            Input::Heartbeat {
                vantage: VantageId("b".into()),
            },
        ];
        for input in inputs {
            let step = Step {
                at: Millis(9),
                input,
            };
            let line = serde_json::to_string(&step).expect("serialises");
            let back: Step = serde_json::from_str(&line).expect("parses");
            assert_eq!(back, step, "{line}");
        }
    }
}
