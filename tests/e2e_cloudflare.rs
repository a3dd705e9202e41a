//! End to end: the real `gslb run` against two loopback origins (NCP, GCP) and the fake
//! Cloudflare API (`gslb_cloudflare::fake`, validating every body against the official
//! OpenAPI subset), the token given in `CLOUDFLARE_API_TOKEN`.
//!
//! Covers: a pool list holding an object with unknown fields and enum values, and a malformed
//! foreign pool, is read; zero writes in steady state (counted at the fake); stopping the
//! primary origin reorders `default_pools` within fall × interval + 2 s with exactly one
//! write and steering `off`; a concurrent writer that reverts gslb's writes is detected,
//! bounded and reported as a write fight (status, metric, log); the token never appears in
//! the logs; `gslb plan` prints the reorder it would write and writes nothing.

mod support;

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use gslb::io::origin::Origin;
use gslb_cloudflare::fake::{Fake, ids};
use serde_json::json;
use support::cloudflare::WebDaemon;
use support::daemon::{free_port, status};
use support::eventually;

const INTERVAL_MS: u64 = 200;
const FALL: u64 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_through_cloudflare_default_pools() {
    let fake = Fake::start().await;
    // A newer API: fields and enum values the 2024 schema does not know, and a foreign pool
    // gslb cannot parse at all. Neither may stop gslb.
    let mut ncp = fake.pool(ids::NCP);
    ncp["health_sources"] = json!(["regional", "global"]);
    ncp["origin_steering"] = json!({"policy": "quantum"});
    ncp["origins"][0]["port"] = json!(8443);
    fake.put_pool(ids::NCP, ncp.clone());
    fake.put_pool(
        "ffff0000ffff0000ffff0000ffff0000",
        json!({"id": "ffff0000ffff0000ffff0000ffff0000", "origins": "not-a-list"}),
    );

    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut ncp_origin = Origin::start(loopback, "ncp").await.expect("ncp origin");
    let gcp_origin = Origin::start(loopback, "gcp").await.expect("gcp origin");
    let web = WebDaemon::start(
        &fake,
        ncp_origin.addr(),
        gcp_origin.addr(),
        &format!(
            "failback = \"manual\"\n[probe]\ninterval = \"{INTERVAL_MS}ms\"\ntimeout = \"150ms\"\nbody_contains = \"ok\"\n[health]\nfall = {FALL}\nrise = 2"
        ),
        &format!("load_balancer = \"{}\"", ids::LB_NAME),
    );
    let admin = web.admin;

    // Steady state: applied on NCP, then resync after resync without a write.
    let applied = eventually(Duration::from_secs(15), || async {
        status(admin, "web")
            .await
            .filter(|s| s["apply"]["state"] == "applied" && s["active"] == "ncp")
    })
    .await;
    assert!(applied.is_some(), "never applied:\n{}", web.log());
    let reads0 = fake.requests().len();
    eventually(Duration::from_secs(15), || async {
        (fake.requests().len() >= reads0 + 10).then_some(())
    })
    .await
    .expect("resync passes keep reading");
    assert_eq!(fake.writes(), 0, "steady state must make zero writes");

    // Stop the primary: default_pools is reordered within fall × interval + 2 s.
    let stopped = Instant::now();
    ncp_origin.stop().await;
    let deadline = Duration::from_millis(FALL * INTERVAL_MS + 2_000);
    let want = vec![ids::GCP.to_owned(), ids::NCP.to_owned()];
    let moved = eventually(deadline, || async {
        (fake.default_pools() == want).then_some(())
    })
    .await;
    let took = stopped.elapsed();
    assert!(
        moved.is_some(),
        "default_pools not reordered within {deadline:?}:\n{}",
        web.log()
    );
    assert!(took <= deadline, "took {took:?}");
    assert_eq!(
        fake.writes(),
        1,
        "exactly one write: the load balancer's default_pools"
    );
    let lb = fake.load_balancer();
    assert_eq!(lb["steering_policy"], "off");
    assert_eq!(lb["fallback_pool"], ids::GCP, "nothing else changed");
    assert_eq!(
        fake.pool(ids::NCP),
        ncp,
        "the pool itself is never written by a failover"
    );

    // Applied after the read-back, and still no further writes.
    eventually(Duration::from_secs(10), || async {
        status(admin, "web")
            .await
            .filter(|s| s["apply"]["state"] == "applied" && s["active"] == "gcp")
    })
    .await
    .expect("applied on GCP");
    assert_eq!(fake.writes(), 1);

    // Another writer puts NCP first again and reverts every gslb write: gslb re-applies a
    // bounded number of times, then reports a write fight and stops writing.
    fake.reverter(true);
    fake.edit_load_balancer(json!({"default_pools": [ids::NCP, ids::GCP]}));
    let fight = eventually(Duration::from_secs(20), || async {
        status(admin, "web")
            .await
            .filter(|s| s["apply"]["write_fight"].is_string())
    })
    .await
    .unwrap_or_else(|| panic!("no write fight reported:\n{}", web.log()));
    let limit = gslb_core::planner::WRITE_FIGHT_LIMIT as u64;
    assert_eq!(fight["apply"]["drift"], limit, "{fight}");
    assert_eq!(
        u64::from(fake.reverts()),
        limit,
        "each re-apply was reverted"
    );
    let metrics = reqwest::get(format!("http://{admin}/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    assert!(
        metrics
            .contains(r#"gslb_provider_write_fights_total{provider="cloudflare",service="web"} 1"#),
        "{metrics}"
    );
    assert!(web.log().contains("write fight"));
    // Bounded: while probes go on (ten more results for GCP), gslb writes nothing more.
    let probes = || async {
        let text = reqwest::get(format!("http://{admin}/metrics"))
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        text.lines()
            .filter(|l| l.starts_with("gslb_probes_total") && l.contains(r#"pool="gcp""#))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .reduce(|a, b| a + b)
    };
    let before = probes().await.expect("probe count");
    eventually(Duration::from_secs(10), || async {
        probes().await.filter(|n| *n >= before + 10.0)
    })
    .await
    .expect("probing goes on");
    assert_eq!(u64::from(fake.reverts()), limit, "gslb stopped fighting");

    // Every body exchanged matched the schema, except the oddities planted above.
    for v in fake.violations() {
        assert!(v.contains("quantum") || v.contains("not-a-list"), "{v}");
    }
    assert!(!web.log().contains(ids::TOKEN), "the token was logged");
}

#[test]
fn run_without_a_cloudflare_token_is_a_configuration_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("web.toml"),
        include_str!("../policies/web-ncp-gcp.toml"),
    )
    .expect("policy");
    let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
    std::fs::write(
        dir.path().join("gslb.toml"),
        format!("policies = [\"web.toml\"]\n[admin]\nlisten = \"{admin}\"\n[cloudflare]\ntoken_env = \"GSLB_TEST_NO_SUCH_TOKEN\"\n"),
    )
    .expect("settings");
    let out = Command::new(env!("CARGO_BIN_EXE_gslb"))
        .args(["run", "--config", "gslb.toml"])
        .current_dir(dir.path())
        .env_remove("GSLB_TEST_NO_SUCH_TOKEN")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no Cloudflare API token") && stderr.contains("GSLB_TEST_NO_SUCH_TOKEN"),
        "{stderr}"
    );
}

/// `gslb plan` against the fake with the primary origin down: the reorder of `default_pools`
/// is printed with its reasons, and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_prints_the_reorder_and_writes_nothing() {
    let fake = Fake::start().await;
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut ncp = Origin::start(loopback, "ncp").await.expect("ncp origin");
    let gcp = Origin::start(loopback, "gcp").await.expect("gcp origin");
    let [n, g] = support::cloudflare::health_urls(ncp.addr(), gcp.addr());
    let (dir, _) = support::cloudflare::web_files(
        &fake,
        [&n, &g],
        "[probe]\ninterval = \"200ms\"\ntimeout = \"150ms\"\n[health]\nfall = 3\nrise = 2",
        &format!("load_balancer = \"{}\"", ids::LB_NAME),
        "",
    );
    ncp.stop().await;
    let before = fake.default_pools();
    let out = support::cloudflare::gslb(dir.path(), &["plan", "--config", "gslb.toml"])
        .output()
        .expect("plan");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(2),
        "changes pending: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("provider serves: ncp"), "{text}");
    assert!(text.contains("decision: failover -> gcp"), "{text}");
    assert!(text.contains("last: connection_refused"), "{text}");
    let reorder = format!(
        "set default_pools from [{n}, {g}] to [{g}, {n}]",
        n = ids::NCP,
        g = ids::GCP
    );
    assert!(text.contains(&reorder), "{text}");
    assert_eq!(fake.writes(), 0, "plan writes nothing");
    assert_eq!(fake.default_pools(), before);
}
