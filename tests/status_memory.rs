//! What the status board holds per service (issue 14: peak RSS at 5,000 services x 2
//! endpoints), counted by dhat's allocator (bytes asked for, without the allocator's own
//! overhead): live bytes after every service has decided and every endpoint has a full history
//! of recent probes from one vantage point.

use std::time::Duration;

use gslb::ops::status::{RECENT_PROBES, StatusBoard};
use gslb_core::engine::{Engine, EngineSettings, Input};
use gslb_core::model::{
    EndpointId, Millis, Observation, PoolId, ProbeOutcome, ProbeReason, ServiceId,
};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// Bytes live now.
fn live() -> isize {
    dhat::HeapStats::get().curr_bytes as isize
}

const SERVICES: usize = 200;

/// The board's live bytes per service of the shipped two-pool policy (one endpoint per pool),
/// after ten rounds of probes and decisions.
fn board_bytes_per_service() -> isize {
    let text = include_str!("../policies/api-seoul-tokyo.toml");
    let policy = gslb_core::policy::parse(std::path::Path::new("api.toml"), text).expect("ok");
    let policies: Vec<_> = (0..SERVICES)
        .map(|i| {
            let mut p = policy.clone();
            p.service = ServiceId(format!("svc-{i:04}"));
            p
        })
        .collect();
    let ids: Vec<ServiceId> = policies.iter().map(|p| p.service.clone()).collect();
    let mut engine = Engine::new(policies, &EngineSettings::default());
    for id in &ids {
        let adopt = Input::Adopt {
            service: id.clone(),
            pool: Some(PoolId::from("seoul")),
        };
        engine.step(Millis(0), &adopt);
    }
    let endpoints: Vec<(PoolId, EndpointId)> = engine
        .services()
        .next()
        .expect("one")
        .policy()
        .pools
        .iter()
        .flat_map(|p| p.endpoints.iter().map(|e| (p.id.clone(), e.id.clone())))
        .collect();
    let board = StatusBoard::default();
    let before = live();
    for round in 1..=(RECENT_PROBES as u64 * 2) {
        let at = Millis(round * 10_000);
        for id in &ids {
            for (pool, endpoint) in &endpoints {
                let observation = Observation {
                    endpoint: endpoint.clone(),
                    vantage: "here".into(),
                    at,
                    outcome: ProbeOutcome {
                        success: true,
                        duration: Duration::from_millis(20),
                        http_status: Some(200),
                        reason: ProbeReason::Ok,
                        dns_lookup: None,
                        cert_expiry: None,
                    },
                };
                board.record_probe(id, pool, &observation);
                let input = Input::Observe {
                    service: id.clone(),
                    observation,
                };
                engine.step(at, &input);
            }
            let s = engine.service(id).expect("service");
            board.update_service(s, engine.overrides().all(), at);
        }
    }
    let with_board = live();
    drop(board);
    let board_only = with_board - live();
    assert!(
        board_only <= with_board - before,
        "the board's bytes were counted"
    );
    board_only / SERVICES as isize
}

#[test]
fn the_status_board_holds_a_bounded_number_of_bytes_per_service() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let per_service = board_bytes_per_service();
    println!("status board: {per_service} bytes per service (2 endpoints, 1 vantage point)");
    // 4,085 before the board kept compact entries (a whole status copied per decision, recent
    // probes in growing queues under copied names); 1,350 after.
    assert!(
        per_service > 0 && per_service <= 2_048,
        "{per_service} bytes per service"
    );
}
