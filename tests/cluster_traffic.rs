//! Benchmark (ignored by default): etcd traffic per gslb instance in steady state, at 1,000 and
//! 10,000 endpoints, against a real three-member etcd (127.0.17.1-3). Three instances' vote
//! publishers, watchers and leases run in this process with the default `[cluster]` timing
//! (lease 10 s, heartbeat 2 s); every endpoint has a verdict, none changes. Figures come from
//! etcd's own counters (`etcd_mvcc_put_total`, `etcd_mvcc_txn_total`,
//! `etcd_network_client_grpc_{received,sent}_bytes_total` summed over the members), divided
//! by three instances and the window. Also prints how long the first publication of every
//! verdict took. Run:
//!
//! `cargo test --release --test cluster_traffic -- --ignored --nocapture`

mod support;

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use etcd_client::GetOptions;
use gslb::config::ClusterSettings;
use gslb::io::coordination::{
    Clients, ErrorCounter, LeaseTask, LocalVerdicts, PeerEvent, Publisher, Watcher,
};
use gslb_core::model::{EndpointId, ServiceId, VantageId, Verdict};
use support::etcd::EtcdCluster;
use tokio::sync::{mpsc, watch};

/// The measured steady-state window.
const WINDOW: Duration = Duration::from_secs(30);

/// etcd's counters: client bytes summed over the members (each counts its own clients),
/// puts and transactions of one member (every member applies every one).
async fn counters(etcd: &EtcdCluster) -> BTreeMap<&'static str, f64> {
    let names = [
        "etcd_mvcc_put_total",
        "etcd_mvcc_txn_total",
        "etcd_network_client_grpc_received_bytes_total",
        "etcd_network_client_grpc_sent_bytes_total",
    ];
    let mut sum: BTreeMap<&'static str, f64> = names.iter().map(|n| (*n, 0.0)).collect();
    for i in 0..3 {
        let url = format!("http://{}/metrics", etcd.client_addr(i));
        let text = reqwest::get(url)
            .await
            .expect("metrics")
            .text()
            .await
            .expect("text");
        for line in text.lines() {
            for n in names {
                if let Some(v) = line
                    .strip_prefix(n)
                    .and_then(|r| r.trim().parse::<f64>().ok())
                {
                    *sum.get_mut(n).expect("name") += v;
                }
            }
        }
    }
    sum
}

fn settings(etcd: &EtcdCluster, prefix: &str) -> ClusterSettings {
    let text = format!(
        "endpoints = {:?}\nvantages = [\"a\", \"b\", \"c\"]\nprefix = \"{prefix}\"\n",
        etcd.endpoints()
    );
    toml::from_str(&text).expect("settings")
}

async fn run(etcd: &EtcdCluster, endpoints: usize) {
    let prefix = format!("/bench{endpoints}");
    let cluster = settings(etcd, &prefix);
    let verdicts: LocalVerdicts = (0..endpoints)
        .map(|i| {
            let e = EndpointId(format!("https://origin-{i}.example.com/api/v1/health"));
            ((ServiceId(format!("svc-{}", i / 10)), e), Verdict::Healthy)
        })
        .collect();
    let mut keep = Vec::new();
    let started = Instant::now();
    for v in ["a", "b", "c"] {
        let vantage = VantageId(v.into());
        let clients = Clients::connect(cluster.connect(), ErrorCounter::detached())
            .await
            .expect("connect");
        let (lease_task, lease) = LeaseTask::new(clients.clone(), cluster.lease_ttl);
        let (tx, rx) = watch::channel(verdicts.clone());
        let publisher = Publisher::new(
            clients.clone(),
            vantage.clone(),
            cluster.heartbeat,
            lease.clone(),
            rx,
        );
        let (peer_tx, mut peer_rx) = mpsc::channel::<PeerEvent>(4096);
        let watcher = Watcher::new(clients.clone(), vantage, cluster.heartbeat);
        keep.push((
            tx,
            tokio::spawn(lease_task.run()),
            tokio::spawn(publisher.run()),
            tokio::spawn(watcher.run(peer_tx)),
            tokio::spawn(async move { while peer_rx.recv().await.is_some() {} }),
        ));
        let _ = clients;
    }
    let probe = Clients::connect(cluster.connect(), ErrorCounter::detached())
        .await
        .expect("connect");
    let want = 3 * endpoints as i64;
    let published = support::eventually(Duration::from_secs(300), || {
        let mut kv = probe.kv.clone();
        let key = probe.keys.votes();
        async move {
            let opts = GetOptions::new().with_prefix().with_count_only();
            let n = kv.get(key, Some(opts)).await.ok()?.count();
            (n >= want).then_some(())
        }
    })
    .await;
    assert!(published.is_some(), "votes never all published");
    let first = started.elapsed();
    // Every write under the prefix, as a watcher sees it.
    let mut untimed = probe.untimed.clone();
    let prefix_all = format!("{prefix}/");
    let options = etcd_client::WatchOptions::new().with_prefix();
    let mut stream = untimed
        .watch(prefix_all, Some(options))
        .await
        .expect("watch");
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let count = seen.clone();
    let counting = tokio::spawn(async move {
        while let Ok(Some(r)) = stream.message().await {
            count.fetch_add(
                r.events().len() as u64,
                std::sync::atomic::Ordering::Relaxed,
            );
        }
    });
    let seen_before = seen.load(std::sync::atomic::Ordering::Relaxed);
    let before = counters(etcd).await;
    let window_start = Instant::now();
    tokio::time::sleep(WINDOW).await; // a measurement window, not a wait for a condition
    let secs = window_start.elapsed().as_secs_f64();
    let after = counters(etcd).await;
    let writes = seen.load(std::sync::atomic::Ordering::Relaxed) - seen_before;
    counting.abort();
    let per = |n: &str| (after[n] - before[n]) / secs / 3.0;
    println!(
        "{endpoints} endpoints: first publication of 3 x {endpoints} votes {first:.1?}; steady state per instance: {:.2} key writes/s (watched), {:.2} puts/s (etcd_mvcc_put_total), {:.2} txns/s, {:.0} bytes/s to etcd, {:.0} bytes/s from etcd (window {secs:.0} s)",
        writes as f64 / secs / 3.0,
        per("etcd_mvcc_put_total"),
        per("etcd_mvcc_txn_total"),
        per("etcd_network_client_grpc_received_bytes_total"),
        per("etcd_network_client_grpc_sent_bytes_total"),
    );
    for (tx, a, b, c, d) in keep {
        drop(tx);
        for t in [a, b, c, d] {
            t.abort();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: prints etcd traffic figures (docs/cluster.md)"]
async fn etcd_traffic_per_instance_in_steady_state() {
    let ips = [1, 2, 3].map(|i| Ipv4Addr::new(127, 0, 17, i));
    let Some(etcd) = EtcdCluster::start(ips) else {
        return;
    };
    for endpoints in [1_000, 10_000] {
        run(&etcd, endpoints).await;
    }
}
