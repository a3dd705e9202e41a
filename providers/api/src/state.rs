//! Desired and observed provider state, and the pure [`diff`] between them.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::ProviderError;

/// The provider's own name for a pool: a Route 53 set identifier, a Cloudflare pool id.
pub type PoolRef = String;

/// How a provider expresses which pool serves traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailoverStyle {
    /// The failover order is fixed at the provider (Route 53 PRIMARY/SECONDARY records); the
    /// first *enabled* pool in that order serves. gslb moves traffic by disabling every pool
    /// ranked above the one it wants active (Route 53: inverting that pool's verdict check).
    Enablement,
    /// The provider serves pools in an order gslb writes (Cloudflare `default_pools`); gslb
    /// moves traffic by putting the active pool first. Pools are disabled only by drains.
    Order,
}

/// What gslb wants the provider to do. Built by [`DesiredState::for_active`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DesiredState {
    /// Pools in the order traffic should prefer them, the active pool first.
    pub order: Vec<PoolRef>,
    /// Per pool: whether it may take traffic.
    pub enabled: BTreeMap<PoolRef, bool>,
}

impl DesiredState {
    /// The desired state that makes `active` serve.
    ///
    /// `priority` is the failover order of the policy (most preferred first) and must contain
    /// `active`; `drained` pools are disabled whatever the style.
    ///
    /// - [`FailoverStyle::Enablement`]: pools ranked above `active` are disabled, `active` and
    ///   the pools below it stay enabled (the standby keeps answering if `active` dies).
    /// - [`FailoverStyle::Order`]: `active` first, then the rest in priority order; only
    ///   drained pools are disabled.
    pub fn for_active(
        style: FailoverStyle,
        priority: &[PoolRef],
        active: &str,
        drained: &BTreeSet<PoolRef>,
    ) -> Self {
        let rank = priority.iter().position(|p| p == active);
        let mut order = vec![active.to_owned()];
        order.extend(priority.iter().filter(|p| *p != active).cloned());
        let enabled = priority
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let above_active =
                    style == FailoverStyle::Enablement && rank.is_some_and(|r| i < r);
                (p.clone(), !above_active && !drained.contains(p))
            })
            .collect();
        Self { order, enabled }
    }
}

/// One pool as the provider reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ObservedPool {
    /// Whether the provider lets this pool take traffic (Route 53: verdict check not inverted;
    /// Cloudflare: pool `enabled`).
    pub enabled: bool,
    /// The fence for a write to this pool: a Route 53 `HealthCheckVersion`, an opaque token
    /// otherwise. `None` when the provider has none.
    pub version: Option<String>,
    /// The provider's own health verdict of the pool, when it has one (Cloudflare: the pool's
    /// `healthy` from its monitors). `None` for Route 53, whose verdict checks gslb itself
    /// sets. Counted as a vote only when a policy asks (`quorum.provider_vote`).
    pub healthy: Option<bool>,
}

/// What the provider says it does now. Always the result of a fresh read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct ObservedState {
    /// The pool order the provider serves in, when gslb can write it
    /// ([`FailoverStyle::Order`]); `None` when the order is fixed at the provider.
    pub order: Option<Vec<PoolRef>>,
    /// Every pool the binding names.
    pub pools: BTreeMap<PoolRef, ObservedPool>,
    /// The pool the provider falls back to when every pool in `order` is down or disabled,
    /// without ever checking its health (Cloudflare `fallback_pool`); `None` when the provider
    /// has no such pool (Route 53). gslb never disables it and refuses a plan that would send
    /// traffic to it while its own probes say it is unhealthy.
    pub fallback: Option<PoolRef>,
    /// The epoch (fencing token) of the gslb writer that last wrote this binding, when the
    /// provider keeps one for gslb (Cloudflare: the `gslb-epoch=N` marker in the load
    /// balancer's `description`, see [`Provider::apply_as`](crate::Provider::apply_as));
    /// `None` when it keeps none or no cluster writer has written yet.
    pub writer_epoch: Option<u64>,
    /// What the provider's answers serve, when that is not the state it stores and gslb can
    /// see it: Route 53 data-plane mode stores only this instance's votes, while Route 53
    /// serves what its tally of every instance's votes says. `None` for a provider whose
    /// stored state is what it serves. The reconciler reports the decision applied only once
    /// this serves its pool and is [`Served::settled`].
    pub served: Option<Served>,
}

/// What a provider's answers serve, as gslb observes them (see [`ObservedState::served`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Served {
    /// The pool served.
    pub pool: PoolRef,
    /// Whether the provider has had time to act on what gslb observes: for Route 53's data
    /// plane, the answer has held for the checkers' share of a failover (`RequestInterval x
    /// FailureThreshold` plus one `RequestInterval`).
    pub settled: bool,
    /// Why, in the policy's words, for the status while it is not the decision's pool or not
    /// settled, e.g. "Route 53's tally serves seoul (seoul: 2 serve, 1 drain; tokyo: 3 serve)".
    pub why: String,
}

impl ObservedState {
    /// The pool the provider serves now, judged the way the provider does: the first enabled
    /// pool in its order (`order`, or `priority` when the order is fixed). When every pool is
    /// disabled, Route 53 answers with the PRIMARY ("last resort"), so the first pool is
    /// returned. `None` only when no pool is known.
    pub fn active<'a>(&'a self, priority: &'a [PoolRef]) -> Option<&'a PoolRef> {
        let order = self.order.as_deref().unwrap_or(priority);
        order
            .iter()
            .find(|p| self.pools.get(*p).is_some_and(|s| s.enabled))
            .or_else(|| order.first())
    }

    /// The state after `plan` is applied, as a provider that honours it would report it.
    /// Fences (versions) of changed pools move on. Used by the in-memory provider and tests.
    pub fn applied(&self, plan: &Plan) -> Self {
        let mut next = self.clone();
        for change in plan {
            match change {
                Change::SetOrder { to, .. } => next.order = Some(to.clone()),
                Change::SetEnabled { pool, enabled, .. } => {
                    if let Some(p) = next.pools.get_mut(pool) {
                        p.enabled = *enabled;
                        p.version = Some(bump(p.version.as_deref()));
                    }
                }
            }
        }
        next
    }
}

fn bump(version: Option<&str>) -> String {
    let n = version.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    (n + 1).to_string()
}

/// One write to a provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum Change {
    /// Write the serving order (Cloudflare `default_pools`).
    SetOrder {
        /// The order read before planning, for logs and fencing by read-back.
        from: Vec<PoolRef>,
        /// The order to write.
        to: Vec<PoolRef>,
    },
    /// Enable or disable one pool (Route 53: un-invert or invert its verdict check).
    SetEnabled {
        /// The pool.
        pool: PoolRef,
        /// The new value.
        enabled: bool,
        /// The fence read with the observed state; the write must fail if it moved.
        expected_version: Option<String>,
    },
}

/// For logs: `set order [tokyo, seoul] (was [seoul, tokyo])`, `disable seoul (version 1)`,
/// `enable tokyo`.
impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::SetOrder { from, to } => {
                write!(
                    f,
                    "set order [{}] (was [{}])",
                    to.join(", "),
                    from.join(", ")
                )
            }
            Self::SetEnabled {
                pool,
                enabled,
                expected_version,
            } => {
                write!(f, "{} {pool}", if *enabled { "enable" } else { "disable" })?;
                match expected_version {
                    Some(v) => write!(f, " (version {v})"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// An ordered list of changes; empty means "write nothing".
pub type Plan = Vec<Change>;

/// The changes that turn `observed` into `desired`. Pure: no I/O, deterministic order
/// (order first, then pools by name).
///
/// Pools are enabled before others are disabled, so a provider that applies the plan one
/// change at a time never passes through a state with fewer serving pools than both ends.
///
/// # Errors
/// [`ProviderError::NotFound`] when `desired` names a pool the provider did not report.
pub fn diff(desired: &DesiredState, observed: &ObservedState) -> Result<Plan, ProviderError> {
    let mut plan = Plan::new();
    if let Some(order) = observed.order.as_ref().filter(|o| **o != desired.order) {
        plan.push(Change::SetOrder {
            from: order.clone(),
            to: desired.order.clone(),
        });
    }
    let mut disables = Vec::new();
    for (pool, &want) in &desired.enabled {
        let seen = observed.pools.get(pool).ok_or_else(|| {
            ProviderError::NotFound(format!("pool {pool} is not at the provider"))
        })?;
        if seen.enabled != want {
            let change = Change::SetEnabled {
                pool: pool.clone(),
                enabled: want,
                expected_version: seen.version.clone(),
            };
            if want {
                plan.push(change)
            } else {
                disables.push(change)
            }
        }
    }
    plan.extend(disables);
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(names: &[&str]) -> Vec<PoolRef> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn observed(enabled: &[(&str, bool)], order: Option<&[&str]>) -> ObservedState {
        ObservedState {
            order: order.map(refs),
            pools: enabled
                .iter()
                .map(|(p, e)| {
                    (
                        p.to_string(),
                        ObservedPool {
                            enabled: *e,
                            version: Some("7".into()),
                            healthy: None,
                        },
                    )
                })
                .collect(),
            fallback: None,
            writer_epoch: None,
            served: None,
        }
    }

    #[test]
    fn enablement_disables_only_pools_above_active() {
        let prio = refs(&["seoul", "tokyo"]);
        let d =
            DesiredState::for_active(FailoverStyle::Enablement, &prio, "tokyo", &BTreeSet::new());
        assert!(!d.enabled["seoul"]);
        assert!(d.enabled["tokyo"]);
        let o = observed(&[("seoul", true), ("tokyo", true)], None);
        let plan = diff(&d, &o).unwrap();
        assert_eq!(
            plan,
            vec![Change::SetEnabled {
                pool: "seoul".into(),
                enabled: false,
                expected_version: Some("7".into())
            }]
        );
        assert_eq!(
            o.applied(&plan).active(&prio).map(String::as_str),
            Some("tokyo")
        );
        assert!(diff(&d, &o.applied(&plan)).unwrap().is_empty());
    }

    #[test]
    fn order_style_reorders_and_keeps_pools_enabled() {
        let prio = refs(&["ncp", "gcp"]);
        let d = DesiredState::for_active(FailoverStyle::Order, &prio, "gcp", &BTreeSet::new());
        assert_eq!(d.order, refs(&["gcp", "ncp"]));
        assert!(d.enabled.values().all(|e| *e));
        let o = observed(&[("ncp", true), ("gcp", true)], Some(&["ncp", "gcp"]));
        let plan = diff(&d, &o).unwrap();
        assert_eq!(plan.len(), 1);
        assert!(diff(&d, &o.applied(&plan)).unwrap().is_empty());
    }

    #[test]
    fn enables_come_before_disables() {
        let prio = refs(&["a", "b"]);
        let d = DesiredState::for_active(FailoverStyle::Enablement, &prio, "b", &BTreeSet::new());
        let o = observed(&[("a", true), ("b", false)], None);
        let plan = diff(&d, &o).unwrap();
        assert!(matches!(&plan[0], Change::SetEnabled { pool, enabled: true, .. } if pool == "b"));
        assert!(matches!(&plan[1], Change::SetEnabled { pool, enabled: false, .. } if pool == "a"));
    }

    #[test]
    fn missing_pool_is_not_found() {
        let prio = refs(&["a", "b"]);
        let d = DesiredState::for_active(FailoverStyle::Enablement, &prio, "a", &BTreeSet::new());
        let o = observed(&[("a", true)], None);
        assert!(matches!(diff(&d, &o), Err(ProviderError::NotFound(_))));
    }

    #[test]
    fn all_disabled_means_primary_serves_as_last_resort() {
        let prio = refs(&["a", "b"]);
        let o = observed(&[("a", false), ("b", false)], None);
        assert_eq!(o.active(&prio).map(String::as_str), Some("a"));
    }
}
