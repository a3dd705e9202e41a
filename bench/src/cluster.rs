//! etcd calls of a cluster, through the product: three `gslb run` processes (vantage points a,
//! b, c) over the same generated services, bound to the Cloudflare fake, coordinated through one
//! etcd member on 127.1.255.1 (the calls an instance makes do not depend on how many members
//! answer them). After the warm-up (every binding's election settled), each instance's
//! `gslb_cluster_etcd_requests_total{method}` is scraped at the start and the end of the
//! window: the calls per second of each instance, in total and by method.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::daemon::Daemon;
use crate::fake::Provider;
use crate::generate::{self, Shape};
use crate::origins::Origins;
use crate::prom;

/// The metric every etcd request is counted in.
const REQUESTS: &str = "gslb_cluster_etcd_requests_total";

/// A single etcd member in a temporary folder, killed when dropped.
struct Etcd {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Etcd {
    /// Starts `etcd` (from PATH) on free ports of 127.1.255.1 and waits until it is healthy.
    async fn start() -> anyhow::Result<Etcd> {
        let port = || -> anyhow::Result<u16> {
            Ok(TcpListener::bind("127.1.255.1:0")?.local_addr()?.port())
        };
        let (client, peer) = (port()?, port()?);
        let url = format!("http://127.1.255.1:{client}");
        let peer_url = format!("http://127.1.255.1:{peer}");
        let dir = tempfile::Builder::new()
            .prefix("gslb-bench-etcd-")
            .tempdir()?;
        let child = Command::new("etcd")
            .args(["--name", "bench", "--data-dir"])
            .arg(dir.path().join("data"))
            .args([
                "--listen-client-urls",
                &url,
                "--advertise-client-urls",
                &url,
            ])
            .args(["--listen-peer-urls", &peer_url])
            .args(["--initial-advertise-peer-urls", &peer_url])
            .args(["--initial-cluster", &format!("bench={peer_url}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("etcd.log"))?)
            .spawn()
            .map_err(|e| anyhow::anyhow!("etcd (Debian etcd-server) not started: {e}"))?;
        let etcd = Etcd {
            child,
            url,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(r) = reqwest::get(format!("{}/health", etcd.url)).await
                && r.status().is_success()
            {
                return Ok(etcd);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        anyhow::bail!("etcd not healthy within 30 s")
    }
}

/// What one instance sent to etcd in the window, per second.
pub struct Calls {
    /// The vantage point.
    pub vantage: String,
    /// By gRPC method.
    pub by_method: BTreeMap<String, f64>,
}

impl Calls {
    /// Every method together.
    pub fn total(&self) -> f64 {
        self.by_method.values().sum()
    }
}

/// Runs three instances over `services` services (two endpoints each, probed every
/// `interval`) for `warmup`, then measures `window`.
pub async fn run(
    gslb: &Path,
    services: usize,
    interval: Duration,
    warmup: Duration,
    window: Duration,
) -> anyhow::Result<Vec<Calls>> {
    let etcd = Etcd::start().await?;
    let origins = Origins::start(services * 2, &[]).await?;
    let provider = Provider::start(services).await?;
    let shape = Shape {
        services,
        per_service: 2,
        interval,
        fall: 3,
        extra: String::new(),
        target_extra: String::new(),
    };
    let urls: Vec<String> = origins
        .addrs
        .iter()
        .map(|a| format!("http://{a}/health"))
        .collect();
    let settings = format!(
        "[cluster]\nendpoints = [\"{}\"]\nvantages = [\"a\", \"b\", \"c\"]",
        etcd.url
    );
    let mut daemons = Vec::new();
    let mut folders = Vec::new();
    for vantage in ["a", "b", "c"] {
        let folder = generate::write(&shape, &urls, &provider.base_url, vantage, &settings)?;
        daemons.push((vantage, Daemon::spawn(gslb, &folder, None)?));
        folders.push(folder);
    }
    for (_, d) in &mut daemons {
        d.ready(Duration::from_secs(600)).await?;
    }
    tokio::time::sleep(warmup).await; // the warm-up, not a wait for a condition
    let before = scrape(&daemons).await?;
    let started = Instant::now();
    tokio::time::sleep(window).await; // the measured window
    let secs = started.elapsed().as_secs_f64();
    let after = scrape(&daemons).await?;
    provider.stop();
    origins.stop();
    let calls = daemons
        .iter()
        .zip(before.iter().zip(&after))
        .map(|((vantage, _), (b, a))| Calls {
            vantage: (*vantage).to_owned(),
            by_method: a
                .iter()
                .map(|(m, n)| (m.clone(), (n - b.get(m).unwrap_or(&0.0)) / secs))
                .collect(),
        })
        .collect();
    Ok(calls)
}

/// Each daemon's requests to etcd so far, by method.
async fn scrape(daemons: &[(&str, Daemon)]) -> anyhow::Result<Vec<BTreeMap<String, f64>>> {
    let mut out = Vec::new();
    for (_, d) in daemons {
        let (text, _) = d.get("/metrics").await?;
        out.push(prom::sum_by(&text, REQUESTS, "method"));
    }
    Ok(out)
}

/// The figures as a markdown table: one row per instance, calls per second in total and by
/// method.
pub fn table(calls: &[Calls]) -> String {
    let methods: std::collections::BTreeSet<&String> =
        calls.iter().flat_map(|c| c.by_method.keys()).collect();
    let mut s = String::from("| instance | etcd calls/s |");
    for m in &methods {
        s.push_str(&format!(" {m} |"));
    }
    s.push_str("\n|---|---|");
    s.push_str(&"---|".repeat(methods.len()));
    for c in calls {
        s.push_str(&format!("\n| {} | {:.2} |", c.vantage, c.total()));
        for m in &methods {
            let n = c.by_method.get(*m).copied().unwrap_or(0.0);
            s.push_str(&format!(" {n:.2} |"));
        }
    }
    s.push('\n');
    s
}
