//! `gslb plan` without a network: gathered reads and probe results made up, the plan and its
//! rendering checked (no change, a failover write, drills of the state file).

use std::path::Path;
use std::time::Duration;

use gslb_provider::ObservedPool;

use super::*;
use gslb_core::engine::{OverrideAction, OverrideId};
use gslb_core::model::{ProbeReason, ServiceId};

const NOW: Millis = Millis(1_800_000_000_000);

fn gathered(seoul_ok: bool) -> Gathered {
    let text = include_str!("../../../policies/api-seoul-tokyo.toml");
    let policy = gslb_core::policy::parse(Path::new("api.toml"), text).expect("valid");
    let pool = ObservedPool {
        enabled: true,
        version: Some("1".into()),
        healthy: None,
    };
    let outcome = |ok: bool| ProbeOutcome {
        success: ok,
        duration: Duration::from_millis(5),
        http_status: ok.then_some(200),
        reason: if ok {
            ProbeReason::Ok
        } else {
            ProbeReason::ConnectionRefused
        },
        dns_lookup: None,
        cert_expiry: None,
    };
    let probes = policy
        .pools
        .iter()
        .flat_map(|p| p.endpoints.iter().map(move |e| (p, e)))
        .map(|(p, e)| (e.id.clone(), outcome(seoul_ok || p.id.0 != "seoul")))
        .collect();
    Gathered {
        policy,
        provider: "route53",
        style: FailoverStyle::Enablement,
        observed: ObservedState {
            order: None,
            pools: [("seoul".into(), pool.clone()), ("tokyo".into(), pool)].into(),
            fallback: None,
            writer_epoch: None,
        },
        probes,
    }
}

fn drain(expires: Millis) -> Override {
    Override {
        id: OverrideId("d-1".into()),
        service: ServiceId("api".into()),
        action: OverrideAction::Drain,
        pool: PoolId("seoul".into()),
        reason: "quarterly DR drill".into(),
        actor: "alice".into(),
        created: Millis(NOW.0 - 60_000),
        expires,
    }
}

fn plan(seoul_ok: bool, drills: Vec<Override>) -> ServicePlan {
    let v = VantageId("here".into());
    let settings = EngineSettings::default();
    let mut plans = evaluate(vec![gathered(seoul_ok)], &settings, drills, &v, NOW, None);
    plans.pop().expect("one plan")
}

#[test]
fn all_healthy_is_no_change() {
    let p = plan(true, vec![]);
    assert_eq!(p.serving, Some(PoolId("seoul".into())));
    assert_eq!(p.outcome, Outcome::NoChange);
}

#[test]
fn the_primary_down_for_fall_rounds_is_a_failover_write() {
    let p = plan(false, vec![]);
    let d = p.decision.expect("decided");
    assert_eq!(d.active, Some(PoolId("tokyo".into())), "{:?}", d.reasons);
    assert!(d.switched());
    let Outcome::Changes(changes) = p.outcome else {
        panic!("{:?}", p.outcome);
    };
    assert!(matches!(
        &changes[..],
        [Change::SetEnabled { pool, enabled: false, .. }] if pool == "seoul"
    ));
    let mut out = Vec::new();
    render(
        &[ServicePlan {
            outcome: Outcome::Changes(changes),
            decision: Some(d),
            ..plan(false, vec![])
        }],
        &mut out,
    )
    .expect("renders");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(text.contains("decision: failover -> tokyo"), "{text}");
    assert!(text.contains("connection_refused"), "{text}");
}

#[test]
fn an_active_drill_of_the_state_file_counts_and_an_expired_one_does_not() {
    let p = plan(true, vec![drain(Millis(NOW.0 + 600_000))]);
    assert_eq!(
        p.decision.as_ref().and_then(|d| d.active.clone()),
        Some(PoolId("tokyo".into()))
    );
    assert!(matches!(p.outcome, Outcome::Changes(_)), "{:?}", p.outcome);
    assert_eq!(plan(true, vec![drain(NOW)]).outcome, Outcome::NoChange);
}
