//! The write planner in simulated time: one Cloudflare-style binding of three pools, decisions
//! with explicit instants, no provider. Not pushed, in sync, write then drift, shadow, an
//! ignored drain of the fallback pool, an unbound pool.

use std::collections::BTreeSet;

use gslb_provider::{Change, ObservedPool};

use super::*;
use crate::engine::{PoolVerdict, Rule};

fn pools() -> ProviderPools {
    ProviderPools {
        service: ServiceId("web".into()),
        priority: vec!["p-ncp".into(), "p-gcp".into(), "p-aws".into()],
        refs: ByPool::from_iter([
            (PoolId("ncp".into()), "p-ncp".into()),
            (PoolId("gcp".into()), "p-gcp".into()),
            (PoolId("aws".into()), "p-aws".into()),
        ]),
    }
}

/// Cloudflare-like: served in order ncp, gcp, aws; aws the fallback pool.
fn observed() -> ObservedState {
    let pool = ObservedPool {
        enabled: true,
        version: None,
        healthy: None,
    };
    ObservedState {
        order: Some(pools().priority),
        pools: pools()
            .priority
            .into_iter()
            .map(|p| (p, pool.clone()))
            .collect(),
        fallback: Some("p-aws".into()),
        writer_epoch: None,
        served: None,
    }
}

fn decision(rule: Rule, active: &str, drained: &[&str]) -> Decision {
    let healthy = PoolVerdict {
        verdict: Verdict::Healthy,
        ..PoolVerdict::unknown(Millis(0))
    };
    Decision {
        service: ServiceId("web".into()),
        at: Millis(0),
        active: Some(PoolId(active.into())),
        previous: None,
        rule,
        blocked: None,
        drained: drained
            .iter()
            .map(|p| PoolId((*p).into()))
            .collect::<BTreeSet<_>>(),
        reasons: vec![],
        pools: pools()
            .refs
            .into_iter()
            .map(|(p, _)| (p, healthy.clone()))
            .collect(),
    }
}

fn planned(d: &Decision, shadow: bool, fight: &mut FightGuard) -> Planned {
    stamped(d, shadow, fight, &observed(), None)
}

/// [`planned`] against `observed`, as a cluster writer that wrote under `restamp`.
fn stamped(
    d: &Decision,
    shadow: bool,
    fight: &mut FightGuard,
    observed: &ObservedState,
    restamp: Option<u64>,
) -> Planned {
    let pools = pools();
    let request = Request {
        pools: &pools,
        style: FailoverStyle::Order,
        shadow,
        decision: Some(d),
        observed,
        restamp,
    };
    plan(&request, fight, Millis(0)).expect("plannable")
}

#[test]
fn a_late_write_of_an_older_epoch_is_stamped_again_even_when_it_matches() {
    let stay = decision(Rule::Stay, "ncp", &[]);
    let mut late = observed();
    late.writer_epoch = Some(12);
    let order = late.order.clone().expect("an order");
    let fight = &mut FightGuard::default();
    let Outcome::Write { plan, .. } = stamped(&stay, false, fight, &late, Some(15)).outcome else {
        panic!("the same order, written again under epoch 15")
    };
    assert_eq!(
        plan,
        vec![Change::SetOrder {
            from: order.clone(),
            to: order
        }]
    );
    // Its own stamp, a newer writer's, no stamp, or no epoch of its own: nothing to write.
    for (seen, mine) in [
        (Some(15), Some(15)),
        (Some(16), Some(15)),
        (None, Some(15)),
        (Some(12), None),
    ] {
        late.writer_epoch = seen;
        let outcome = stamped(&stay, false, &mut FightGuard::default(), &late, mine).outcome;
        assert_eq!(outcome, Outcome::InSync, "seen {seen:?}, mine {mine:?}");
    }
}

#[test]
fn a_hold_is_not_pushed_and_a_served_pool_is_in_sync() {
    let mut fight = FightGuard::default();
    let hold = decision(Rule::FailStatic, "gcp", &[]);
    assert_eq!(
        planned(&hold, false, &mut fight).outcome,
        Outcome::NotPushed
    );
    let stay = decision(Rule::Stay, "ncp", &[]);
    assert_eq!(planned(&stay, false, &mut fight).outcome, Outcome::InSync);
}

#[test]
fn a_failover_is_a_write_then_drift_once_written_and_shadow_writes_nothing() {
    let mut fight = FightGuard::default();
    let failover = decision(Rule::Failover, "gcp", &[]);
    let Outcome::Write {
        plan,
        desired,
        drift: false,
    } = planned(&failover, false, &mut fight).outcome
    else {
        panic!("a write")
    };
    assert!(matches!(&plan[..], [Change::SetOrder { to, .. }] if to[0] == "p-gcp"));
    fight.wrote(&desired);
    let again = planned(&failover, false, &mut fight).outcome;
    assert!(matches!(again, Outcome::Write { drift: true, .. }));
    let shadow = planned(&failover, true, &mut FightGuard::default()).outcome;
    assert_eq!(shadow, Outcome::Shadow(plan));
}

#[test]
fn a_drain_of_the_fallback_pool_is_ignored_and_named_by_its_pool() {
    let d = decision(Rule::Drain, "ncp", &["aws"]);
    let p = planned(&d, false, &mut FightGuard::default());
    assert_eq!(p.outcome, Outcome::InSync);
    let note = p.ignored_drain.expect("ignored");
    assert!(note.starts_with("drain of pool aws ignored"), "{note}");
}

#[test]
fn a_pool_without_a_provider_pool_cannot_be_planned() {
    let (pools, observed) = (pools(), observed());
    let d = decision(Rule::Failover, "azure", &[]);
    let request = Request {
        pools: &pools,
        style: FailoverStyle::Order,
        shadow: false,
        decision: Some(&d),
        observed: &observed,
        restamp: None,
    };
    let e = plan(&request, &mut FightGuard::default(), Millis(0)).expect_err("unbound");
    assert!(matches!(e, ProviderError::Invalid(_)), "{e:?}");
}
