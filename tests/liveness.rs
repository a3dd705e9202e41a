//! `/healthz` and `/readyz` of the admin API over a real controller (daemon builder, engine
//! loop, in-process provider), in paused tokio time: a stalled engine loop fails liveness with
//! its name and since when, and recovers; readiness waits for every binding's adoption; every
//! loop reports.

mod support;

use std::io::Read as _;
use std::path::Path;
use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use gslb::admin::{self, AdminState};
use gslb::config::AdminAuth;
use gslb::daemon::inbox::{MESSAGE_BUFFER, Message, ReplyTo};
use gslb::io::drill_store::DrillStore;
use gslb::io::journal::Journal;
use gslb::io::state_file::StateFile;
use gslb::ops::health::engine_bound;
use gslb::ops::telemetry::Telemetry;
use gslb_core::engine::{Input, OverrideAction, OverrideId, OverrideRequest};
use gslb_core::event::Event;
use gslb_core::model::{Millis, Observation, ProbeOutcome, ProbeReason, VantageId};
use gslb_core::policy::Policy;
use serde_json::Value;
use tower::ServiceExt as _;

fn policy() -> Policy {
    gslb_core::policy::parse(
        Path::new("api.toml"),
        include_str!("../policies/api-seoul-tokyo.toml"),
    )
    .expect("valid policy")
}

/// `GET path` through the admin router: status and JSON body.
async fn get(app: &axum::Router, path: &str) -> (u16, Value) {
    let request = Request::builder()
        .uri(path)
        .body(Body::empty())
        .expect("request");
    let response = app.clone().oneshot(request).await.expect("infallible");
    let status = response.status().as_u16();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    (status, serde_json::from_slice(&body).expect("JSON body"))
}

/// Advances paused time a second at a time (at most `within`) until `path` answers `status`.
async fn advance_until(app: &axum::Router, path: &str, status: u16, within: Duration) -> Value {
    advance_until_body(app, path, within, |got, _| got == status).await
}

/// Advances paused time a second at a time (at most `within`) until `path`'s answer passes
/// `check`.
async fn advance_until_body(
    app: &axum::Router,
    path: &str,
    within: Duration,
    check: impl Fn(u16, &Value) -> bool,
) -> Value {
    let mut waited = Duration::ZERO;
    loop {
        let (got, body) = get(app, path).await;
        if check(got, &body) {
            return body;
        }
        assert!(
            waited < within,
            "{path} still {got} after {waited:?}: {body}"
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        waited += Duration::from_secs(1);
    }
}

/// A passing probe result of `policy`'s first endpoint.
fn probe_result(policy: &Policy) -> Message {
    Input::Observe {
        service: policy.service.clone(),
        observation: Observation {
            endpoint: policy.pools[0].endpoints[0].id.clone(),
            vantage: VantageId("test".into()),
            at: Millis(0),
            outcome: ProbeOutcome {
                success: true,
                duration: Duration::from_millis(5),
                http_status: Some(200),
                dns_lookup: None,
                cert_expiry: None,
                reason: ProbeReason::Ok,
            },
        },
    }
    .into()
}

fn app(sinks: &Telemetry, daemon: &gslb::daemon::builder::Daemon) -> axum::Router {
    let state = AdminState::new(
        sinks,
        Some(daemon.commands()),
        AdminAuth::default(),
        Default::default(),
    );
    admin::router(state, true)
}

#[tokio::test(start_paused = true)]
async fn an_engine_loop_that_stops_making_progress_fails_healthz_and_recovers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = StateFile::new(dir.path().join("overrides.json"));
    // The state file's temporary file is a FIFO nobody reads: the next drill's save blocks in
    // `open`, and the engine loop, which waits for it, stalls (as on a hung disk).
    let fifo = dir.path().join(".overrides.json.tmp");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let sinks = support::controller::sinks(1024);
    let policy = policy();
    let daemon = support::controller::start(
        std::slice::from_ref(&policy),
        &sinks,
        Journal::new(None, None, DrillStore::File(state)),
        Vec::new(),
    );
    let app = app(&sinks, &daemon);
    let healthy = advance_until(&app, "/healthz", 200, Duration::ZERO).await;
    assert_eq!(healthy["status"], "ok");

    let (reply, answered) = tokio::sync::oneshot::channel();
    let drain = OverrideRequest {
        id: OverrideId("d-stall".into()),
        service: policy.service.clone(),
        action: OverrideAction::Drain,
        pool: "tokyo".into(),
        reason: "stall test".into(),
        actor: "test".into(),
        duration: None,
    };
    daemon
        .commands()
        .send(Message::command(
            Input::AddOverride(drain),
            ReplyTo::Override(reply),
        ))
        .await
        .expect("engine loop running");
    let bound = engine_bound(gslb::daemon::controller::MAX_TICK);
    let stuck = advance_until(&app, "/healthz", 503, bound * 3).await;
    assert_eq!(stuck["status"], "stuck", "{stuck}");
    let first = &stuck["stuck"][0];
    assert_eq!(first["loop"], "engine_loop", "{stuck}");
    assert_eq!(first["bound_seconds"], bound.as_secs_f64(), "{stuck}");
    assert!(
        first["stalled_seconds"].as_f64().expect("seconds") > bound.as_secs_f64(),
        "{stuck}"
    );
    let since = first["since"].as_str().expect("since");
    assert!(
        humantime::parse_rfc3339(since).is_ok() && since.ends_with('Z'),
        "{since}"
    );

    // The disk answers again: the save goes through (or fails and is refused: either way the
    // loop moves on), the drill is answered, and liveness is back.
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        std::fs::File::open(&fifo)
            .and_then(|mut f| f.read_to_string(&mut text))
            .expect("read the FIFO");
        text
    });
    // Saved, or refused as not saved (fsync of a FIFO fails): answered either way.
    let _saved_or_refused = answered.await.expect("the engine loop answers the drill");
    assert!(reader.join().expect("reader").contains("d-stall"));
    let healthy = advance_until(&app, "/healthz", 200, Duration::from_secs(5)).await;
    assert_eq!(healthy["status"], "ok");
    daemon.stop().await;
}

#[tokio::test(start_paused = true)]
async fn readyz_waits_for_every_binding_to_adopt_its_provider() {
    let sinks = support::controller::sinks(1024);
    let policy = policy();
    let mut daemon = support::controller::start(
        std::slice::from_ref(&policy),
        &sinks,
        Journal::default(),
        Vec::new(),
    );
    let app = app(&sinks, &daemon);
    // Once the engine loop runs the policies, the service awaits its provider: not ready.
    let waiting = advance_until_body(&app, "/readyz", Duration::from_secs(5), |_, b| {
        b["policies_loaded"] == true
    })
    .await;
    assert_eq!(waiting["status"], "not_ready", "{waiting}");
    assert_eq!(waiting["awaiting_provider"][0], "api", "{waiting}");
    daemon
        .attach(&policy, support::controller::provider())
        .expect("attach");
    let ready = advance_until(&app, "/readyz", 200, Duration::from_secs(10)).await;
    assert_eq!(ready["status"], "ready");
    assert_eq!(ready["services"], 1);
    // The canaries' probe loops report too.
    let engine: gslb::config::EngineConfig =
        toml::from_str("canaries = [\"tcp://127.0.0.1:9\", \"tcp://127.0.0.1:19\"]")
            .expect("engine settings");
    let (spec, canaries) = engine.canary_endpoints().expect("canaries");
    let targets = canaries
        .iter()
        .map(|e| daemon.prober().target(&spec, e))
        .collect::<Result<Vec<_>, _>>()
        .expect("targets");
    daemon.attach_canaries(targets);
    let (status, live) = get(&app, "/healthz").await;
    assert_eq!(status, 200, "{live}");
    // engine_loop, probes:api, reconciler:api, canaries.
    assert_eq!(live["loops"], 4, "{live}");
    daemon.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_adoption_overtakes_an_inbox_full_of_probe_results() {
    let sinks = support::controller::sinks(4 * MESSAGE_BUFFER);
    let mut events = sinks.events.subscribe();
    let policy = policy();
    let mut daemon = support::controller::start(
        std::slice::from_ref(&policy),
        &sinks,
        Journal::default(),
        Vec::new(),
    );
    let app = app(&sinks, &daemon);
    // Nothing has yielded yet (one runtime thread): the engine loop has not started, and the
    // inbox fills up with probe results, as when every probe loop's first result arrives at
    // once at start.
    let commands = daemon.commands();
    let mut queued = 0;
    while commands.try_send(probe_result(&policy)).is_ok() {
        queued += 1;
    }
    assert_eq!(queued, MESSAGE_BUFFER);
    daemon
        .attach(&policy, support::controller::provider())
        .expect("attach");
    // The adoption's first decision comes before most of the queued results are stepped.
    let mut stepped_before = 0;
    let adopted = loop {
        match events.recv().await.expect("no event lost") {
            Event::Probe { .. } => stepped_before += 1,
            Event::Decision(d) => break d,
            _ => {}
        }
    };
    assert_eq!(adopted.service, policy.service);
    assert!(
        stepped_before < MESSAGE_BUFFER / 4,
        "{stepped_before} of {queued} queued probe results were stepped before the adoption"
    );
    let ready = advance_until(&app, "/readyz", 200, Duration::from_secs(10)).await;
    assert_eq!(ready["status"], "ready", "{ready}");
    daemon.stop().await;
}
