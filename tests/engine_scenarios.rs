//! Engine scenarios with explicit time: rise/fall, failover, fail static, unknown evidence,
//! failback rules and minimum dwell. No clock, no I/O: every instant is given.

use std::path::Path;
use std::time::Duration;

use gslb::engine::{Decision, Engine, Rule};
use gslb::model::{EndpointId, Millis, Observation, PoolId, ProbeOutcome, ProbeReason, VantageId};
use gslb::policy::{self, Policy};

const SEOUL: &str = "https://seoul.api.example.com:443/api/v1/health";
const TOKYO: &str = "https://tokyo.api.example.com:443/api/v1/health";
const INTERVAL: u64 = 10_000;

fn policy(edit: impl Fn(String) -> String) -> Policy {
    let text = edit(include_str!("../policies/api-seoul-tokyo.toml").to_owned());
    policy::parse(Path::new("api.toml"), &text).expect("valid policy")
}

fn obs(endpoint: &str, at: u64, ok: bool) -> Observation {
    Observation {
        endpoint: EndpointId(endpoint.into()),
        vantage: VantageId("test".into()),
        at: Millis(at),
        outcome: ProbeOutcome {
            success: ok,
            duration: Duration::from_millis(20),
            http_status: ok.then_some(200),
            reason: if ok {
                ProbeReason::Ok
            } else {
                ProbeReason::Timeout
            },
        },
    }
}

/// Drives an engine one probe round at a time: each round probes both endpoints.
struct Sim {
    engine: Engine,
    now: u64,
    decisions: Vec<Decision>,
}

impl Sim {
    fn new(policy: Policy) -> Self {
        let mut engine = Engine::new(policy);
        engine.adopt(PoolId("seoul".into()));
        Self {
            engine,
            now: 0,
            decisions: Vec::new(),
        }
    }

    fn round(&mut self, seoul_ok: bool, tokyo_ok: bool) -> &Decision {
        self.now += INTERVAL;
        self.engine.observe(&obs(SEOUL, self.now, seoul_ok));
        self.engine.observe(&obs(TOKYO, self.now, tokyo_ok));
        let d = self.engine.decide(Millis(self.now));
        self.decisions.push(d);
        self.decisions.last().expect("just pushed")
    }

    fn switches(&self) -> usize {
        self.decisions.iter().filter(|d| d.switched()).count()
    }

    fn active(&self) -> &str {
        self.engine.active().map_or("", |p| p.0.as_str())
    }
}

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

#[test]
fn unknown_evidence_never_switches() {
    let mut engine = Engine::new(policy(|t| t));
    engine.adopt(PoolId("tokyo".into()));
    // Seoul (preferred) is healthy, tokyo has never been probed: unknown -> hold.
    engine.observe(&obs(SEOUL, 1_000, true));
    engine.observe(&obs(SEOUL, 2_000, true));
    let d = engine.decide(Millis(2_000));
    assert_eq!(d.rule, Rule::HoldUnknown);
    assert_eq!(d.active, Some(PoolId("tokyo".into())));
    assert!(!d.rule.pushes());
}

#[test]
fn stale_evidence_becomes_unknown_not_down() {
    let mut sim = Sim::new(policy(|t| t));
    sim.round(true, true);
    sim.round(true, true);
    // Nothing more arrives for longer than 3 intervals + timeout.
    let d = sim.engine.decide(Millis(sim.now + 3 * INTERVAL + 5_000));
    assert_eq!(d.rule, Rule::HoldUnknown);
    assert_eq!(
        d.pools[&PoolId("seoul".into())].verdict,
        gslb::model::Verdict::Unknown
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
fn auto_failback_waits_for_min_dwell() {
    let mut sim = Sim::new(policy(|t| {
        t.replace("failback = \"manual\"", "failback = \"auto\"")
            .replace("min_dwell = \"5m\"", "min_dwell = \"60s\"")
    }));
    sim.round(true, true);
    for _ in 0..3 {
        sim.round(false, true);
    }
    let switched_at = sim.now;
    assert_eq!(sim.active(), "tokyo");
    let mut failback_at = None;
    for _ in 0..20 {
        let d = sim.round(true, true).clone();
        if d.rule == Rule::Failback {
            failback_at = Some(sim.now);
            break;
        }
        assert!(
            matches!(d.rule, Rule::Dwell | Rule::Stay),
            "unexpected rule {:?}",
            d.rule
        );
    }
    let at = failback_at.expect("auto failback happens");
    assert!(
        at - switched_at >= 60_000,
        "failback after {} ms, min_dwell is 60 s",
        at - switched_at
    );
    assert_eq!(sim.active(), "seoul");
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
    let mut engine = Engine::new(policy(|t| t));
    engine.observe(&obs(TOKYO, 1_000, true));
    engine.observe(&obs(TOKYO, 2_000, true));
    assert_eq!(engine.decide(Millis(2_000)).rule, Rule::AwaitingEvidence);
    engine.observe(&obs(SEOUL, 3_000, true));
    engine.observe(&obs(SEOUL, 4_000, true));
    let d = engine.decide(Millis(4_000));
    assert_eq!(d.rule, Rule::ServePreferred);
    assert_eq!(d.active, Some(PoolId("seoul".into())));
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
