//! The admin API's access and transport over real loopback listeners: read routes behind a
//! token when `admin.require_token_for_reads` is set, named tokens whose name is the drill's
//! actor in the audit log, TLS from certificate and key files (a replaced pair is picked up),
//! `/metrics` on a listener of its own; `/v1/status` of a live controller writes times as
//! RFC 3339 and durations as seconds; and the real `gslb run` (the Cloudflare fake) wires it
//! all from its settings, `gslb healthcheck` included.

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use gslb::admin::{self, AdminState, Routes};
use gslb::config::{AdminAuth, AdminSettings, resolve_admin_auth};
use gslb::io::audit::AuditLog;
use gslb::io::drill_store::DrillStore;
use gslb::io::journal::Journal;
use gslb::io::origin::Origin;
use gslb::ops::telemetry::Telemetry;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};
use support::{controller, eventually, tls};

const DEADLINE: Duration = Duration::from_secs(15);

/// Named tokens `alice` and `ci` from a token file in `dir`; reads protected when
/// `protect_reads`.
fn auth(dir: &Path, protect_reads: bool) -> AdminAuth {
    let file = dir.join("tokens");
    std::fs::write(&file, "alice = \"alice-secret\"\nci = \"ci-secret\"\n").expect("write");
    let settings = AdminSettings {
        token_files: vec![file],
        require_token_for_reads: protect_reads,
        ..AdminSettings::default()
    };
    resolve_admin_auth(&settings, None).expect("valid tokens")
}

/// Serves `routes` of `state` on 127.0.0.1:<free port>, over TLS with `tls`.
async fn listen(
    state: &AdminState,
    routes: Routes,
    tls: Option<tokio_rustls::TlsAcceptor>,
) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(admin::serve_on(listener, tls, state.clone(), routes));
    addr
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client")
}

/// `GET url` with `token` as bearer token: status and body.
async fn get(url: &str, token: Option<&str>) -> (u16, String) {
    let mut req = client().get(url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().await.expect("answer");
    (r.status().as_u16(), r.text().await.expect("body"))
}

/// `POST url` with the JSON `body` and `token` as bearer token.
async fn post(url: &str, token: Option<&str>, body: &Value) -> reqwest::Response {
    let mut req = client()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    req.send().await.expect("answer")
}

fn state(sinks: &Telemetry, auth: AdminAuth) -> AdminState {
    AdminState::new(sinks, None, auth, Default::default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_routes_refuse_without_a_token_when_required() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sinks = controller::sinks(16);
    let protected = listen(&state(&sinks, auth(dir.path(), true)), Routes::ALL, None).await;
    let open = listen(&state(&sinks, auth(dir.path(), false)), Routes::ALL, None).await;
    for path in ["/v1/status", "/v1/events", "/metrics"] {
        for token in [None, Some("wrong"), Some("alice-secre")] {
            let (status, body) = get(&format!("http://{protected}{path}"), token).await;
            assert_eq!(status, 401, "{path} with {token:?}: {body}");
            assert!(!body.contains("alice-secret"), "{body}");
        }
        for token in ["alice-secret", "ci-secret"] {
            let (status, body) = get(&format!("http://{protected}{path}"), Some(token)).await;
            assert_eq!(status, 200, "{path}: {body}");
        }
        let (status, _) = get(&format!("http://{open}{path}"), None).await;
        assert_eq!(status, 200, "{path} is open by default");
    }
    // The probes' routes never need a token.
    let (status, body) = get(&format!("http://{protected}/healthz"), None).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = get(&format!("http://{protected}/readyz"), None).await;
    assert_eq!(status, 503, "no policies loaded: {body}");
}

/// A live controller of one service `api` on loopback origins and the in-process provider,
/// its audit log in `dir`, and its admin API (every route) with `auth`.
struct Live {
    _origins: (Origin, Origin),
    daemon: gslb::daemon::builder::Daemon,
    admin: SocketAddr,
}

async fn live(dir: &Path, auth: AdminAuth) -> Live {
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let seoul = Origin::start(loopback, "seoul").await.expect("seoul");
    let tokyo = Origin::start(loopback, "tokyo").await.expect("tokyo");
    let policy = support::policy::fast_seoul_tokyo("api", 2, seoul.addr(), tokyo.addr());
    let audit = AuditLog::open(dir.join("audit.jsonl"))
        .await
        .expect("audit log");
    let sinks = controller::sinks(1024);
    let journal = Journal::new(None, Some(audit), DrillStore::Memory);
    let mut daemon = controller::start(std::slice::from_ref(&policy), &sinks, journal, vec![]);
    daemon
        .attach(&policy, controller::provider())
        .expect("attach");
    let state = AdminState::new(&sinks, Some(daemon.commands()), auth, Default::default());
    let admin = listen(&state, Routes::ALL, None).await;
    Live {
        _origins: (seoul, tokyo),
        daemon,
        admin,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_actor_of_a_drill_is_the_name_of_the_callers_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let live = live(dir.path(), auth(dir.path(), false)).await;
    let drill = json!({
        "service": "api", "action": "drain", "pool": "tokyo",
        "reason": "quarterly DR drill", "actor": "mallory"
    });
    let url = format!("http://{}/v1/drills", live.admin);
    let refused = post(&url, None, &drill).await;
    assert_eq!(refused.status().as_u16(), 401);
    let created = post(&url, Some("ci-secret"), &drill).await;
    assert_eq!(created.status().as_u16(), 201);
    let created: Value =
        serde_json::from_slice(&created.bytes().await.expect("body")).expect("json");
    assert_eq!(
        created["actor"], "ci",
        "not what the client says: {created}"
    );
    let audit = dir.path().join("audit.jsonl");
    let line = eventually(DEADLINE, || async {
        let text = std::fs::read_to_string(&audit).unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("JSON line"))
            .find(|l| l["action"] == "drill.drain")
    })
    .await
    .expect("the drill is audited");
    assert_eq!(line["actor"], "ci", "{line}");
    assert_eq!(line["detail"]["actor"], "ci", "{line}");
    live.daemon.stop().await;
}

/// Every value of `v` under a key of `keys`, at any depth.
fn values_of<'a>(v: &'a Value, keys: &[&str], out: &mut Vec<(String, &'a Value)>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if keys.contains(&k.as_str()) {
                    out.push((k.clone(), x));
                }
                values_of(x, keys, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| values_of(x, keys, out)),
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_times_are_rfc3339_and_durations_are_seconds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let live = live(dir.path(), AdminAuth::default()).await;
    let drill = json!({
        "service": "api", "action": "drain", "pool": "tokyo", "reason": "drill"
    });
    let url = format!("http://{}/v1/drills", live.admin);
    let created = post(&url, None, &drill).await;
    assert_eq!(created.status().as_u16(), 201);
    // Once the provider is adopted, probes are in, a decision is made and the drill shows.
    let status = eventually(DEADLINE, || async {
        let s = support::daemon::status(live.admin, "api").await?;
        let probed = s["pools"][0]["endpoints"][0]["recent"]
            .as_array()
            .is_some_and(|r| !r.is_empty());
        (probed && s["last_decision"].is_object() && s["overrides"][0].is_object()).then_some(s)
    })
    .await
    .expect("a decision, probes and the drill in the status");
    let mut times = Vec::new();
    let time_keys = [
        "at",
        "since",
        "created",
        "expires",
        "last_ok",
        "last_write_at",
    ];
    values_of(&status, &time_keys, &mut times);
    let keys: std::collections::BTreeSet<_> = times.iter().map(|(k, _)| k.as_str()).collect();
    for key in ["at", "since", "created", "expires", "last_ok"] {
        assert!(keys.contains(key), "no {key} in {status:#}");
    }
    for (key, value) in times.iter().filter(|(_, v)| !v.is_null()) {
        let text = value.as_str().unwrap_or_else(|| panic!("{key}: {value}"));
        assert!(
            text.ends_with('Z') && humantime::parse_rfc3339(text).is_ok(),
            "{key}: {text}"
        );
    }
    let mut durations = Vec::new();
    values_of(&status, &["duration"], &mut durations);
    assert!(!durations.is_empty(), "{status:#}");
    for (_, value) in durations {
        let seconds = value
            .as_f64()
            .unwrap_or_else(|| panic!("duration: {value}"));
        assert!((0.0..1.0).contains(&seconds), "{seconds}");
    }
    live.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_can_name_one_service_and_leave_the_endpoints_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let live = live(dir.path(), AdminAuth::default()).await;
    let url = |query: &str| format!("http://{}/v1/status{query}", live.admin);
    let full = eventually(DEADLINE, || async {
        let (code, body) = get(&url(""), None).await;
        let v: Value = serde_json::from_str(&body).ok()?;
        let probed = v["services"]["api"]["pools"][0]["endpoints"][0]["recent"]
            .as_array()
            .is_some_and(|r| !r.is_empty());
        (code == 200 && probed).then_some(v)
    })
    .await
    .expect("probes in the status");
    let (code, body) = get(&url("?service=api&endpoints=false"), None).await;
    assert_eq!(code, 200, "{body}");
    let compact: Value = serde_json::from_str(&body).expect("json");
    let api = &compact["services"]["api"];
    assert_eq!(api["hostname"], full["services"]["api"]["hostname"]);
    assert_eq!(api["pools"][0]["pool"], "seoul");
    assert_eq!(api["pools"][0]["endpoints"], json!([]), "{compact:#}");
    assert!(body.len() < full.to_string().len(), "{body}");
    let (code, body) = get(&url("?service=web"), None).await;
    assert_eq!((code, body.as_str()), (200, r#"{"services":{}}"#));
    for bad in ["?endpoints=maybe", "?services=api"] {
        let (code, body) = get(&url(bad), None).await;
        assert_eq!(code, 400, "{bad}: {body}");
    }
    live.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_served_on_a_listener_of_their_own() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sinks = controller::sinks(16);
    let state = state(&sinks, auth(dir.path(), true));
    let api = listen(
        &state,
        Routes::All {
            with_metrics: false,
        },
        None,
    )
    .await;
    let metrics = listen(&state, Routes::Metrics, None).await;
    let (status, body) = get(&format!("http://{metrics}/metrics"), Some("ci-secret")).await;
    assert_eq!(status, 200);
    assert!(body.contains("gslb_build_info"), "{body}");
    let (status, _) = get(&format!("http://{metrics}/metrics"), None).await;
    assert_eq!(status, 401, "the read-token rule holds there too");
    let (status, _) = get(&format!("http://{metrics}/v1/status"), Some("ci-secret")).await;
    assert_eq!(status, 404, "only /metrics");
    let (status, _) = get(&format!("http://{api}/metrics"), Some("ci-secret")).await;
    assert_eq!(status, 404, "not on the admin listener any more");
    let (status, _) = get(&format!("http://{api}/v1/status"), Some("ci-secret")).await;
    assert_eq!(status, 200);
}

/// The leaf certificate `addr` presents over TLS (unverified: only which one is asked).
async fn peer_certificate(addr: SocketAddr) -> Option<Vec<u8>> {
    let client = reqwest::Client::builder()
        .no_proxy()
        .tls_danger_accept_invalid_certs(true)
        .tls_info(true)
        .build()
        .expect("client");
    let r = client
        .get(format!("https://{addr}/healthz"))
        .send()
        .await
        .ok()?;
    assert_eq!(r.status().as_u16(), 200);
    let info = r.extensions().get::<reqwest::tls::TlsInfo>()?;
    info.peer_certificate().map(<[u8]>::to_vec)
}

fn der(pem: &str) -> Vec<u8> {
    CertificateDer::from_pem_slice(pem.as_bytes())
        .expect("PEM")
        .to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tls_listener_serves_with_the_files_and_picks_up_a_replaced_certificate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert, tls::CERT_PEM).expect("write");
    std::fs::write(&key, tls::KEY_PEM).expect("write");
    let store = Arc::new(admin::tls::CertStore::load(&cert, &key).expect("loads"));
    let acceptor = store.acceptor().expect("acceptor");
    tokio::spawn(store.clone().watch());
    let sinks = controller::sinks(16);
    let addr = listen(
        &state(&sinks, AdminAuth::default()),
        Routes::ALL,
        Some(acceptor),
    )
    .await;
    assert_eq!(peer_certificate(addr).await, Some(der(tls::CERT_PEM)));
    let plain = client().get(format!("http://{addr}/healthz")).send().await;
    assert!(plain.is_err(), "plain HTTP is not served: {plain:?}");

    // A half-written replacement does not load: the old pair keeps serving.
    std::fs::write(&cert, "-----BEGIN CERTIFICATE-----\n").expect("write");
    assert!(store.reload().is_err());
    assert_eq!(peer_certificate(addr).await, Some(der(tls::CERT_PEM)));
    // The renewed pair (both files replaced) serves within the reload interval.
    std::fs::write(&key, tls::EXPIRED_KEY_PEM).expect("write");
    std::fs::write(&cert, tls::EXPIRED_CERT_PEM).expect("write");
    let replaced = eventually(admin::tls::RELOAD_INTERVAL * 3, || async {
        (peer_certificate(addr).await? == der(tls::EXPIRED_CERT_PEM)).then_some(())
    })
    .await;
    assert!(replaced.is_some(), "the replaced certificate is served");
}

/// An HTTPS client that does not verify the certificate (the test's is self-signed for
/// another name); `token` as bearer token.
async fn get_tls(url: &str, token: Option<&str>) -> Option<(u16, String)> {
    let client = reqwest::Client::builder()
        .no_proxy()
        .tls_danger_accept_invalid_certs(true)
        .build()
        .expect("client");
    let mut req = client.get(url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().await.ok()?;
    Some((r.status().as_u16(), r.text().await.ok()?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gslb_run_serves_https_with_protected_reads_and_metrics_on_their_own_listener() {
    use gslb_cloudflare::fake::{Fake, ids};
    let fake = Fake::start().await;
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let ncp = Origin::start(loopback, "ncp").await.expect("ncp");
    let gcp = Origin::start(loopback, "gcp").await.expect("gcp");
    let secrets = tempfile::tempdir().expect("tempdir");
    let (cert, key) = (
        secrets.path().join("tls.crt"),
        secrets.path().join("tls.key"),
    );
    std::fs::write(&cert, tls::CERT_PEM).expect("write");
    std::fs::write(&key, tls::KEY_PEM).expect("write");
    let metrics = SocketAddr::from(([127, 0, 0, 1], support::daemon::free_port()));
    let [n, g] = support::cloudflare::health_urls(ncp.addr(), gcp.addr());
    let env = [
        ("GSLB_ADMIN__TLS_CERT_FILE", cert.display().to_string()),
        ("GSLB_ADMIN__TLS_KEY_FILE", key.display().to_string()),
        ("GSLB_ADMIN__METRICS_LISTEN", metrics.to_string()),
        ("GSLB_ADMIN__REQUIRE_TOKEN_FOR_READS", "true".into()),
        ("GSLB_ADMIN_TOKEN", "admin-secret".into()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let web = support::cloudflare::WebDaemon::start_with(
        &fake,
        [&n, &g],
        "[probe]\ninterval = \"200ms\"\ntimeout = \"150ms\"",
        &format!("load_balancer = \"{}\"", ids::LB_NAME),
        "",
        &env,
    );
    let admin = web.admin;
    let ready = eventually(DEADLINE, || async {
        get_tls(&format!("https://{admin}/readyz"), None)
            .await
            .filter(|(status, _)| *status == 200)
    })
    .await;
    assert!(ready.is_some(), "never ready over https:\n{}", web.log());
    let status_url = format!("https://{admin}/v1/status");
    assert_eq!(get_tls(&status_url, None).await.map(|a| a.0), Some(401));
    let (status, body) = get_tls(&status_url, Some("admin-secret"))
        .await
        .expect("answer");
    assert_eq!(status, 200, "{body}");
    let metrics_url = format!("https://{metrics}/metrics");
    let (status, body) = get_tls(&metrics_url, Some("admin-secret"))
        .await
        .expect("answer");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("process_cpu_seconds_total"), "{body}");
    assert_eq!(get_tls(&metrics_url, None).await.map(|a| a.0), Some(401));
    let on_admin = get_tls(&format!("https://{admin}/metrics"), Some("admin-secret")).await;
    assert_eq!(on_admin.map(|a| a.0), Some(404));

    // The container HEALTHCHECK finds the admin API, and that it speaks https, in the settings.
    let mut check = std::process::Command::new(env!("CARGO_BIN_EXE_gslb"));
    check
        .arg("healthcheck")
        .env("GSLB_CONFIG", web.dir.path().join("gslb.toml"))
        .envs(env.iter().copied());
    let out = tokio::task::spawn_blocking(move || check.output().expect("gslb healthcheck"))
        .await
        .expect("join");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("healthy: https://{admin}/healthz\n")
    );
}
