//! Property-based tests of the pure engine: random policies and random observation timelines
//! (three vantage points, outages, prober-side failures, ticks, drills, re-arms), checking the
//! invariants that make automated failover safe after every step.
//!
//! 10,000 cases by default (`PROPTEST_CASES` overrides).

use std::path::Path;
use std::time::Duration;

use gslb_core::engine::{
    Decision, Engine, EngineSettings, Input, OverrideAction, OverrideId, OverrideRequest, Rule,
};
use gslb_core::model::{
    EndpointId, Millis, Observation, PoolId, ProbeOutcome, ProbeReason, ServiceId, VantageId,
    Verdict,
};
use gslb_core::policy::{self, Policy};
use proptest::prelude::*;

const VANTAGES: [&str; 3] = ["a", "b", "c"];

#[derive(Debug, Clone)]
struct Params {
    pools: usize,
    fall: u32,
    rise: u32,
    auto: bool,
    burst: u32,
    refill_s: u64,
    min_dwell_s: u64,
    hold_s: u64,
}

fn params() -> impl Strategy<Value = Params> {
    (
        2usize..=2,
        1u32..=4,
        1u32..=3,
        any::<bool>(),
        1u32..=3,
        60u64..=1800,
        10u64..=300,
        10u64..=300,
    )
        .prop_map(
            |(pools, fall, rise, auto, burst, refill_s, min_dwell_s, hold_s)| Params {
                pools,
                fall,
                rise,
                auto,
                burst,
                refill_s,
                min_dwell_s,
                hold_s,
            },
        )
}

fn endpoint(i: usize) -> String {
    format!("https://p{i}.api.example.com/health")
}

fn make_policy(p: &Params) -> Policy {
    let mut text = format!(
        "service = \"api\"\nhostname = \"api.example.com\"\nfailback = \"{}\"\nmin_dwell = \"{}s\"\nfailback_hold = \"{}s\"\nfailback_hold_max = \"{}s\"\n\n[probe]\ninterval = \"10s\"\ntimeout = \"4s\"\n\n[health]\nfall = {}\nrise = {}\n\n[velocity]\nburst = {}\nrefill = \"{}s\"\n\n",
        if p.auto { "auto" } else { "manual" },
        p.min_dwell_s,
        p.hold_s,
        p.hold_s * 3,
        p.fall,
        p.rise,
        p.burst,
        p.refill_s,
    );
    for i in 0..p.pools {
        text.push_str(&format!(
            "[[pools]]\nname = \"p{i}\"\npriority = {}\nendpoints = [\"{}\"]\n\n",
            i + 1,
            endpoint(i)
        ));
    }
    if p.pools == 2 {
        text.push_str("[target.route53]\nhosted_zone_id = \"Z1\"\nttl = \"5s\"\n");
        for i in 0..p.pools {
            text.push_str(&format!(
                "[target.route53.pools.p{i}]\nvalues = [\"192.0.2.{}\"]\n",
                i + 1
            ));
        }
    } else {
        // Route 53 failover pairs have two pools; three pools go to a Cloudflare target.
        text.push_str(&format!(
            "[target.cloudflare]\naccount_id = \"{0}\"\nzone_id = \"{0}\"\nttl = \"5s\"\n",
            "0".repeat(32)
        ));
        for i in 0..p.pools {
            text.push_str(&format!(
                "[target.cloudflare.pools.p{i}]\npool_id = \"{:032x}\"\n",
                i + 1
            ));
        }
    }
    policy::parse(Path::new("generated.toml"), &text).expect("generated policies are valid")
}

#[derive(Debug, Clone)]
enum Event {
    /// Every vantage point probes every pool; `up[v][pool]` and a prober-side flag per vantage.
    Round {
        up: Vec<Vec<bool>>,
        prober_side: Vec<bool>,
    },
    Tick,
    Drill {
        action: u8,
        pool: usize,
        minutes: u64,
    },
    EndDrill {
        nth: usize,
    },
    Rearm,
}

fn event(pools: usize) -> impl Strategy<Value = Event> {
    prop_oneof![
        12 => (
            prop::collection::vec(prop::collection::vec(prop::bool::weighted(0.7), pools), VANTAGES.len()),
            prop::collection::vec(prop::bool::weighted(0.05), VANTAGES.len()),
        )
            .prop_map(|(up, prober_side)| Event::Round { up, prober_side }),
        2 => Just(Event::Tick),
        1 => (0u8..3, 0..pools, 1u64..=60).prop_map(|(action, pool, minutes)| Event::Drill { action, pool, minutes }),
        1 => (0usize..4).prop_map(|nth| Event::EndDrill { nth }),
        1 => Just(Event::Rearm),
    ]
}

fn case() -> impl Strategy<Value = (Params, Vec<(u64, Event)>)> {
    params().prop_flat_map(|p| {
        let pools = p.pools;
        (
            Just(p),
            prop::collection::vec((1u64..=60_000, event(pools)), 1..80),
        )
    })
}

fn observation(v: usize, pool: usize, at: u64, ok: bool, prober_side: bool) -> Observation {
    let reason = match (ok, prober_side) {
        (_, true) => ProbeReason::ResolverUnavailable,
        (true, false) => ProbeReason::Ok,
        (false, false) => ProbeReason::Timeout,
    };
    Observation {
        endpoint: EndpointId(endpoint(pool)),
        vantage: VantageId(VANTAGES[v].into()),
        at: Millis(at),
        outcome: ProbeOutcome {
            success: reason == ProbeReason::Ok,
            duration: Duration::from_millis(5),
            http_status: None,
            dns_lookup: None,
            cert_expiry: None,
            reason,
        },
    }
}

/// Checks every invariant on one evaluated decision.
fn check(d: &Decision, drills_active: bool) -> Result<(), TestCaseError> {
    let active = d
        .active
        .as_ref()
        .ok_or_else(|| TestCaseError::fail("no serving pool"))?;
    prop_assert!(
        !d.drained.contains(active),
        "the serving pool is drained: {d:?}"
    );
    let verdict = |p: &PoolId| d.pools.get(p).map_or(Verdict::Unknown, |s| s.verdict);
    let any_other_healthy = d
        .pools
        .iter()
        .any(|(p, s)| p != active && s.verdict == Verdict::Healthy);
    if !drills_active && !matches!(d.rule, Rule::VelocityLimited | Rule::ConfirmTarget) {
        prop_assert!(
            !(verdict(active) == Verdict::Unhealthy && any_other_healthy),
            "serves {active}, down by quorum, while another pool is healthy: {:?} {:?}",
            d.rule,
            d.reasons
        );
    }
    if d.switched() {
        prop_assert_eq!(
            verdict(active),
            Verdict::Healthy,
            "switched to a pool that is not healthy: {:?}",
            d.reasons
        );
        if d.rule == Rule::Failover {
            let from = d.previous.as_ref().map(verdict);
            prop_assert_eq!(
                from,
                Some(Verdict::Unhealthy),
                "failover away from a pool not down"
            );
        }
        prop_assert!(
            d.pools.values().any(|s| s.verdict != Verdict::Unknown),
            "a switch on unknown-only evidence"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(10_000),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn engine_invariants_hold((p, timeline) in case()) {
        let policy = make_policy(&p);
        let service = ServiceId("api".into());
        let refill = p.refill_s * 1_000;
        let mut engine = Engine::new(vec![policy], &EngineSettings::default());
        let mut now = 1_000u64;
        engine.step(Millis(now), &Input::Adopt { service: service.clone(), pool: Some(PoolId("p0".into())) });
        // Automatic switch times since the last re-arm, for the velocity budget.
        let mut automatic: Vec<u64> = Vec::new();
        let mut ids = Vec::new();
        let mut last_expiry = 0;
        for (n, (dt, ev)) in timeline.into_iter().enumerate() {
            now += dt;
            let inputs: Vec<Input> = match ev {
                Event::Round { up, prober_side } => up
                    .iter()
                    .enumerate()
                    .flat_map(|(v, pools)| {
                        let ps = prober_side[v];
                        pools.iter().enumerate().map(move |(i, ok)| (v, i, *ok, ps))
                    })
                    .map(|(v, i, ok, ps)| Input::Observe { service: service.clone(), observation: observation(v, i, now, ok, ps) })
                    .collect(),
                Event::Tick => vec![Input::Tick],
                Event::Drill { action, pool, minutes } => {
                    let id = OverrideId(format!("d{n}"));
                    ids.push(id.clone());
                    last_expiry = last_expiry.max(now + minutes * 60_000);
                    vec![Input::AddOverride(OverrideRequest {
                        id,
                        service: service.clone(),
                        action: [OverrideAction::Drain, OverrideAction::Restore, OverrideAction::Force][action as usize],
                        pool: PoolId(format!("p{pool}")),
                        reason: "drill".into(),
                        actor: "prop".into(),
                        duration: Some(Duration::from_secs(minutes * 60)),
                    })]
                }
                Event::EndDrill { nth } => match ids.get(nth) {
                    Some(id) => vec![Input::EndOverride { id: id.clone(), actor: "prop".into(), reason: "done".into() }],
                    None => vec![Input::Tick],
                },
                Event::Rearm => {
                    automatic.clear();
                    vec![Input::Rearm { service: Some(service.clone()), actor: "prop".into(), reason: "test".into() }]
                }
            };
            for input in inputs {
                let out = engine.step(Millis(now), &input);
                let drills = !engine.overrides().is_empty() || out.overrides.iter().any(|c| matches!(c, gslb_core::engine::OverrideChange::Added(_)));
                for (d, _) in &out.decisions {
                    check(d, drills)?;
                    if d.switched() && d.rule.is_automatic() {
                        automatic.push(now);
                    }
                }
                prop_assert!(
                    engine.overrides().all().all(|o| o.expires.0 > now),
                    "an override outlived its expiry"
                );
            }
            // Switches per window never exceed the budget: burst + elapsed / refill.
            for (i, a) in automatic.iter().enumerate() {
                for (j, b) in automatic.iter().enumerate().skip(i) {
                    let allowed = u64::from(p.burst) + (b - a) / refill;
                    prop_assert!((j - i + 1) as u64 <= allowed, "{} switches in {} ms, budget {}", j - i + 1, b - a, allowed);
                }
            }
        }
        // Every override ends by its expiry.
        engine.step(Millis(last_expiry.max(now) + 1), &Input::Tick);
        prop_assert!(engine.overrides().all().all(|o| o.actor == "gslb"), "a drill outlived its expiry");
        let revert_expiry = engine.overrides().all().map(|o| o.expires.0).max().unwrap_or(0);
        engine.step(Millis(revert_expiry.max(last_expiry) + 1), &Input::Tick);
        prop_assert!(engine.overrides().is_empty(), "every override ends by its expiry");
    }
}
