//! `gslb-bench`: the product benchmark (issue 14). Drives `gslb run` end to end as a separate
//! process over generated policies (N endpoints, K per service in two pools, bound to
//! Cloudflare), with the origins and the Cloudflare fake each in their own process; reports
//! from the daemon's `/proc/<pid>` and `/metrics`, the origins' hit counts and the fake's call
//! log, then runs blackbox_exporter over the same origins; prints a markdown table.
//!
//! ```sh
//! bash benches/probe-bench.sh                                  # installs blackbox_exporter, builds, runs
//! gslb-bench --endpoints 10000 --per-service 2                 # 5,000 services x 2 endpoints
//! gslb-bench --endpoints 10000 --per-service 500               # 20 services x 500 endpoints
//! gslb-bench detect --rounds 20                                # kill to provider write, 1 s / fall 3
//! gslb-bench cluster --services 1000                           # etcd calls/s of 3 instances
//! gslb-bench --endpoints 10000 --cpu-quota 20 --no-blackbox    # overload
//! gslb-bench --endpoints 2000 --cpu-quota 20 --no-blackbox --keep  # ... keeping the audit log
//! ```
//!
//! Loopback only (127.1.x.y, the fake and blackbox_exporter on 127.0.0.1); everything it starts
//! stops with it. Linux only (`/proc`).

mod blackbox;
mod child;
mod cluster;
mod daemon;
mod detect;
mod fake;
mod generate;
mod origins;
mod procfs;
mod product;
mod prom;
mod quota;
mod report;
mod workload;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::workload::Workload;

#[derive(Parser)]
#[command(
    name = "gslb-bench",
    about = "The product benchmark: gslb run end to end, against blackbox_exporter"
)]
struct Cli {
    #[command(subcommand)]
    mode: Option<Mode>,
    /// Endpoints probed (origins started on 127.1.x.y).
    #[arg(long, default_value_t = 10_000)]
    endpoints: usize,
    /// Endpoints per service, split over its two pools: 2 gives 5,000 services at 10,000
    /// endpoints, 500 gives 20.
    #[arg(long, default_value_t = 2)]
    per_service: usize,
    /// Probe interval of every endpoint.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    interval: Duration,
    /// Measured window in steady state.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Time between start-up and the window.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    warmup: Duration,
    /// Timed `/metrics` scrapes after the window.
    #[arg(long, default_value_t = 3)]
    scrapes: usize,
    /// Longest start-up waited for.
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    startup_limit: Duration,
    /// `[reconcile] resync` of the daemon (default: the daemon's own, 60 s).
    #[arg(long, value_parser = humantime::parse_duration)]
    resync: Option<Duration>,
    /// Run the daemon under a CPU quota, percent of one core (overload); skips blackbox_exporter.
    #[arg(long)]
    cpu_quota: Option<u32>,
    /// The gslb binary (default: `gslb` next to this program).
    #[arg(long, global = true)]
    gslb: Option<PathBuf>,
    /// The blackbox_exporter binary (default: prometheus-blackbox-exporter or blackbox_exporter on PATH).
    #[arg(long)]
    blackbox: Option<PathBuf>,
    /// Skip blackbox_exporter.
    #[arg(long)]
    no_blackbox: bool,
    /// Keep the daemon's folder (`run.log`, `state/audit.jsonl`, the window's two `/metrics`
    /// scrapes) and print its path.
    #[arg(long)]
    keep: bool,
}

#[derive(Subcommand)]
enum Mode {
    /// Detection: kill the primary's origin process, time until the provider receives the write.
    Detect {
        /// Kills.
        #[arg(long, default_value_t = 20)]
        rounds: usize,
        /// Probe interval.
        #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
        interval: Duration,
        /// Consecutive failures that mark an endpoint down.
        #[arg(long, default_value_t = 3)]
        fall: u32,
    },
    /// etcd calls per second of each of three clustered instances (`etcd` on PATH).
    Cluster {
        /// Generated services (two endpoints each).
        #[arg(long, default_value_t = 1_000)]
        services: usize,
        /// Probe interval.
        #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
        interval: Duration,
        /// Time between start-up and the window (every election settles).
        #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
        warmup: Duration,
        /// Measured window.
        #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
        window: Duration,
    },
    /// (internal) Serve origins until standard input closes.
    ServeOrigins {
        /// How many.
        #[arg(long)]
        endpoints: usize,
        /// Bind these addresses instead.
        #[arg(long)]
        at: Vec<SocketAddr>,
    },
    /// (internal) Serve the Cloudflare fake until standard input closes.
    ServeFake {
        /// Generated services (one load balancer and two pools each).
        #[arg(long)]
        services: usize,
    },
    /// (internal) Spin until standard input closes (the competing process of an overload run).
    Busy,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.mode {
        Some(Mode::ServeOrigins { endpoints, at }) => origins::serve(*endpoints, at),
        Some(Mode::ServeFake { services }) => fake::serve(*services),
        Some(Mode::Busy) => {
            quota::busy();
            Ok(())
        }
        _ => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(anyhow::Error::from)
            .and_then(|rt| rt.block_on(bench(cli))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gslb-bench: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// The detection rounds, or the scale run.
async fn bench(cli: Cli) -> anyhow::Result<()> {
    let gslb = daemon::find(cli.gslb.as_deref())?;
    println!("gslb product benchmark ({})", gslb.display());
    println!("  machine: {}", procfs::machine());
    println!(
        "  allocator: glibc, MALLOC_ARENA_MAX={} (the image's; set MALLOC_ARENA_MAX to change it)",
        daemon::malloc_arena_max()
    );
    if let Some(Mode::Detect {
        rounds,
        interval,
        fall,
    }) = cli.mode
    {
        println!(
            "  command: gslb-bench detect --rounds {rounds} --interval {} --fall {fall}",
            humantime::format_duration(interval)
        );
        let d = detect::run(&gslb, rounds, interval, fall).await?;
        print!("\n{}", d.report());
        return Ok(());
    }
    if let Some(Mode::Cluster {
        services,
        interval,
        warmup,
        window,
    }) = cli.mode
    {
        println!(
            "  command: gslb-bench cluster --services {services} --interval {} --warmup {} --window {}",
            humantime::format_duration(interval),
            humantime::format_duration(warmup),
            humantime::format_duration(window)
        );
        let calls = cluster::run(&gslb, services, interval, warmup, window).await?;
        print!("\n{}", cluster::table(&calls));
        return Ok(());
    }
    scale(&cli, gslb).await
}

/// The scale run, then blackbox_exporter over the same origins.
async fn scale(cli: &Cli, gslb: PathBuf) -> anyhow::Result<()> {
    if cli.per_service < 2
        || cli.endpoints < cli.per_service
        || cli.interval < Duration::from_millis(100)
    {
        anyhow::bail!(
            "--per-service must be at least 2, --endpoints at least --per-service, --interval at least 100ms"
        );
    }
    let services = cli.endpoints / cli.per_service;
    let endpoints = services * cli.per_service;
    let open_files = gslb::io::probe::raise_open_file_limit().ok();
    println!(
        "  workload: {services} services x {} endpoints = {endpoints} endpoints on 127.1.x.y, every {} ms; window {} s after {} s warm-up; open-file limit {}",
        cli.per_service,
        cli.interval.as_millis(),
        cli.duration.as_secs(),
        cli.warmup.as_secs(),
        open_files.map_or("unknown".into(), |n| n.to_string()),
    );
    println!(
        "  command: gslb-bench --endpoints {endpoints} --per-service {} --interval {} --duration {}{}",
        cli.per_service,
        humantime::format_duration(cli.interval),
        humantime::format_duration(cli.duration),
        cli.cpu_quota
            .map_or(String::new(), |q| format!(" --cpu-quota {q}")),
    );
    let origins = origins::Origins::start(endpoints, &[]).await?;
    let provider = fake::Provider::start(services).await?;
    println!(
        "  origins: process {}, fake: process {} at {}",
        origins.pid(),
        provider.pid(),
        provider.base_url
    );
    let run = product::Run {
        shape: generate::Shape {
            services,
            per_service: cli.per_service,
            interval: cli.interval,
            fall: 3,
            extra: String::new(),
            target_extra: String::new(),
        },
        warmup: cli.warmup,
        duration: cli.duration,
        scrapes: cli.scrapes.max(1),
        gslb,
        cpu_quota: cli.cpu_quota,
        settings: cli.resync.map_or(String::new(), |r| {
            format!("[reconcile]\nresync = \"{}ms\"", r.as_millis())
        }),
        startup_limit: cli.startup_limit,
        keep: cli.keep,
    };
    let product = product::run(&run, &origins, &provider).await;
    provider.stop();
    let product = product?;
    let bb = blackbox_phase(cli, &origins).await;
    origins.stop();
    println!();
    print!("{}", report::table(&product, &bb));
    Ok(())
}

/// blackbox_exporter over the same origins with the same interval and timeout, or why not.
async fn blackbox_phase(
    cli: &Cli,
    origins: &origins::Origins,
) -> Result<(String, blackbox::Figures), String> {
    if cli.no_blackbox || cli.cpu_quota.is_some() {
        return Err("skipped".into());
    }
    let bin = blackbox::find(cli.blackbox.as_deref())?;
    let version = blackbox::version(&bin);
    let w = Workload {
        interval: cli.interval,
        timeout: (cli.interval / 2).min(Duration::from_secs(5)),
        warmup: cli.warmup.min(cli.interval * 5),
        duration: cli.duration,
        max_in_flight: gslb::io::probe::default_max_in_flight(),
        origins_pid: origins.pid(),
        ticks: procfs::clock_ticks(),
    };
    println!(
        "  blackbox_exporter {version}: {} s window",
        w.duration.as_secs()
    );
    blackbox::run(&w, &origins.addrs, &bin)
        .await
        .map(|f| (version, f))
        .map_err(|e| format!("failed: {e:#}"))
}
