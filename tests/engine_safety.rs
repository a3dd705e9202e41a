//! Issue 3's scenarios with explicit time: vantage-point quorum, suspect vantage points,
//! staleness, flap damping, velocity limits, drills with expiry, and replay.

mod support;

use gslb_core::engine::{Engine, EngineSettings, Input, OverrideAction, OverrideChange, Rule};
use gslb_core::model::{EndpointId, Millis, PoolId, ProbeReason, Verdict};
use support::sim::{HERE, INTERVAL, SEOUL, Sim, TOKYO, obs, policy};

fn pool(p: &str) -> PoolId {
    PoolId(p.into())
}

#[test]
fn one_of_three_vantage_points_cut_off_from_the_primary_does_not_fail_over() {
    let mut sim = Sim::new(policy(|t| t));
    let all_ok = [
        ("aws-seoul", true, true),
        ("gcp-tokyo", true, true),
        ("ncp", true, true),
    ];
    sim.round_from(&all_ok);
    sim.round_from(&all_ok);
    for _ in 0..20 {
        sim.round_from(&[
            ("aws-seoul", true, true),
            ("gcp-tokyo", false, true),
            ("ncp", true, true),
        ]);
    }
    let d = sim.last();
    assert_eq!(sim.switches(), 0);
    assert_eq!(sim.active(), "seoul");
    assert_eq!(d.rule, Rule::Stay);
    let seoul = &d.pools[&pool("seoul")];
    assert_eq!(seoul.verdict, Verdict::Healthy);
    assert_eq!(
        (seoul.votes.up, seoul.votes.down),
        (2, 1),
        "{:?}",
        seoul.votes
    );
}

#[test]
fn two_of_three_vantage_points_seeing_the_primary_down_fail_over() {
    let mut sim = Sim::new(policy(|t| t));
    let all_ok = [("a", true, true), ("b", true, true), ("c", true, true)];
    sim.round_from(&all_ok);
    sim.round_from(&all_ok);
    let mut rules = Vec::new();
    for _ in 0..4 {
        rules.push(
            sim.round_from(&[("a", false, true), ("b", false, true), ("c", true, true)])
                .rule,
        );
    }
    assert!(rules.contains(&Rule::Failover), "{rules:?}");
    assert_eq!(sim.active(), "tokyo");
}

#[test]
fn a_vantage_point_that_sees_everything_down_is_suspect_and_causes_no_failover() {
    let mut sim = Sim::new(policy(|t| t));
    let all_ok = [("a", true, true), ("b", true, true), ("c", true, true)];
    sim.round_from(&all_ok);
    sim.round_from(&all_ok);
    for _ in 0..6 {
        sim.round_from(&[("a", false, false), ("b", true, true), ("c", true, true)]);
    }
    assert_eq!(sim.switches(), 0);
    let suspects = sim.engine.vantage_points(Millis(sim.now));
    let a = suspects
        .iter()
        .find(|(v, _)| v.0 == "a")
        .and_then(|(_, s)| s.as_ref())
        .expect("a is suspect");
    assert_eq!(a.as_str(), "all_pools_down");
    assert!(suspects.iter().filter(|(_, s)| s.is_some()).count() == 1);
    let seoul = &sim.last().pools[&pool("seoul")];
    assert_eq!(seoul.votes.discounted, 1, "{:?}", seoul.votes);
    assert_eq!(seoul.verdict, Verdict::Healthy);
}

#[test]
fn a_single_vantage_point_that_loses_its_network_holds() {
    // Probes of both pools fail in the same rounds: the standby's next probe fails before
    // traffic could move, and then everything is down from here.
    let mut sim = Sim::new(policy(|t| t));
    sim.round(true, true);
    sim.round(true, true);
    let mut rules = Vec::new();
    for _ in 0..6 {
        rules.push(sim.round(false, false).rule);
    }
    assert_eq!(sim.switches(), 0, "{rules:?}");
    assert!(!rules.contains(&Rule::Failover));
    assert_eq!(sim.last().rule, Rule::FailStatic);
    assert!(!sim.last().rule.pushes());
    let suspects = sim.engine.vantage_points(Millis(sim.now));
    assert!(suspects[0].1.is_some(), "{suspects:?}");
}

#[test]
fn with_one_vantage_point_the_primary_going_dark_while_the_standby_answers_fails_over() {
    let mut sim = Sim::new(policy(|t| t));
    sim.round(true, true);
    sim.round(true, true);
    let mut rules = Vec::new();
    for _ in 0..4 {
        rules.push(sim.round(false, true).rule);
    }
    assert!(rules.contains(&Rule::Failover), "{rules:?}");
    assert_eq!(sim.active(), "tokyo");
    assert!(
        sim.engine.vantage_points(Millis(sim.now))[0].1.is_none(),
        "not suspect"
    );
}

#[test]
fn prober_side_failures_never_count_toward_fall_and_make_the_vantage_suspect() {
    let mut sim = Sim::new(policy(|t| t));
    sim.round(true, true);
    sim.round(true, true);
    for _ in 0..6 {
        sim.now += INTERVAL;
        sim.probe(HERE, SEOUL, ProbeReason::ResolverUnavailable);
        sim.probe(HERE, TOKYO, ProbeReason::ResolverUnavailable);
    }
    assert_eq!(sim.switches(), 0);
    let d = sim.last();
    assert_eq!(
        d.pools[&pool("seoul")].verdict,
        Verdict::Unknown,
        "stale, never down"
    );
    assert_eq!(d.rule, Rule::HoldUnknown);
    let (_, s) = &sim.engine.vantage_points(Millis(sim.now))[0];
    assert_eq!(s.as_ref().map(|s| s.as_str()), Some("prober_side_failures"));
}

#[test]
fn failing_canaries_discount_the_vantage_points_down_votes() {
    let canaries = ["tcp://192.0.2.53:53", "tcp://198.51.100.53:53"];
    let settings = EngineSettings {
        canaries: canaries.iter().map(|c| EndpointId((*c).into())).collect(),
        ..EngineSettings::default()
    };
    let mut sim = Sim::with(vec![policy(|t| t)], &settings, Some("seoul"));
    sim.round(true, true);
    sim.round(true, true);
    for _ in 0..6 {
        sim.now += INTERVAL;
        for canary in canaries {
            let observation = obs(HERE, canary, sim.now, ProbeReason::Timeout);
            sim.step(Input::Canary { observation });
        }
        sim.probe(HERE, SEOUL, ProbeReason::Timeout);
        sim.probe(HERE, TOKYO, ProbeReason::Ok);
    }
    assert_eq!(sim.switches(), 0);
    let d = sim.last();
    assert_eq!(d.rule, Rule::ProberSuspect, "{:?}", d.reasons);
    assert!(!d.rule.pushes());
    assert!(
        d.reasons.iter().any(|r| r.contains("canary")),
        "{:?}",
        d.reasons
    );
}

#[test]
fn a_stale_vantage_point_is_unknown_not_down() {
    let mut sim = Sim::new(policy(|t| t));
    sim.round_from(&[("a", true, true), ("b", true, true)]);
    sim.round_from(&[("a", true, true), ("b", true, true)]);
    // a goes silent; b sees seoul down. While a is fresh it is a tie (seoul stays healthy);
    // once a is stale its vote no longer counts at all, and b alone decides.
    for _ in 0..3 {
        sim.round_from(&[("b", false, true)]);
    }
    assert_eq!(sim.active(), "seoul", "a tie with a fresh healthy vote");
    for _ in 0..3 {
        sim.round_from(&[("b", false, true)]);
    }
    assert_eq!(sim.active(), "tokyo", "b is the only fresh voter");
    let mut sim = Sim::new(policy(|t| t));
    sim.round(true, true);
    sim.round(true, true);
    for _ in 0..2 {
        sim.round(false, true);
    }
    // Silence for longer than the freshness window: neither down nor healthy; stale evidence
    // holds, so the last decision (stay) stands and says why.
    let d = sim.tick_at(sim.now + 3 * INTERVAL + 5_000).clone();
    assert_eq!(d.pools[&pool("seoul")].verdict, Verdict::Unknown);
    assert_eq!(d.rule, Rule::Stay, "{:?}", d.reasons);
    assert!(
        d.reasons.iter().any(|r| r.contains("stale evidence holds")),
        "{:?}",
        d.reasons
    );
    assert_eq!(sim.switches(), 0);
}

/// Issue 14: a CPU-starved controller gets its results late, past the freshness window, and
/// ticks in between see the evidence stale. The last decision stands (no flip between
/// `hold_unknown` and `stay`, each of which was a changed decision sent to the reconciler),
/// and the stale results are counted.
#[test]
fn late_results_hold_the_last_decision_instead_of_flip_flopping() {
    let mut sim = Sim::new(policy(|t| t));
    sim.round(true, true);
    sim.round(true, true);
    assert_eq!(sim.last().rule, Rule::Stay);
    let from = sim.decisions.len();
    for _ in 0..20 {
        let d = sim.tick_at(sim.now + 4 * INTERVAL).clone();
        assert_eq!(d.pools[&pool("seoul")].verdict, Verdict::Unknown);
        let stale = sim.engine.service(&sim.service).map(|s| s.stale_evidence());
        assert_eq!(stale, Some(2), "seoul and tokyo from one vantage point");
        sim.round(true, true);
    }
    let rules: Vec<Rule> = sim.decisions[from..].iter().map(|d| d.rule).collect();
    let flips = rules.windows(2).filter(|w| w[0] != w[1]).count();
    assert_eq!(flips, 0, "{rules:?}");
    assert!(rules.iter().all(|r| *r == Rule::Stay), "{rules:?}");
    assert_eq!(sim.switches(), 0);
    assert_eq!(
        sim.engine.service(&sim.service).map(|s| s.stale_evidence()),
        Some(0),
        "fresh again"
    );
}

/// Issue 14: probes of healthy origins that time out while the controller is starved of CPU
/// come in as `late`. They are neither failures nor successes: no fall, no suspicion, no
/// decision change however long the starvation lasts (the evidence goes stale and the last
/// decision stands, counted); a real outage seen meanwhile (connection refused) still fails
/// over within `fall` probes.
#[test]
fn late_probes_change_no_decision_and_a_real_outage_still_fails_over() {
    let mut sim = Sim::new(policy(|t| t));
    sim.round(true, true);
    sim.round(true, true);
    assert_eq!(sim.last().rule, Rule::Stay);
    let from = sim.decisions.len();
    // Starved: most probes come back late, a few in time and passing; then only late ones
    // (permanent starvation) with ticks past the freshness window in between.
    for i in 0..40 {
        sim.now += INTERVAL;
        let seoul = if i % 5 == 4 && i < 20 {
            ProbeReason::Ok
        } else {
            ProbeReason::Late
        };
        sim.probe(HERE, SEOUL, seoul);
        sim.probe(HERE, TOKYO, ProbeReason::Late);
        if i % 4 == 3 {
            sim.tick_at(sim.now + 4 * INTERVAL);
        }
    }
    let rules: Vec<Rule> = sim.decisions[from..].iter().map(|d| d.rule).collect();
    assert!(!rules.is_empty(), "stale evidence is decided on");
    assert!(rules.iter().all(|r| *r == Rule::Stay), "{rules:?}");
    assert_eq!(sim.switches(), 0);
    let last = sim.last();
    assert_eq!(last.pools[&pool("seoul")].verdict, Verdict::Unknown);
    assert!(
        last.reasons
            .iter()
            .any(|r| r.contains("stale evidence holds")),
        "{:?}",
        last.reasons
    );
    assert_eq!(
        sim.engine.service(&sim.service).map(|s| s.stale_evidence()),
        Some(2),
        "visible: both endpoints' evidence is stale"
    );
    let vantages = sim.engine.vantage_points(Millis(sim.now));
    assert!(vantages.iter().all(|(_, s)| s.is_none()), "{vantages:?}");
    // Still starved (tokyo's probes late), seoul goes down for real: refused at once. With
    // tokyo unknown there is nowhere to go: fail static, nothing pushed.
    for _ in 0..3 {
        sim.now += INTERVAL;
        sim.probe(HERE, SEOUL, ProbeReason::ConnectionRefused);
        sim.probe(HERE, TOKYO, ProbeReason::Late);
    }
    assert_eq!(
        sim.last().rule,
        Rule::FailStatic,
        "{:?}",
        sim.last().reasons
    );
    assert_eq!(sim.switches(), 0);
    // Tokyo's probes get their time again: the outage fails over within `fall` rounds.
    let mut rounds = 0;
    while sim.active() == "seoul" && rounds < 3 {
        sim.now += INTERVAL;
        sim.probe(HERE, TOKYO, ProbeReason::Ok);
        sim.probe(HERE, SEOUL, ProbeReason::ConnectionRefused);
        rounds += 1;
    }
    assert_eq!(sim.active(), "tokyo", "{:?}", sim.last().reasons);
    assert_eq!(sim.switches(), 1);
}

#[test]
fn a_tie_between_vantage_points_keeps_the_current_verdict() {
    let mut sim = Sim::new(policy(|t| t));
    sim.round_from(&[("a", true, true), ("b", true, true)]);
    sim.round_from(&[("a", true, true), ("b", true, true)]);
    for _ in 0..5 {
        sim.round_from(&[("a", false, true), ("b", true, true)]);
    }
    assert_eq!(sim.last().pools[&pool("seoul")].verdict, Verdict::Healthy);
    assert_eq!(sim.switches(), 0);
}

#[test]
fn a_flapping_pool_is_damped_and_gets_no_failback_while_suppressed() {
    let mut sim = Sim::new(policy(|t| {
        t.replace("failback = \"manual\"", "failback = \"auto\"")
            .replace(
                "min_dwell = \"5m\"",
                "min_dwell = \"10s\"\nfailback_hold = \"30s\"\nfailback_hold_max = \"30s\"",
            )
            .replace("ttl = \"60s\"", "ttl = \"5s\"")
            .replace("[health]", "[velocity]\nburst = 100\n\n[health]")
    }));
    sim.round(true, true);
    sim.round(true, true);
    // Seoul flaps: down for 4 rounds, up for 8, over and over.
    let mut suppressed_at = None;
    for _ in 0..10 {
        for _ in 0..4 {
            sim.round(false, true);
        }
        for _ in 0..8 {
            let d = sim.round(true, true).clone();
            if d.rule == Rule::Suppressed && suppressed_at.is_none() {
                suppressed_at = Some(sim.now);
            }
        }
        if suppressed_at.is_some() {
            break;
        }
    }
    let at = suppressed_at.expect("damping suppresses the flapping pool");
    assert_eq!(sim.active(), "tokyo");
    let seoul = sim.last().pools[&pool("seoul")].clone();
    assert!(seoul.suppressed && seoul.penalty > 750, "{seoul:?}");
    // Seoul stays healthy: no failback until the penalty decays below reuse (750).
    let mut back = None;
    while back.is_none() && sim.now - at < 3 * 3_600_000 {
        let d = sim.round(true, true).clone();
        if d.rule == Rule::Failback {
            back = Some((sim.now, d.pools[&pool("seoul")].penalty));
        } else {
            assert!(matches!(d.rule, Rule::Suppressed), "{:?}", d.rule);
        }
    }
    let (back_at, penalty) = back.expect("failback once the penalty decays");
    assert!(penalty < 750, "released at penalty {penalty}");
    assert!(back_at - at <= 3_600_000, "max suppress time is 60 min");
}

#[test]
fn three_outages_within_ten_minutes_hit_the_velocity_limit_and_a_rearm_releases() {
    let mut sim = Sim::new(policy(|t| t));
    sim.round(true, true);
    sim.round(true, true);
    let start = sim.now;
    // Outage 1: seoul.
    for _ in 0..3 {
        sim.round(false, true);
    }
    assert_eq!(sim.active(), "tokyo");
    sim.round(true, true);
    sim.round(true, true);
    // Outage 2: tokyo, traffic goes back to seoul.
    for _ in 0..3 {
        sim.round(true, false);
    }
    assert_eq!(sim.active(), "seoul");
    sim.round(true, true);
    sim.round(true, true);
    // Outage 3: seoul again, within 10 minutes: held.
    for _ in 0..3 {
        sim.round(false, true);
    }
    assert!(sim.now - start < 600_000);
    let d = sim.last().clone();
    assert_eq!(d.rule, Rule::VelocityLimited, "{:?}", d.reasons);
    assert_eq!(sim.active(), "seoul");
    let blocked = d.blocked.expect("records the blocked decision");
    assert_eq!((blocked.rule, blocked.to), (Rule::Failover, pool("tokyo")));
    assert_eq!(sim.switches(), 2);
    sim.rearm();
    assert_eq!(sim.last().rule, Rule::Failover);
    assert_eq!(sim.active(), "tokyo");
}

#[test]
fn a_drain_moves_traffic_and_its_expiry_reverts_through_the_rails() {
    let mut sim = Sim::new(policy(|t| t));
    sim.round(true, true);
    sim.round(true, true);
    let id = sim.drill(OverrideAction::Drain, "seoul", 30);
    let expires = sim.now + 30 * 60_000;
    let d = sim.last().clone();
    assert_eq!(d.rule, Rule::Drain);
    assert_eq!(sim.active(), "tokyo");
    assert!(d.drained.contains(&pool("seoul")));
    while sim.now + INTERVAL < expires {
        sim.round(true, true);
        assert_eq!(sim.active(), "tokyo");
    }
    sim.round(true, true);
    assert_eq!(sim.active(), "seoul", "the expiry reverted the drill");
    assert!(sim.last().drained.is_empty());
    let expired = sim
        .overrides
        .iter()
        .any(|c| matches!(c, OverrideChange::Expired(o) if o.id == id));
    assert!(expired, "{:?}", sim.overrides);
    assert!(
        sim.overrides
            .iter()
            .any(|c| matches!(c, OverrideChange::Completed(o) if o.pool == pool("seoul"))),
        "the revert restore completed"
    );
    assert!(sim.engine.overrides().is_empty(), "every override ended");
    // Velocity is for automatic switches: drills do not spend it.
    assert_eq!(
        sim.engine
            .service(&sim.service)
            .map(|s| s.velocity_available(Millis(sim.now))),
        Some(2)
    );
}

#[test]
fn a_drain_without_another_healthy_pool_holds() {
    let mut sim = Sim::new(policy(|t| t));
    sim.round(true, false);
    sim.round(true, false);
    for _ in 0..3 {
        sim.round(true, false);
    }
    sim.drill(OverrideAction::Drain, "seoul", 30);
    let d = sim.last();
    assert_eq!(d.rule, Rule::RailHold);
    assert_eq!(sim.active(), "seoul");
    assert!(d.drained.is_empty(), "the serving pool is never disabled");
}

#[test]
fn force_pins_a_healthy_pool_but_never_outranks_an_outage() {
    let mut sim = Sim::new(policy(|t| t));
    sim.round(true, true);
    sim.round(true, true);
    sim.drill(OverrideAction::Force, "tokyo", 60);
    assert_eq!(sim.last().rule, Rule::Force);
    assert_eq!(sim.active(), "tokyo");
    for _ in 0..3 {
        sim.round(true, false);
    }
    assert_eq!(
        sim.active(),
        "seoul",
        "tokyo down: failover despite the drill"
    );
}

#[test]
fn manual_failback_happens_by_restore() {
    let mut sim = Sim::new(policy(|t| t));
    sim.round(true, true);
    for _ in 0..3 {
        sim.round(false, true);
    }
    for _ in 0..40 {
        sim.round(true, true);
    }
    assert_eq!(sim.last().rule, Rule::FailbackManual);
    sim.drill(OverrideAction::Restore, "seoul", 60);
    assert_eq!(sim.last().rule, Rule::Restore);
    assert_eq!(sim.active(), "seoul");
    assert!(
        sim.engine.overrides().is_empty(),
        "a restore ends once its pool serves"
    );
}

#[test]
fn restored_overrides_decide_the_same_after_a_restart() {
    let mut sim = Sim::new(policy(|t| t));
    sim.round(true, true);
    sim.round(true, true);
    sim.drill(OverrideAction::Drain, "seoul", 60);
    let saved: Vec<_> = sim.engine.overrides().all().cloned().collect();
    // A restarted controller: adopts what the provider serves and reloads the state file.
    let mut again = Sim::with(
        vec![policy(|t| t)],
        &EngineSettings::default(),
        Some("tokyo"),
    );
    again.now = sim.now;
    again.step(Input::LoadOverrides {
        overrides: saved.clone(),
    });
    again.round(true, true);
    again.round(true, true);
    assert_eq!(again.active(), "tokyo");
    assert_eq!(again.last().drained, [pool("seoul")].into());
    assert_eq!(
        again.engine.overrides().all().cloned().collect::<Vec<_>>(),
        saved
    );
}

#[test]
fn replaying_the_recorded_steps_reproduces_the_decisions_exactly() {
    let mut sim = Sim::new(policy(|t| t));
    for i in 0..40 {
        sim.round_from(&[
            ("a", i % 9 != 0 && !(10..16).contains(&i), true),
            ("b", !(12..=20).contains(&i), i % 4 != 0),
        ]);
        if i == 25 {
            sim.drill(OverrideAction::Drain, "tokyo", 5);
        }
    }
    sim.tick_at(sim.now + 3_600_000);
    let text: String = sim
        .steps
        .iter()
        .map(|s| serde_json::to_string(s).expect("serialises") + "\n")
        .collect();
    let mut replay = Engine::new(vec![policy(|t| t)], &EngineSettings::default());
    let mut decisions = Vec::new();
    for line in text.lines() {
        let step: gslb_core::engine::Step = serde_json::from_str(line).expect("parses");
        let out = replay.step(step.at, &step.input);
        decisions.extend(out.decisions.into_iter().map(|(d, _)| d));
    }
    assert_eq!(decisions, sim.decisions);
    assert!(
        sim.decisions.iter().any(|d| d.switched()),
        "the recording has switches"
    );
}

#[test]
fn the_providers_own_health_counts_as_a_vote_only_when_asked() {
    let run = |provider_vote: bool| {
        let mut sim = Sim::new(policy(|t| {
            t.replace(
                "[health]",
                &format!("[quorum]\nprovider_vote = {provider_vote}\n\n[health]"),
            )
        }));
        sim.round(true, true);
        sim.round(true, true);
        for _ in 0..4 {
            let service = sim.service.clone();
            sim.step(Input::ProviderHealth {
                service,
                pool: pool("seoul"),
                healthy: true,
                fresh_for: std::time::Duration::from_secs(120),
            });
            sim.round(false, true);
        }
        sim.active().to_owned()
    };
    assert_eq!(
        run(true),
        "seoul",
        "one down vote against the provider's up vote: a tie holds"
    );
    assert_eq!(run(false), "tokyo");
}

#[test]
fn a_real_outage_outranks_a_drain_of_the_standby() {
    let mut sim = Sim::new(policy(|t| t));
    sim.round(true, true);
    sim.round(true, true);
    sim.drill(OverrideAction::Drain, "tokyo", 60);
    assert_eq!(sim.active(), "seoul");
    let mut rules = Vec::new();
    for _ in 0..4 {
        rules.push(sim.round(false, true).rule);
    }
    assert_eq!(sim.active(), "tokyo", "{rules:?}");
    let d = sim
        .decisions
        .iter()
        .find(|d| d.switched())
        .expect("a failover");
    assert_eq!(d.rule, Rule::Failover);
    assert!(
        d.reasons
            .last()
            .is_some_and(|r| r.contains("outranks the drill"))
    );
    assert!(d.drained.is_empty(), "the serving pool is never disabled");
}

#[test]
fn ending_a_drain_of_the_standby_adds_no_failback() {
    // Seoul is down for real; a drain of tokyo ends: no restore of seoul is queued, so when
    // seoul recovers, manual failback still holds.
    let mut sim = Sim::new(policy(|t| t));
    sim.round(true, true);
    sim.round(true, true);
    let id = sim.drill(OverrideAction::Drain, "tokyo", 60);
    for _ in 0..4 {
        sim.round(false, true);
    }
    assert_eq!(sim.active(), "tokyo");
    sim.step(Input::EndOverride {
        id,
        actor: "tester".into(),
        reason: "drill over".into(),
    });
    assert!(sim.engine.overrides().is_empty(), "{:?}", sim.overrides);
    for _ in 0..60 {
        sim.round(true, true);
    }
    assert_eq!(sim.active(), "tokyo");
    assert_eq!(sim.last().rule, Rule::FailbackManual);
}

#[test]
fn rearming_a_service_releases_a_controller_wide_hold() {
    let second = policy(|t| {
        t.replace("service = \"api\"", "service = \"web\"")
            .replace(
                "hostname = \"api.example.com\"",
                "hostname = \"web.example.com\"",
            )
            .replace(
                "record_name = \"api.example.com\"",
                "record_name = \"web.example.com\"",
            )
            .replace("seoul.api.", "seoul.web.")
            .replace("tokyo.api.", "tokyo.web.")
    });
    let settings = EngineSettings {
        global_velocity: Some((1, std::time::Duration::from_secs(600))),
        ..EngineSettings::default()
    };
    let mut sim = Sim::with(vec![policy(|t| t), second], &settings, Some("seoul"));
    let web = gslb_core::model::ServiceId("web".into());
    let web_seoul = "https://seoul.web.example.com:443/api/v1/health";
    let web_tokyo = "https://tokyo.web.example.com:443/api/v1/health";
    let probe_web = |sim: &mut Sim, seoul_ok: bool| {
        for (e, ok) in [(web_seoul, seoul_ok), (web_tokyo, true)] {
            let reason = if ok {
                ProbeReason::Ok
            } else {
                ProbeReason::Timeout
            };
            let observation = obs(HERE, e, sim.now, reason);
            sim.step(Input::Observe {
                service: web.clone(),
                observation,
            });
        }
    };
    for _ in 0..2 {
        sim.round(true, true);
        probe_web(&mut sim, true);
    }
    for _ in 0..4 {
        sim.round(false, true);
        probe_web(&mut sim, false);
    }
    assert_eq!(sim.active(), "tokyo", "the first service switched");
    let held = sim
        .decisions
        .iter()
        .rev()
        .find(|d| d.service == web)
        .expect("web decided");
    assert_eq!(held.rule, Rule::VelocityLimited, "{:?}", held.reasons);
    sim.step(Input::Rearm {
        service: Some(web.clone()),
        actor: "tester".into(),
        reason: "a real regional outage".into(),
    });
    let web_active = sim
        .engine
        .service(&web)
        .and_then(|s| s.active())
        .map(|p| p.0.clone());
    assert_eq!(web_active.as_deref(), Some("tokyo"));
}

#[test]
fn a_state_file_is_checked_like_requests_when_loaded() {
    let mut sim = Sim::new(policy(|t| t));
    let o = |id: &str, action, pool: &str, reason: &str, hours: u64| gslb_core::engine::Override {
        id: gslb_core::engine::OverrideId(id.into()),
        service: sim.service.clone(),
        action,
        pool: PoolId(pool.into()),
        reason: reason.into(),
        actor: "alice".into(),
        created: Millis(0),
        expires: Millis(hours * 3_600_000),
    };
    let saved = vec![
        o("ok", OverrideAction::Force, "tokyo", "drill", 1),
        o("second-force", OverrideAction::Force, "seoul", "drill", 1),
        o("drain-forced", OverrideAction::Drain, "tokyo", "drill", 1),
        o("no-reason", OverrideAction::Drain, "seoul", " ", 1),
        o("forever", OverrideAction::Drain, "seoul", "drill", 24 * 365),
    ];
    sim.step(Input::LoadOverrides { overrides: saved });
    let active: Vec<_> = sim
        .engine
        .overrides()
        .all()
        .map(|o| o.id.0.clone())
        .collect();
    assert_eq!(active, ["ok"]);
    let skipped = sim
        .overrides
        .iter()
        .filter(|c| matches!(c, OverrideChange::Skipped(_)))
        .count();
    assert_eq!(skipped, 4);
}

#[test]
fn drill_text_is_bounded_and_free_of_control_characters() {
    let mut sim = Sim::new(policy(|t| t));
    for (reason, actor) in [
        ("x".repeat(501), "alice".to_owned()),
        ("drill".to_owned(), "alice\n d-fake drain".to_owned()),
    ] {
        let out = sim.step(Input::AddOverride(gslb_core::engine::OverrideRequest {
            id: gslb_core::engine::OverrideId("d-x".into()),
            service: sim.service.clone(),
            action: OverrideAction::Drain,
            pool: pool("seoul"),
            reason,
            actor,
            duration: None,
        }));
        assert!(
            matches!(
                out.reply,
                Some(gslb_core::engine::Reply::Override(Err(
                    gslb_core::engine::OverrideError::BadText(_)
                )))
            ),
            "{:?}",
            out.reply
        );
    }
    assert!(sim.engine.overrides().is_empty());
}

/// Issue 12, part 1: a vantage point that lost its own network is suspect while everything
/// looks down from it; when its network returns, the standby's probes happen to pass first.
/// Leaving the suspect state must not switch by itself: the primary has not re-formed its
/// verdict (rise) yet, so nothing moves until it has, and then it stays.
#[test]
fn leaving_a_suspect_state_never_switches_by_itself() {
    let mut sim = Sim::new(policy(|t| t));
    sim.round(true, true);
    sim.round(true, true);
    for _ in 0..6 {
        sim.round(false, false);
    }
    assert_eq!(sim.last().rule, Rule::FailStatic);
    // The network is back: in each round the standby is probed before the primary.
    for _ in 0..4 {
        sim.now += INTERVAL;
        sim.probe(HERE, TOKYO, ProbeReason::Ok);
        sim.probe(HERE, SEOUL, ProbeReason::Ok);
    }
    let switched: Vec<_> = sim.decisions.iter().filter(|d| d.switched()).collect();
    assert!(
        switched.is_empty(),
        "a switch on leaving the suspect state: {:?}",
        switched.iter().map(|d| &d.reasons).collect::<Vec<_>>()
    );
    assert_eq!(sim.active(), "seoul");
    assert_eq!(sim.last().rule, Rule::Stay, "{:?}", sim.last().reasons);
    assert!(
        sim.engine.vantage_points(Millis(sim.now))[0].1.is_none(),
        "every pool re-formed its verdict: no longer suspect"
    );
}

/// Issue 12, part 1: after leaving the suspect state, a primary that is down for real still
/// fails over once its vantage point has re-formed every pool's verdict (fall probes).
#[test]
fn a_real_outage_found_after_a_suspect_state_still_fails_over() {
    let mut sim = Sim::new(policy(|t| t));
    sim.round(true, true);
    sim.round(true, true);
    for _ in 0..6 {
        sim.round(false, false);
    }
    let mut rules = Vec::new();
    for _ in 0..5 {
        sim.now += INTERVAL;
        sim.probe(HERE, TOKYO, ProbeReason::Ok);
        sim.probe(HERE, SEOUL, ProbeReason::Timeout);
        rules.push(sim.last().rule);
    }
    assert_eq!(sim.active(), "tokyo", "{rules:?}");
    let d = sim
        .decisions
        .iter()
        .find(|d| d.switched())
        .expect("a failover");
    assert_eq!(d.rule, Rule::Failover);
    assert!(
        d.reasons
            .iter()
            .any(|r| r.contains("failed 3 consecutive probes")),
        "{:?}",
        d.reasons
    );
}

/// Issue 12, part 4: a 2-minute drain of the primary (spacing 5 min: `min_dwell`) reverts at
/// its deadline: its expiry ends the drill's switch and is not a new switch for the spacing
/// rail.
#[test]
fn a_drills_expiry_reverts_at_its_deadline_despite_the_spacing_rail() {
    let mut sim = Sim::new(policy(|t| t));
    sim.round(true, true);
    sim.round(true, true);
    sim.drill(OverrideAction::Drain, "seoul", 2);
    let deadline = sim.now + 2 * 60_000;
    assert_eq!(sim.active(), "tokyo");
    while sim.now + INTERVAL < deadline {
        sim.round(true, true);
    }
    let d = sim.tick_at(deadline).clone();
    assert_eq!(sim.active(), "seoul", "{:?} {:?}", d.rule, d.reasons);
    assert_eq!(d.rule, Rule::Restore);
    assert!(sim.engine.overrides().is_empty(), "{:?}", sim.overrides);
}

/// A real outage outranks drills of every pool: with both pools drained and the serving pool
/// down, traffic fails over to the healthy one (the promise of `docs/drills.md`), not held on the down
/// pool by the rail that keeps a drained pool serving.
#[test]
fn a_real_outage_outranks_drains_of_every_pool() {
    let mut sim = Sim::new(policy(|t| t));
    sim.round(true, true);
    sim.round(true, true);
    sim.drill(OverrideAction::Drain, "tokyo", 60);
    sim.drill(OverrideAction::Drain, "seoul", 60);
    assert_eq!(sim.active(), "seoul", "both drained: seoul keeps serving");
    for _ in 0..6 {
        sim.round(false, true);
    }
    assert_eq!(sim.active(), "tokyo", "{:?}", sim.last().reasons);
    let d = sim
        .decisions
        .iter()
        .find(|d| d.switched())
        .expect("a failover");
    assert_eq!(d.rule, Rule::Failover);
    assert!(
        d.reasons
            .last()
            .is_some_and(|r| r.contains("outranks the drill")),
        "{:?}",
        d.reasons
    );
}

/// Shared safety state (`[cluster]`): the engine's snapshot after two automatic switches,
/// restored into a fresh engine (a restarted cluster, or a new writer), keeps the velocity
/// budget spent; without the restore the fresh engine would switch a third time.
#[test]
fn a_restored_safety_state_keeps_the_velocity_budget_spent_after_a_restart() {
    let mut sim = Sim::new(policy(|t| t));
    sim.round(true, true);
    sim.round(true, true);
    for _ in 0..3 {
        sim.round(false, true);
    }
    sim.round(true, true);
    sim.round(true, true);
    for _ in 0..3 {
        sim.round(true, false);
    }
    assert_eq!(sim.switches(), 2);
    let saved = sim.engine.service(&sim.service).expect("service").safety();
    let saved: gslb_core::engine::SafetyState =
        serde_json::from_value(serde_json::to_value(&saved).expect("json")).expect("back");
    for restore in [false, true] {
        let mut restarted = Sim::new(policy(|t| t));
        restarted.now = sim.now;
        if restore {
            restarted.step(Input::RestoreSafety {
                service: restarted.service.clone(),
                safety: saved.clone(),
            });
        }
        restarted.round(true, true);
        restarted.round(true, true);
        for _ in 0..3 {
            restarted.round(false, true);
        }
        let rule = restarted.last().rule;
        if restore {
            assert_eq!(rule, Rule::VelocityLimited, "the budget is still spent");
            assert_eq!(restarted.active(), "seoul");
        } else {
            assert_eq!(
                rule,
                Rule::Failover,
                "a fresh engine alone forgets the budget"
            );
        }
    }
}
