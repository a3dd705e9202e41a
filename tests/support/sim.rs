//! A simulated-time harness around the pure engine: explicit instants, no clock, no I/O.

use std::path::Path;
use std::time::Duration;

use gslb_core::engine::{
    Decision, Engine, EngineSettings, Input, Output, OverrideAction, OverrideChange, OverrideId,
    OverrideRequest, Reply, Step,
};
use gslb_core::model::{
    EndpointId, Millis, Observation, PoolId, ProbeOutcome, ProbeReason, ServiceId, VantageId,
};
use gslb_core::policy::{self, Policy};

pub const SEOUL: &str = "https://seoul.api.example.com:443/api/v1/health";
pub const TOKYO: &str = "https://tokyo.api.example.com:443/api/v1/health";
/// The shipped policy's probe interval, in ms.
pub const INTERVAL: u64 = 10_000;
/// The vantage point of single-vantage scenarios.
pub const HERE: &str = "test";

/// The shipped api-seoul-tokyo policy, edited by `edit` (text replacements).
pub fn policy(edit: impl Fn(String) -> String) -> Policy {
    let text = edit(include_str!("../../policies/api-seoul-tokyo.toml").to_owned());
    policy::parse(Path::new("api.toml"), &text).expect("valid policy")
}

/// A probe result of `endpoint` from `vantage` at `at`.
pub fn obs(vantage: &str, endpoint: &str, at: u64, reason: ProbeReason) -> Observation {
    let ok = reason == ProbeReason::Ok;
    Observation {
        endpoint: EndpointId(endpoint.into()),
        vantage: VantageId(vantage.into()),
        at: Millis(at),
        outcome: ProbeOutcome {
            success: ok,
            duration: Duration::from_millis(20),
            http_status: ok.then_some(200),
            dns_lookup: None,
            cert_expiry: None,
            reason,
        },
    }
}

fn reason(ok: bool) -> ProbeReason {
    if ok {
        ProbeReason::Ok
    } else {
        ProbeReason::Timeout
    }
}

/// Drives an engine with explicit time and keeps every step and output.
pub struct Sim {
    pub engine: Engine,
    pub service: ServiceId,
    pub now: u64,
    /// Every decision evaluated, in order.
    pub decisions: Vec<std::sync::Arc<Decision>>,
    /// Every override change, in order.
    pub overrides: Vec<OverrideChange>,
    /// Every step fed, in order (a recording).
    pub steps: Vec<Step>,
    next_id: u32,
}

impl Sim {
    /// One service, default controller settings, the provider serving seoul.
    pub fn new(policy: Policy) -> Self {
        Self::with(vec![policy], &EngineSettings::default(), Some("seoul"))
    }

    /// `policies` (the first is the one `round` probes), `adopt` for every service.
    pub fn with(policies: Vec<Policy>, settings: &EngineSettings, adopt: Option<&str>) -> Self {
        let service = policies[0].service.clone();
        let ids: Vec<ServiceId> = policies.iter().map(|p| p.service.clone()).collect();
        let mut sim = Self {
            engine: Engine::new(policies, settings),
            service,
            now: 0,
            decisions: Vec::new(),
            overrides: Vec::new(),
            steps: Vec::new(),
            next_id: 0,
        };
        for id in ids {
            sim.step(Input::Adopt {
                service: id,
                pool: adopt.map(PoolId::from),
            });
        }
        sim
    }

    /// Feeds one input at `now`.
    pub fn step(&mut self, input: Input) -> Output {
        let step = Step {
            at: Millis(self.now),
            input,
        };
        let out = self.engine.step(step.at, &step.input);
        self.steps.push(step);
        self.decisions
            .extend(out.decisions.iter().map(|(d, _)| d.clone()));
        self.overrides.extend(out.overrides.iter().cloned());
        out
    }

    /// One probe result of the first service at `now`.
    pub fn probe(&mut self, vantage: &str, endpoint: &str, reason: ProbeReason) {
        let observation = obs(vantage, endpoint, self.now, reason);
        let service = self.service.clone();
        self.step(Input::Observe {
            service,
            observation,
        });
    }

    /// Advances one interval; `HERE` probes both pools.
    pub fn round(&mut self, seoul_ok: bool, tokyo_ok: bool) -> &Decision {
        self.round_from(&[(HERE, seoul_ok, tokyo_ok)])
    }

    /// Advances one interval; each vantage point probes both pools. Returns the round's
    /// switching decision if there was one, else its last decision, else (a steady decision
    /// is not evaluated again) the decision in force.
    pub fn round_from(&mut self, views: &[(&str, bool, bool)]) -> &Decision {
        self.now += INTERVAL;
        let first = self.decisions.len();
        for (v, seoul, tokyo) in views {
            self.probe(v, SEOUL, reason(*seoul));
            self.probe(v, TOKYO, reason(*tokyo));
        }
        let round = &self.decisions[first..];
        round
            .iter()
            .find(|d| d.switched())
            .or(round.last())
            .or(self.decisions.last())
            .expect("a decision was evaluated")
    }

    /// Advances to `at` and ticks.
    pub fn tick_at(&mut self, at: u64) -> &Decision {
        self.now = at;
        self.step(Input::Tick);
        self.last()
    }

    /// Starts a drill override lasting `minutes`.
    pub fn drill(&mut self, action: OverrideAction, pool: &str, minutes: u64) -> OverrideId {
        self.next_id += 1;
        let id = OverrideId(format!("d{}", self.next_id));
        let out = self.step(Input::AddOverride(OverrideRequest {
            id: id.clone(),
            service: self.service.clone(),
            action,
            pool: PoolId(pool.into()),
            reason: "quarterly DR drill".into(),
            actor: "tester".into(),
            duration: Some(Duration::from_secs(minutes * 60)),
        }));
        match out.reply {
            Some(Reply::Override(Ok(o))) => o.id,
            other => panic!("drill refused: {other:?}"),
        }
    }

    /// Re-arms the first service's velocity budget.
    pub fn rearm(&mut self) {
        let service = Some(self.service.clone());
        self.step(Input::Rearm {
            service,
            actor: "tester".into(),
            reason: "the outage is real".into(),
        });
    }

    /// The last decision evaluated.
    pub fn last(&self) -> &Decision {
        self.decisions.last().expect("a decision was evaluated")
    }

    /// The serving pool.
    pub fn active(&self) -> &str {
        self.engine
            .service(&self.service)
            .and_then(|s| s.active())
            .map_or("", |p| p.0.as_str())
    }

    /// How many decisions moved traffic.
    pub fn switches(&self) -> usize {
        self.decisions.iter().filter(|d| d.switched()).count()
    }
}
