//! The scale run: origins and the Cloudflare fake in their own processes, `gslb run` on the
//! generated policies; start-up, then a measured window in steady state, then a few timed
//! scrapes; every figure read from the daemon's `/proc/<pid>` and `/metrics`, the origins' hit
//! counts and the fake's call log.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use crate::daemon::Daemon;
use crate::fake::Provider;
use crate::generate::{self, Shape};
use crate::origins::Origins;
use crate::procfs;
use crate::prom;
use crate::quota::Quota;

/// What to run.
pub struct Run {
    /// The policies.
    pub shape: Shape,
    /// Before the window, after start-up.
    pub warmup: Duration,
    /// The measured window.
    pub duration: Duration,
    /// Timed `/metrics` scrapes after the window.
    pub scrapes: usize,
    /// The `gslb` binary.
    pub gslb: PathBuf,
    /// A CPU quota for the daemon, percent of one core (overload).
    pub cpu_quota: Option<u32>,
    /// TOML appended to the daemon's settings (e.g. `[reconcile]`).
    pub settings: String,
    /// Longest start-up waited for.
    pub startup_limit: Duration,
    /// Keep the daemon's folder (settings, policies, `run.log`, `state/audit.jsonl`, the
    /// window's two `/metrics` scrapes) instead of removing it; its path is printed.
    pub keep: bool,
}

/// Start-up: spawn until `/readyz` answers 200 and every origin was probed once.
#[derive(Debug, Clone, Default)]
pub struct Startup {
    /// Spawn to ready.
    pub ready: Duration,
    /// Spawn to the end of the first round (every origin probed).
    pub first_round: Duration,
    /// The daemon's CPU meanwhile.
    pub cpu: Option<Duration>,
    /// Calls the fake answered meanwhile, by kind.
    pub calls: BTreeMap<String, u64>,
}

/// The steady-state window.
#[derive(Debug, Clone, Default)]
pub struct Steady {
    /// Length of the window.
    pub elapsed: Duration,
    /// Probes the origins answered per second.
    pub probes_per_s: f64,
    /// Probes per second the policies plan.
    pub planned_per_s: f64,
    /// CPU of the daemon, the origins, the fake (in that order) in the window.
    pub cpu: Vec<Option<Duration>>,
    /// CPU of every other process in the window.
    pub others: Option<Duration>,
    /// The lateness histogram over the window.
    pub lateness: prom::Lateness,
    /// Counter deltas over the window, by metric (late, skipped, probes, decisions, holds,
    /// audit).
    pub counters: BTreeMap<&'static str, f64>,
    /// `gslb_probes_total` deltas over the window, by reason (`ok`, `timeout`, `late`, ...).
    pub reasons: BTreeMap<String, f64>,
    /// Time between the two scrapes the counters come from.
    pub counters_span: Duration,
    /// Calls the fake answered in the window, by kind.
    pub calls: BTreeMap<String, u64>,
}

/// Everything one scale run measured.
#[derive(Debug, Clone, Default)]
pub struct Product {
    /// Start-up.
    pub startup: Startup,
    /// Steady state.
    pub steady: Steady,
    /// Peak RSS of the daemon, bytes.
    pub peak_rss: Option<u64>,
    /// The timed `/metrics` scrapes, made as Prometheus makes them (gzip).
    pub metrics: Scrapes,
    /// `/v1/status` bytes: uncompressed, and on the wire when asked with gzip.
    pub status_bytes: Sizes,
    /// How the CPU quota was applied, if one was asked for.
    pub quota: Option<String>,
}

/// Sizes of one answer, bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sizes {
    /// The body as the daemon renders it.
    pub uncompressed: usize,
    /// On the wire, asked with `Accept-Encoding: gzip`.
    pub wire: usize,
}

/// The timed `/metrics` scrapes after the window, each asked with `Accept-Encoding: gzip`.
#[derive(Debug, Clone, Default)]
pub struct Scrapes {
    /// The last scrape's sizes.
    pub sizes: Sizes,
    /// Each scrape's time from the request to the whole answer.
    pub took: Vec<Duration>,
}

/// The counters whose window deltas are reported.
const COUNTERS: [(&str, &str); 4] = [
    ("late", "gslb_probes_late_total"),
    ("skipped", "gslb_probes_skipped_total"),
    ("decisions", "gslb_decisions_total"),
    ("holds", "gslb_holds_total"),
];

/// `late_after` of the daemon's lateness (`[probing] late_after` default), seconds.
const LATE_AFTER: f64 = 0.05;

/// Runs the daemon over `origins` and `provider`.
pub async fn run(r: &Run, origins: &Origins, provider: &Provider) -> anyhow::Result<Product> {
    let urls: Vec<String> = origins
        .addrs
        .iter()
        .map(|a| format!("http://{a}/health"))
        .collect();
    let folder = generate::write(&r.shape, &urls, &provider.base_url, "bench", &r.settings)?;
    let mut quota = r.cpu_quota.map(crate::quota::detect).transpose()?;
    let described = quota.as_ref().zip(r.cpu_quota).map(|(q, p)| q.describe(p));
    let result = measure(r, origins, provider, &folder, quota.as_mut()).await;
    if let Some(q) = quota.as_mut() {
        q.release();
    }
    if r.keep {
        println!(
            "  kept the daemon's folder: {}",
            folder.dir.keep().display()
        );
    }
    let mut product = result?;
    product.quota = described;
    Ok(product)
}

/// Start-up, warm-up, window, scrapes; the daemon is stopped when this returns.
async fn measure(
    r: &Run,
    origins: &Origins,
    provider: &Provider,
    folder: &generate::Folder,
    quota: Option<&mut Quota>,
) -> anyhow::Result<Product> {
    let ticks = procfs::clock_ticks();
    let spawned_at = SystemTime::now();
    let mut daemon = Daemon::spawn(&r.gslb, folder, quota)?;
    let pids = [daemon.pid(), origins.pid(), provider.pid()];
    let startup_window = procfs::Window::start(&pids, ticks);
    let ready = daemon.ready(r.startup_limit).await? - daemon.spawned;
    let first_round = first_round(&mut daemon, origins, r.startup_limit).await?;
    let startup = Startup {
        ready,
        first_round,
        cpu: startup_window.end().cpu[0],
        calls: provider.counts(spawned_at, SystemTime::now()),
    };
    println!(
        "  started: ready after {:.1} s, first round after {:.1} s; warm-up {} s, window {} s",
        ready.as_secs_f64(),
        first_round.as_secs_f64(),
        r.warmup.as_secs(),
        r.duration.as_secs()
    );
    tokio::time::sleep(r.warmup).await;
    let steady = window(r, &daemon, origins, provider, &pids, ticks).await?;
    let mut metrics = Scrapes::default();
    for _ in 0..r.scrapes {
        let scrape = daemon.get_gzip("/metrics").await?;
        metrics.sizes = Sizes {
            uncompressed: scrape.text.len(),
            wire: scrape.wire,
        };
        metrics.took.push(scrape.took);
    }
    let status = daemon.get_gzip("/v1/status").await?;
    Ok(Product {
        startup,
        steady,
        peak_rss: procfs::peak_rss(&daemon.pid()),
        metrics,
        status_bytes: Sizes {
            uncompressed: status.text.len(),
            wire: status.wire,
        },
        quota: None,
    })
}

/// Waits until every origin has been probed at least once, within `limit` of the spawn.
async fn first_round(
    daemon: &mut Daemon,
    origins: &Origins,
    limit: Duration,
) -> anyhow::Result<Duration> {
    while daemon.spawned.elapsed() < limit {
        let h = origins.fresh_hits().await;
        if h.untouched == 0 {
            return Ok(h.at.unwrap_or_else(Instant::now) - daemon.spawned);
        }
    }
    Err(daemon.fail(&format!(
        "not every origin was probed within {limit:?} of the start"
    )))
}

/// The measured window: scrape, counters, sleep, counters, scrape.
async fn window(
    r: &Run,
    daemon: &Daemon,
    origins: &Origins,
    provider: &Provider,
    pids: &[String],
    ticks: u64,
) -> anyhow::Result<Steady> {
    let audit = daemon.audit_log();
    let (m0, _) = daemon.get("/metrics").await?;
    let scraped0 = Instant::now();
    let audit0 = audit_decisions(&audit);
    let h0 = origins.fresh_hits().await;
    let cpu = procfs::Window::start(pids, ticks);
    let t0 = SystemTime::now();
    tokio::time::sleep(r.duration).await;
    let h1 = origins.fresh_hits().await;
    let usage = cpu.end();
    let t1 = SystemTime::now();
    let scraped1 = Instant::now();
    let (m1, _) = daemon.get("/metrics").await?;
    if let Some(dir) = audit.parent().and_then(std::path::Path::parent) {
        std::fs::write(dir.join("metrics-window-start.txt"), &m0)?;
        std::fs::write(dir.join("metrics-window-end.txt"), &m1)?;
    }
    let elapsed = h1.at.zip(h0.at).map_or(r.duration, |(b, a)| b - a);
    let name = "gslb_probe_lateness_seconds";
    let audited = audit_decisions(&audit).saturating_sub(audit0);
    let counters = COUNTERS
        .iter()
        .map(|(k, metric)| (*k, prom::sum(&m1, metric) - prom::sum(&m0, metric)))
        .chain([("audit", audited as f64)])
        .collect();
    let before = prom::sum_by(&m0, "gslb_probes_total", "reason");
    let reasons = prom::sum_by(&m1, "gslb_probes_total", "reason")
        .into_iter()
        .map(|(reason, n)| {
            let delta = n - before.get(&reason).copied().unwrap_or(0.0);
            (reason, delta)
        })
        .collect();
    Ok(Steady {
        elapsed,
        probes_per_s: (h1.total - h0.total) as f64 / elapsed.as_secs_f64().max(1e-9),
        planned_per_s: (r.shape.services * r.shape.per_service) as f64
            / r.shape.interval.as_secs_f64(),
        cpu: usage.cpu,
        others: usage.others,
        lateness: prom::lateness(
            &prom::buckets(&m0, name),
            &prom::buckets(&m1, name),
            LATE_AFTER,
        ),
        counters,
        reasons,
        counters_span: scraped1 - scraped0,
        calls: provider.counts(t0, t1),
    })
}

/// Decisions in the daemon's audit log so far (`"action":"decision"` lines).
fn audit_decisions(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| {
            t.lines()
                .filter(|l| l.contains("\"action\":\"decision\""))
                .count()
        })
        .unwrap_or(0)
}
