//! End to end: a failover's timeline, every phase observed for real.
//!
//! The real `gslb` binary (`provision`, then `run`) steers a moto Route 53 failover pair for
//! `api.example.test`, whose pools are two loopback origins on the same port, 127.0.0.2
//! (seoul) and 127.0.0.3 (tokyo), answering `X-Served-By: <region>`. The test's own
//! authoritative DNS server (hickory-server, zone `example.test.`, TTL 1 s) answers
//! `api.example.test` with seoul's address, and switches the A record to tokyo's once Route 53
//! (moto) serves the change and gslb has read it back in sync, standing in for Route 53's
//! propagation. The policy's `[observe]` resolves the name through that
//! server and requests `http://api.example.test:<port>/` like a client.
//!
//! Stopping seoul must produce a timeline, at `GET /v1/events` and in `gslb events`, with all
//! seven phases in order, also written to the audit log and the phase histograms; after a
//! restart, `gslb events` still shows it (read back from the audit log).

mod support;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use gslb::io::origin::Origin;
use serde_json::Value;
use support::authoritative::Authoritative;
use support::daemon::{Daemon, free_port, log_file, read_log, status};
use support::emulators::{Emulator, Kind};
use support::eventually;
use support::route53::{create_zone, gslb, sdk, verdict_check};

const SEOUL: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
const TOKYO: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);
const PHASES: [&str; 7] = [
    "first_failed_probe",
    "marked_down",
    "decision",
    "provider_accepted",
    "provider_in_sync",
    "dns_observed",
    "served_by_observed",
];

/// The newest timeline of `api` at `GET /v1/events`, when there is one.
async fn newest_timeline(admin: SocketAddr) -> Option<Value> {
    let r = reqwest::get(format!("http://{admin}/v1/events?service=api&limit=1"))
        .await
        .ok()?;
    let v: Value = serde_json::from_slice(&r.bytes().await.ok()?).ok()?;
    v["timelines"].get(0).cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_timeline_has_every_phase_in_order_and_survives_a_restart() {
    let moto = Emulator::start(Kind::Moto);
    let client = sdk(&moto.endpoint());
    let zone_id = create_zone(&client, "example.test.").await;
    let mut seoul = Origin::start(SocketAddr::from((SEOUL, 0)), "ap-northeast-2")
        .await
        .expect("seoul origin");
    let port = seoul.addr().port();
    let _tokyo = Origin::start(SocketAddr::from((TOKYO, port)), "ap-northeast-1")
        .await
        .expect("tokyo origin on the same port");
    let dns = Authoritative::start("example.test.", "api.example.test.", 1, SEOUL).await;

    let dir = tempfile::tempdir().expect("tempdir");
    let policy = format!(
        r#"service = "api"
hostname = "api.example.test"
failback = "manual"
[probe]
interval = "200ms"
timeout = "150ms"
[health]
fall = 3
rise = 2
[[pools]]
name = "seoul"
priority = 1
region = "ap-northeast-2"
endpoints = ["http://{SEOUL}:{port}/health"]
[[pools]]
name = "tokyo"
priority = 2
region = "ap-northeast-1"
endpoints = ["http://{TOKYO}:{port}/health"]
[target.route53]
hosted_zone_id = "{zone_id}"
ttl = "1s"
[target.route53.pools.seoul]
values = ["{SEOUL}"]
[target.route53.pools.tokyo]
values = ["{TOKYO}"]
[observe]
nameservers = ["{dns}"]
interval = "200ms"
window = "1m"
url = "http://api.example.test:{port}/"
served_by_header = "X-Served-By"
"#,
        dns = dns.addr,
    );
    std::fs::write(dir.path().join("api.toml"), policy).expect("policy");
    let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let settings = format!(
        "vantage = \"e2e\"\npolicies = [\"api.toml\"]\n[admin]\nlisten = \"{admin}\"\n[route53]\nendpoint_url = \"{}\"\nrequests_per_second = 50\n[reconcile]\nresync = \"300ms\"\n",
        moto.endpoint()
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
    let daemon = Daemon(
        gslb(dir.path(), &["run", "--config", "gslb.toml"])
            .stderr(log_file(dir.path(), "run.log"))
            .spawn()
            .expect("run"),
    );
    let log = || read_log(dir.path(), "run.log");
    eventually(Duration::from_secs(15), || async {
        status(admin, "api")
            .await
            .filter(|s| s["apply"]["state"] == "applied" && s["active"] == "seoul")
    })
    .await
    .unwrap_or_else(|| panic!("never applied on seoul:\n{}", log()));

    seoul.stop().await;
    // Route 53 serves the change: seoul's verdict check is inverted...
    eventually(Duration::from_secs(10), || async {
        verdict_check(&client, &zone_id, "seoul")
            .await
            .1
            .then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("seoul's verdict check never inverted:\n{}", log()));
    // ...gslb read it back in sync, and then the change propagates to the name servers.
    eventually(Duration::from_secs(10), || async {
        newest_timeline(admin)
            .await
            .filter(|t| !t["phases"]["provider_in_sync"].is_null())
    })
    .await
    .unwrap_or_else(|| panic!("no timeline in sync:\n{}", log()));
    dns.set_address(TOKYO).await;

    let complete = eventually(Duration::from_secs(20), || async {
        newest_timeline(admin)
            .await
            .filter(|t| t["status"] == "complete")
    })
    .await;
    let Some(t) = complete else {
        let last = newest_timeline(admin).await.unwrap_or_default();
        panic!("the timeline never completed: {last:#}\n{}", log());
    };
    assert_eq!(
        (&t["kind"], &t["rule"], &t["from"], &t["to"]),
        (
            &Value::from("automatic"),
            &Value::from("failover"),
            &Value::from("seoul"),
            &Value::from("tokyo")
        ),
        "{t:#}"
    );
    let times: Vec<std::time::SystemTime> = PHASES
        .iter()
        .map(|p| {
            t["phases"][p]
                .as_str()
                .and_then(|at| humantime::parse_rfc3339(at).ok())
                .unwrap_or_else(|| panic!("phase {p} missing or not RFC 3339: {t:#}"))
        })
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "phases out of order {times:?}: {t:#}"
    );
    assert!(
        t["observed"]["served_by_observed"]
            .as_str()
            .is_some_and(|d| d.contains("X-Served-By: ap-northeast-1")),
        "{t:#}"
    );
    assert!(
        t["observed"]["dns_observed"]
            .as_str()
            .is_some_and(|d| d.contains("127.0.0.3")),
        "{t:#}"
    );

    // The CLI prints it as a drill report.
    let out = gslb(
        dir.path(),
        &[
            "events",
            "--admin",
            &format!("http://{admin}"),
            "--service",
            "api",
        ],
    )
    .output()
    .expect("gslb events");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{report}");
    let mut from = 0;
    for line in [
        "api: seoul -> tokyo (automatic, failover), complete",
        "first failed probe",
        "marked down",
        "provider in sync",
        "first response served by the new pool (200 X-Served-By: ap-northeast-1)",
        "detection time",
        "decision time",
        "apply time",
        "DNS-observed time",
        "read RTO",
    ] {
        let at = report[from..]
            .find(line)
            .unwrap_or_else(|| panic!("missing or out of order: {line:?}\n{report}"));
        from += at + line.len();
    }
    // Every figure of the DR report is measured (none is `-`).
    for name in [
        "detection time",
        "decision time",
        "apply time",
        "in sync time",
        "DNS-observed time",
        "read RTO",
    ] {
        let row = report
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name} row:\n{report}"));
        assert!(
            row.contains(" ms  ("),
            "{name} not measured: {row}\n{report}"
        );
    }

    let bad = reqwest::get(format!("http://{admin}/v1/events?limit=many"))
        .await
        .expect("events");
    assert_eq!(bad.status(), 400, "a query that does not parse is refused");

    // The phase histograms and the audit log have it too.
    let metrics = reqwest::get(format!("http://{admin}/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    assert!(
        metrics.contains(
            "gslb_failover_phase_seconds_count{phase=\"served_by_observed\",service=\"api\"} 1"
        ),
        "{metrics}"
    );
    let audit = eventually(Duration::from_secs(5), || async {
        read_log(dir.path(), "state/audit.jsonl")
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("audit line"))
            .find(|e| e["action"] == "failover.timeline")
    })
    .await
    .expect("the closed timeline is in the audit log");
    assert_eq!(audit["result"], "complete");
    assert_eq!(audit["detail"]["id"], t["id"]);

    // A restart (the process killed, as a crash would): the new process reads the timeline
    // back from the audit log, and `gslb events` still shows it.
    drop(daemon);
    let _daemon = Daemon(
        gslb(dir.path(), &["run", "--config", "gslb.toml"])
            .stderr(log_file(dir.path(), "run-again.log"))
            .spawn()
            .expect("run again"),
    );
    let again = eventually(Duration::from_secs(15), || async {
        newest_timeline(admin).await.filter(|n| n["id"] == t["id"])
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "no timeline after the restart:\n{}",
            read_log(dir.path(), "run-again.log")
        )
    });
    assert_eq!(again, t, "the same timeline, as it closed");
    let out = gslb(
        dir.path(),
        &[
            "events",
            "--admin",
            &format!("http://{admin}"),
            "--service",
            "api",
        ],
    )
    .output()
    .expect("gslb events after the restart");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{report}");
    assert!(
        report.contains("api: seoul -> tokyo (automatic, failover), complete"),
        "{report}"
    );
}
