//! The write planner: what a decision asks of a provider, or why nothing may be written.
//!
//! One pure function, [`plan`], shared by the reconciler and `gslb plan`: (the service's
//! [`ProviderPools`], the provider's [`FailoverStyle`], shadow mode, the [`Decision`], the
//! provider's observed state, the write-fight state, now) -> an [`Outcome`]: not pushed, in
//! sync, write, refused, stopped by a write fight, or shadow. Every refusal rule lives here
//! once: the fallback-pool rules in [`fallback`], write-fight detection in [`fight`].
//!
//! No I/O and no clock: the caller reads the provider and passes `now` in.

pub mod fallback;
pub mod fight;

use std::collections::BTreeMap;

use gslb_provider::{
    Change, DesiredState, FailoverStyle, ObservedState, Plan, PoolRef, ProviderError,
};

use crate::engine::Decision;
use crate::model::{ByPool, Millis, PoolId, ServiceId, Verdict};
use crate::policy::Policy;

pub use fallback::Refusal;
pub use fight::{FightCheck, FightGuard, WRITE_FIGHT_LIMIT, WRITE_FIGHT_WINDOW};

/// A service's pools as its provider names them (Route 53 set identifiers, Cloudflare pool
/// ids), in the policy's priority (failover) order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderPools {
    /// The service.
    pub service: ServiceId,
    /// Provider pool refs in the policy's priority order.
    pub priority: Vec<PoolRef>,
    /// gslb pool -> provider pool ref.
    pub refs: ByPool<PoolRef>,
}

impl ProviderPools {
    /// The pools a policy's target names, in the policy's priority order.
    pub fn of(policy: &Policy) -> Self {
        let refs: ByPool<PoolRef> = policy.target.pool_refs();
        Self {
            service: policy.service.clone(),
            priority: policy
                .pools
                .iter()
                .filter_map(|p| refs.get(&p.id).cloned())
                .collect(),
            refs,
        }
    }

    /// The gslb pool the provider serves in `observed`: what its answers serve when gslb can
    /// see it ([`ObservedState::served`]), else its stored state judged as the provider does.
    pub fn serving(&self, observed: &ObservedState) -> Option<PoolId> {
        let r = match &observed.served {
            Some(s) => &s.pool,
            None => observed.active(&self.priority)?,
        };
        self.pool_of(r).cloned()
    }

    /// Why the provider does not serve `decision` yet although it stores it: `Some` when
    /// `observed` says what its answers serve ([`ObservedState::served`]) and that is another
    /// pool than the decision's, or has not settled; `None` otherwise.
    pub fn awaiting(&self, decision: &Decision, observed: &ObservedState) -> Option<String> {
        let served = observed.served.as_ref()?;
        let wanted = self.refs.get(decision.active.as_ref()?)?;
        (served.pool != *wanted || !served.settled).then(|| served.why.clone())
    }

    /// The gslb pool that is the provider's fallback pool in `observed` (Cloudflare
    /// `fallback_pool`), which gslb never disables; `None` when there is none.
    pub fn fallback(&self, observed: &ObservedState) -> Option<PoolId> {
        self.pool_of(observed.fallback.as_ref()?).cloned()
    }

    /// The gslb pool a provider pool ref stands for.
    fn pool_of(&self, r: &PoolRef) -> Option<&PoolId> {
        self.refs.iter().find(|(_, v)| *v == r).map(|(k, _)| k)
    }
}

/// What [`plan`] is asked.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The service's pools at the provider.
    pub pools: &'a ProviderPools,
    /// How the provider expresses the serving pool.
    pub style: FailoverStyle,
    /// Shadow mode (`mode = "shadow"`): plan as usual, write nothing.
    pub shadow: bool,
    /// The latest decision; `None` before the first.
    pub decision: Option<&'a Decision>,
    /// The provider's state, read afresh.
    pub observed: &'a ObservedState,
    /// `[cluster]`: the epoch this instance has written under as the binding's writer, if it
    /// has. When the provider reports an older writer epoch
    /// ([`ObservedState::writer_epoch`]), a late write of a former writer landed after this
    /// writer's: the state is written again with this epoch's stamp even when it matches the
    /// decision (the same pool order, [`Change::SetOrder`] to itself). `None` alone, for a
    /// follower, and in `gslb plan`.
    pub restamp: Option<u64>,
}

/// What [`plan`] answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// What to do.
    pub outcome: Outcome,
    /// Set while the decision drains the provider's fallback pool, which gslb never disables:
    /// the drain is ignored and this says so (see [`fallback::ignored_drain`]). Always `None`
    /// when the outcome is [`Outcome::NotPushed`].
    pub ignored_drain: Option<String>,
}

/// What to do with a provider, in the order the rules are checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The decision pushes nothing (a hold, or no serving pool): write nothing.
    NotPushed,
    /// The provider already matches the decision (an empty plan): write nothing.
    InSync,
    /// A safety rule refuses the plan (see [`fallback`]): write nothing.
    Refused(Refusal),
    /// Another writer keeps reverting this state (see [`fight`]): write nothing before
    /// `until`. `declared` is true on the pass that declared the fight.
    Stopped {
        /// When writing this state may resume.
        until: Millis,
        /// Whether this pass declared the fight (report it once).
        declared: bool,
    },
    /// Shadow mode: this plan would be written; nothing is.
    Shadow(Plan),
    /// Write `plan`, which makes the provider match `desired`. `drift` is true when it
    /// re-applies a state gslb already wrote (another writer changed it since). Tell the
    /// fight guard once written ([`FightGuard::wrote`]).
    Write {
        /// The changes, in order.
        plan: Plan,
        /// The state the plan reaches.
        desired: DesiredState,
        /// Whether this re-applies a state gslb already wrote.
        drift: bool,
    },
}

/// Plans the writes `request.decision` asks of the provider at `now`; see the module docs.
/// `fight` is the binding's write-fight state (a fresh one when nothing was ever written).
///
/// # Errors
/// [`ProviderError::Invalid`] when the decision's pool has no provider pool;
/// [`ProviderError::NotFound`] when the provider did not report a pool of the binding.
pub fn plan(
    request: &Request<'_>,
    fight: &mut FightGuard,
    now: Millis,
) -> Result<Planned, ProviderError> {
    let Some((decision, active)) = request
        .decision
        .filter(|d| d.rule.pushes())
        .and_then(|d| Some((d, d.active.as_ref()?)))
    else {
        return Ok(Planned {
            outcome: Outcome::NotPushed,
            ignored_drain: None,
        });
    };
    let pools = request.pools;
    let Some(active_ref) = pools.refs.get(active) else {
        return Err(ProviderError::Invalid(format!(
            "pool {active} has no provider binding"
        )));
    };
    let drained = decision
        .drained
        .iter()
        .filter_map(|p| pools.refs.get(p).cloned())
        .collect();
    let observed = request.observed;
    let (desired, dropped) = match fallback::spare(
        request.style,
        &pools.priority,
        active_ref,
        drained,
        observed,
    ) {
        Ok(spared) => spared,
        Err(refusal) => {
            return Ok(Planned {
                outcome: Outcome::Refused(refusal),
                ignored_drain: None,
            });
        }
    };
    let ignored_drain = dropped.map(|f| {
        let name = pools.pool_of(&f).map_or(f.as_str(), |p| p.0.as_str());
        fallback::ignored_drain(name)
    });
    let mut plan = gslb_provider::diff(&desired, observed)?;
    if plan.is_empty()
        && let Some(order) = stale_stamp(request.restamp, observed)
    {
        plan.push(Change::SetOrder {
            from: order.clone(),
            to: order.clone(),
        });
    }
    let outcome = if plan.is_empty() {
        Outcome::InSync
    } else {
        guard(request, decision, plan, desired, fight, now)
    };
    Ok(Planned {
        outcome,
        ignored_drain,
    })
}

/// The order to write again when the provider carries an older writer's stamp than `restamp`
/// (see [`Request::restamp`]); `None` when it carries none, this one or a newer one, or has
/// no order gslb writes.
fn stale_stamp(restamp: Option<u64>, observed: &ObservedState) -> Option<&Vec<PoolRef>> {
    let (mine, seen) = (restamp?, observed.writer_epoch?);
    (seen < mine).then_some(observed.order.as_ref()?)
}

/// The rules for a non-empty `plan` towards `desired`, in order: the unhealthy-fallback
/// refusal, write-fight detection, shadow mode; else write.
fn guard(
    request: &Request<'_>,
    decision: &Decision,
    plan: Plan,
    desired: DesiredState,
    fight: &mut FightGuard,
    now: Millis,
) -> Outcome {
    let refs = &request.pools.refs;
    let verdicts: BTreeMap<PoolRef, Verdict> = decision
        .pools
        .iter()
        .filter_map(|(pool, v)| refs.get(pool).map(|r| (r.clone(), v.verdict)))
        .collect();
    if let Some(refusal) = fallback::unhealthy(&desired, request.observed, &verdicts) {
        return Outcome::Refused(refusal);
    }
    match fight.before_apply(&desired, now) {
        FightCheck::Stop { until, declared } => Outcome::Stopped { until, declared },
        FightCheck::Apply { .. } if request.shadow => Outcome::Shadow(plan),
        FightCheck::Apply { drift } => Outcome::Write {
            plan,
            desired,
            drift,
        },
    }
}

#[cfg(test)]
mod tests;
