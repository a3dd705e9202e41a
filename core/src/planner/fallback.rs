//! The fallback-pool rules, each decided here once.
//!
//! Cloudflare sends traffic to its `fallback_pool` when every pool in `default_pools` is down
//! or disabled, and never health-checks it there. So:
//!
//! - [`spare`]: gslb never disables the fallback pool. A drain of it is dropped (the rest of
//!   the decision, e.g. a failover order, still applies, and the caller reports the ignored
//!   drain); a desired state that would still disable it (a provider that moves traffic by
//!   disabling the pools ranked above the active one) is refused, `fallback_disabled`.
//! - [`unhealthy`]: gslb never leads traffic to the fallback pool blind: a plan whose traffic
//!   would land on it while gslb's probes say it is unhealthy is refused, `fallback_unhealthy`.
//!
//! The adapter never sees gslb's verdicts; it only reports which pool is the fallback, in
//! [`ObservedState::fallback`].

use std::collections::{BTreeMap, BTreeSet};

use gslb_provider::{DesiredState, FailoverStyle, ObservedState, PoolRef};

use crate::model::Verdict;

/// Why a plan is refused, as a bounded metric label and a sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// `fallback_disabled` or `fallback_unhealthy`.
    pub code: &'static str,
    /// What was refused and why.
    pub reason: String,
}

/// The desired state that makes `active` serve under `style` in `priority` order with
/// `drained` disabled, sparing the provider's fallback pool (see the module docs). Returns it
/// with the fallback pool's ref when a drain of it was dropped.
///
/// # Errors
/// A [`Refusal`] (`fallback_disabled`) when the desired state disables the fallback pool even
/// without its drain.
pub fn spare(
    style: FailoverStyle,
    priority: &[PoolRef],
    active: &str,
    mut drained: BTreeSet<PoolRef>,
    observed: &ObservedState,
) -> Result<(DesiredState, Option<PoolRef>), Refusal> {
    let dropped = observed.fallback.clone().filter(|f| drained.remove(f));
    let desired = DesiredState::for_active(style, priority, active, &drained);
    match &observed.fallback {
        Some(fallback) if desired.enabled.get(fallback) == Some(&false) => Err(Refusal {
            code: "fallback_disabled",
            reason: format!(
                "the plan disables pool {fallback}, the load balancer's fallback pool: with \
                 every other pool down, nothing would answer; gslb never disables it"
            ),
        }),
        _ => Ok((desired, dropped)),
    }
}

/// The status note for a dropped drain of the fallback pool `pool` (the policy's name for it).
pub fn ignored_drain(pool: &str) -> String {
    format!(
        "drain of pool {pool} ignored: it is the load balancer's fallback pool, which gslb \
         never disables (with every other pool down, nothing would answer); the rest of the \
         decision is applied"
    )
}

/// Checks where traffic lands under `desired`: on the first pool in `desired.order` that is
/// enabled and not unhealthy; when there is none, on the provider's fallback pool. `verdicts`
/// are gslb's verdicts by provider pool ref; a pool without one counts as unknown. Returns a
/// refusal (`fallback_unhealthy`) when traffic would land on the fallback pool while its
/// verdict is unhealthy; `None` otherwise, and when the provider has no fallback pool.
pub fn unhealthy(
    desired: &DesiredState,
    observed: &ObservedState,
    verdicts: &BTreeMap<PoolRef, Verdict>,
) -> Option<Refusal> {
    let fallback = observed.fallback.as_ref()?;
    let verdict = |p: &PoolRef| verdicts.get(p).copied().unwrap_or(Verdict::Unknown);
    let lands_on_default = desired.order.iter().any(|p| {
        desired.enabled.get(p).copied().unwrap_or(true) && verdict(p) != Verdict::Unhealthy
    });
    if !lands_on_default && verdict(fallback) == Verdict::Unhealthy {
        return Some(Refusal {
            code: "fallback_unhealthy",
            reason: format!(
                "every pool in the plan is disabled or unhealthy, so traffic would go to the \
                 fallback pool {fallback}, which gslb's probes find unhealthy (the provider \
                 never health-checks its fallback pool); holding"
            ),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use gslb_provider::ObservedPool;

    use super::*;

    fn refs() -> Vec<PoolRef> {
        vec!["ncp".into(), "gcp".into()]
    }

    fn observed(fallback: &str) -> ObservedState {
        ObservedState {
            order: Some(refs()),
            pools: refs()
                .into_iter()
                .map(|p| {
                    (
                        p,
                        ObservedPool {
                            enabled: true,
                            version: None,
                            healthy: None,
                        },
                    )
                })
                .collect(),
            fallback: Some(fallback.into()),
            writer_epoch: None,
            served: None,
        }
    }

    fn verdicts(ncp: Verdict, gcp: Verdict) -> BTreeMap<PoolRef, Verdict> {
        BTreeMap::from([("ncp".into(), ncp), ("gcp".into(), gcp)])
    }

    #[test]
    fn refuses_to_disable_the_fallback_pool() {
        // Failing over by enablement disables the pools ranked above the active one: here the
        // fallback pool ncp.
        let r = spare(
            FailoverStyle::Enablement,
            &refs(),
            "gcp",
            BTreeSet::new(),
            &observed("ncp"),
        );
        assert_eq!(r.err().map(|r| r.code), Some("fallback_disabled"));
    }

    #[test]
    fn a_drain_of_the_fallback_pool_is_dropped_and_the_rest_applies() {
        let drained = BTreeSet::from(["gcp".to_owned()]);
        let (d, dropped) = spare(
            FailoverStyle::Order,
            &refs(),
            "gcp",
            drained,
            &observed("gcp"),
        )
        .expect("not refused");
        assert_eq!(dropped.as_deref(), Some("gcp"));
        assert_eq!(d.enabled.get("gcp"), Some(&true));
        assert_eq!(d.order, vec!["gcp".to_owned(), "ncp".to_owned()]);
    }

    #[test]
    fn refuses_traffic_landing_on_an_unhealthy_fallback() {
        let d = DesiredState::for_active(FailoverStyle::Order, &refs(), "gcp", &BTreeSet::new());
        let all_down = verdicts(Verdict::Unhealthy, Verdict::Unhealthy);
        let r = unhealthy(&d, &observed("gcp"), &all_down).expect("refused");
        assert_eq!(r.code, "fallback_unhealthy");
        assert!(r.reason.contains("fallback pool gcp"), "{}", r.reason);
        // A healthy default pool catches the traffic first: nothing to refuse.
        let ncp_up = verdicts(Verdict::Healthy, Verdict::Unhealthy);
        assert_eq!(unhealthy(&d, &observed("gcp"), &ncp_up), None);
        // Unknown is not evidence of anything.
        let unknown = verdicts(Verdict::Unhealthy, Verdict::Unknown);
        assert_eq!(unhealthy(&d, &observed("gcp"), &unknown), None);
        let mut no_fallback = observed("gcp");
        no_fallback.fallback = None;
        assert_eq!(unhealthy(&d, &no_fallback, &all_down), None);
    }
}
