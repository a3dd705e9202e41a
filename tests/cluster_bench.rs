//! Benchmark (run by hand, `--ignored`): failover time with three clustered instances against
//! one instance alone, on the same loopback origins and the Cloudflare fake. Each round stops
//! the serving origin and times until the fake applied the write (detection: fall 3 x 200 ms
//! probes, then decision, then for the cluster the fenced etcd transaction, then the write);
//! the other origin then serves, and the next round stops it. Prints p50 and p99 of each and
//! the coordination's added latency; figures go in the docs, never into an assert.
//!
//! `cargo test --release --test cluster_bench -- --ignored --nocapture`
//! (`GSLB_BENCH_ROUNDS`, default 20).

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use gslb::io::origin::Origin;
use gslb_cloudflare::fake::Fake;
use serde_json::Value;
use support::cloudflare::WebDaemon;
use support::cluster::{GslbCluster, INTERVAL_MS};
use support::daemon::status;
use support::eventually;

fn head() -> String {
    format!(
        "failback = \"manual\"\n[probe]\ninterval = \"{INTERVAL_MS}ms\"\ntimeout = \"150ms\"\nbody_contains = \"ok\"\n[health]\nfall = 3\nrise = 2\n[damping]\npenalty = 1\n[velocity]\nburst = 1000"
    )
}

fn rounds() -> usize {
    std::env::var("GSLB_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20)
}

/// Whether every admin API in `admins` reports `web` applied on `pool` with both pools healthy.
async fn settled(admins: &[SocketAddr], pool: &str) -> Option<()> {
    for a in admins {
        let s = status(*a, "web").await?;
        (s["apply"]["state"] == "applied" && s["active"] == pool).then_some(())?;
        let pools = s["pools"].as_array()?;
        pools
            .iter()
            .all(|p: &Value| p["state"]["verdict"] == "healthy")
            .then_some(())?;
    }
    Some(())
}

/// Alternates outages of `ncp` and `gcp`, timing each from the stop to the applied write.
async fn measure(
    fake: &Fake,
    admins: &[SocketAddr],
    ncp: &mut Origin,
    gcp: &mut Origin,
) -> Vec<Duration> {
    let mut took = Vec::new();
    for round in 0..rounds() {
        let (down, up, to) = if round % 2 == 0 {
            (&mut *ncp, "ncp", "gcp")
        } else {
            (&mut *gcp, "gcp", "ncp")
        };
        eventually(Duration::from_secs(30), || settled(admins, up))
            .await
            .expect("settled before the round");
        let writes = fake.write_log().len();
        let stopped = Instant::now();
        down.stop().await;
        eventually(Duration::from_secs(30), || async {
            (fake.write_log().len() > writes).then_some(())
        })
        .await
        .expect("failover written");
        took.push(stopped.elapsed());
        down.start_again().await.expect("origin again");
        eventually(Duration::from_secs(30), || settled(admins, to))
            .await
            .expect("settled after the round");
    }
    took
}

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn summary(name: &str, mut took: Vec<Duration>) -> (Duration, Duration) {
    took.sort();
    let (p50, p99) = (quantile(&took, 0.5), quantile(&took, 0.99));
    println!("{name}: {} rounds, p50 {p50:?}, p99 {p99:?}", took.len());
    (p50, p99)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run by hand with --ignored --nocapture"]
async fn failover_time_three_clustered_instances_against_one() {
    let fake = Fake::start().await;
    let Some(mut c) = GslbCluster::start(&fake, &head()).await else {
        return;
    };
    let admins: Vec<SocketAddr> = c.instances.iter().map(|x| x.admin).collect();
    let (mut ncp, mut gcp) = (
        std::mem::replace(
            &mut c.ncp,
            Origin::start(([127, 0, 0, 1], 0).into(), "spare")
                .await
                .expect("spare"),
        ),
        std::mem::replace(
            &mut c.gcp,
            Origin::start(([127, 0, 0, 1], 0).into(), "spare")
                .await
                .expect("spare"),
        ),
    );
    let three = measure(&fake, &admins, &mut ncp, &mut gcp).await;
    drop(c);

    let alone_fake = Fake::start().await;
    let web = WebDaemon::start(&alone_fake, ncp.addr(), gcp.addr(), &head(), "");
    let one = measure(&alone_fake, &[web.admin], &mut ncp, &mut gcp).await;

    let (p50_1, p99_1) = summary("one instance", one);
    let (p50_3, p99_3) = summary("three instances (etcd, fenced writer)", three);
    let added =
        |three: Duration, one: Duration| three.as_secs_f64() * 1e3 - one.as_secs_f64() * 1e3;
    println!(
        "coordination's added latency: p50 {:+.0} ms, p99 {:+.0} ms",
        added(p50_3, p50_1),
        added(p99_3, p99_1)
    );
}
