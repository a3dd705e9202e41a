//! Cluster votes in the pure engine, with simulated time: other vantage points' published
//! verdicts and heartbeats (recorded inputs), freshness on the reader's clock, `min_voters`,
//! and failing static while coordination is lost. Replaying the steps reproduces every
//! decision. A property test drives random heartbeats, verdicts, probes and coordination
//! changes and checks that no automatic switch happens on fewer than `min_voters` counted
//! votes, on a stale vote, or without coordination.

mod support;

use std::time::Duration;

use gslb_core::engine::{Engine, EngineSettings, Input, Rule, VantageVote};
use gslb_core::model::{EndpointId, Millis, PoolId, ServiceId, VantageId, Verdict};
use proptest::prelude::*;
use support::sim::{HERE, INTERVAL, SEOUL, Sim, TOKYO, policy};

/// Heartbeats keep a vantage point fresh for three probe intervals.
const FRESH_FOR: Duration = Duration::from_millis(3 * INTERVAL);

/// A sim whose engine is one of three vantage points (`test`, `b`, `c`), needing `min_voters`
/// votes, coordinated, with every peer heard from and healthy on both pools.
fn cluster(min_voters: u32) -> Sim {
    let mut sim = Sim::new(policy(|t| t));
    sim.step(Input::Cluster {
        local: VantageId(HERE.into()),
        vantages: [HERE, "b", "c"].map(|v| VantageId(v.into())).to_vec(),
        min_voters,
        fresh_for: FRESH_FOR,
    });
    sim.step(Input::Coordination { coordinated: true });
    for peer in ["b", "c"] {
        verdict(&mut sim, peer, SEOUL, Verdict::Healthy);
        verdict(&mut sim, peer, TOKYO, Verdict::Healthy);
    }
    sim
}

fn verdict(sim: &mut Sim, vantage: &str, endpoint: &str, verdict: Verdict) {
    sim.step(Input::RemoteVerdict {
        vantage: VantageId(vantage.into()),
        service: ServiceId("api".into()),
        endpoint: EndpointId(endpoint.into()),
        verdict,
    });
}

/// One probe round: `alive` peers send a heartbeat, then this vantage point probes.
fn round(sim: &mut Sim, alive: &[&str], seoul_ok: bool) -> Rule {
    for peer in alive {
        sim.step(Input::Heartbeat {
            vantage: VantageId((*peer).into()),
        });
    }
    sim.round(seoul_ok, true).rule
}

fn votes(sim: &Sim, pool: &str) -> Vec<(String, VantageVote)> {
    sim.last().pools[&PoolId(pool.into())]
        .by_vantage
        .iter()
        .map(|(v, vote)| (v.0.clone(), *vote))
        .collect()
}

fn seoul(sim: &Sim) -> Verdict {
    sim.last().pools[&PoolId("seoul".into())].verdict
}

#[test]
fn one_vantage_point_alone_seeing_a_pool_down_is_outvoted() {
    let mut sim = cluster(2);
    for _ in 0..6 {
        round(&mut sim, &["b", "c"], false);
    }
    assert_eq!(sim.switches(), 0, "{:?}", sim.last().reasons);
    assert_eq!(seoul(&sim), Verdict::Healthy);
    let counted = |verdict| VantageVote {
        verdict,
        counted: true,
    };
    assert_eq!(
        votes(&sim, "seoul"),
        vec![
            ("b".into(), counted(Verdict::Healthy)),
            ("c".into(), counted(Verdict::Healthy)),
            (HERE.into(), counted(Verdict::Unhealthy)),
        ],
        "the disagreement is visible"
    );
}

#[test]
fn two_of_three_seeing_it_fail_over_once() {
    let mut sim = cluster(2);
    round(&mut sim, &["b", "c"], true);
    verdict(&mut sim, "b", SEOUL, Verdict::Unhealthy);
    for _ in 0..4 {
        round(&mut sim, &["b", "c"], false);
    }
    assert_eq!(seoul(&sim), Verdict::Unhealthy);
    assert_eq!(sim.active(), "tokyo", "{:?}", sim.last().reasons);
    assert_eq!(sim.switches(), 1);
}

#[test]
fn two_peers_alone_can_see_a_pool_down() {
    let mut sim = cluster(2);
    verdict(&mut sim, "b", SEOUL, Verdict::Unhealthy);
    verdict(&mut sim, "c", SEOUL, Verdict::Unhealthy);
    for _ in 0..3 {
        round(&mut sim, &["b", "c"], true);
    }
    assert_eq!(sim.active(), "tokyo", "2 down of 3 fresh");
}

#[test]
fn stale_peers_votes_are_unknown_never_down() {
    let mut sim = cluster(2);
    verdict(&mut sim, "b", SEOUL, Verdict::Unhealthy);
    verdict(&mut sim, "c", SEOUL, Verdict::Unhealthy);
    // The peers' heartbeats stop before their down votes can count: three silent
    // intervals later their votes are stale, and this vantage point alone is not enough.
    for _ in 0..8 {
        round(&mut sim, &[], false);
    }
    assert_eq!(sim.switches(), 0, "{:?}", sim.last().reasons);
    assert_eq!(seoul(&sim), Verdict::Unknown, "too few fresh votes");
    let stale = |verdict| VantageVote {
        verdict,
        counted: false,
    };
    let v = votes(&sim, "seoul");
    assert_eq!(v[0], ("b".into(), stale(Verdict::Unhealthy)));
    assert!(
        sim.last()
            .reasons
            .iter()
            .any(|r| r.contains("b stale, c stale") && r.contains("needs 2 fresh voters")),
        "{:?}",
        sim.last().reasons
    );
}

#[test]
fn freshness_is_judged_on_the_readers_clock() {
    let mut sim = cluster(2);
    let heard = sim.now;
    round(&mut sim, &["b", "c"], true);
    let peers = |sim: &Sim| -> Vec<bool> {
        votes(sim, "seoul")
            .into_iter()
            .filter(|(n, _)| n != HERE)
            .map(|(_, v)| v.counted)
            .collect()
    };
    sim.tick_at(heard + FRESH_FOR.as_millis() as u64);
    assert_eq!(peers(&sim), [true, true], "fresh for exactly fresh_for");
    sim.tick_at(heard + FRESH_FOR.as_millis() as u64 + 1);
    assert_eq!(peers(&sim), [false, false], "stale one ms later");
}

#[test]
fn losing_coordination_fails_static() {
    let mut sim = cluster(2);
    round(&mut sim, &["b", "c"], true);
    sim.step(Input::Coordination { coordinated: false });
    verdict(&mut sim, "b", SEOUL, Verdict::Unhealthy);
    verdict(&mut sim, "c", SEOUL, Verdict::Unhealthy);
    for _ in 0..6 {
        round(&mut sim, &["b", "c"], false);
    }
    assert_eq!(sim.switches(), 0);
    assert_eq!(sim.active(), "seoul");
    assert_eq!(seoul(&sim), Verdict::Unknown);
    assert!(
        sim.last()
            .reasons
            .iter()
            .any(|r| r.contains("coordination lost: fail static")),
        "{:?}",
        sim.last().reasons
    );
    sim.step(Input::Coordination { coordinated: true });
    round(&mut sim, &["b", "c"], false);
    assert_eq!(sim.active(), "tokyo", "coordinated again, three down votes");
}

#[test]
fn alone_nothing_changes_and_remote_inputs_are_ignored() {
    let mut sim = Sim::new(policy(|t| t));
    verdict(&mut sim, "b", SEOUL, Verdict::Healthy);
    sim.step(Input::Heartbeat {
        vantage: VantageId("b".into()),
    });
    for _ in 0..4 {
        sim.round(false, true);
    }
    assert_eq!(sim.active(), "tokyo", "quorum of 1 of 1, as before");
    assert!(
        sim.last().pools[&PoolId("seoul".into())]
            .by_vantage
            .is_empty()
    );
}

#[test]
fn replaying_the_steps_reproduces_every_cluster_decision() {
    let mut sim = cluster(2);
    round(&mut sim, &["b", "c"], true);
    verdict(&mut sim, "b", SEOUL, Verdict::Unhealthy);
    for _ in 0..4 {
        round(&mut sim, &["b", "c"], false);
    }
    assert_eq!(sim.switches(), 1);
    let mut replay = Engine::new([policy(|t| t)], &EngineSettings::default());
    let mut decisions = Vec::new();
    for step in &sim.steps {
        let line = serde_json::to_string(step).expect("records");
        let back: gslb_core::engine::Step = serde_json::from_str(&line).expect("reads");
        let out = replay.step(back.at, &back.input);
        decisions.extend(out.decisions.into_iter().map(|(d, _)| d));
    }
    assert_eq!(decisions, sim.decisions);
}

/// One random event of the property test.
#[derive(Debug, Clone)]
enum Event {
    Heartbeat(usize),
    Verdict(usize, bool, Verdict),
    Probe(bool),
    Coordination(bool),
    Wait(u64),
}

fn event() -> impl Strategy<Value = Event> {
    let verdict = prop_oneof![
        Just(Verdict::Healthy),
        Just(Verdict::Unhealthy),
        Just(Verdict::Unknown)
    ];
    prop_oneof![
        4 => (0..2usize).prop_map(Event::Heartbeat),
        3 => (0..2usize, any::<bool>(), verdict).prop_map(|(p, s, v)| Event::Verdict(p, s, v)),
        4 => any::<bool>().prop_map(Event::Probe),
        1 => any::<bool>().prop_map(Event::Coordination),
        2 => (1..40_000u64).prop_map(Event::Wait),
    ]
}

#[test]
fn no_switch_without_enough_fresh_votes_or_coordination() {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(1_000);
    let strategy = (1..=3u32, prop::collection::vec(event(), 1..120));
    support::props::run("engine_cluster", cases, strategy, |(min_voters, events)| {
        let mut sim = cluster(min_voters);
        let peers = ["b", "c"];
        for e in events {
            let before = sim.decisions.len();
            match e {
                Event::Heartbeat(p) => {
                    sim.step(Input::Heartbeat {
                        vantage: VantageId(peers[p].into()),
                    });
                }
                Event::Verdict(p, s, v) => {
                    verdict(&mut sim, peers[p], if s { SEOUL } else { TOKYO }, v)
                }
                Event::Probe(ok) => {
                    sim.round(ok, true);
                }
                Event::Coordination(c) => {
                    sim.step(Input::Coordination { coordinated: c });
                }
                Event::Wait(ms) => {
                    sim.tick_at(sim.now + ms);
                }
            }
            let cluster = sim.engine.cluster().expect("cluster").clone();
            for d in &sim.decisions[before..] {
                if !(d.switched() && d.rule.is_automatic()) {
                    continue;
                }
                prop_assert!(
                    cluster.coordinated(),
                    "switched without coordination: {d:?}"
                );
                let from = d.previous.as_ref().expect("switched");
                let pool = &d.pools[from];
                let counted = pool.by_vantage.values().filter(|v| v.counted).count();
                prop_assert!(
                    counted as u32 >= min_voters,
                    "switched on {counted} counted votes, min_voters {min_voters}: {d:?}"
                );
                for (v, _) in pool
                    .by_vantage
                    .iter()
                    .filter(|(v, vote)| vote.counted && v.0 != HERE)
                {
                    let age = cluster.age(v, Millis(sim.now)).expect("heard from");
                    prop_assert!(age <= FRESH_FOR, "a stale vote of {v} counted");
                }
            }
        }
        Ok(())
    });
}
