//! End to end: a drill drain and restore round trip through the real `gslb run`, the `gslb
//! drill` command and the fake Cloudflare API (validating every body against the official
//! OpenAPI subset).
//!
//! Draining the serving pool moves it out of `default_pools`' first place and disables it with
//! a pool PATCH carrying only `enabled`; ending the drill reverts both through the same rules
//! and rails (a restore of the preferred pool).

mod support;

use std::net::SocketAddr;
use std::process::{Command, Output};
use std::time::Duration;

use gslb::io::origin::Origin;
use gslb_cloudflare::fake::{Fake, ids};
use support::cloudflare::WebDaemon;
use support::daemon::status;
use support::eventually;

fn drill(admin: SocketAddr, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gslb"))
        .arg("drill")
        .args(args)
        .env("GSLB_ADMIN_URL", format!("http://{admin}"))
        .env("USER", "alice")
        .output()
        .expect("gslb drill")
}

fn enabled(fake: &Fake, pool: &str) -> bool {
    fake.pool(pool)["enabled"].as_bool().unwrap_or(true)
}

/// The fake, origins ncp and gcp, and the daemon steering `web`, once ncp serves (applied)
/// and both pools are healthy: a drain then moves traffic (else it is held, exit code 3).
async fn steady() -> (Fake, Origin, Origin, WebDaemon) {
    let fake = Fake::start().await;
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let ncp = Origin::start(loopback, "ncp").await.expect("origin");
    let gcp = Origin::start(loopback, "gcp").await.expect("origin");
    let web = WebDaemon::start(
        &fake,
        ncp.addr(),
        gcp.addr(),
        "min_dwell = \"1s\"\n[probe]\ninterval = \"200ms\"\ntimeout = \"150ms\"",
        "ttl = \"1s\"",
    );
    let admin = web.admin;
    eventually(Duration::from_secs(15), || async {
        status(admin, "web")
            .await
            .filter(|s| s["apply"]["state"] == "applied" && s["active"] == "ncp")
            .filter(|s| s["pools"][1]["state"]["verdict"] == "healthy")
    })
    .await
    .unwrap_or_else(|| panic!("never applied on ncp:\n{}", web.log()));
    (fake, ncp, gcp, web)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drill_drain_and_restore_round_trip() {
    let (fake, _ncp, _gcp, web) = steady().await;
    let admin = web.admin;
    assert_eq!(fake.writes(), 0);

    // Drain the serving pool.
    let out = drill(
        admin,
        &[
            "drain",
            "--service",
            "web",
            "--pool",
            "ncp",
            "--for",
            "10m",
            "--reason",
            "quarterly DR drill",
        ],
    );
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = said
        .split_whitespace()
        .find(|w| w.starts_with("d-"))
        .expect("the drill's id")
        .to_owned();
    let drained = eventually(Duration::from_secs(10), || async {
        (fake.default_pools() == [ids::GCP, ids::NCP] && !enabled(&fake, ids::NCP)).then_some(())
    })
    .await;
    assert!(drained.is_some(), "not drained:\n{}", web.log());
    assert!(
        enabled(&fake, ids::GCP),
        "only the drained pool is disabled"
    );
    let pool_writes: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH" && r.path.contains("/pools/"))
        .collect();
    assert_eq!(pool_writes.len(), 1, "{pool_writes:?}");
    assert!(pool_writes[0].path.ends_with(ids::NCP));
    let listed = drill(admin, &["list"]);
    assert!(String::from_utf8_lossy(&listed.stdout).contains(&id));

    // End it: traffic returns to ncp and ncp is enabled again.
    let out = drill(admin, &["end", &id, "--reason", "drill over"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let restored = eventually(Duration::from_secs(15), || async {
        (fake.default_pools() == [ids::NCP, ids::GCP] && enabled(&fake, ids::NCP)).then_some(())
    })
    .await;
    assert!(restored.is_some(), "not restored:\n{}", web.log());
    let settled = eventually(Duration::from_secs(10), || async {
        status(admin, "web").await.filter(|s| {
            s["apply"]["state"] == "applied"
                && s["active"] == "ncp"
                && s["overrides"].as_array().is_some_and(Vec::is_empty)
        })
    })
    .await;
    assert!(settled.is_some(), "{:?}", status(admin, "web").await);
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
    let audit =
        std::fs::read_to_string(web.dir.path().join("state/audit.jsonl")).expect("audit log");
    for action in [
        "drill.drain",
        "drill.end",
        "drill.restore",
        "drill.complete",
    ] {
        assert!(
            audit.contains(&format!("\"action\":\"{action}\"")),
            "{action}:\n{audit}"
        );
    }
}

/// Issue 12, part 4: `gslb drill` says when a drill is accepted but not in effect, with the
/// reason and exit code 3: a drain of the load balancer's fallback pool (gcp) is ignored, and
/// a drain of the serving pool while no other pool is healthy is held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drill_that_is_held_or_ignored_says_so_and_exits_3() {
    let (_fake, _ncp, gcp, web) = steady().await;
    let admin = web.admin;
    let start = |pool: &str| {
        let args = [
            "drain",
            "--service",
            "web",
            "--pool",
            pool,
            "--reason",
            "drill",
        ];
        drill(admin, &args)
    };

    let out = start("gcp");
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(3), "{said}");
    assert!(said.contains("drain web/gcp"), "{said}");
    assert!(
        said.contains(
            "but it is ignored: drain of pool gcp ignored: it is the load balancer's fallback pool"
        ),
        "{said}"
    );
    let id = said
        .split_whitespace()
        .find(|w| w.starts_with("d-"))
        .expect("the drill's id")
        .to_owned();
    let ended = drill(admin, &["end", &id, "--reason", "drill over"]);
    assert!(ended.status.success(), "{ended:?}");

    gcp.set_mode(gslb::io::origin::Mode::Status(503));
    eventually(Duration::from_secs(15), || async {
        status(admin, "web")
            .await
            .filter(|s| s["pools"][1]["state"]["verdict"] == "unhealthy")
    })
    .await
    .unwrap_or_else(|| panic!("gcp never down:\n{}", web.log()));
    let out = start("ncp");
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(3), "{said}");
    assert!(
        said.contains("drain web/ncp") && said.contains("but it is held: a drill drains ncp but no other pool is healthy: keeping ncp (never zero serving pools)"),
        "{said}"
    );
    assert_eq!(
        status(admin, "web").await.map(|s| s["active"].clone()),
        Some("ncp".into())
    );
}
