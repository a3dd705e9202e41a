//! When a service's decision can change, and what stale evidence does to it. PURE: time is an
//! argument.
//!
//! A decision is taken again only when something it reads can change it: an observation that
//! changes an endpoint's rise/fall verdict as seen at its time (a verdict, or evidence turning
//! fresh), a vantage point's suspicion ([`super::Vantages::generation`]), or time reaching the
//! moment the earliest fresh piece of evidence, provider vote or heartbeat goes stale, or the
//! velocity budget gains a switch (so its gauge follows). A
//! service whose last decision is [steady](Steady) skips the evaluation of every other input:
//! that is what keeps the engine's cost per observation independent of the endpoints per
//! service. Holds that end with time (spacing, velocity, failback hold, damping) and a switch
//! awaiting confirmation are not steady: they are evaluated at every input, as before.
//!
//! Stale evidence holds: when the serving pool's verdict is unknown only because results stopped
//! arriving in time (probes running late, a CPU-starved controller), the last decision stands
//! (no flip between `hold_unknown` and `stay`), and the stale results are counted.

use std::time::Duration;

use crate::model::{Millis, PoolId};

use super::assess::ByEndpoint;
use super::decide::{Decision, Rule};

/// Until when a decision stands without being evaluated again, and the suspect state it read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Steady {
    /// The first time the decision may differ by time alone (evidence, a provider vote or a
    /// heartbeat going stale).
    pub(super) until: Millis,
    /// The first time something other than the service's own results may change it by time
    /// alone (a provider vote or a heartbeat going stale, the velocity budget's refill).
    pub(super) others: Millis,
    /// How many results were fresh when it was decided.
    pub(super) fresh: u32,
    /// [`super::Vantages::generation`] when it was decided.
    pub(super) generation: u64,
}

impl Steady {
    /// Whether a decision at `at` may differ from this steady one.
    pub(super) fn expired(&self, at: Millis, generation: u64) -> bool {
        at >= self.until || generation != self.generation
    }

    /// Moves `until` on when only the evidence's clock ran out at `at` and every result that
    /// was fresh at the decision still is (`clock` read at `at`): each was refreshed by a
    /// result of the same verdict, so the decision stands. A result turns fresh again only
    /// through an observation that counts as a change (and is decided), so an equal count of
    /// fresh results is the same set. Returns whether the decision still stands.
    pub(super) fn extend(&mut self, at: Millis, clock: &EvidenceClock) -> bool {
        if at >= self.others || clock.fresh != self.fresh {
            return false;
        }
        self.until = clock.next.map_or(self.others, |n| n.min(self.others));
        at < self.until
    }
}

/// What the evidence's clock says at a time ([`evidence_clock`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct EvidenceClock {
    /// The first time a fresh result is stale (`None`: none is fresh).
    pub(super) next: Option<Millis>,
    /// How many results with a rise/fall verdict are stale (older than the freshness window,
    /// not for a prober-side or unprobeable reason: they arrived late or not at all).
    pub(super) stale: u32,
    /// How many results are fresh.
    pub(super) fresh: u32,
}

/// Whether a decision by `rule` keeps its pool until a verdict changes: none of the holds that
/// end with time, no switch, no confirmation awaited.
pub(super) fn steady_rule(rule: Rule) -> bool {
    matches!(
        rule,
        Rule::Stay
            | Rule::FailStatic
            | Rule::HoldUnknown
            | Rule::AwaitingEvidence
            | Rule::FailbackManual
    )
}

/// What the evidence's clock says at `now`, with results fresh for `fresh`.
pub(super) fn evidence_clock(evidence: &ByEndpoint, fresh: Duration, now: Millis) -> EvidenceClock {
    let mut clock = EvidenceClock {
        next: None,
        stale: 0,
        fresh: 0,
    };
    for h in evidence.values().flat_map(|m| m.values()) {
        let Some(last) = h.last_at else { continue };
        let expires = last.plus(fresh);
        if expires >= now {
            let stale_at = expires.plus(Duration::from_millis(1));
            clock.next = Some(clock.next.map_or(stale_at, |n| n.min(stale_at)));
            clock.fresh = clock.fresh.saturating_add(1);
        } else if h.prober_side.is_none() && h.unprobeable_since.is_none() {
            clock.stale = clock.stale.saturating_add(1);
        }
    }
    clock
}

/// The rule a `hold_unknown` candidate keeping `active` follows instead when stale evidence
/// holds: the last decision's, when it kept the same pool by a rule that keeps a pool
/// (`stay`, `fail_static`, `failback_manual`) without a blocked switch. Whether the serving
/// pool's results are merely stale is the caller's part.
pub(super) fn stale_hold(
    last: Option<&Decision>,
    rule: Rule,
    active: Option<&PoolId>,
) -> Option<Rule> {
    let l = last?;
    let keeps = matches!(l.rule, Rule::Stay | Rule::FailStatic | Rule::FailbackManual);
    (rule == Rule::HoldUnknown && keeps && l.blocked.is_none() && l.active.as_ref() == active)
        .then_some(l.rule)
}
