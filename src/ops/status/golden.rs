//! The status JSON of a service with probe history, against a golden taken before the board's
//! storage was made compact (issue 14): the layout in memory changed, the answer did not.

use std::time::Duration;

use gslb_core::engine::{Engine, EngineSettings, Input};
use gslb_core::model::{
    EndpointId, Millis, Observation, PoolId, ProbeOutcome, ProbeReason, ServiceId, VantageId,
};

use super::*;

const SEOUL: &str = "https://seoul.api.example.com:443/api/v1/health";
const TOKYO: &str = "https://tokyo.api.example.com:443/api/v1/health";

/// Probe `i` of an endpoint from a vantage point: varied outcomes, every optional field used.
fn observation(endpoint: &str, vantage: &str, i: u64) -> Observation {
    let ok = endpoint == SEOUL || i.is_multiple_of(4);
    Observation {
        endpoint: EndpointId::from(endpoint),
        vantage: VantageId::from(vantage),
        at: Millis(10_000 * i + 7),
        outcome: ProbeOutcome {
            success: ok,
            duration: Duration::from_nanos(20_000_123 + i * 1_000_007),
            http_status: ok.then_some(200),
            reason: if ok {
                ProbeReason::Ok
            } else {
                ProbeReason::Timeout
            },
            dns_lookup: i
                .is_multiple_of(2)
                .then(|| Duration::from_nanos(1_234_567 + i)),
            cert_expiry: ok.then_some(Millis(1_900_000_000_000 + i)),
        },
    }
}

/// A board showing the shipped api policy (and a copy, `web`, never adopted) after eight rounds of probes from two vantage
/// points, and the reconciler's report.
fn board() -> StatusBoard {
    let text = include_str!("../../../policies/api-seoul-tokyo.toml");
    let policy = gslb_core::policy::parse(std::path::Path::new("api.toml"), text).expect("ok");
    let service = policy.service.clone();
    // A second service the provider has not been read for yet: it holds, awaiting it.
    let mut waiting = policy.clone();
    waiting.service = ServiceId::from("web");
    let mut engine = Engine::new([policy, waiting], &EngineSettings::default());
    let board = StatusBoard::default();
    let adopt = Input::Adopt {
        service: service.clone(),
        pool: Some(PoolId::from("seoul")),
    };
    engine.step(Millis(0), &adopt);
    for s in engine.services() {
        board.update_service(s, std::iter::empty(), Millis(0));
    }
    for i in 1..=8 {
        for (e, v) in [(SEOUL, "here"), (TOKYO, "here"), (SEOUL, "there")] {
            let obs = observation(e, v, i);
            let pool = PoolId::from(if e == SEOUL { "seoul" } else { "tokyo" });
            board.record_probe(&service, &pool, &obs);
            let input = Input::Observe {
                service: service.clone(),
                observation: obs,
            };
            engine.step(Millis(10_000 * i + 7), &input);
        }
        let s = engine.service(&service).expect("api");
        board.update_service(s, engine.overrides().all(), Millis(10_000 * i + 9));
    }
    board.update_apply(&service, |a| {
        a.state = ApplyState::Applied;
        a.provider = "route53".into();
        a.observed_active = Some(PoolId::from("seoul"));
        a.writes = 1;
    });
    board
}

#[test]
fn the_status_json_of_a_service_with_recent_probes_is_unchanged() {
    let board = board();
    let api = ServiceId::from("api");
    let full = serde_json::to_string_pretty(&board.snapshot_of(Some(&api), true)).expect("json");
    let bare = serde_json::to_string_pretty(&board.snapshot_of(None, false)).expect("json");
    if std::env::var_os("GSLB_PRINT_GOLDEN").is_some() {
        println!("{full}\n---\n{bare}");
    }
    assert_eq!(full, include_str!("golden_full.json").trim_end());
    assert_eq!(bare, include_str!("golden_bare.json").trim_end());
}

#[test]
fn recent_probes_keep_exactly_the_last_five_in_order() {
    let board = board();
    let status = board
        .snapshot()
        .remove(&ServiceId::from("api"))
        .expect("api");
    let mut seen = 0;
    for e in status.pools.iter().flat_map(|p| p.endpoints.iter()) {
        let at: Vec<u64> = e.recent.iter().map(|r| r.at.0).collect();
        assert_eq!(at, [40_007, 50_007, 60_007, 70_007, 80_007], "{e:?}");
        let expected: Vec<_> = (4..=8)
            .map(|i| observation(&e.endpoint.0, &e.vantage.0, i).outcome)
            .collect();
        let outcomes: Vec<_> = e.recent.iter().map(|r| r.outcome.clone()).collect();
        assert_eq!(outcomes, expected);
        seen += 1;
    }
    assert_eq!(seen, 3, "seoul from two vantage points, tokyo from one");
    board.remove_service(&ServiceId::from("api"));
    assert_eq!(
        board.snapshot().into_keys().collect::<Vec<_>>(),
        [ServiceId::from("web")]
    );
}
