//! blackbox_exporter's side: the Debian package's binary on a loopback port, its `http_2xx`
//! module with the same timeout, driven by a scrape loop at the same rate as gslb's probes (one
//! loop per target with the same schedule and the same in-flight bound; keep-alive connections
//! to the exporter, as Prometheus keeps them). Only the exporter's process is measured.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gslb::io::probe::Schedule;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep_until};

use crate::Workload;
use crate::procfs;
use crate::report::{Figures, quantile};

/// Where to look for the exporter when `--blackbox` is not given.
pub const CANDIDATES: [&str; 2] = ["prometheus-blackbox-exporter", "blackbox_exporter"];

/// Finds the exporter: `explicit`, else the first of [`CANDIDATES`] on `PATH`.
pub fn find(explicit: Option<&PathBuf>) -> Result<PathBuf, String> {
    if let Some(p) = explicit {
        return if p.is_file() {
            Ok(p.clone())
        } else {
            Err(format!("{} not found", p.display()))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in CANDIDATES {
            let p = dir.join(name);
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    Err("not installed (apt-get install -y prometheus-blackbox-exporter)".into())
}

/// `0.23.0` from `blackbox_exporter, version 0.23.0 (branch: ...)`.
pub fn version(bin: &PathBuf) -> String {
    let out = Command::new(bin).arg("--version").output();
    let text = out
        .map(|o| {
            let mut t = String::from_utf8_lossy(&o.stdout).into_owned();
            t.push_str(&String::from_utf8_lossy(&o.stderr));
            t
        })
        .unwrap_or_default();
    text.split_whitespace()
        .skip_while(|w| *w != "version")
        .nth(1)
        .unwrap_or("?")
        .to_owned()
}

struct Exporter {
    child: Child,
    dir: PathBuf,
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs the workload against `addrs` through the exporter at `bin`.
pub async fn run(
    w: &Workload,
    addrs: &[SocketAddr],
    bin: &PathBuf,
    ticks: u64,
) -> anyhow::Result<Figures> {
    let dir = std::env::temp_dir().join(format!("gslb-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let config = dir.join("blackbox.yml");
    std::fs::write(
        &config,
        format!(
            "modules:\n  http_2xx:\n    prober: http\n    timeout: {}ms\n    http:\n      preferred_ip_protocol: ip4\n      ip_protocol_fallback: false\n",
            w.timeout.as_millis()
        ),
    )?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let log = std::fs::File::create(dir.join("blackbox.log"))?;
    let child = Command::new(bin)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--log.level=warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()?;
    let exporter = Exporter { child, dir };
    let pid = exporter.child.id().to_string();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(w.max_in_flight)
        .build()?;
    let ready = async {
        loop {
            if client.get(&base).send().await.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(15), ready)
        .await
        .map_err(|_| anyhow::anyhow!("blackbox_exporter did not answer on {base} within 15 s"))?;

    let shared = Arc::new(Shared::default());
    let room = Arc::new(Semaphore::new(w.max_in_flight));
    let mut loops = JoinSet::new();
    for addr in addrs {
        let mut url = url::Url::parse(&format!("{base}/probe"))?;
        url.query_pairs_mut()
            .append_pair("target", &format!("http://{addr}/health"))
            .append_pair("module", "http_2xx");
        loops.spawn(scrape_loop(
            client.clone(),
            url,
            w.interval,
            w.timeout,
            room.clone(),
            shared.clone(),
        ));
    }
    tokio::time::sleep(w.warmup).await;
    let cpu = procfs::Window::start(&pid, &w.origins_pid, ticks);
    let started = std::time::Instant::now();
    shared.measuring.store(true, Ordering::Relaxed);
    tokio::time::sleep(w.duration).await;
    shared.measuring.store(false, Ordering::Relaxed);
    let elapsed = started.elapsed();
    let (cpu, others) = cpu.end(&pid, &w.origins_pid, ticks);
    let rss = procfs::peak_rss(&pid);
    loops.shutdown().await;
    drop(exporter);

    let mut lateness =
        std::mem::take(&mut *shared.lateness.lock().unwrap_or_else(|p| p.into_inner()));
    lateness.sort_unstable();
    let mut durations =
        std::mem::take(&mut *shared.durations.lock().unwrap_or_else(|p| p.into_inner()));
    durations.sort_unstable();
    let failed = shared.failed.load(Ordering::Relaxed);
    let timeouts = shared.timeouts.load(Ordering::Relaxed);
    let errors = shared.errors.load(Ordering::Relaxed);
    let late = lateness
        .iter()
        .filter(|l| **l > Duration::from_millis(50))
        .count() as u64;
    let mut failures = Vec::new();
    if failed > 0 {
        failures.push(format!(
            "probe_success 0: {failed} (of which at the timeout: {timeouts})"
        ));
    }
    if errors > 0 {
        failures.push(format!("scrape errors: {errors}"));
    }
    Ok(Figures {
        probes: shared.done.load(Ordering::Relaxed),
        elapsed,
        cpu,
        others,
        lateness: Some((
            quantile(&lateness, 0.5),
            quantile(&lateness, 0.99),
            lateness.last().copied().unwrap_or_default(),
        )),
        durations: Some((
            quantile(&durations, 0.5),
            quantile(&durations, 0.99),
            durations.last().copied().unwrap_or_default(),
        )),
        late: Some(late),
        skipped: None,
        timeouts,
        failed: failed + errors,
        failures,
        peak_rss: rss,
    })
}

#[derive(Default)]
struct Shared {
    measuring: AtomicBool,
    done: AtomicU64,
    failed: AtomicU64,
    timeouts: AtomicU64,
    errors: AtomicU64,
    lateness: Mutex<Vec<Duration>>,
    durations: Mutex<Vec<Duration>>,
}

/// Scrapes `url` on gslb's schedule (same phase, jitter and skip rules), within `room`.
async fn scrape_loop(
    client: reqwest::Client,
    url: url::Url,
    interval: Duration,
    timeout: Duration,
    room: Arc<Semaphore>,
    shared: Arc<Shared>,
) {
    let mut schedule = Schedule::new(Instant::now(), interval, &mut rand::rng());
    loop {
        sleep_until(schedule.plan()).await;
        let Ok(permit) = room.acquire().await else {
            return;
        };
        let lateness = Instant::now().saturating_duration_since(schedule.plan());
        let result = async {
            let response = client
                .get(url.clone())
                .timeout(timeout + Duration::from_secs(1))
                .send()
                .await?;
            response.text().await
        }
        .await;
        drop(permit);
        if shared.measuring.load(Ordering::Relaxed) {
            shared
                .lateness
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(lateness);
            match result {
                Ok(body) => {
                    shared.done.fetch_add(1, Ordering::Relaxed);
                    if let Some(d) = duration(&body) {
                        shared
                            .durations
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(d);
                    }
                    if !body.contains("\nprobe_success 1") {
                        shared.failed.fetch_add(1, Ordering::Relaxed);
                        if duration(&body).is_some_and(|d| d >= timeout.mul_f64(0.95)) {
                            shared.timeouts.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                Err(_) => {
                    shared.errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        schedule.advance(Instant::now(), &mut rand::rng());
    }
}

/// `probe_duration_seconds` from the exporter's answer.
fn duration(body: &str) -> Option<Duration> {
    let line = body
        .lines()
        .find(|l| l.starts_with("probe_duration_seconds "))?;
    let secs: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(Duration::from_secs_f64(secs.max(0.0)))
}
