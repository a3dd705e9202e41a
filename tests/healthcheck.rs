//! `gslb healthcheck` (the container HEALTHCHECK) against the real admin API on loopback: 0 on
//! `/healthz` 200, 1 on any other status, no answer or unreadable settings (never Docker's
//! reserved 2); without `--url` it finds the admin address in `GSLB_CONFIG`'s settings.

mod support;

use std::net::SocketAddr;
use std::process::{Command, Output};
use std::sync::Arc;

use gslb::admin::{self, AdminState};
use gslb::ops::metrics::Metrics;
use gslb::ops::status::StatusBoard;

/// Serves the admin API (no token, no drills) on 127.0.0.1:<free port>.
async fn admin_api() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let state = AdminState {
        board: Arc::new(StatusBoard::default()),
        metrics: Metrics::new(),
        commands: None,
        auth: Default::default(),
        timelines: Default::default(),
        health: Default::default(),
        clock: gslb::io::clock::Clock::system(),
    };
    tokio::spawn(async move { admin::serve(listener, state).await });
    addr
}

/// Runs `gslb healthcheck args` with `GSLB_CONFIG` = `config` (or unset), off the runtime.
async fn healthcheck(args: &[&str], config: Option<&std::path::Path>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gslb"));
    cmd.arg("healthcheck")
        .args(args)
        .env_remove("GSLB_ADMIN__LISTEN")
        .env_remove("GSLB_CONFIG");
    if let Some(c) = config {
        cmd.env("GSLB_CONFIG", c);
    }
    tokio::task::spawn_blocking(move || cmd.output().expect("run gslb healthcheck"))
        .await
        .expect("join")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_200_is_healthy_and_anything_else_exits_1() {
    let addr = admin_api().await;
    let ok = healthcheck(&["--url", &format!("http://{addr}/healthz")], None).await;
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert_eq!(
        String::from_utf8_lossy(&ok.stdout),
        format!("healthy: http://{addr}/healthz\n")
    );

    let missing = healthcheck(&["--url", &format!("http://{addr}/nope")], None).await;
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        stderr(&missing).contains("HTTP 404"),
        "{}",
        stderr(&missing)
    );

    let closed = support::daemon::free_port();
    let down = healthcheck(
        &["--url", &format!("http://127.0.0.1:{closed}/healthz")],
        None,
    )
    .await;
    assert_eq!(down.status.code(), Some(1));
    assert!(stderr(&down).contains("refused"), "{}", stderr(&down));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_url_it_checks_the_admin_address_of_the_settings() {
    let addr = admin_api().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let settings = dir.path().join("gslb.toml");
    // As in the container: listening on every address, checked on loopback.
    std::fs::write(
        &settings,
        format!("[admin]\nlisten = \"0.0.0.0:{}\"\n", addr.port()),
    )
    .expect("write");
    let ok = healthcheck(&[], Some(&settings)).await;
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert_eq!(
        String::from_utf8_lossy(&ok.stdout),
        format!("healthy: http://127.0.0.1:{}/healthz\n", addr.port())
    );

    std::fs::write(&settings, "[admin]\nport = 1\n").expect("write");
    let bad = healthcheck(&[], Some(&settings)).await;
    assert_eq!(bad.status.code(), Some(1), "Docker reserves exit code 2");
    assert!(stderr(&bad).contains("gslb.toml"), "{}", stderr(&bad));
}
