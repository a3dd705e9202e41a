//! Engine scenarios with explicit time: rise/fall, failover, fail static, unknown evidence,
//! failback rules and spacing. No clock, no I/O: every instant is given.

mod support;

use gslb_core::engine::{Input, Rule};
use gslb_core::model::{Millis, PoolId, ProbeReason, Verdict};
use support::sim::{HERE, INTERVAL, SEOUL, Sim, TOKYO, obs, policy};

#[test]
fn one_failed_probe_causes_no_switch() {
    let mut sim = Sim::new(policy(|t| t));
    for _ in 0..3 {
        sim.round(true, true);
    }
    sim.round(false, true);
    for _ in 0..3 {
        sim.round(true, true);
    }
    assert_eq!(sim.switches(), 0);
    assert_eq!(sim.active(), "seoul");
}

#[test]
fn an_endpoint_alternating_pass_fail_causes_no_switch() {
    let mut sim = Sim::new(policy(|t| t));
    sim.round(true, true);
    sim.round(true, true);
    for i in 0..200 {
        sim.round(i % 2 == 1, true);
    }
    assert_eq!(sim.switches(), 0);
    assert_eq!(sim.active(), "seoul");
    assert_eq!(
        sim.decisions.last().expect("decisions").rule,
        Rule::Stay,
        "seoul stays healthy: never fall in a row"
    );
}

#[test]
fn fall_consecutive_failures_fail_over_with_reasons() {
    let mut sim = Sim::new(policy(|t| t));
    sim.round(true, true);
    sim.round(true, true);
    assert_eq!(sim.round(false, true).rule, Rule::Stay);
    assert_eq!(sim.round(false, true).rule, Rule::Stay);
    let d = sim.round(false, true).clone();
    assert_eq!(d.rule, Rule::Failover);
    assert_eq!(d.active, Some(PoolId("tokyo".into())));
    assert_eq!(d.previous, Some(PoolId("seoul".into())));
    let text = d.reasons.join("\n");
    assert!(
        text.contains("failed 3 consecutive probes (fall=3), last: timeout"),
        "{text}"
    );
    assert!(text.contains(SEOUL), "{text}");
    assert!(
        text.contains("failover from seoul to the most preferred healthy pool tokyo"),
        "{text}"
    );
}

#[test]
fn all_pools_down_fails_static_and_says_why() {
    let mut sim = Sim::new(policy(|t| t));
    sim.round(true, true);
    sim.round(true, true);
    for _ in 0..5 {
        sim.round(false, false);
    }
    let d = sim.decisions.last().expect("decisions");
    assert_eq!(d.rule, Rule::FailStatic);
    assert!(!d.rule.pushes(), "fail static must not push");
    assert_eq!(d.active, Some(PoolId("seoul".into())));
    assert!(
        d.reasons
            .last()
            .expect("reason")
            .contains("no pool is healthy, keeping seoul")
    );
    assert_eq!(sim.switches(), 0);
}

/// Issue 12: while this vantage point's own resolver fails, the evidence goes stale and the
/// reasons say why (every probe failed on the prober's side), not only "no result".
#[test]
fn evidence_stale_from_prober_side_failures_says_so() {
    let mut sim = Sim::new(policy(|t| t));
    sim.round(true, true);
    sim.round(true, true);
    let failing_from = sim.now + INTERVAL;
    for _ in 0..5 {
        sim.now += INTERVAL;
        sim.probe(HERE, SEOUL, ProbeReason::ResolverUnavailable);
        sim.probe(HERE, TOKYO, ProbeReason::ResolverUnavailable);
    }
    let reasons = sim.last().reasons.join("\n");
    assert!(
        reasons.contains(&format!(
            "every probe from here since {} failed on this vantage point's own side, last: \
             resolver_unavailable",
            Millis(failing_from).rfc3339()
        )),
        "{reasons}"
    );
    assert!(!reasons.contains("stale (no result for over"), "{reasons}");
    assert_eq!(sim.switches(), 0);
}

#[test]
fn unknown_evidence_never_switches() {
    let mut sim = Sim::with(vec![policy(|t| t)], &Default::default(), Some("tokyo"));
    // Seoul (preferred) is healthy, tokyo has never been probed: unknown -> hold.
    sim.now = 1_000;
    sim.probe(HERE, SEOUL, ProbeReason::Ok);
    sim.now = 2_000;
    sim.probe(HERE, SEOUL, ProbeReason::Ok);
    let d = sim.last();
    assert_eq!(d.rule, Rule::HoldUnknown);
    assert_eq!(d.active, Some(PoolId("tokyo".into())));
    assert!(!d.rule.pushes());
}

#[test]
fn stale_evidence_becomes_unknown_not_down() {
    let mut sim = Sim::new(policy(|t| t));
    sim.round(true, true);
    sim.round(true, true);
    // Nothing more arrives for longer than 3 intervals + timeout: unknown, and stale evidence
    // holds (issue 14): the last decision (stay) stands, and says so.
    let d = sim.tick_at(sim.now + 3 * INTERVAL + 5_000).clone();
    assert_eq!(d.rule, Rule::Stay);
    assert!(
        d.reasons.iter().any(|r| r.contains("stale evidence holds")),
        "{:?}",
        d.reasons
    );
    assert_eq!(d.pools[&PoolId("seoul".into())].verdict, Verdict::Unknown);
    assert!(
        d.reasons.join("\n").contains("stale (no result for over"),
        "{:?}",
        d.reasons
    );
    assert_eq!(sim.active(), "seoul");
}

#[test]
fn manual_failback_holds_on_the_standby() {
    let mut sim = Sim::new(policy(|t| t));
    sim.round(true, true);
    for _ in 0..3 {
        sim.round(false, true);
    }
    assert_eq!(sim.active(), "tokyo");
    for _ in 0..100 {
        sim.round(true, true);
    }
    let d = sim.decisions.last().expect("decisions");
    assert_eq!(d.rule, Rule::FailbackManual);
    assert_eq!(sim.active(), "tokyo");
    assert!(
        d.rule.pushes(),
        "holding a healthy standby is still enforced at the provider"
    );
}

#[test]
fn auto_failback_waits_for_the_failback_hold() {
    let mut sim = Sim::new(policy(|t| {
        t.replace("failback = \"manual\"", "failback = \"auto\"")
            .replace("min_dwell = \"5m\"", "min_dwell = \"60s\"")
    }));
    sim.round(true, true);
    for _ in 0..3 {
        sim.round(false, true);
    }
    assert_eq!(sim.active(), "tokyo");
    sim.round(true, true);
    sim.round(true, true);
    let healthy_at = sim.now;
    let mut failback_at = None;
    for _ in 0..60 {
        let d = sim.round(true, true).clone();
        if d.rule == Rule::Failback {
            failback_at = Some(sim.now);
            break;
        }
        assert_eq!(d.rule, Rule::FailbackHold, "{:?}", d.reasons);
    }
    let at = failback_at.expect("auto failback happens");
    assert!(
        at - healthy_at >= 300_000,
        "failback {} ms after seoul was healthy again; the hold after one failover is 5 min",
        at - healthy_at
    );
    assert_eq!(sim.active(), "seoul");
}

#[test]
fn the_failback_hold_grows_with_consecutive_failovers() {
    let mut sim = Sim::new(policy(|t| {
        t.replace("failback = \"manual\"", "failback = \"auto\"")
            .replace("min_dwell = \"5m\"", "min_dwell = \"60s\"")
            .replace("[health]", "[velocity]\nburst = 10\n\n[health]")
    }));
    // Two outages of seoul: the second failback waits 2 x 5 min.
    let mut waits = Vec::new();
    for _ in 0..2 {
        sim.round(true, true);
        for _ in 0..3 {
            sim.round(false, true);
        }
        assert_eq!(sim.active(), "tokyo");
        sim.round(true, true);
        sim.round(true, true);
        let healthy_at = sim.now;
        while sim.active() != "seoul" {
            sim.round(true, true);
            assert!(
                sim.now - healthy_at < 3_600_000,
                "no failback within an hour"
            );
        }
        waits.push(sim.now - healthy_at);
    }
    assert!(waits[0] >= 300_000 && waits[0] < 600_000, "{waits:?}");
    assert!(waits[1] >= 600_000, "{waits:?}");
}

#[test]
fn failover_away_from_a_down_pool_ignores_min_dwell() {
    let mut sim = Sim::new(policy(|t| {
        t.replace("failback = \"manual\"", "failback = \"auto\"")
            .replace("min_dwell = \"5m\"", "min_dwell = \"1h\"")
    }));
    sim.round(true, true);
    for _ in 0..3 {
        sim.round(false, true);
    }
    assert_eq!(sim.active(), "tokyo");
    // Seoul recovers, tokyo dies right after the first switch: no dwell on a failover.
    for _ in 0..3 {
        sim.round(true, false);
    }
    assert_eq!(sim.active(), "seoul");
    assert_eq!(sim.switches(), 2);
}

#[test]
fn without_adoption_the_engine_waits_for_preferred_evidence() {
    let mut sim = Sim::with(vec![policy(|t| t)], &Default::default(), None);
    for at in [1_000, 2_000] {
        sim.now = at;
        sim.probe(HERE, TOKYO, ProbeReason::Ok);
    }
    assert_eq!(sim.last().rule, Rule::AwaitingEvidence);
    for at in [3_000, 4_000] {
        sim.now = at;
        sim.probe(HERE, SEOUL, ProbeReason::Ok);
    }
    let d = sim.last();
    assert_eq!(d.rule, Rule::ServePreferred);
    assert_eq!(d.active, Some(PoolId("seoul".into())));
}

#[test]
fn before_adoption_nothing_is_decided() {
    let mut sim = Sim::with(vec![policy(|t| t)], &Default::default(), None);
    let service = sim.service.clone();
    // A fresh engine that has not been told what the provider serves decides nothing.
    let mut fresh = gslb_core::engine::Engine::new(vec![policy(|t| t)], &Default::default());
    let out = fresh.step(Millis(1), &Input::Tick);
    assert!(out.decisions.is_empty());
    sim.round(true, true);
    assert_eq!(sim.last().service, service);
}

#[test]
fn decisions_are_deterministic() {
    let run = || {
        let mut sim = Sim::new(policy(|t| t));
        for i in 0..50 {
            sim.round(i % 7 != 0 && i < 30, i % 5 != 0);
        }
        sim.decisions
    };
    assert_eq!(run(), run());
}

#[test]
fn an_unprobeable_primary_never_fails_over_nor_makes_the_vantage_point_suspect() {
    // Issue 12: an AAAA-only primary seen from a vantage point without IPv6. Not the origin's
    // fault and not the prober's health: no failover, no suspicion, and the decision says why.
    let mut sim = Sim::new(policy(|t| t));
    sim.round(true, true);
    sim.round(true, true);
    for _ in 0..15 {
        sim.now += INTERVAL;
        sim.probe(HERE, SEOUL, ProbeReason::Unprobeable);
        sim.probe(HERE, TOKYO, ProbeReason::Ok);
    }
    assert_eq!((sim.switches(), sim.active()), (0, "seoul"));
    let now = Millis(sim.now);
    let vantages = sim.engine.vantage_points(now);
    assert!(vantages.iter().all(|(_, s)| s.is_none()), "{vantages:?}");
    let reasons = sim.last().reasons.join("\n");
    assert!(reasons.contains("unprobeable from here since"), "{reasons}");
    assert!(!reasons.contains("no probe result yet"), "{reasons}");
}

/// Issue 14: when the serving pool goes down and the switch waits for a probe of its target to
/// pass (`confirm_target`), the engine asks for that probe at once (once per wait), and the
/// out-of-schedule result decides the failover: detection to decision is `fall × interval`
/// plus the confirmation probe, not one more interval for the target's next slot.
#[test]
fn a_switch_awaiting_confirmation_asks_for_the_target_at_once() {
    let mut sim = Sim::new(policy(|t| t));
    sim.round(true, true);
    sim.round(true, true);
    let fall = sim
        .engine
        .service(&sim.service)
        .map(|s| s.policy().thresholds.fall);
    let fall = fall.expect("the service");
    // Seoul's probes fail; tokyo's pass, 100 ms before seoul's in each interval, so its next
    // slot after seoul goes down is almost one interval away.
    for _ in 1..fall {
        sim.now += INTERVAL - 100;
        sim.probe(HERE, TOKYO, ProbeReason::Ok);
        sim.now += 100;
        sim.probe(HERE, SEOUL, ProbeReason::Timeout);
    }
    sim.now += INTERVAL - 100;
    sim.probe(HERE, TOKYO, ProbeReason::Ok);
    sim.now += 100;
    let down = sim.now;
    let out = sim.step(Input::Observe {
        service: sim.service.clone(),
        observation: support::sim::obs(HERE, SEOUL, down, ProbeReason::Timeout),
    });
    assert_eq!(
        sim.last().rule,
        Rule::ConfirmTarget,
        "{:?}",
        sim.last().reasons
    );
    let asked: Vec<_> = out
        .confirm
        .iter()
        .map(|c| (c.service.0.as_str(), c.pool.0.as_str()))
        .collect();
    assert_eq!(asked, [("api", "tokyo")]);
    // Another failing result while waiting: evaluated, not asked again.
    sim.now += 20;
    let out = sim.step(Input::Observe {
        service: sim.service.clone(),
        observation: support::sim::obs(HERE, SEOUL, sim.now, ProbeReason::Timeout),
    });
    assert_eq!(sim.last().rule, Rule::ConfirmTarget);
    assert!(out.confirm.is_empty(), "{:?}", out.confirm);
    // The out-of-schedule probe of tokyo passes 80 ms after seoul went down.
    sim.now = down + 80;
    sim.probe(HERE, TOKYO, ProbeReason::Ok);
    let d = sim.last();
    assert_eq!(d.rule, Rule::Failover, "{:?}", d.reasons);
    assert_eq!(d.at, Millis(down + 80));
    assert_eq!(sim.active(), "tokyo");
}

/// The `i`-th of `n` endpoints of `pool` in [`behind_policy`].
fn behind_endpoint(pool: &str, i: usize) -> String {
    format!("https://{pool}-{i}.api.example.com:443/api/v1/health")
}

/// The shipped policy with `n` endpoints in each pool.
fn behind_policy(n: usize) -> gslb_core::policy::Policy {
    let list = |pool: &str| {
        let urls: Vec<String> = (0..n)
            .map(|i| format!("\"{}\"", behind_endpoint(pool, i)))
            .collect();
        format!("endpoints = [{}]", urls.join(", "))
    };
    policy(|t| {
        t.replace(
            "endpoints = [\"https://seoul.api.example.com:443/api/v1/health\"]",
            &list("seoul"),
        )
        .replace(
            "endpoints = [\"https://tokyo.api.example.com:443/api/v1/health\"]",
            &list("tokyo"),
        )
    })
}

/// [`behind_policy`] with every endpoint healthy (two rounds of passes), and how long its
/// results stay fresh, in ms.
fn behind_sim(n: usize) -> (Sim, u64) {
    let mut sim = Sim::new(behind_policy(n));
    for _ in 0..2 {
        sim.now += INTERVAL;
        for i in 0..n {
            for pool in ["seoul", "tokyo"] {
                sim.probe(HERE, &behind_endpoint(pool, i), ProbeReason::Ok);
            }
        }
    }
    let service = sim.engine.services().next().expect("one service");
    let fresh = u64::try_from(service.policy().fresh_for().as_millis()).expect("small");
    (sim, fresh)
}

#[test]
fn a_controller_running_behind_does_not_re_decide_its_service_at_every_result() {
    // Issue 14: each result arrives after its endpoint's previous one went stale (rounds
    // longer than the freshness window, results spread over the round). While another fresh
    // healthy result holds each pool's view, a result turning fresh or stale cannot change
    // the decision: it must not cost a decision (O(endpoints) each), or a controller that
    // fell behind falls further behind.
    const N: usize = 20;
    let (mut sim, fresh) = behind_sim(N);
    assert_eq!(sim.last().rule, Rule::Stay);
    let round = fresh + INTERVAL / 2;
    let (rounds, results) = (5, 2 * N as u64);
    let from = sim.decisions.len();
    let start = sim.now;
    for k in 0..rounds * results {
        sim.now = start + round * (1 + k / results) + round * (k % results) / results;
        let (i, pool) = ((k / 2) as usize % N, ["seoul", "tokyo"][k as usize % 2]);
        sim.probe(HERE, &behind_endpoint(pool, i), ProbeReason::Ok);
    }
    let evaluated = &sim.decisions[from..];
    assert!(
        evaluated
            .iter()
            .all(|d| d.active == Some(PoolId("seoul".into()))),
        "late results never move the service"
    );
    assert!(
        evaluated.len() <= 3 * rounds as usize,
        "{} decisions for {} late results",
        evaluated.len(),
        rounds * results
    );
}

#[test]
fn results_already_stale_when_stepped_change_no_decision() {
    // Issue 14: an engine loop so far behind that each result is older than the freshness
    // window when it is stepped (and each endpoint's results are further apart than that, its
    // probe loop skipping slots). Such a result changes no vote as seen now, so it must cost
    // no decision: re-deciding at each one kept the loop behind for good.
    const N: usize = 20;
    let (mut sim, fresh) = behind_sim(N);
    let (round, delay) = (fresh + INTERVAL / 2, fresh + 1_000);
    // The evidence goes stale: one decision (the stale hold) at the first step after it.
    let start = sim.now;
    sim.now += delay;
    sim.step(Input::Tick);
    let from = sim.decisions.len();
    let results = 2 * N as u64;
    for k in 0..4 * results {
        let made = start + round * (1 + k / results) + round * (k % results) / results;
        sim.now = made + delay;
        let (i, pool) = ((k / 2) as usize % N, ["seoul", "tokyo"][k as usize % 2]);
        let observation = obs(HERE, &behind_endpoint(pool, i), made, ProbeReason::Ok);
        let service = sim.service.clone();
        sim.step(Input::Observe {
            service,
            observation,
        });
    }
    assert_eq!(
        sim.decisions.len(),
        from,
        "no decision for results stale when stepped"
    );
    assert_eq!(sim.active(), "seoul");
}
