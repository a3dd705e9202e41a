//! Safety rails: checked on every switching candidate before it can become a plan. PURE.
//!
//! A violation never means "push anyway": the service holds its current pool, the decision
//! records the rail and the switch it blocked, and a metric counts it.

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use crate::model::{ByPool, Millis, PoolId, Verdict};

use super::decide::PoolVerdict;

/// A rail a candidate broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// The candidate would leave the service with no serving pool (none chosen, drained, or
    /// not one of the policy's pools).
    NoServingPool,
    /// The candidate switches to a pool that is not healthy by quorum.
    NotHealthy {
        /// The pool.
        pool: PoolId,
        /// Its verdict.
        verdict: Verdict,
    },
    /// A failback or a switch between two healthy pools less than the spacing after the
    /// previous change to the same record.
    Spacing {
        /// The spacing, `max(2 × TTL, min_dwell)`.
        spacing: Duration,
        /// Time since the previous change.
        since: Duration,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoServingPool => f.write_str("it would leave no serving pool"),
            Self::NotHealthy { pool, verdict } => {
                write!(f, "it switches to {pool}, which is {verdict} by quorum")
            }
            Self::Spacing { spacing, since } => write!(
                f,
                "the previous change was {} ago; changes that are not a failover away from a down pool are spaced at least {} (max(2 x TTL, min_dwell))",
                humantime::format_duration(*since),
                humantime::format_duration(*spacing)
            ),
        }
    }
}

impl Violation {
    /// The metric label value.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::NoServingPool => "no_serving_pool",
            Self::NotHealthy { .. } => "not_healthy",
            Self::Spacing { .. } => "spacing",
        }
    }
}

/// What the rails look at.
#[derive(Debug)]
pub struct Plan<'a> {
    /// The pool serving now.
    pub current: Option<&'a PoolId>,
    /// The pool the candidate wants serving.
    pub candidate: Option<&'a PoolId>,
    /// Every pool's state.
    pub pools: &'a ByPool<PoolVerdict>,
    /// Drained pools.
    pub drained: &'a BTreeSet<PoolId>,
    /// When the record last changed, if known.
    pub last_change: Option<Millis>,
    /// `max(2 × TTL, min_dwell)`.
    pub spacing: Duration,
    /// Now.
    pub now: Millis,
}

/// Checks a switching plan (candidate differs from current). A plan that keeps the current
/// pool always passes: holding is what rails fall back to.
///
/// # Errors
/// The first rail broken, in the order: no serving pool, not healthy, spacing.
pub fn check(plan: &Plan<'_>) -> Result<(), Violation> {
    if plan.candidate == plan.current {
        return Ok(());
    }
    let Some(to) = plan.candidate else {
        return Err(Violation::NoServingPool);
    };
    let Some(state) = plan.pools.get(to) else {
        return Err(Violation::NoServingPool);
    };
    let away_from_down = plan
        .current
        .and_then(|c| plan.pools.get(c))
        .is_some_and(|c| c.verdict == Verdict::Unhealthy);
    // Moving onto a drained pool is allowed only away from a down pool: a real outage
    // outranks a drill.
    if plan.drained.contains(to) && !away_from_down {
        return Err(Violation::NoServingPool);
    }
    if state.verdict != Verdict::Healthy {
        return Err(Violation::NotHealthy {
            pool: to.clone(),
            verdict: state.verdict,
        });
    }
    if let Some(last) = plan.last_change {
        let since = plan.now.since(last);
        if !away_from_down && since < plan.spacing {
            return Err(Violation::Spacing {
                spacing: plan.spacing,
                since,
            });
        }
    }
    Ok(())
}
