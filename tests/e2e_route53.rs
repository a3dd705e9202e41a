//! End to end: the real `gslb` binary (`provision`, then `run`) against two loopback origins
//! and the moto Route 53 emulator, with a counting proxy between gslb and moto.
//!
//! Covers: stopping the primary origin inverts the primary's verdict check within
//! fall × interval + 2 s and leaves the secondary's alone; zero writes while both origins are
//! healthy; all pools down -> no write and a status that says it holds and why; a controller
//! restarted mid-failover makes no write at start and does not flip back.

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use gslb::io::origin::Origin;
use support::daemon::{Daemon, free_port, log_file, read_log, status};
use support::emulators::{Emulator, Kind};
use support::eventually;
use support::proxy::CountingProxy;
use support::route53::{create_zone, gslb, sdk, verdict_check};

const INTERVAL_MS: u64 = 200;
const FALL: u64 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_through_route53_verdict_checks() {
    let moto = Emulator::start(Kind::Moto);
    let client = sdk(&moto.endpoint());
    let zone_id = create_zone(&client, "example.test.").await;
    let proxy = CountingProxy::start(&moto.endpoint()).await;

    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut seoul = Origin::start(loopback, "seoul")
        .await
        .expect("seoul origin");
    let mut tokyo = Origin::start(loopback, "tokyo")
        .await
        .expect("tokyo origin");
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = format!(
        r#"service = "api"
hostname = "api.example.test"
failback = "manual"
[probe]
interval = "{INTERVAL_MS}ms"
timeout = "150ms"
body_contains = "ok"
[health]
fall = {FALL}
rise = 2
{pools}"#,
        pools = support::policy::seoul_tokyo_route53(
            &format!("http://{}/api/v1/health", seoul.addr()),
            &format!("http://{}/api/v1/health", tokyo.addr()),
            &zone_id,
        ),
    );
    std::fs::write(dir.path().join("api.toml"), policy).expect("policy");
    let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let settings = format!(
        "vantage = \"e2e\"\npolicies = [\"api.toml\"]\n[admin]\nlisten = \"{admin}\"\n[route53]\nendpoint_url = \"{}\"\nrequests_per_second = 50\n[reconcile]\nresync = \"300ms\"\n",
        proxy.url
    );
    std::fs::write(dir.path().join("gslb.toml"), settings).expect("settings");

    let out = gslb(dir.path(), &["provision", "--config", "gslb.toml"])
        .output()
        .expect("provision");
    assert!(
        out.status.success(),
        "provision failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (seoul_check, inverted) = verdict_check(&client, &zone_id, "seoul").await;
    assert!(!inverted);

    // Steady state: both healthy, the controller applied (nothing to change) and then keeps
    // reading on every resync without writing.
    let daemon = Daemon(
        gslb(dir.path(), &["run", "--config", "gslb.toml"])
            .stderr(log_file(dir.path(), "run1.log"))
            .spawn()
            .expect("run"),
    );
    let applied = eventually(Duration::from_secs(15), || async {
        status(admin, "api")
            .await
            .filter(|s| s["apply"]["state"] == "applied" && s["active"] == "seoul")
    })
    .await;
    assert!(
        applied.is_some(),
        "controller never reached applied state:\n{}",
        read_log(dir.path(), "run1.log")
    );
    let (reads0, writes0) = proxy.counts.get();
    eventually(Duration::from_secs(15), || async {
        (proxy.counts.get().0 >= reads0 + 10).then_some(())
    })
    .await
    .expect("resync passes keep reading");
    assert_eq!(
        proxy.counts.get().1,
        writes0,
        "steady state must make zero writes"
    );

    // Stop the primary: its verdict check is inverted within fall × interval + 2 s.
    let stopped = Instant::now();
    seoul.stop().await;
    let deadline = Duration::from_millis(FALL * INTERVAL_MS + 2_000);
    let flipped = eventually(deadline, || async {
        verdict_check(&client, &zone_id, "seoul")
            .await
            .1
            .then_some(())
    })
    .await;
    let took = stopped.elapsed();
    assert!(
        flipped.is_some(),
        "seoul's verdict check was not inverted within {deadline:?}"
    );
    assert!(took <= deadline, "took {took:?}");
    let (_, tokyo_inverted) = verdict_check(&client, &zone_id, "tokyo").await;
    assert!(!tokyo_inverted, "the secondary's check must be left alone");
    let (_, writes1) = proxy.counts.get();
    assert_eq!(
        writes1 - writes0,
        1,
        "exactly one write: invert seoul's verdict check"
    );
    assert_eq!(
        verdict_check(&client, &zone_id, "seoul").await.0,
        seoul_check,
        "same check, not a new one"
    );

    // Every pool down: hold, say why, write nothing.
    tokyo.stop().await;
    let holding = eventually(Duration::from_secs(10), || async {
        status(admin, "api").await.filter(|s| {
            s["holding"]
                .as_str()
                .is_some_and(|h| h.starts_with("fail_static"))
        })
    })
    .await
    .expect("status says it is holding");
    assert!(
        holding["holding"]
            .as_str()
            .unwrap_or("")
            .contains("no pool is healthy"),
        "{holding}"
    );
    let (reads2, _) = proxy.counts.get();
    eventually(Duration::from_secs(10), || async {
        (proxy.counts.get().0 >= reads2 + 5).then_some(())
    })
    .await
    .expect("still reading");
    assert_eq!(proxy.counts.get().1, writes1, "fail static writes nothing");

    // Restart mid-failover with seoul healthy again: adopt tokyo, no write, no flip back.
    drop(daemon);
    seoul.start_again().await.expect("restart seoul");
    tokyo.start_again().await.expect("restart tokyo");
    let (reads3, writes3) = proxy.counts.get();
    let _daemon = Daemon(
        gslb(dir.path(), &["run", "--config", "gslb.toml"])
            .stderr(log_file(dir.path(), "run2.log"))
            .spawn()
            .expect("run again"),
    );
    let held = eventually(Duration::from_secs(15), || async {
        status(admin, "api").await.filter(|s| {
            s["last_decision"]["rule"] == "failback_manual" && s["apply"]["state"] == "applied"
        })
    })
    .await
    .expect("restarted controller holds on tokyo under manual failback");
    assert_eq!(held["active"], "tokyo");
    eventually(Duration::from_secs(10), || async {
        (proxy.counts.get().0 >= reads3 + 10).then_some(())
    })
    .await
    .expect("restarted controller reads");
    assert_eq!(
        proxy.counts.get().1,
        writes3,
        "a restarted controller writes nothing"
    );
    assert!(
        verdict_check(&client, &zone_id, "seoul").await.1,
        "seoul stays failed over"
    );
}
