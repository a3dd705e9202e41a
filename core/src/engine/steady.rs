//! When a service's decision can change, and what stale evidence does to it. PURE: time is an
//! argument.
//!
//! A decision is taken again only when something it reads can change it: an observation that
//! changes an endpoint's vote as seen when it is stepped (a rise/fall verdict, evidence turning
//! fresh outside a held view, a first result from a vantage point, or the endpoint turning
//! unprobeable or prober-side or back), a vantage point's suspicion
//! ([`super::Vantages::generation`]), time reaching the moment a piece of evidence, a provider
//! vote or a heartbeat going stale can change it, or the velocity budget gaining a switch (so
//! its gauge follows). A service whose last decision is [steady](Steady) skips the evaluation
//! of every other input: that is what keeps the engine's cost per observation independent of
//! the endpoints per service. Holds that end with time (spacing, velocity, failback hold,
//! damping) and a switch awaiting confirmation are not steady: they are evaluated at every
//! input, as before. A result already stale when it is stepped (an engine loop running behind)
//! changes no vote.
//!
//! A pool healthy by quorum holds on its [healthy views](HeldView): a vantage point's view of
//! the pool is healthy while one of its results is fresh and healthy, so another result of it
//! turning fresh or stale cannot change the view, only the last fresh healthy one going stale
//! can. Without this, a controller running behind (each result arriving after its endpoint's
//! previous one went stale) re-decided its service at every result and at every expiry, O(the
//! service's endpoints) each time, which made it fall further behind and never recover.
//!
//! Stale evidence holds: when the serving pool's verdict is unknown only because results stopped
//! arriving in time (probes running late, a CPU-starved controller), the last decision stands
//! (no flip between `hold_unknown` and `stay`), and the stale results are counted.

use std::time::Duration;

use crate::model::{Millis, PoolId, VantageId, Verdict};
use crate::policy::Policy;

use super::assess::ByEndpoint;
use super::decide::{Decision, Rule};
use super::health::EndpointHealth;

/// A vantage point's view of a pool that a steady decision holds on: the pool is healthy by
/// quorum and the view has a fresh healthy result. Until that result goes stale (a transition
/// of it is decided at once), the view stays healthy whatever the pool's other results from
/// there do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct HeldView {
    /// The pool's place among the policy's pools.
    pub(super) pool: usize,
    /// The vantage point.
    pub(super) vantage: VantageId,
}

/// Until when a decision stands without being evaluated again, and the suspect state it read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Steady {
    /// The first time the decision may differ by time alone (evidence, a provider vote or a
    /// heartbeat going stale).
    pub(super) until: Millis,
    /// The first time something other than the service's own results may change it by time
    /// alone (a provider vote or a heartbeat going stale, the velocity budget's refill).
    pub(super) others: Millis,
    /// How many results outside the held views were fresh when it was decided.
    pub(super) fresh: u32,
    /// The views it holds on, by pool then vantage point.
    pub(super) held: Vec<HeldView>,
    /// [`super::Vantages::generation`] when it was decided.
    pub(super) generation: u64,
}

impl Steady {
    /// Whether a decision at `at` may differ from this steady one.
    pub(super) fn expired(&self, at: Millis, generation: u64) -> bool {
        at >= self.until || generation != self.generation
    }

    /// Whether a result of the pool at `pool` from `vantage` turning fresh at `at` leaves the
    /// decision standing: the view is held and `at` is before `until`, so the fresh healthy
    /// result that holds it still is.
    pub(super) fn holds(&self, pool: usize, vantage: &VantageId, at: Millis) -> bool {
        at < self.until
            && self
                .held
                .iter()
                .any(|h| h.pool == pool && h.vantage == *vantage)
    }

    /// Moves `until` on when only the evidence's clock ran out at `at`, every held view is
    /// still held and every other result that was fresh at the decision still is (`clock` read
    /// at `at`): each was refreshed by a result of the same verdict, so the decision stands. A
    /// result outside the held views turns fresh again only through an observation that
    /// counts as a change (and is decided), so an equal count of fresh results is the same
    /// set. Returns whether the decision still stands.
    pub(super) fn extend(&mut self, at: Millis, clock: &EvidenceClock) -> bool {
        if at >= self.others || clock.fresh != self.fresh || clock.held_changed {
            return false;
        }
        self.until = clock.next.map_or(self.others, |n| n.min(self.others));
        at < self.until
    }
}

/// What the evidence's clock says at a time ([`evidence_clock`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct EvidenceClock {
    /// The first time the evidence going stale may change a view: a result outside the held
    /// views going stale, or a held view's last fresh healthy result (`None`: none is fresh).
    pub(super) next: Option<Millis>,
    /// How many results with a rise/fall verdict are stale (older than the freshness window,
    /// not for a prober-side or unprobeable reason: they arrived late or not at all).
    pub(super) stale: u32,
    /// How many results outside the held views are fresh.
    pub(super) fresh: u32,
    /// Whether the views held differ from those [`evidence_clock`] was given.
    pub(super) held_changed: bool,
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

/// One pool's results from one vantage point at a time ([`evidence_clock`]).
struct ViewClock<'a> {
    vantage: &'a VantageId,
    /// Fresh results, and the first time one of them is stale.
    fresh: u32,
    next: Option<Millis>,
    /// The last time a fresh healthy result is stale (`None`: none is fresh and healthy).
    healthy_until: Option<Millis>,
}

/// The earlier of two times (`None`: no time).
fn earliest(a: Option<Millis>, b: Option<Millis>) -> Option<Millis> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Reads one pool's `results` at `now` into `views` (cleared first; by vantage point), each
/// fresh for `fresh_for`; returns how many of them are stale (not prober-side or unprobeable).
fn read_views<'a>(
    results: impl Iterator<Item = (&'a VantageId, &'a EndpointHealth)>,
    fresh_for: Duration,
    now: Millis,
    views: &mut Vec<ViewClock<'a>>,
) -> u32 {
    views.clear();
    let mut stale = 0u32;
    for (vantage, h) in results {
        let Some(last) = h.last_at else { continue };
        let expires = last.plus(fresh_for);
        if expires < now {
            if h.prober_side.is_none() && h.unprobeable_since.is_none() {
                stale = stale.saturating_add(1);
            }
            continue;
        }
        let stale_at = expires.plus(Duration::from_millis(1));
        let at = views
            .iter()
            .position(|v| v.vantage == vantage)
            .unwrap_or_else(|| {
                views.push(ViewClock {
                    vantage,
                    fresh: 0,
                    next: None,
                    healthy_until: None,
                });
                views.len() - 1
            });
        let view = &mut views[at];
        view.fresh = view.fresh.saturating_add(1);
        view.next = earliest(view.next, Some(stale_at));
        if h.verdict == Verdict::Healthy {
            view.healthy_until = Some(view.healthy_until.map_or(stale_at, |u| u.max(stale_at)));
        }
    }
    views.sort_by(|a, b| a.vantage.cmp(b.vantage));
    stale
}

/// What the evidence's clock says at `now`, with results fresh for `policy.fresh_for()` and the
/// pools healthy by quorum those for which `healthy` holds. `held` is set to the views held
/// ([`HeldView`]: those with a fresh healthy result in a pool healthy by quorum, by pool then
/// vantage point); given the last ones, it is changed only where they differ. O(results), one
/// look-up per endpoint, and a scratch vector of each pool's vantage points.
pub(super) fn evidence_clock(
    policy: &Policy,
    evidence: &ByEndpoint,
    healthy: impl Fn(&PoolId) -> bool,
    held: &mut Vec<HeldView>,
    now: Millis,
) -> EvidenceClock {
    let mut clock = EvidenceClock {
        next: None,
        stale: 0,
        fresh: 0,
        held_changed: false,
    };
    let mut kept = 0;
    let mut views: Vec<ViewClock<'_>> = Vec::new();
    for (i, pool) in policy.pools.iter().enumerate() {
        let results = pool
            .endpoints
            .iter()
            .filter_map(|e| evidence.get(&e.id))
            .flat_map(|m| m.iter());
        let stale = read_views(results, policy.fresh_for(), now, &mut views);
        clock.stale = clock.stale.saturating_add(stale);
        let holds = healthy(&pool.id);
        for v in &views {
            match v.healthy_until.filter(|_| holds) {
                Some(until) => {
                    let same = held
                        .get(kept)
                        .is_some_and(|h| h.pool == i && h.vantage == *v.vantage);
                    if !same {
                        clock.held_changed = true;
                        held.truncate(kept);
                        held.push(HeldView {
                            pool: i,
                            vantage: v.vantage.clone(),
                        });
                    }
                    kept += 1;
                    clock.next = earliest(clock.next, Some(until));
                }
                None => {
                    clock.fresh = clock.fresh.saturating_add(v.fresh);
                    clock.next = earliest(clock.next, v.next);
                }
            }
        }
    }
    clock.held_changed |= held.len() != kept;
    held.truncate(kept);
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
