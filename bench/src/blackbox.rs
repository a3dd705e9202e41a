//! blackbox_exporter's side: the Debian package's binary on a loopback port, its `http_2xx`
//! module with the same timeout, driven by a scrape loop at the same rate as gslb's probes (one
//! loop per target with the same schedule and the same in-flight bound; keep-alive connections
//! to the exporter, as Prometheus keeps them). Only the exporter's process is measured.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gslb::io::probe::{Schedule, default_late_after};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep_until};

use crate::workload::{Measured, Workload};

/// What blackbox_exporter did in the measured window.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    /// Probes answered.
    pub probes: u64,
    /// Length of the window.
    pub elapsed: Duration,
    /// CPU time (user + system) of the exporter's process in the window.
    pub cpu: Option<Duration>,
    /// The scrape loop's lateness (start minus plan): p50, p99, max.
    pub lateness: (Duration, Duration, Duration),
    /// Scrapes that started more than 50 ms late.
    pub late: u64,
    /// Probes that failed for any reason.
    pub failed: u64,
    /// Failures by kind.
    pub failures: Vec<String>,
    /// Peak resident set size of the exporter's process, bytes.
    pub peak_rss: Option<u64>,
    /// CPU used in the window by processes other than the exporter and the origins (the
    /// scrape loop included).
    pub others: Option<Duration>,
}

impl Figures {
    /// Probes per second.
    pub fn rate(&self) -> f64 {
        self.probes as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// CPU milliseconds per probe.
    pub fn cpu_ms_per_probe(&self) -> Option<f64> {
        let cpu = self.cpu?;
        (self.probes > 0).then(|| cpu.as_secs_f64() * 1000.0 / self.probes as f64)
    }
}

/// p50, p99 and max of sorted `values` (zero when empty), nearest rank.
fn spread(sorted: &[Duration]) -> (Duration, Duration, Duration) {
    let q = |q: f64| {
        if sorted.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1]
    };
    (q(0.5), q(0.99), sorted.last().copied().unwrap_or_default())
}

/// Where to look for the exporter when `--blackbox` is not given.
pub const CANDIDATES: [&str; 2] = ["prometheus-blackbox-exporter", "blackbox_exporter"];

/// Finds the exporter: `explicit`, else the first of [`CANDIDATES`] on `PATH`.
pub fn find(explicit: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = explicit {
        return if p.is_file() {
            Ok(p.to_path_buf())
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
pub fn version(bin: &Path) -> String {
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

/// The exporter's process on a loopback port, its configuration folder, and the keep-alive
/// client that scrapes it. Dropping it stops the process and removes the folder.
struct Exporter {
    child: Child,
    dir: PathBuf,
    /// `http://127.0.0.1:<port>`.
    base: String,
    client: reqwest::Client,
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Exporter {
    /// Writes the `http_2xx` module with the workload's timeout, starts `bin` on a free
    /// loopback port and waits (up to 15 s) until it answers.
    async fn start(bin: &Path, w: &Workload) -> anyhow::Result<Exporter> {
        let client = reqwest::Client::builder()
            .no_proxy()
            .pool_max_idle_per_host(w.max_in_flight)
            .build()?;
        let dir = std::env::temp_dir().join(format!("gslb-bench-blackbox-{}", std::process::id()));
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
        // From here on, dropping `exporter` stops the process whatever fails.
        let exporter = Exporter {
            child,
            dir,
            base: format!("http://127.0.0.1:{port}"),
            client,
        };
        exporter.ready().await?;
        Ok(exporter)
    }

    /// Waits until the exporter answers, within 15 s.
    async fn ready(&self) -> anyhow::Result<()> {
        let answers = async {
            while self.client.get(&self.base).send().await.is_err() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(15), answers)
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "blackbox_exporter did not answer on {} within 15 s",
                    self.base
                )
            })
    }

    /// The exporter's process id, for `/proc`.
    fn pid(&self) -> String {
        self.child.id().to_string()
    }

    /// One scrape loop per origin, asking the exporter to probe `http://<addr>/health`.
    fn scrape_loops(
        &self,
        w: &Workload,
        addrs: &[SocketAddr],
        shared: &Arc<Shared>,
    ) -> anyhow::Result<JoinSet<()>> {
        let scrape = Scrape {
            client: self.client.clone(),
            interval: w.interval,
            timeout: w.timeout,
            room: Arc::new(Semaphore::new(w.max_in_flight)),
            shared: shared.clone(),
        };
        let mut loops = JoinSet::new();
        for addr in addrs {
            let mut url = url::Url::parse(&format!("{}/probe", self.base))?;
            url.query_pairs_mut()
                .append_pair("target", &format!("http://{addr}/health"))
                .append_pair("module", "http_2xx");
            loops.spawn(scrape.clone().run(url));
        }
        Ok(loops)
    }
}

/// Runs the workload against `addrs` through the exporter at `bin`.
pub async fn run(w: &Workload, addrs: &[SocketAddr], bin: &Path) -> anyhow::Result<Figures> {
    let exporter = Exporter::start(bin, w).await?;
    let shared = Arc::new(Shared::default());
    let mut loops = exporter.scrape_loops(w, addrs, &shared)?;
    tokio::time::sleep(w.warmup).await;
    let measured = w.window(&exporter.pid(), &shared.measuring).await;
    loops.shutdown().await;
    drop(exporter);
    Ok(shared.figures(measured))
}

/// What the scrape loops count while `measuring` is on.
#[derive(Default)]
struct Shared {
    measuring: AtomicBool,
    /// Scrapes answered.
    done: AtomicU64,
    /// Answers without `probe_success 1`.
    failed: AtomicU64,
    /// Failed answers whose probe took (about) the whole timeout.
    timeouts: AtomicU64,
    /// Scrapes not answered.
    errors: AtomicU64,
    lateness: Mutex<Vec<Duration>>,
}

impl Shared {
    /// Counts one scrape that started `lateness` after its plan, if measuring.
    fn record(&self, lateness: Duration, answer: reqwest::Result<String>, timeout: Duration) {
        if !self.measuring.load(Ordering::Relaxed) {
            return;
        }
        lock(&self.lateness).push(lateness);
        let Ok(body) = answer else {
            self.errors.fetch_add(1, Ordering::Relaxed);
            return;
        };
        self.done.fetch_add(1, Ordering::Relaxed);
        let took = duration(&body);
        if !body.contains("\nprobe_success 1") {
            self.failed.fetch_add(1, Ordering::Relaxed);
            if took.is_some_and(|d| d >= timeout.mul_f64(0.95)) {
                self.timeouts.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The figures of the window `m`.
    fn figures(&self, m: Measured) -> Figures {
        let mut lateness = std::mem::take(&mut *lock(&self.lateness));
        lateness.sort_unstable();
        let failed = self.failed.load(Ordering::Relaxed);
        let timeouts = self.timeouts.load(Ordering::Relaxed);
        let errors = self.errors.load(Ordering::Relaxed);
        let late_after = default_late_after();
        let mut failures = Vec::new();
        if failed > 0 {
            failures.push(format!(
                "probe_success 0: {failed} (of which at the timeout: {timeouts})"
            ));
        }
        if errors > 0 {
            failures.push(format!("scrape errors: {errors}"));
        }
        Figures {
            probes: self.done.load(Ordering::Relaxed),
            elapsed: m.elapsed,
            cpu: m.cpu,
            others: m.others,
            late: lateness.iter().filter(|l| **l > late_after).count() as u64,
            lateness: spread(&lateness),
            failed: failed + errors,
            failures,
            peak_rss: m.peak_rss,
        }
    }
}

/// The vector behind `m`, poisoned or not (a scrape loop that panicked left it whole).
fn lock(m: &Mutex<Vec<Duration>>) -> std::sync::MutexGuard<'_, Vec<Duration>> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One target's scrape loop: the exporter's client, gslb's schedule, the shared in-flight
/// bound and counters.
#[derive(Clone)]
struct Scrape {
    client: reqwest::Client,
    interval: Duration,
    timeout: Duration,
    room: Arc<Semaphore>,
    shared: Arc<Shared>,
}

impl Scrape {
    /// Scrapes `url` on gslb's schedule (same phase, jitter and skip rules), within `room`.
    async fn run(self, url: url::Url) {
        let mut schedule = Schedule::new(Instant::now(), self.interval, &mut rand::rng());
        loop {
            sleep_until(schedule.plan()).await;
            let Ok(permit) = self.room.acquire().await else {
                return;
            };
            let lateness = Instant::now().saturating_duration_since(schedule.plan());
            let answer = async {
                let response = self
                    .client
                    .get(url.clone())
                    .timeout(self.timeout + Duration::from_secs(1))
                    .send()
                    .await?;
                response.text().await
            }
            .await;
            drop(permit);
            self.shared.record(lateness, answer, self.timeout);
            schedule.advance(Instant::now(), &mut rand::rng());
        }
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
