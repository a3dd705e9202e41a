//! Priority failover, the vocabulary: the [`Rule`] a decision followed, each pool's state as the
//! decision saw it, what the rules read ([`RuleInput`]) and return ([`Candidate`]), and the
//! [`Decision`] itself. Pure data; the rules themselves and their precedence live in `rules`,
//! which reads this module and is never read by it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Serialize;

use crate::model::{ByPool, Millis, PoolId, ServiceId, VantageId, Verdict, pools_as_map};

use super::cluster::VantageVote;
use super::quorum::Tally;

/// The rule a decision followed. Holds keep the current pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// No pool is serving yet and the evidence to pick one is incomplete: nothing is pushed.
    AwaitingEvidence,
    /// No pool was serving; the most preferred healthy pool is chosen.
    ServePreferred,
    /// The serving pool is healthy and no better pool is: stay.
    Stay,
    /// The serving pool is down by quorum: move to the most preferred healthy pool.
    Failover,
    /// A more preferred pool is healthy again and failback is `auto`: return to it.
    Failback,
    /// Fail static: the serving pool is down but no pool is healthy, so nothing changes.
    FailStatic,
    /// Hold: the serving pool is down and a healthy pool is ready, but no probe of that pool
    /// has passed since the serving pool went down. Waiting for one (at most one interval)
    /// confirms the prober still reaches the regions: a prober that lost its network sees the
    /// standby fail next, and never moves traffic.
    ConfirmTarget,
    /// Hold: the serving pool's verdict is unknown (no or stale evidence). Unknown never switches.
    HoldUnknown,
    /// Hold: the serving pool looks down only from suspect vantage points ("everything looks
    /// down from here"); their down votes are discounted and nothing is pushed.
    ProberSuspect,
    /// Hold: a more preferred pool is healthy again, but failback is `manual`.
    FailbackManual,
    /// Hold: an automatic failback waits until the preferred pool has been healthy for the
    /// failback hold (`failback_hold × consecutive failovers`, capped).
    FailbackHold,
    /// Hold: an automatic failback is blocked because the preferred pool is flap-suppressed.
    Suppressed,
    /// Hold: the spacing rail: the previous change to the record is less than
    /// `max(2 × TTL, min_dwell)` ago.
    Dwell,
    /// Hold: the service's (or the controller's) velocity budget of automatic switches is
    /// spent; the blocked decision is recorded. An operator re-arm releases it.
    VelocityLimited,
    /// Hold: a safety rail refused the plan (it would leave no serving pool, or switch to a
    /// pool that is not healthy by quorum).
    RailHold,
    /// Drill: traffic leaves a drained pool.
    Drain,
    /// Drill: traffic is pinned to a forced pool.
    Force,
    /// Drill: traffic returns to a restored pool (the operator's failback).
    Restore,
}

impl Rule {
    /// The label value, e.g. `fail_static`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AwaitingEvidence => "awaiting_evidence",
            Self::ServePreferred => "serve_preferred",
            Self::Stay => "stay",
            Self::Failover => "failover",
            Self::Failback => "failback",
            Self::FailStatic => "fail_static",
            Self::ConfirmTarget => "confirm_target",
            Self::HoldUnknown => "hold_unknown",
            Self::ProberSuspect => "prober_suspect",
            Self::FailbackManual => "failback_manual",
            Self::FailbackHold => "failback_hold",
            Self::Suppressed => "suppressed",
            Self::Dwell => "dwell",
            Self::VelocityLimited => "velocity_limited",
            Self::RailHold => "rail_hold",
            Self::Drain => "drain",
            Self::Force => "force",
            Self::Restore => "restore",
        }
    }

    /// Whether the decision may be pushed to a provider. Fail static, unknown or suspect
    /// evidence and awaiting evidence push nothing: the provider keeps what it has.
    pub fn pushes(self) -> bool {
        !matches!(
            self,
            Self::AwaitingEvidence | Self::FailStatic | Self::HoldUnknown | Self::ProberSuspect
        )
    }

    /// Whether the rule is a hold (the engine wanted to, or could not, act).
    pub fn is_hold(self) -> bool {
        matches!(
            self,
            Self::FailStatic
                | Self::ConfirmTarget
                | Self::HoldUnknown
                | Self::ProberSuspect
                | Self::FailbackManual
                | Self::FailbackHold
                | Self::Suppressed
                | Self::Dwell
                | Self::VelocityLimited
                | Self::RailHold
        )
    }

    /// Whether a switch by this rule is automatic (counted by the velocity limit). Drills are
    /// operator actions and are not.
    pub fn is_automatic(self) -> bool {
        matches!(self, Self::Failover | Self::Failback)
    }
}

/// One pool's state as the decision saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolVerdict {
    /// The quorum verdict.
    pub verdict: Verdict,
    /// When the pool entered this verdict (as far as this engine has seen).
    pub since: Millis,
    /// The fresh votes behind it.
    pub votes: Tally,
    /// The flap-damping penalty, rounded.
    pub penalty: u32,
    /// Whether flap damping suppresses the pool (no automatic failback to it).
    pub suppressed: bool,
    /// The weighted state-change percentage of its most flapping endpoint, rounded.
    pub flap_percent: u32,
    /// Whether any of its endpoints is flapping (above `flapping.high`, until below `low`).
    pub flapping: bool,
    /// When a probe of it last passed (from a vantage point that is not suspect).
    pub last_ok: Option<Millis>,
    /// Each vantage point's vote on it, and whether it counted (cluster only; empty alone).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub by_vantage: BTreeMap<VantageId, VantageVote>,
}

impl PoolVerdict {
    /// An unknown pool as of `since`.
    pub fn unknown(since: Millis) -> Self {
        Self {
            verdict: Verdict::Unknown,
            since,
            votes: Tally::default(),
            penalty: 0,
            suppressed: false,
            flap_percent: 0,
            flapping: false,
            last_ok: None,
            by_vantage: BTreeMap::new(),
        }
    }
}

/// A switch that a hold blocked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Blocked {
    /// The rule the blocked decision followed.
    pub rule: Rule,
    /// The pool it would have switched to.
    pub to: PoolId,
}

/// The outcome of one evaluation: deterministic and self-explaining.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// The service.
    pub service: ServiceId,
    /// When it was made.
    pub at: Millis,
    /// The pool that should serve; `None` only while awaiting evidence with nothing adopted.
    pub active: Option<PoolId>,
    /// The pool that served before this decision, when it switched.
    pub previous: Option<PoolId>,
    /// The rule followed.
    pub rule: Rule,
    /// The switch a hold blocked (velocity limit, rails, spacing), if any.
    pub blocked: Option<Blocked>,
    /// Pools a drill drains (never the active pool): providers that can disable a pool do.
    pub drained: BTreeSet<PoolId>,
    /// Human-readable reasons: which endpoints, votes, thresholds, rule.
    pub reasons: Vec<String>,
    /// Every pool's state, by pool.
    #[serde(serialize_with = "pools_as_map")]
    pub pools: ByPool<PoolVerdict>,
}

impl Decision {
    /// Whether this decision moved traffic.
    pub fn switched(&self) -> bool {
        self.previous.is_some() && self.previous != self.active
    }
}

/// What the rules see besides the policy.
#[derive(Debug)]
pub struct RuleInput<'a> {
    /// The pool serving now (adopted from the provider or chosen earlier).
    pub current: Option<&'a PoolId>,
    /// Each pool's state.
    pub pools: &'a ByPool<PoolVerdict>,
    /// Pools drained by a drill.
    pub drained: &'a BTreeSet<PoolId>,
    /// The pool a drill forces, if any.
    pub forced: Option<&'a PoolId>,
    /// Pools a drill restores (failback authorised by an operator).
    pub restored: &'a BTreeSet<PoolId>,
    /// The automatic failback hold now (grows with consecutive failovers).
    pub failback_hold: Duration,
    /// Now.
    pub now: Millis,
}

/// A rule's choice, before rails and velocity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The rule.
    pub rule: Rule,
    /// The pool it wants serving.
    pub active: Option<PoolId>,
    /// Why, for the decision's reasons (the last one names the rule).
    pub reasons: Vec<String>,
    /// With `confirm_target`: the target pool whose passing probe the switch waits for.
    pub confirm: Option<PoolId>,
}

/// A pool's flap figures as they stand after an observation ([`super::Output::flaps`]); the pool's
/// [`PoolVerdict`] shows the same from then on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolFlap {
    /// The service.
    pub service: ServiceId,
    /// The pool.
    pub pool: PoolId,
    /// The weighted state-change percentage of its most flapping endpoint, rounded.
    pub flap_percent: u32,
    /// Whether any of its endpoints is flapping.
    pub flapping: bool,
}
