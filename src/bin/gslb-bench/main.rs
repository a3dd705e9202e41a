//! `gslb-bench`: the probe benchmark of issue 6. Starts N origins on loopback in a separate
//! process, probes them all every interval for a measured window with gslb's probe loops, then
//! runs the same workload through blackbox_exporter (when installed) driven by a scrape loop at
//! the same rate, prints probes per second, CPU seconds per 1,000 probes, scheduling lateness
//! p50/p99/max, timeouts and peak RSS of each prober with the CPU ratio; then measures detection
//! latency (origin kill to provider write) with the whole controller in process.
//!
//! ```sh
//! bash benches/probe-bench.sh                              # installs blackbox_exporter, builds, runs
//! cargo run --release --bin gslb-bench                      # defaults: about two minutes
//! cargo run --release --bin gslb-bench -- --endpoints 10000 --interval 1s --duration 30s
//! ```
//!
//! Loopback only (127.0.x.y); everything it starts stops with it. Linux only (`/proc`).

mod blackbox;
mod detect;
mod gslb_phase;
mod origins;
mod procfs;
mod report;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};

use crate::report::Figures;

#[derive(Parser)]
#[command(
    name = "gslb-bench",
    about = "Probe benchmark: gslb against blackbox_exporter"
)]
struct Cli {
    #[command(subcommand)]
    mode: Option<Mode>,
    /// Endpoints probed (origins started, on 127.0.x.y). The default keeps blackbox_exporter
    /// within the machine's two cores, so both probers run the same workload on time.
    #[arg(long, default_value_t = 1000)]
    endpoints: usize,
    /// Probe interval of every endpoint.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    interval: Duration,
    /// Probe timeout (default: half the interval, at most 5 s).
    #[arg(long, value_parser = humantime::parse_duration)]
    timeout: Option<Duration>,
    /// Measured window of each prober.
    #[arg(long, default_value = "20s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Time before the window (every loop past its start phase).
    #[arg(long, value_parser = humantime::parse_duration)]
    warmup: Option<Duration>,
    /// Probes in flight at once, for both probers (gslb's `[probing] max_in_flight`).
    #[arg(long, default_value_t = gslb::io::probe::default_max_in_flight())]
    max_in_flight: usize,
    /// The blackbox_exporter binary (default: prometheus-blackbox-exporter or blackbox_exporter on PATH).
    #[arg(long)]
    blackbox: Option<PathBuf>,
    /// Skip blackbox_exporter.
    #[arg(long)]
    no_blackbox: bool,
    /// Origin kills for the detection-latency figure (0 skips it).
    #[arg(long, default_value_t = 50)]
    kills: usize,
    /// Probe interval of the detection run.
    #[arg(long, default_value = "200ms", value_parser = humantime::parse_duration)]
    detect_interval: Duration,
    /// `fall` of the detection run.
    #[arg(long, default_value_t = 2)]
    detect_fall: u32,
}

#[derive(Subcommand)]
enum Mode {
    /// (internal) Serve the origins until standard input closes.
    ServeOrigins {
        /// How many.
        #[arg(long)]
        endpoints: usize,
    },
}

/// One prober's workload.
pub struct Workload {
    /// Endpoints.
    pub endpoints: usize,
    /// Interval of each.
    pub interval: Duration,
    /// Probe timeout.
    pub timeout: Duration,
    /// Before the window.
    pub warmup: Duration,
    /// The window.
    pub duration: Duration,
    /// In-flight bound.
    pub max_in_flight: usize,
    /// The origins' process id (its CPU is kept apart from the rest of the machine's).
    pub origins_pid: String,
    /// Clock ticks per second of `/proc` ([`procfs::clock_ticks`]).
    pub ticks: u64,
}

/// What one prober's measured window gives, whatever the prober.
pub struct Measured {
    /// Length of the window.
    pub elapsed: Duration,
    /// CPU time of the prober's process in the window.
    pub cpu: Option<Duration>,
    /// CPU time of processes other than the prober and the origins in the window.
    pub others: Option<Duration>,
    /// Peak resident set size of the prober's process, bytes.
    pub peak_rss: Option<u64>,
}

impl Workload {
    /// The workload the flags ask for; the origins' process id is filled in once they run.
    ///
    /// # Errors
    /// An interval under 100 ms, no endpoints, or a timeout not shorter than the interval.
    fn from_cli(cli: &Cli) -> anyhow::Result<Workload> {
        if cli.interval < Duration::from_millis(100) || cli.endpoints == 0 {
            anyhow::bail!("--interval must be at least 100ms and --endpoints at least 1");
        }
        let timeout = cli
            .timeout
            .unwrap_or_else(|| (cli.interval / 2).min(Duration::from_secs(5)));
        if timeout >= cli.interval {
            anyhow::bail!("--timeout must be shorter than --interval");
        }
        Ok(Workload {
            endpoints: cli.endpoints,
            interval: cli.interval,
            timeout,
            warmup: cli.warmup.unwrap_or(cli.interval * 3),
            duration: cli.duration,
            max_in_flight: cli.max_in_flight,
            origins_pid: String::new(),
            ticks: procfs::clock_ticks(),
        })
    }

    /// The measured window: `measuring` is on for [`Workload::duration`]; the CPU counters of
    /// `prober` (a process id, `"self"` for this one), the origins and the machine are read
    /// around it, the prober's peak RSS after it.
    pub async fn window(&self, prober: &str, measuring: &AtomicBool) -> Measured {
        let cpu = procfs::Window::start(prober, &self.origins_pid, self.ticks);
        let started = Instant::now();
        measuring.store(true, Ordering::Relaxed);
        tokio::time::sleep(self.duration).await;
        measuring.store(false, Ordering::Relaxed);
        let elapsed = started.elapsed();
        let (cpu, others) = cpu.end(prober, &self.origins_pid, self.ticks);
        Measured {
            elapsed,
            cpu,
            others,
            peak_rss: procfs::peak_rss(prober),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(Mode::ServeOrigins { endpoints }) = cli.mode {
        return match origins::serve(endpoints) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("gslb-bench serve-origins: {e:#}");
                ExitCode::from(1)
            }
        };
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(bench(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// The whole run: origins, gslb's window, blackbox_exporter's, the table, then detection.
async fn bench(cli: Cli) -> anyhow::Result<()> {
    let mut w = Workload::from_cli(&cli)?;
    let open_files = gslb::io::probe::raise_open_file_limit().ok();
    header(&w, cli.kills, open_files);

    let origins = origins::Origins::start(w.endpoints).await?;
    w.origins_pid = origins.pid();
    println!(
        "  origins: {} listening in process {}",
        origins.addrs.len(),
        w.origins_pid
    );
    let origins_cpu = procfs::cpu_time(&w.origins_pid, w.ticks);
    let gslb = gslb_phase::run(&w, &origins.addrs).await?;
    let origins_cpu = procfs::cpu_time(&w.origins_pid, w.ticks)
        .zip(origins_cpu)
        .map(|(a, b)| a.saturating_sub(b));
    println!("  gslb done: {} probes", gslb.probes);
    let blackbox = blackbox_phase(&cli, &w, &origins.addrs).await;
    origins.stop();

    println!();
    print!("{}", report::table(&gslb, &blackbox));
    if let Some(cpu) = origins_cpu {
        println!(
            "origins process CPU during gslb's run (warm-up included): {:.2} s",
            cpu.as_secs_f64()
        );
    }
    if let Err(why) = &blackbox {
        println!("blackbox_exporter: {why}");
    }
    if cli.kills > 0 {
        let d = detect::run(cli.kills, cli.detect_interval, cli.detect_fall).await?;
        println!();
        print!("{}", d.report());
    }
    Ok(())
}

/// The lines that say what is measured, where, and how to run it again.
fn header(w: &Workload, kills: usize, open_files: Option<u64>) {
    println!("gslb probe benchmark");
    println!("  machine: {}", procfs::machine());
    println!(
        "  workload: {} endpoints on 127.0.x.y, HTTP GET every {} ms (timeout {} ms, fresh connection per probe), {} s measured after {} s warm-up, at most {} in flight; open-file limit {}",
        w.endpoints,
        w.interval.as_millis(),
        w.timeout.as_millis(),
        w.duration.as_secs_f64(),
        w.warmup.as_secs_f64(),
        w.max_in_flight,
        open_files.map_or("unknown".into(), |n| n.to_string()),
    );
    println!(
        "  command: gslb-bench --endpoints {} --interval {} --duration {} --kills {kills}",
        w.endpoints,
        humantime::format_duration(w.interval),
        humantime::format_duration(w.duration),
    );
}

/// blackbox_exporter's figures with its version, or why it did not run (skipped, not found,
/// failed).
async fn blackbox_phase(
    cli: &Cli,
    w: &Workload,
    addrs: &[SocketAddr],
) -> Result<(String, Figures), String> {
    if cli.no_blackbox {
        return Err("skipped (--no-blackbox)".to_owned());
    }
    let bin = blackbox::find(cli.blackbox.as_deref())?;
    let version = blackbox::version(&bin);
    match blackbox::run(w, addrs, &bin).await {
        Ok(f) => {
            println!("  blackbox_exporter {version} done: {} probes", f.probes);
            Ok((version, f))
        }
        Err(e) => Err(format!("failed: {e:#}")),
    }
}
