//! `gslb plan` without a network: gathered reads and probe results made up, the plan and its
//! rendering checked (no change, a failover write, drills of the state file).

use std::path::Path;
use std::time::Duration;

use gslb_provider::ObservedPool;

use super::*;
use gslb_core::engine::{OverrideAction, OverrideId};
use gslb_core::model::{ProbeReason, ServiceId, Verdict};

const NOW: Millis = Millis(1_800_000_000_000);

fn gathered(seoul_ok: bool) -> Gathered {
    gathered_with(
        |pool, ok| {
            if ok || pool != "seoul" {
                (ProbeReason::Ok, Some(200))
            } else {
                (ProbeReason::ConnectionRefused, None)
            }
        },
        seoul_ok,
    )
}

/// The example policy with each endpoint's probe result `result(pool, seoul_ok)`: its reason
/// and HTTP status.
fn gathered_with(
    result: impl Fn(&str, bool) -> (ProbeReason, Option<u16>),
    seoul_ok: bool,
) -> Gathered {
    let text = include_str!("../../../policies/api-seoul-tokyo.toml");
    let policy = gslb_core::policy::parse(Path::new("api.toml"), text).expect("valid");
    let pool = ObservedPool {
        enabled: true,
        version: Some("1".into()),
        healthy: None,
    };
    let outcome = |pool: &str| {
        let (reason, http_status) = result(pool, seoul_ok);
        ProbeOutcome {
            success: reason == ProbeReason::Ok,
            duration: Duration::from_millis(5),
            http_status,
            reason,
            dns_lookup: None,
            cert_expiry: None,
        }
    };
    let probes = policy
        .pools
        .iter()
        .flat_map(|p| p.endpoints.iter().map(move |e| (p, e)))
        .map(|(p, e)| (e.id.clone(), outcome(&p.id.0)))
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
            served: None,
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

/// The example policy's `body_contains = "ok"` against origins that answer 200
/// `{"status":"UP"}`: every endpoint answers and fails the body check. The plan names the text
/// the check expected and points at the check, not at this vantage point.
#[test]
fn when_only_the_body_check_fails_the_plan_points_at_the_check() {
    let g = gathered_with(|_, _| (ProbeReason::BodyMismatch, Some(200)), true);
    let v = VantageId("here".into());
    let mut plans = evaluate(vec![g], &EngineSettings::default(), vec![], &v, NOW, None);
    let mut out = Vec::new();
    render(&plans, &mut out).expect("renders");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(
        text.contains("body_mismatch 200 in 5 ms: the body lacks \"ok\" (probe.body_contains"),
        "{text}"
    );
    let check = text
        .find("  check failing: every endpoint answered")
        .unwrap_or_else(|| panic!("no check line: {text}"));
    let decision = text.find("  decision:").expect("a decision");
    assert!(check < decision, "the check comes first: {text}");
    assert!(
        text[check..].starts_with(
            "  check failing: every endpoint answered and none passed the check (the body \
             lacks \"ok\" (probe.body_contains, first 64 KiB read)): this vantage point \
             reaches the origins"
        ),
        "{text}"
    );
    let p = plans.pop().expect("one plan");
    assert_eq!(p.outcome, Outcome::NoChange, "fail static: {text}");
    // One origin down for another reason: no check line (the network may be at fault).
    let g = gathered_with(
        |pool, _| match pool {
            "seoul" => (ProbeReason::Timeout, None),
            _ => (ProbeReason::BodyMismatch, Some(200)),
        },
        true,
    );
    let mut out = Vec::new();
    render(
        &evaluate(vec![g], &EngineSettings::default(), vec![], &v, NOW, None),
        &mut out,
    )
    .expect("renders");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(!text.contains("check failing"), "{text}");
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

/// Binds `web` to a provider that cannot be read and every other service to an in-memory
/// provider serving its first pool.
struct OneUnreadable;

/// A provider whose every read fails (as an unreachable API would).
struct Unreadable;

impl Provider for Unreadable {
    fn name(&self) -> &'static str {
        "unreadable"
    }

    fn style(&self) -> FailoverStyle {
        FailoverStyle::Enablement
    }

    async fn observe(&self) -> Result<ObservedState, ProviderError> {
        Err(ProviderError::Transient("connection refused".into()))
    }

    async fn apply(&self, _plan: &Plan) -> Result<(), ProviderError> {
        Err(ProviderError::Transient("connection refused".into()))
    }
}

impl Bind for OneUnreadable {
    async fn bind(
        &self,
        policy: &Policy,
    ) -> Result<gslb_provider::AnyProvider, crate::cli::run::BoxError> {
        if policy.service.0 == "web" {
            return Ok(gslb_provider::AnyProvider::new(Arc::new(Unreadable)));
        }
        let refs: Vec<_> = policy
            .target
            .pool_refs()
            .into_iter()
            .map(|(_, r)| r)
            .collect();
        let memory = gslb_provider::MemoryProvider::new(FailoverStyle::Enablement, &refs);
        Ok(gslb_provider::AnyProvider::new(Arc::new(memory)))
    }
}

/// `api` and `web`, their endpoints closed loopback ports (probes are refused at once).
fn two_services() -> Vec<Policy> {
    ["api", "web"]
        .into_iter()
        .map(|service| {
            let text = include_str!("../../../policies/api-seoul-tokyo.toml")
                .replace("service = \"api\"", &format!("service = \"{service}\""))
                .replace("api.example.com", &format!("{service}.example.com"))
                .replace(
                    &format!("https://seoul.{service}.example.com:443"),
                    "http://127.0.40.1:9",
                )
                .replace(
                    &format!("https://tokyo.{service}.example.com:443"),
                    "http://127.0.40.2:9",
                );
            gslb_core::policy::parse(Path::new("p.toml"), &text).expect("valid")
        })
        .collect()
}

#[tokio::test]
async fn plan_over_two_services_with_one_unreadable_prints_both_and_exits_1() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("gslb.toml");
    std::fs::write(&file, "").expect("settings");
    let settings = Settings::load(&file).expect("defaults");
    let policies = two_services();
    let mut out = Vec::new();
    let summary = plan_all(&settings, &policies, &OneUnreadable, Some(1), &mut out)
        .await
        .expect("planned what it could");
    let text = String::from_utf8(out).expect("utf-8");
    assert_eq!(summary, Summary::Failed, "{text}");
    assert_eq!(summary.exit_code(), 1);
    let api = text
        .find("service api (api.example.com, memory):")
        .expect(&text);
    let web = text.find("service web (web.example.com):").expect(&text);
    assert!(api < web, "policy order: {text}");
    assert!(text[api..web].contains("would change:"), "{text}");
    assert!(
        text[web..].contains(
            "cannot plan: reading the provider of service web: transient provider failure: connection refused"
        ),
        "{text}"
    );
    let mut out = Vec::new();
    let e = run(&settings, &policies, &OneUnreadable, Some(1), &mut out)
        .await
        .expect_err("one service unreadable");
    assert_eq!(e.exit_code(), 1);
}

#[test]
fn the_summary_is_terraforms_detailed_exit_code() {
    let no_change = plan(true, vec![]);
    let changes = plan(false, vec![]);
    assert_eq!(
        Summary::of(std::slice::from_ref(&no_change), 0).exit_code(),
        0
    );
    assert_eq!(
        Summary::of(&[no_change.clone(), changes.clone()], 0).exit_code(),
        2
    );
    assert_eq!(Summary::of(&[changes], 1).exit_code(), 1);
    let broken = ServicePlan {
        outcome: Outcome::Error("no such pool".into()),
        ..no_change
    };
    assert_eq!(Summary::of(&[broken], 0).exit_code(), 1);
}

/// A plan as vantage point `here` of a cluster with `b` and `c`, whose published verdicts of
/// seoul are `b` and `c` (tokyo healthy), fresh when listed in `fresh`.
fn cluster_plan(seoul_ok: bool, b: Verdict, c: Verdict, fresh: &[&str]) -> ServicePlan {
    use crate::io::coordination::keys::VoteKey;
    let me = VantageId("here".into());
    let cluster: ClusterSettings = toml::from_str(
        "endpoints = [\"http://127.0.0.1:2379\"]\nvantages = [\"here\", \"b\", \"c\"]\n",
    )
    .expect("settings");
    let g = gathered(seoul_ok);
    let mut verdicts = Vec::new();
    for (peer, seoul) in [("b", b), ("c", c)] {
        for pool in g.policy.pools.iter() {
            let verdict = if pool.id.0 == "seoul" {
                seoul
            } else {
                Verdict::Healthy
            };
            let key = VoteKey {
                vantage: VantageId(peer.into()),
                service: ServiceId("api".into()),
                endpoint: pool.endpoints[0].id.clone(),
            };
            verdicts.push((key, verdict));
        }
    }
    let peers = votes::Peers {
        reachable: true,
        verdicts,
        fresh: fresh
            .iter()
            .map(|v| (VantageId((*v).into()), Duration::from_millis(400)))
            .collect(),
    };
    let settings = EngineSettings::default();
    let mut plans = evaluate_in(
        vec![g],
        &settings,
        vec![],
        (&me, Some((&cluster, &peers))),
        NOW,
        None,
    );
    let mut p = plans.pop().expect("one plan");
    if let Some(d) = &p.decision {
        p.votes = votes::lines(d, &peers, &me);
    }
    p
}

#[test]
fn in_a_cluster_one_vantage_point_alone_is_outvoted_and_the_votes_are_printed() {
    use gslb_core::model::Verdict::{Healthy, Unhealthy};
    let p = cluster_plan(false, Healthy, Healthy, &["b", "c"]);
    assert_eq!(p.outcome, Outcome::NoChange, "{:?}", p.decision);
    assert!(
        p.votes.contains(
            &"seoul: b healthy (fresh, heartbeat 0.4s ago), c healthy (fresh, heartbeat 0.4s ago), here unhealthy (this instance)".to_owned()
        ),
        "{:?}",
        p.votes
    );
    let mut text = Vec::new();
    render(&[p], &mut text).expect("render");
    let text = String::from_utf8(text).expect("utf-8");
    assert!(text.contains("  votes:\n    seoul: b healthy"), "{text}");

    let p = cluster_plan(false, Unhealthy, Healthy, &["b", "c"]);
    assert!(
        matches!(p.outcome, Outcome::Changes(_)),
        "two of three: {:?}",
        p.decision
    );

    // b's down vote is stale: too few fresh down votes, no failover; b shows stale.
    let p = cluster_plan(false, Unhealthy, Healthy, &["c"]);
    assert_eq!(p.outcome, Outcome::NoChange, "{:?}", p.decision);
    assert!(
        p.votes.iter().any(|l| l.contains("b unhealthy (stale)")),
        "{:?}",
        p.votes
    );
}
