//! A pool that flaps steadily is reported as flapping without waiting for a decision (issue
//! 26): the real `gslb run` steering the Cloudflare fake, pool `ncp`'s origin answering 200 and
//! 503 by turns (a real HTTP server on loopback), `fall = 3`, `rise = 2`. The endpoint never
//! reaches `fall` (nor `rise`), so the service is never re-decided; still `/metrics` shows
//! `gslb_pool_flap_percent` above `flapping.high` and `gslb_pool_flapping` 1 within the flap
//! history of 21 probes, `/v1/status` shows the pool's `flap_percent`, and promtool fires
//! PoolFlapping on the scraped series held for 11 minutes.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use gslb::io::origin::Origin;
use gslb_cloudflare::fake::{Fake, ids};
use prometheus_parse::{Scrape, Value};
use support::cloudflare::WebDaemon;
use support::daemon::status;
use support::eventually;
use support::tls::read_head;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

/// An origin answering 200 `ok` and 503 by turns, one answer per connection.
async fn flapping_origin() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let answered = Arc::new(AtomicU64::new(0));
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let n = answered.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                read_head(&mut stream).await;
                let answer: &[u8] = if n.is_multiple_of(2) {
                    b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"
                } else {
                    b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                };
                let _ = stream.write_all(answer).await;
            });
        }
    });
    addr
}

/// The value of `family{service="web",pool}` in the daemon's `/metrics`, when scraped.
async fn pool_gauge(admin: SocketAddr, family: &str, pool: &str) -> Option<f64> {
    let text = reqwest::get(format!("http://{admin}/metrics"))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    let scrape = Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).ok()?;
    scrape
        .samples
        .iter()
        .find(|s| {
            s.metric == family
                && s.labels.get("service") == Some("web")
                && s.labels.get("pool") == Some(pool)
        })
        .and_then(|s| match s.value {
            Value::Gauge(v) | Value::Untyped(v) => Some(v),
            _ => None,
        })
}

/// Runs promtool's rule tests on the alert rules with `gslb_pool_flapping` of pool `ncp` at
/// `value` for 15 minutes; whether PoolFlapping fires at 11 minutes as the test expects.
fn promtool_fires_pool_flapping(value: f64) -> Option<()> {
    let promtool = support::emulators::tool("promtool")?;
    let rules = support::emulators::workspace_root().join("deploy/prometheus/gslb-alerts.yml");
    let dir = tempfile::tempdir().expect("tempdir");
    let test = format!(
        r#"rule_files:
  - {rules}
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'gslb_pool_flapping{{service="web",pool="ncp"}}'
        values: '{value}x15'
    alert_rule_test:
      - eval_time: 11m
        alertname: PoolFlapping
        exp_alerts:
          - exp_labels:
              severity: critical
              service: web
              pool: ncp
            exp_annotations:
              summary: "gslb: pool ncp of service web is flapping"
              description: "Pool ncp of service web has alternated between up and down for 10 minutes. Flap damping holds failback to it; the origin is unstable."
              runbook_url: "docs/metrics-and-alerts.md#poolflapping"
"#,
        rules = rules.display()
    );
    let file = dir.path().join("scraped.test.yml");
    std::fs::write(&file, test).expect("write");
    let out = std::process::Command::new(promtool)
        .args(["test", "rules"])
        .arg(&file)
        .output()
        .expect("promtool");
    assert!(
        out.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steadily_flapping_pool_is_flapping_without_a_decision() {
    let fake = Fake::start().await;
    let flappy = flapping_origin().await;
    let gcp = Origin::start(SocketAddr::from(([127, 0, 0, 1], 0)), "gcp")
        .await
        .expect("gcp origin");
    let web = WebDaemon::start_with(
        &fake,
        [
            &format!("http://{flappy}/api/v1/health"),
            &format!("http://{}/api/v1/health", gcp.addr()),
        ],
        "[probe]\ninterval = \"200ms\"\ntimeout = \"150ms\"\n[health]\nfall = 3\nrise = 2",
        &format!("load_balancer = \"{}\"", ids::LB_NAME),
        "",
        &[],
    );
    let admin = web.admin;
    // 21 probes fill the flap history: about 4 s at 200 ms.
    let flapping = eventually(Duration::from_secs(30), || async {
        pool_gauge(admin, "gslb_pool_flapping", "ncp")
            .await
            .filter(|v| *v == 1.0)
    })
    .await;
    assert!(flapping.is_some(), "never flapping:\n{}", web.log());
    let percent = pool_gauge(admin, "gslb_pool_flap_percent", "ncp")
        .await
        .expect("scraped");
    assert!(percent >= 30.0, "flap percent {percent}");
    // Never re-decided: the endpoint reached neither fall nor rise. The status shows the
    // pool's flap figures as of its last tick (at most 1 s later).
    let ncp = eventually(Duration::from_secs(5), || async {
        let s = status(admin, "web").await?;
        s["pools"]
            .as_array()?
            .iter()
            .find(|p| p["pool"] == "ncp" && p["state"]["flapping"] == true)
            .cloned()
    })
    .await
    .unwrap_or_else(|| panic!("the status never shows ncp flapping:\n{}", web.log()));
    assert!(
        ncp["state"]["flap_percent"]
            .as_u64()
            .is_some_and(|p| p >= 30),
        "{ncp}"
    );
    assert_eq!(ncp["state"]["flapping"], true, "{ncp}");
    assert_eq!(ncp["state"]["verdict"], "unknown", "{ncp}");
    promtool_fires_pool_flapping(1.0);
}
