//! One etcd member down while quorum holds (issue 27, defect 4): three real `gslb run`
//! processes (vantage points a, b, c on 127.0.25.1-3), a real three-member etcd (127.0.24.1-3),
//! the Cloudflare fake. With one member killed, and then another paused (SIGSTOP: its
//! connections stay open and nothing answers), every instance stays coordinated and keeps its
//! role, and a failover is written as usual. Before that, in steady state, the shared safety
//! state is not put again.

mod support;

use std::time::{Duration, Instant};

use gslb_cloudflare::fake::Fake;
use support::cluster::{GslbCluster, Layout, head};
use support::eventually;

fn layout() -> Layout {
    Layout {
        etcd: 24,
        admin: 25,
        ..Layout::default()
    }
}

/// Every instance's view of the cluster: (vantage point, coordinated, role of `web`).
async fn views(c: &GslbCluster) -> Vec<(String, bool, String)> {
    let mut seen = Vec::new();
    for x in &c.instances {
        let all = support::daemon::status_all(x.admin).await;
        let coordinated = all
            .as_ref()
            .is_some_and(|a| a["cluster"]["coordinated"] == true);
        let role = all
            .as_ref()
            .and_then(|a| a["services"]["web"]["apply"]["cluster"]["role"].as_str())
            .unwrap_or("no answer")
            .to_owned();
        seen.push((x.vantage.clone(), coordinated, role));
    }
    seen
}

/// Looks at every instance every 200 ms for `during`: each moment one was not coordinated or
/// its role was neither writer nor follower, with the time since the start of the watch.
async fn degraded(c: &GslbCluster, during: Duration) -> Vec<String> {
    let start = Instant::now();
    let mut bad = Vec::new();
    while start.elapsed() < during {
        for (vantage, coordinated, role) in views(c).await {
            if !coordinated || !matches!(role.as_str(), "writer" | "follower") {
                let at = start.elapsed();
                bad.push(format!(
                    "{at:.1?} {vantage}: coordinated {coordinated}, role {role}"
                ));
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    bad
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_etcd_member_killed_then_another_paused_degrades_no_instance() {
    let fake = Fake::start().await;
    let Some((mut c, _, _)) = GslbCluster::settled(&fake, &head(), layout()).await else {
        return;
    };
    // Steady state: the shared safety state is not put again while it does not change (the
    // instances merge each other's; a put after each merge made every service's key churn).
    let etcd = c.etcd.client("root").await;
    let version = || async {
        let prefix = Some(etcd_client::GetOptions::new().with_prefix());
        let got = etcd
            .kv_client()
            .get("/gslb/safety/", prefix)
            .await
            .expect("read");
        got.kvs()
            .iter()
            .map(|kv| (kv.key_str().unwrap_or("").to_owned(), kv.version()))
            .collect::<Vec<_>>()
    };
    let want = [
        "/gslb/safety/a/web",
        "/gslb/safety/b/web",
        "/gslb/safety/c/web",
    ];
    let first = eventually(Duration::from_secs(10), || async {
        let got = version().await;
        let keys: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
        (keys == want).then_some(got)
    })
    .await
    .expect("every instance shares its safety state");
    tokio::time::sleep(Duration::from_secs(5)).await; // a measurement window (5 rounds)
    assert_eq!(version().await, first, "put again without a change");
    // Killed: its port refuses connections. Watched for three lease TTLs and more.
    c.etcd.kill(0);
    let bad = degraded(&c, Duration::from_secs(15)).await;
    assert!(bad.is_empty(), "member 0 killed: {bad:#?}\n{}", c.logs());
    // Back, then another one paused: connections to it stay open and nothing answers.
    c.etcd.restart(0);
    c.etcd.wait_healthy(0);
    c.etcd.pause(1);
    let bad = degraded(&c, Duration::from_secs(15)).await;
    // A failover while it is paused is written as usual.
    c.ncp.stop().await;
    let failed_over = c.applied_on("gcp", None, Duration::from_secs(15)).await;
    c.etcd.resume(1);
    assert!(bad.is_empty(), "member 1 paused: {bad:#?}\n{}", c.logs());
    assert!(failed_over, "{}", c.logs());
    assert_eq!(fake.write_log().len(), 1, "{:?}", fake.write_log());
}
