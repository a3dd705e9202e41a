//! The drill edge over HTTP: the admin routes on a real axum server on 127.0.0.1:0, the CLI
//! client against it, and the daemon's refusal to expose the drill API without a token.
//!
//! A small responder task stands in for the engine loop: it answers [`Message`]s with the real
//! pure [`Overrides`] store and the real example policy, so what is tested here is the HTTP
//! edge (status codes, bodies, auth), not the engine (the end-to-end drill tests do that).

mod support;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gslb::admin::AdminState;
use gslb::admin::drills::{DrillRequest, EndRequest, RearmRequest};
use gslb::cli::drill::{self, AdminClient, ClientError};
use gslb::config::{AdminAuth, AdminToken, AdminTokens};
use gslb::daemon::inbox::{Message, MessageSender};
use gslb::io::clock::Clock;
use gslb::ops::metrics::Metrics;
use gslb::ops::status::StatusBoard;
use gslb_core::engine::{Input, OverrideAction, OverrideError, Overrides, Reply};
use gslb_core::model::ServiceId;
use gslb_core::policy::Policy;
use serde_json::{Value, json};
use tokio::sync::mpsc;

const TOKEN: &str = "correct horse battery staple";

fn policy() -> Policy {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/api-seoul-tokyo.toml");
    let text = std::fs::read_to_string(&path).expect("example policy");
    gslb_core::policy::parse(&path, &text).expect("valid policy")
}

/// What the responder was asked, as `command actor reason`.
type Seen = Arc<Mutex<Vec<String>>>;

/// Stands in for the engine loop: answers with the pure store at the current wall time.
async fn responder(mut rx: mpsc::Receiver<Message>, policy: Policy, seen: Seen) {
    let mut store = Overrides::default();
    let log = |s: String| seen.lock().expect("lock").push(s);
    while let Some(message) = rx.recv().await {
        let now = drill::wall_now();
        let (input, reply) = match message {
            Message::Input {
                input,
                reply: Some(reply),
            } => (input, reply),
            Message::ListOverrides(reply) => {
                let _ = reply.send(store.all().cloned().collect());
                continue;
            }
            other => panic!("not an operator's message: {other:?}"),
        };
        let answer = match input {
            Input::AddOverride(request) => {
                log(format!("add {} {}", request.actor, request.reason));
                Reply::Override(if request.service == policy.service {
                    store.add(&policy, &request, now).map(|(o, _)| o)
                } else {
                    Err(OverrideError::UnknownService(request.service.clone()))
                })
            }
            Input::EndOverride { id, actor, reason } => {
                log(format!("end {actor} {reason}"));
                Reply::Override(store.end(&id))
            }
            Input::Rearm {
                service,
                actor,
                reason,
            } => {
                log(format!("rearm {actor} {reason}"));
                Reply::Rearmed(match service {
                    Some(s) if s != policy.service => Err(OverrideError::UnknownService(s)),
                    Some(s) => Ok(vec![s]),
                    None => Ok(vec![policy.service.clone()]),
                })
            }
            other => panic!("not an operator's input: {other:?}"),
        };
        reply.send(Some(answer));
    }
}

/// Which engine loop stands behind the API.
enum Engine {
    /// The responder.
    Responder,
    /// None configured (`commands: None`).
    Absent,
    /// Stopped: its receiver is gone.
    Stopped,
    /// Takes commands and drops their replies.
    DropsReplies,
}

struct Server {
    url: String,
    seen: Seen,
}

/// How long an override lasts: `expires` minus `created`, both RFC 3339.
fn lasts(o: &Value) -> Duration {
    let at = |key: &str| {
        let text = o[key].as_str().expect(key);
        assert!(text.ends_with('Z'), "{key}: {text}");
        humantime::parse_rfc3339(text).expect(key)
    };
    at("expires").duration_since(at("created")).expect("after")
}

async fn serve(engine: Engine, token: Option<&str>) -> Server {
    serve_with(engine, token, Arc::default()).await
}

/// [`serve`] with this status board.
async fn serve_with(engine: Engine, token: Option<&str>, board: Arc<StatusBoard>) -> Server {
    let seen = Seen::default();
    let commands: Option<MessageSender> = match engine {
        Engine::Absent => None,
        Engine::Responder => {
            let (tx, rx) = mpsc::channel(16);
            tokio::spawn(responder(rx, policy(), seen.clone()));
            Some(tx)
        }
        Engine::Stopped => Some(mpsc::channel(16).0),
        Engine::DropsReplies => {
            let (tx, mut rx) = mpsc::channel::<Message>(16);
            tokio::spawn(async move { while rx.recv().await.is_some() {} });
            Some(tx)
        }
    };
    let state = AdminState {
        board,
        metrics: Metrics::new(),
        commands,
        auth: AdminAuth {
            tokens: token
                .map(|t| AdminTokens::single(AdminToken::new(t, "test").expect("token")))
                .unwrap_or_default(),
            protect_reads: false,
        },
        timelines: Default::default(),
        health: Default::default(),
        clock: Clock::system(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(gslb::admin::serve(listener, state));
    Server { url, seen }
}

/// A raw HTTP call: status, `WWW-Authenticate`, `Location`, JSON body (Null when empty).
struct Answer {
    status: u16,
    www_authenticate: Option<String>,
    location: Option<String>,
    body: Value,
    text: String,
}

async fn call(method: &str, url: &str, token: Option<&str>, body: Option<Value>) -> Answer {
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let mut req = client.request(method.parse().expect("method"), url);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    if let Some(b) = body {
        req = req
            .header("content-type", "application/json")
            .body(b.to_string());
    }
    let resp = req.send().await.expect("send");
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .map(|v| v.to_str().expect("ascii").to_owned())
    };
    let (www_authenticate, location) = (header("www-authenticate"), header("location"));
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("body");
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Answer {
        status,
        www_authenticate,
        location,
        body,
        text,
    }
}

fn drain_seoul() -> Value {
    json!({
        "service": "api", "action": "drain", "pool": "seoul",
        "reason": "quarterly DR drill", "duration": "30m", "actor": "alice"
    })
}

#[tokio::test]
async fn a_drill_is_started_listed_and_ended_over_http() {
    let s = serve(Engine::Responder, None).await;
    let drills = format!("{}/v1/drills", s.url);

    let created = call("POST", &drills, None, Some(drain_seoul())).await;
    assert_eq!(created.status, 201, "{}", created.text);
    let o = created.body;
    let id = o["id"].as_str().expect("id").to_owned();
    assert!(id.starts_with("d-"), "{id}");
    assert_eq!(created.location, Some(format!("/v1/drills/{id}")));
    assert_eq!(
        (
            &o["service"],
            &o["action"],
            &o["pool"],
            &o["actor"],
            &o["reason"]
        ),
        (
            &json!("api"),
            &json!("drain"),
            &json!("seoul"),
            &json!("alice"),
            &json!("quarterly DR drill")
        )
    );
    assert_eq!(lasts(&o), Duration::from_secs(30 * 60));

    let list = call("GET", &drills, None, None).await;
    assert_eq!(list.status, 200);
    assert_eq!(list.body["overrides"], json!([o]));

    let ended = call(
        "DELETE",
        &format!("{drills}/{id}"),
        None,
        Some(json!({ "reason": "drill over", "actor": "bob" })),
    )
    .await;
    assert_eq!(ended.status, 200, "{}", ended.text);
    assert_eq!(ended.body, o);

    let again = call(
        "DELETE",
        &format!("{drills}/{id}"),
        None,
        Some(json!({ "reason": "drill over" })),
    )
    .await;
    assert_eq!(again.status, 404);
    assert_eq!(again.body["error"], "not_found");
    assert_eq!(
        call("GET", &drills, None, None).await.body["overrides"],
        json!([])
    );
    assert_eq!(
        *s.seen.lock().expect("lock"),
        [
            "add alice quarterly DR drill",
            "end bob drill over",
            "end api drill over"
        ]
    );
}

#[tokio::test]
async fn delete_takes_reason_and_actor_from_the_query_string() {
    let s = serve(Engine::Responder, None).await;
    let drills = format!("{}/v1/drills", s.url);
    let mut body = drain_seoul();
    body.as_object_mut().expect("object").remove("duration");
    let created = call("POST", &drills, None, Some(body)).await;
    assert_eq!(created.status, 201, "{}", created.text);
    let o = created.body;
    assert_eq!(
        lasts(&o),
        Duration::from_secs(4 * 3600),
        "the default duration is 4h"
    );
    let id = o["id"].as_str().expect("id");

    let missing = call("DELETE", &format!("{drills}/{id}"), None, None).await;
    assert_eq!(
        (missing.status, &missing.body["error"]),
        (400, &json!("missing_reason"))
    );
    let ended = call(
        "DELETE",
        &format!("{drills}/{id}?reason=done%20early&actor=carol"),
        None,
        None,
    )
    .await;
    assert_eq!(ended.status, 200, "{}", ended.text);
    assert!(
        s.seen
            .lock()
            .expect("lock")
            .contains(&"end carol done early".to_owned())
    );
}

#[tokio::test]
async fn refusals_have_a_status_an_error_code_and_a_message() {
    let s = serve(Engine::Responder, None).await;
    let drills = format!("{}/v1/drills", s.url);
    let with = |edit: Value| {
        let mut b = drain_seoul();
        for (k, v) in edit.as_object().expect("object") {
            b[k] = v.clone();
        }
        b
    };
    let force = with(json!({ "action": "force" }));
    assert_eq!(
        call("POST", &drills, None, Some(force.clone()))
            .await
            .status,
        201
    );

    let cases = [
        (
            with(json!({ "service": "web" })),
            404,
            "unknown_service",
            "unknown service 'web'",
        ),
        (
            with(json!({ "pool": "osaka" })),
            404,
            "unknown_pool",
            "service 'api' has no pool 'osaka'",
        ),
        (
            with(json!({ "reason": "  " })),
            400,
            "missing_reason",
            "a reason is required",
        ),
        (
            with(json!({ "duration": "soon" })),
            400,
            "bad_duration",
            "duration 'soon'",
        ),
        (
            with(json!({ "duration": "25h" })),
            400,
            "bad_duration",
            "duration must be between 1s and 24h",
        ),
        (force, 409, "conflict", "conflicts with active override"),
        (
            with(json!({ "action": "explode" })),
            400,
            "bad_request",
            "action",
        ),
        (
            with(json!({ "colour": "red" })),
            400,
            "bad_request",
            "unknown field `colour`",
        ),
    ];
    for (body, status, code, message) in cases {
        let a = call("POST", &drills, None, Some(body.clone())).await;
        assert_eq!(a.status, status, "{body} -> {}", a.text);
        assert_eq!(a.body["error"], code, "{body} -> {}", a.text);
        let m = a.body["message"].as_str().expect("message");
        assert!(m.contains(message), "{body} -> {m}");
    }
    let not_json = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client")
        .post(&drills)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .expect("send");
    assert_eq!(not_json.status().as_u16(), 400);
    let body: Value = serde_json::from_str(&not_json.text().await.expect("text")).expect("json");
    assert_eq!(body["error"], "bad_request");
}

#[tokio::test]
async fn rearm_answers_the_services_re_armed() {
    let s = serve(Engine::Responder, None).await;
    let rearm = format!("{}/v1/rearm", s.url);
    let all = call(
        "POST",
        &rearm,
        None,
        Some(json!({ "reason": "budget spent" })),
    )
    .await;
    assert_eq!(
        (all.status, &all.body),
        (200, &json!({ "rearmed": ["api"] }))
    );
    let one = call(
        "POST",
        &rearm,
        None,
        Some(json!({ "service": "api", "reason": "budget spent", "actor": "dave" })),
    )
    .await;
    assert_eq!(one.body, json!({ "rearmed": ["api"] }));
    let unknown = call(
        "POST",
        &rearm,
        None,
        Some(json!({ "service": "web", "reason": "x" })),
    )
    .await;
    assert_eq!(
        (unknown.status, &unknown.body["error"]),
        (404, &json!("unknown_service"))
    );
    let no_reason = call("POST", &rearm, None, Some(json!({}))).await;
    assert_eq!(
        (no_reason.status, &no_reason.body["error"]),
        (400, &json!("missing_reason"))
    );
    assert_eq!(
        *s.seen.lock().expect("lock"),
        [
            "rearm api budget spent",
            "rearm dave budget spent",
            "rearm api x"
        ]
    );
}

#[tokio::test]
async fn without_a_running_engine_loop_drill_routes_answer_503() {
    for engine in [Engine::Absent, Engine::Stopped, Engine::DropsReplies] {
        let s = serve(engine, None).await;
        for (method, path, body) in [
            ("GET", "/v1/drills", None),
            ("POST", "/v1/drills", Some(drain_seoul())),
            ("DELETE", "/v1/drills/d-1", Some(json!({ "reason": "x" }))),
            ("POST", "/v1/rearm", Some(json!({ "reason": "x" }))),
        ] {
            let a = call(method, &format!("{}{path}", s.url), None, body).await;
            assert_eq!(a.status, 503, "{method} {path}: {}", a.text);
            assert_eq!(a.body["error"], "unavailable");
            let m = a.body["message"].as_str().expect("message");
            assert!(m.starts_with("drills unavailable: "), "{m}");
        }
        // The read-only routes do not depend on it.
        assert_eq!(
            call("GET", &format!("{}/healthz", s.url), None, None)
                .await
                .status,
            200
        );
    }
}

#[tokio::test]
async fn with_a_token_drill_routes_need_the_right_bearer_token() {
    let s = serve(Engine::Responder, Some(TOKEN)).await;
    let drills = format!("{}/v1/drills", s.url);
    for token in [None, Some("wrong"), Some("correct horse battery stapl")] {
        for (method, path, body) in [
            ("POST", "/v1/drills", Some(drain_seoul())),
            ("GET", "/v1/drills", None),
            ("DELETE", "/v1/drills/d-1", Some(json!({ "reason": "x" }))),
            ("POST", "/v1/rearm", Some(json!({ "reason": "x" }))),
        ] {
            let a = call(method, &format!("{}{path}", s.url), token, body).await;
            assert_eq!(a.status, 401, "{method} {path} with {token:?}");
            assert_eq!(a.www_authenticate.as_deref(), Some("Bearer"));
            assert_eq!(a.body["error"], "unauthorized");
            assert!(!a.text.contains(TOKEN));
        }
    }
    assert!(
        s.seen.lock().expect("lock").is_empty(),
        "nothing reached the engine loop"
    );
    let ok = call("POST", &drills, Some(TOKEN), Some(drain_seoul())).await;
    assert_eq!(ok.status, 201, "{}", ok.text);
    for open in ["/healthz", "/metrics", "/v1/status"] {
        let a = call("GET", &format!("{}{open}", s.url), None, None).await;
        assert_eq!(a.status, 200, "{open} stays open");
    }
}

#[tokio::test]
async fn the_client_starts_lists_and_ends_drills() {
    let s = serve(Engine::Responder, Some(TOKEN)).await;
    let token = || Some(AdminToken::new(TOKEN, "test").expect("token"));
    let c = AdminClient::new(&s.url, token()).expect("client");
    let started = c
        .start(&DrillRequest {
            service: "api".into(),
            action: OverrideAction::Force,
            pool: "tokyo".into(),
            reason: "failover test".into(),
            duration: Some("1h".into()),
            actor: Some("erin".into()),
        })
        .await
        .expect("start")
        .drill;
    assert_eq!(started.action, OverrideAction::Force);
    let listed = c.list().await.expect("list");
    assert_eq!(listed, vec![started.clone()]);
    let table = drill::table(&listed, drill::wall_now());
    let row = table.lines().nth(1).expect("row");
    assert!(
        row.starts_with(&format!("{}  api      force   tokyo  ", started.id)),
        "{table}"
    );
    // With a token, the actor is the token's name ("admin" for GSLB_ADMIN_TOKEN), not what
    // the client says.
    assert!(row.ends_with("admin  failover test"), "{table}");
    let ended = c
        .end(
            &started.id.0,
            &EndRequest {
                reason: "done".into(),
                actor: None,
            },
        )
        .await
        .expect("end");
    assert_eq!(ended, started);
    let rearmed = c
        .rearm(&RearmRequest {
            service: Some("api".into()),
            reason: "spent".into(),
            actor: None,
        })
        .await
        .expect("rearm");
    assert_eq!(rearmed, vec![ServiceId::from("api")]);
}

#[tokio::test]
async fn the_client_reports_refusals_with_the_servers_message_and_exit_code_1() {
    let s = serve(Engine::Responder, Some(TOKEN)).await;
    let unauthenticated = AdminClient::new(&s.url, None).expect("client");
    let e = unauthenticated.list().await.expect_err("no token");
    assert!(matches!(&e, ClientError::Refused { status: 401, code, .. } if code == "unauthorized"));
    assert_eq!(e.exit_code(), 1);

    let c = AdminClient::new(&s.url, Some(AdminToken::new(TOKEN, "t").expect("token")))
        .expect("client");
    let e = c
        .end(
            "d-nope",
            &EndRequest {
                reason: "x".into(),
                actor: None,
            },
        )
        .await
        .expect_err("unknown id");
    assert_eq!(
        e.to_string(),
        "refused by the admin API (404 not_found): no active override 'd-nope'"
    );
    assert_eq!(e.exit_code(), 1);
}

#[tokio::test]
async fn the_client_says_when_nothing_listens() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    drop(listener);
    let e = AdminClient::new(&url, None)
        .expect("client")
        .list()
        .await
        .expect_err("nothing listens");
    assert!(
        e.to_string()
            .starts_with(&format!("cannot reach the admin API at {url}/v1/drills: ")),
        "{e}"
    );
    assert_eq!(e.exit_code(), 1);
}

/// Runs the real binary off the runtime's threads (the test server keeps serving).
async fn gslb(args: Vec<String>) -> std::process::Output {
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_gslb"))
            .args(args)
            .env_remove("GSLB_ADMIN_TOKEN")
            .env_remove("GSLB_ADMIN_URL")
            .env_remove("GSLB_CONFIG")
            .output()
            .expect("run gslb")
    })
    .await
    .expect("join")
}

#[tokio::test]
async fn the_gslb_drill_command_drains_lists_and_ends() {
    let s = serve(Engine::Responder, Some(TOKEN)).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).expect("write");
    let common = |args: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        v.extend(["--admin".into(), s.url.clone(), "--token-file".into()]);
        v.push(token_file.display().to_string());
        v
    };
    let out = gslb(common(&[
        "drill",
        "drain",
        "--service",
        "api",
        "--pool",
        "seoul",
        "--for",
        "30m",
        "--reason",
        "quarterly DR drill",
        "--actor",
        "frank",
    ]))
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("started d-"), "{stdout}");
    assert!(
        stdout.contains(" drain api/seoul, expires in 29m") || stdout.contains("expires in 30m"),
        "{stdout}"
    );
    let id = stdout.split_whitespace().nth(1).expect("id").to_owned();

    let out = gslb(common(&["drill", "list"])).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("ID "), "{stdout}");
    assert!(
        stdout.contains(&id) && stdout.contains("admin") && !stdout.contains("frank"),
        "{stdout}"
    );

    let out = gslb(common(&[
        "drill",
        "drain",
        "--service",
        "api",
        "--pool",
        "osaka",
        "--reason",
        "x",
    ]))
    .await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("service 'api' has no pool 'osaka'"),
        "{stderr}"
    );

    let out = gslb(common(&["drill", "end", &id, "--reason", "drill over"])).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with(&format!("ended {id} drain api/seoul (started by admin: ")),
        "{stdout}"
    );
    assert!(
        !stdout.contains("expires"),
        "an ended drill does not expire: {stdout}"
    );

    let out = gslb(common(&[
        "drill",
        "drain",
        "--service",
        "api",
        "--pool",
        "seoul",
        "--for",
        "2d",
        "--reason",
        "x",
    ]))
    .await;
    assert_eq!(
        out.status.code(),
        Some(2),
        "a duration over 24h is a usage error"
    );
}

#[tokio::test]
async fn gslb_run_refuses_a_non_loopback_admin_address_without_a_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let settings = dir.path().join("gslb.toml");
    let policies = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    std::fs::write(
        &settings,
        format!(
            "policies = [{:?}]\n[admin]\nlisten = \"0.0.0.0:0\"\n",
            policies.display().to_string()
        ),
    )
    .expect("write");
    let out = gslb(vec![
        "run".into(),
        "--config".into(),
        settings.display().to_string(),
    ])
    .await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("admin.listen: 0.0.0.0:0 is not a loopback address"),
        "{stderr}"
    );
}

#[tokio::test]
async fn gslb_events_refuses_limit_0_like_the_api_and_prints_the_api_json() {
    let s = serve(Engine::Responder, None).await;
    let a = call("GET", &format!("{}/v1/events?limit=0", s.url), None, None).await;
    assert_eq!(a.status, 400, "{}", a.text);
    assert!(a.text.contains("limit: must be at least 1"), "{}", a.text);
    let a = call("GET", &format!("{}/v1/events?limit=1", s.url), None, None).await;
    assert_eq!(
        (a.status, a.body.clone()),
        (200, json!({ "timelines": [] }))
    );

    let events = |extra: &[&str]| {
        let mut v: Vec<String> = vec!["events".into(), "--admin".into(), s.url.clone()];
        v.extend(extra.iter().map(|a| (*a).to_owned()));
        v
    };
    let out = gslb(events(&["--limit", "0"])).await;
    assert_eq!(out.status.code(), Some(2), "a usage error");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("'0' for '--limit <LIMIT>': must be at least 1"),
        "{stderr}"
    );
    let out = gslb(events(&["--json"])).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(printed, a.body, "the API's answer, as it came");
}

/// Issue 12, part 4: the answer to `POST /v1/drills` says when the drill is accepted but not in
/// effect, with the reason: `held` when the service's decision keeps the drained pool serving
/// (no other pool is healthy), `ignored` for a drain of the provider's fallback pool.
#[tokio::test]
async fn a_started_drill_that_is_not_in_effect_says_held_or_ignored() {
    use support::sim::Sim;
    // The engine loop's view as the status board shows it: seoul serves, tokyo is down, and a
    // drain of seoul holds.
    let mut sim = Sim::new(policy());
    for _ in 0..3 {
        sim.round(true, false);
    }
    sim.drill(OverrideAction::Drain, "seoul", 30);
    let board = Arc::new(StatusBoard::default());
    let service = sim.engine.service(&sim.service).expect("api");
    board.update_service(
        service,
        sim.engine.overrides().all(),
        gslb_core::model::Millis(sim.now),
    );
    board.update_apply(&sim.service, |a| a.fallback_pool = Some("tokyo".into()));
    let server = serve_with(Engine::Responder, None, board).await;
    let url = format!("{}/v1/drills", server.url);
    let a = call("POST", &url, None, Some(drain_seoul())).await;
    assert_eq!(a.status, 201, "{}", a.text);
    assert_eq!(
        a.body["held"],
        "a drill drains seoul but no other pool is healthy: keeping seoul (never zero serving pools)",
        "{}",
        a.text
    );
    assert!(a.body.get("ignored").is_none(), "{}", a.text);
    assert_eq!(a.body["pool"], "seoul", "the override itself: {}", a.text);
    let mut tokyo = drain_seoul();
    tokyo["pool"] = json!("tokyo");
    let a = call("POST", &url, None, Some(tokyo)).await;
    assert_eq!(a.status, 201, "{}", a.text);
    assert!(a.body.get("held").is_none(), "{}", a.text);
    assert!(
        a.body["ignored"].as_str().is_some_and(|s| s
            .starts_with("drain of pool tokyo ignored: it is the load balancer's fallback pool")),
        "{}",
        a.text
    );
}
