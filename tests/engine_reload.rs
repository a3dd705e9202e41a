//! Policy reload in the pure engine, in simulated time: an unchanged service keeps all of its
//! state, a changed one starts fresh (awaiting the provider), a removed one is gone with its
//! drills; a recording with a reload step replays.

mod support;

use gslb_core::engine::{
    Engine, EngineSettings, Input, OverrideAction, OverrideChange, Rule, Step,
};
use gslb_core::model::{Millis, PoolId, ProbeReason, ServiceId};
use gslb_core::policy::{Policy, PolicyDiff};
use support::sim::{Sim, obs, policy};

fn web(edit: impl Fn(String) -> String) -> Policy {
    policy(|t| edit(t.replace("service = \"api\"", "service = \"web\"")))
}

/// `api` (probed by the sim) failed over to tokyo, spending velocity budget and starting its
/// spacing; `web` is another service with a drill.
fn failed_over() -> Sim {
    let mut sim = Sim::with(
        vec![policy(|t| t), web(|t| t)],
        &EngineSettings::default(),
        Some("seoul"),
    );
    sim.round(true, true);
    sim.round(true, true);
    for _ in 0..3 {
        sim.round(false, true);
    }
    assert_eq!(sim.active(), "tokyo");
    sim
}

/// Applies `policies` as the live controller does and records the step like the engine loop.
fn reload(sim: &mut Sim, policies: Vec<Policy>) -> Input {
    let at = Millis(sim.now);
    let current: Vec<Policy> = sim.engine.services().map(|s| s.policy().clone()).collect();
    let diff = PolicyDiff::new(&current, policies);
    let (input, out) = sim.engine.reload(at, &diff);
    sim.steps.push(Step {
        at,
        input: input.clone(),
    });
    sim.overrides.extend(out.overrides);
    input
}

fn budget(sim: &Sim, service: &str) -> u32 {
    sim.engine
        .service(&ServiceId(service.into()))
        .expect("service")
        .velocity_available(Millis(sim.now))
}

#[test]
fn an_unchanged_service_keeps_its_serving_pool_budget_and_evidence() {
    let mut sim = failed_over();
    let api = ServiceId("api".into());
    let before = budget(&sim, "api");
    let evidence_before = sim.engine.service(&api).expect("api").evidence().count();
    let input = reload(
        &mut sim,
        vec![policy(|t| t), web(|t| t.replace("rise = 2", "rise = 3"))],
    );
    assert_eq!(
        input,
        Input::Reload {
            reset: vec![ServiceId("web".into())],
            removed: vec![],
        }
    );
    let s = sim.engine.service(&api).expect("api kept");
    assert_eq!(
        s.active(),
        Some(&PoolId("tokyo".into())),
        "serving pool kept"
    );
    assert_eq!(s.velocity_available(Millis(sim.now)), before, "budget kept");
    assert_eq!(
        s.evidence().count(),
        evidence_before,
        "rise/fall evidence kept"
    );
    assert!(s.ready(), "no re-adoption needed");
    // Its rise/fall counts continue: seoul recovering needs `rise` more passes, not a restart
    // from unknown, and failback stays manual as before.
    let d = sim.round(true, true).clone();
    assert_eq!(d.active, Some(PoolId("tokyo".into())));
    assert_ne!(d.rule, Rule::HoldUnknown, "{:?}", d.reasons);
}

#[test]
fn a_changed_service_starts_fresh_and_waits_for_the_provider() {
    let mut sim = failed_over();
    let api = ServiceId("api".into());
    let input = reload(
        &mut sim,
        vec![policy(|t| t.replace("fall = 3", "fall = 4")), web(|t| t)],
    );
    assert_eq!(
        input,
        Input::Reload {
            reset: vec![api.clone()],
            removed: vec![],
        }
    );
    let s = sim.engine.service(&api).expect("api");
    assert_eq!(s.policy().thresholds.fall, 4, "the new policy is in force");
    assert!(!s.ready(), "awaits the provider's serving pool");
    assert_eq!(s.active(), None);
    assert_eq!(s.evidence().count(), 0, "fresh evidence");
    // Re-adoption of the provider's serving pool: traffic does not move because of a reload.
    sim.step(Input::Adopt {
        service: api.clone(),
        pool: Some(PoolId("tokyo".into())),
    });
    let d = sim.round(true, true).clone();
    assert_eq!(d.active, Some(PoolId("tokyo".into())));
    assert!(!d.switched(), "{:?}", d.reasons);
}

#[test]
fn a_removed_service_is_gone_with_its_drills() {
    let mut sim = failed_over();
    sim.service = ServiceId("web".into());
    let drill = sim.drill(OverrideAction::Drain, "seoul", 30);
    let input = reload(&mut sim, vec![policy(|t| t)]);
    assert_eq!(
        input,
        Input::Reload {
            reset: vec![],
            removed: vec![ServiceId("web".into())],
        }
    );
    assert!(sim.engine.service(&ServiceId("web".into())).is_none());
    assert_eq!(sim.engine.overrides().all().count(), 0);
    assert!(
        sim.overrides
            .iter()
            .any(|c| matches!(c, OverrideChange::Skipped(o) if o.id == drill)),
        "{:?}",
        sim.overrides
    );
    assert_eq!(
        sim.engine
            .service(&ServiceId("api".into()))
            .and_then(|s| s.active()),
        Some(&PoolId("tokyo".into()))
    );
}

#[test]
fn a_recording_with_a_reload_replays_to_the_same_decisions() {
    let mut sim = failed_over();
    let after = || vec![policy(|t| t), web(|t| t.replace("rise = 2", "rise = 3"))];
    reload(&mut sim, after());
    sim.step(Input::Adopt {
        service: ServiceId("web".into()),
        pool: Some(PoolId("seoul".into())),
    });
    for _ in 0..3 {
        sim.round(true, false);
    }
    let switches =
        |ds: &[std::sync::Arc<gslb_core::engine::Decision>]| -> Vec<(Millis, ServiceId, Option<PoolId>)> {
            ds.iter()
                .filter(|d| d.switched())
                .map(|d| (d.at, d.service.clone(), d.active.clone()))
                .collect()
        };
    let live = switches(&sim.decisions);
    assert_eq!(
        live.len(),
        2,
        "failover to tokyo, then back to seoul: {live:?}"
    );
    let text: String = sim
        .steps
        .iter()
        .map(|s| serde_json::to_string(s).expect("serialises") + "\n")
        .collect();
    assert!(text.contains(r#""input":"reload""#), "{text}");
    // Replayed with the policies in force after the reload (as `gslb replay --policy`).
    let replayed = gslb::cli::replay::replay(after(), &EngineSettings::default(), text.as_bytes())
        .expect("replays");
    assert_eq!(replayed.steps, sim.steps.len());
    let replayed: Vec<_> = replayed
        .decisions
        .into_iter()
        .map(std::sync::Arc::new)
        .collect();
    assert_eq!(switches(&replayed), live);
}

#[test]
fn a_service_whose_edit_only_touches_observe_or_rto_budget_keeps_its_state() {
    let mut sim = failed_over();
    let api = ServiceId("api".into());
    let before = budget(&sim, "api");
    let edited = policy(|t| {
        t.replace("interval = \"5s\"\nurl", "interval = \"2s\"\nurl")
            .replace("rto_budget = \"3m\"", "rto_budget = \"4m\"")
    });
    assert_ne!(edited.observe, policy(|t| t).observe, "the edit took");
    assert!(
        PolicyDiff::new(&[policy(|t| t), web(|t| t)], vec![edited.clone()])
            .changed
            .is_empty(),
        "the controller keeps its probes and reconciler"
    );
    let input = reload(&mut sim, vec![edited.clone(), web(|t| t)]);
    assert_eq!(
        input,
        Input::Reload {
            reset: vec![],
            removed: vec![],
        },
        "nothing the engine reads changed"
    );
    let s = sim.engine.service(&api).expect("api kept");
    assert_eq!(s.active(), Some(&PoolId("tokyo".into())));
    assert_eq!(s.velocity_available(Millis(sim.now)), before, "budget kept");
    assert_eq!(s.policy(), &edited, "the new [observe] is in force");
}

/// Every service's count of endpoints with evidence, by name.
fn evidence_counts(engine: &Engine) -> Vec<(String, usize)> {
    engine
        .services()
        .map(|s| (s.policy().service.0.clone(), s.evidence().count()))
        .collect()
}

/// Issue 14: service handles resolved before a reload that removes a service and adds another
/// (every slot after the removed one moves) never attribute an observation to another
/// service: the input's service name decides, a stale handle is not used, and an observation
/// of the removed service is refused. A valid handle gives the same output as a search by
/// name.
#[test]
fn a_stale_service_handle_after_a_reload_is_never_misattributed() {
    let named = |names: &[&str]| -> Vec<Policy> {
        names
            .iter()
            .map(|n| policy(|t| t.replace("service = \"api\"", &format!("service = \"{n}\""))))
            .collect()
    };
    let id = |n: &str| ServiceId(n.into());
    let mut engine = Engine::new(named(&["a", "b", "c"]), &EngineSettings::default());
    let [a, b, c] = ["a", "b", "c"].map(|n| engine.handle(&id(n)).expect("known service"));
    let seoul = "https://seoul.api.example.com:443/api/v1/health";
    let observe = |service: &str, at: u64| Input::Observe {
        service: id(service),
        observation: obs("here", seoul, at, ProbeReason::Ok),
    };
    // A valid handle: the same output as the search by name.
    let mut by_name = engine.clone();
    let handled = engine.step_handled(Millis(1_000), &observe("b", 1_000), Some(b));
    let named_out = by_name.step(Millis(1_000), &observe("b", 1_000));
    assert_eq!(format!("{handled:?}"), format!("{named_out:?}"));
    assert_eq!(evidence_counts(&engine), evidence_counts(&by_name));

    let current: Vec<Policy> = engine.services().map(|s| s.policy().clone()).collect();
    let diff = PolicyDiff::new(&current, named(&["b", "c", "d"]));
    engine.reload(Millis(2_000), &diff);
    // b's old handle names c's slot now, c's names d's, a's names b's.
    engine.step_handled(Millis(3_000), &observe("c", 3_000), Some(c));
    assert_eq!(
        evidence_counts(&engine),
        [("b".into(), 1), ("c".into(), 1), ("d".into(), 0)]
    );
    let refused = engine.step_handled(Millis(3_000), &observe("a", 3_000), Some(a));
    assert!(refused.transitions.is_empty() && refused.decisions.is_empty());
    // A handle of another service is not used either: the name decides.
    engine.step_handled(Millis(3_000), &observe("d", 3_000), Some(b));
    assert_eq!(
        evidence_counts(&engine),
        [("b".into(), 1), ("c".into(), 1), ("d".into(), 1)]
    );
    let fresh = engine.handle(&id("d")).expect("added service");
    assert_ne!(Some(fresh), Some(c), "slots moved: a new epoch");
    assert!(engine.handle(&id("a")).is_none(), "removed service");
}
