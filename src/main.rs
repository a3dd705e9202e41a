//! The `gslb` command: run, check, provision, plan, demo, drill, rearm, events, healthcheck.
//!
//! Exit codes: 0 ok, 1 runtime failure, 2 bad configuration or policy. This is the only place
//! that names concrete providers.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use gslb::config::Settings;
use gslb::daemon::controller::{self, Controller};
use gslb::daemon::reconcile::Sinks;
use gslb::io::audit::AuditLog;
use gslb::io::journal::Journal;
use gslb::io::jsonl::JsonlWriter;
use gslb::io::probe::Prober;
use gslb::io::state_file::StateFile;
use gslb::ops::metrics::Metrics;
use gslb::ops::status::StatusBoard;
use gslb_cloudflare::{
    ApiToken, CloudflareBinding, CloudflarePool, CloudflareProvider, LoadBalancerRef,
};
use gslb_core::policy::{self, Policy, Target};
use gslb_route53::{ProvisionAction, Route53Binding, Route53Pool, Route53Provider};
use tokio::task::JoinSet;

#[derive(Parser)]
#[command(name = "gslb", version, about = "Multi-cloud GSLB health controller")]
struct Cli {
    /// Log format on stderr: `text` (human-readable) or `json` (one JSON object per line:
    /// timestamp, level, fields, target).
    #[arg(
        long,
        global = true,
        env = "GSLB_LOG_FORMAT",
        default_value = "text",
        value_parser = parse_log_format
    )]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

/// How log lines are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LogFormat {
    /// Human-readable lines (colours on a terminal).
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

/// `text` or `json`, in any case; the error names both ways of setting it.
fn parse_log_format(s: &str) -> Result<LogFormat, String> {
    match s.to_ascii_lowercase().as_str() {
        "text" => Ok(LogFormat::Text),
        "json" => Ok(LogFormat::Json),
        _ => Err("expected `text` or `json` (set by --log-format or GSLB_LOG_FORMAT)".to_owned()),
    }
}

#[derive(Subcommand)]
enum Command {
    /// Probe, decide and push decisions to the providers; serve the admin API.
    Run {
        /// Daemon settings file (TOML); GSLB_* environment variables override it.
        #[arg(long, short, env = "GSLB_CONFIG")]
        config: PathBuf,
        /// Create or correct the failover records and verdict checks before starting.
        #[arg(long)]
        provision: bool,
    },
    /// Validate policy files or folders; report every problem with file, key and reason.
    Check {
        /// Files or folders of *.toml policies.
        #[arg(default_value = "policies")]
        paths: Vec<PathBuf>,
    },
    /// Create or correct the providers' failover records and verdict checks, then exit.
    Provision {
        /// Daemon settings file (TOML).
        #[arg(long, short, env = "GSLB_CONFIG")]
        config: PathBuf,
    },
    /// Print, for every policy target, what `gslb run` would change right now and why, then
    /// exit without writing: reads each provider, probes every endpoint once, evaluates.
    Plan {
        /// Daemon settings file (TOML).
        #[arg(long, short, env = "GSLB_CONFIG")]
        config: PathBuf,
        /// Probe rounds the results are taken to hold for (default: the larger of each
        /// policy's rise and fall; at most 1000, ten times the largest rise or fall a policy
        /// may set: every round of every endpoint is simulated in memory).
        #[arg(long, value_parser = clap::value_parser!(u32).range(0..=1000))]
        rounds: Option<u32>,
    },
    /// Run the whole loop on loopback with an in-process provider and print a drill report.
    Demo,
    /// Manual drills through the admin API of a running `gslb run`: drain, restore or force a
    /// pool for a while; list or end them.
    Drill(gslb::cli::drill::DrillArgs),
    /// Refill the velocity budget (of one service, or all) after a velocity-limited hold.
    Rearm(gslb::cli::drill::RearmArgs),
    /// Exit 0 when the admin API's /healthz answers 200, else 1 (a container HEALTHCHECK).
    Healthcheck {
        /// URL to get. Default: /healthz on the settings' admin.listen (loopback for 0.0.0.0),
        /// or http://127.0.0.1:9464/healthz without settings.
        #[arg(long)]
        url: Option<String>,
        /// Daemon settings file (TOML), read for admin.listen only.
        #[arg(long, short, env = "GSLB_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Failover timelines of a running `gslb run` (every switch, automatic or drill), printed
    /// as drill reports: detection, decision, apply, DNS-observed times and read RTO.
    Events(gslb::cli::drill::EventsArgs),
    /// Run the engine over a recorded observation log and print its decisions with reasons.
    Replay {
        /// Policy files or folders to evaluate with (e.g. a copy with tuned thresholds).
        #[arg(long, required = true)]
        policy: Vec<PathBuf>,
        /// The recording (`[record] observations` of the daemon settings).
        #[arg(long)]
        observations: PathBuf,
        /// Daemon settings whose `[engine]` table to use (suspect window, canaries, velocity).
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
}

/// A failure with its exit code.
struct Failure {
    code: u8,
    error: anyhow::Error,
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(e: E) -> Self {
        Self {
            code: 1,
            error: e.into(),
        }
    }
}

fn bad_config(e: impl Into<anyhow::Error>) -> Failure {
    Failure {
        code: 2,
        error: e.into(),
    }
}

fn client_failure(e: gslb::cli::drill::ClientError) -> Failure {
    Failure {
        code: e.exit_code(),
        error: e.into(),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(matches!(cli.command, Command::Demo), cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(dispatch(cli.command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            if cli.log_format == LogFormat::Json {
                // Every stderr line stays JSON for the log shipper.
                tracing::error!(
                    error = format!("{:#}", f.error),
                    exit_code = f.code,
                    "exiting"
                );
            } else {
                eprintln!("error: {:#}", f.error);
            }
            ExitCode::from(f.code)
        }
    }
}

/// Logs to stderr in `format`, filtered by `GSLB_LOG` (an `EnvFilter` directive, e.g.
/// `info,gslb::daemon::reconcile=debug`); default `info` (`warn` when `quiet`).
fn init_tracing(quiet: bool, format: LogFormat) {
    let default = if quiet { "warn" } else { "info" };
    let (filter, bad) = match std::env::var("GSLB_LOG") {
        Ok(v) => match tracing_subscriber::EnvFilter::try_new(&v) {
            Ok(f) if !v.trim().is_empty() => (f, None),
            _ => (tracing_subscriber::EnvFilter::new(default), Some(v)),
        },
        Err(_) => (tracing_subscriber::EnvFilter::new(default), None),
    };
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(ansi).init(),
        LogFormat::Json => builder.json().with_ansi(false).init(),
    }
    if let Some(v) = bad {
        tracing::warn!(GSLB_LOG = %v, "not a valid log filter; using {default}");
    }
}

async fn dispatch(command: Command) -> Result<(), Failure> {
    match command {
        Command::Check { paths } => check(&paths),
        Command::Demo => Ok(gslb::cli::demo::run(&mut std::io::stdout()).await?),
        Command::Drill(args) => gslb::cli::drill::drill(args)
            .await
            .map(|out| print!("{out}"))
            .map_err(client_failure),
        Command::Rearm(args) => gslb::cli::drill::rearm(args)
            .await
            .map(|out| print!("{out}"))
            .map_err(client_failure),
        Command::Healthcheck { url, config } => {
            let url = match url {
                Some(u) => u,
                None => gslb::cli::healthcheck::default_url(config.as_deref())?,
            };
            println!("healthy: {}", gslb::cli::healthcheck::check(&url).await?);
            Ok(())
        }
        Command::Events(args) => gslb::cli::drill::events(args)
            .await
            .map(|out| print!("{out}"))
            .map_err(client_failure),
        Command::Replay {
            policy,
            observations,
            config,
        } => replay(&policy, &observations, config.as_deref()),
        Command::Provision { config } => {
            let (settings, policies) = load(&config)?;
            provision_all(&settings, &policies).await
        }
        Command::Plan { config, rounds } => plan(&config, rounds).await,
        Command::Run { config, provision } => {
            // First, so a SIGHUP during start-up (provisioning included) queues a reload
            // instead of ending the process.
            let hangup = hangup_signal()?;
            let (settings, policies, reloader) = load_tracked(&config)?;
            if provision {
                provision_all(&settings, &policies).await?;
            }
            run(settings, policies, reloader, hangup).await
        }
    }
}

fn check(paths: &[PathBuf]) -> Result<(), Failure> {
    let policies = policy::load(paths).map_err(bad_config)?;
    for (file, p) in &policies {
        println!(
            "ok: {} (service {}, {} pools, worst-case failover {}: detection and TTL {} + expected apply time {})",
            file.display(),
            p.service,
            p.pools.len(),
            humantime::format_duration(p.worst_case_rto()),
            humantime::format_duration(p.worst_case_failover()),
            humantime::format_duration(p.target.expected_apply_time()),
        );
        if let Some(w) = p.rto_warning() {
            println!("warning: {}: rto_budget: {w}", file.display());
        }
        if let Some(w) = p.observe_warning() {
            println!("warning: {}: observe: {w}", file.display());
        }
    }
    Ok(())
}

fn replay(
    policies: &[PathBuf],
    observations: &std::path::Path,
    config: Option<&std::path::Path>,
) -> Result<(), Failure> {
    let policies = policy::load(policies).map_err(bad_config)?;
    let engine = match config {
        Some(c) => Settings::load(c).map_err(bad_config)?.engine,
        None => gslb::config::EngineConfig::default(),
    };
    let file = std::fs::File::open(observations)
        .with_context(|| format!("opening {}", observations.display()))?;
    let replayed = gslb::cli::replay::replay(
        policies.into_iter().map(|(_, p)| p).collect(),
        &engine.engine_settings(),
        std::io::BufReader::new(file),
    )
    .with_context(|| format!("replaying {}", observations.display()))?;
    if let Some((line, reason)) = &replayed.truncated_last_line {
        eprintln!("warning: the last line ({line}) is cut short and was skipped: {reason}");
    }
    if !replayed.unknown_services.is_empty() {
        let names: Vec<_> = replayed
            .unknown_services
            .iter()
            .map(ToString::to_string)
            .collect();
        eprintln!(
            "warning: the recording observes services no given policy names: {}",
            names.join(", ")
        );
    }
    let decisions = &replayed.decisions;
    for d in decisions {
        println!(
            "{} {} {} -> {}{}",
            d.at.rfc3339(),
            d.service,
            d.rule.as_str(),
            d.active.as_ref().map_or("-", |p| p.0.as_str()),
            d.blocked.as_ref().map_or_else(String::new, |b| format!(
                " (blocked: {} to {})",
                b.rule.as_str(),
                b.to
            )),
        );
        for r in &d.reasons {
            println!("    - {r}");
        }
    }
    println!(
        "{} decision(s), {} switch(es) from {} step(s) in {} run(s)",
        decisions.len(),
        decisions.iter().filter(|d| d.switched()).count(),
        replayed.steps,
        replayed.runs
    );
    Ok(())
}

fn load(config: &std::path::Path) -> Result<(Settings, Vec<Policy>), Failure> {
    load_tracked(config).map(|(settings, policies, _)| (settings, policies))
}

/// [`load`], with a reloader of the policy files fingerprinted just before they were read: a
/// change from then on (during `run --provision` too) is a reload.
fn load_tracked(
    config: &std::path::Path,
) -> Result<(Settings, Vec<Policy>, gslb::daemon::reload::Reloader), Failure> {
    let settings = Settings::load(config).map_err(bad_config)?;
    let reloader = gslb::daemon::reload::Reloader::new(settings.policies.clone());
    let policies = policy::load(&settings.policies).map_err(bad_config)?;
    let policies = policies.into_iter().map(|(_, p)| p).collect();
    Ok((settings, policies, reloader))
}

async fn route53(settings: &Settings, t: &gslb_core::policy::Route53Target) -> Route53Provider {
    let binding = Route53Binding {
        hosted_zone_id: t.hosted_zone_id.clone(),
        record_name: t.record_name.clone(),
        record_type: t.record_type.clone(),
        ttl: t.ttl,
        pools: t
            .pools
            .iter()
            .map(|p| Route53Pool {
                set_identifier: p.set_identifier.clone(),
                values: p.values.clone(),
            })
            .collect(),
    };
    let s = &settings.route53;
    let r53 = gslb_route53::Route53Settings {
        endpoint_url: s.endpoint_url.clone(),
        region: s.region.clone(),
        requests_per_second: s.requests_per_second,
        change_timeout: s.change_timeout,
        ..gslb_route53::Route53Settings::default()
    };
    Route53Provider::from_env(r53, binding).await
}

/// The Cloudflare API token, from `token_file` when set, else from `token_env`.
fn cloudflare_token(settings: &Settings) -> Result<ApiToken, Failure> {
    let s = &settings.cloudflare;
    match &s.token_file {
        Some(f) => ApiToken::from_file(f),
        None => ApiToken::from_env(&s.token_env),
    }
    .context("no Cloudflare API token")
    .map_err(bad_config)
}

fn cloudflare(
    settings: &Settings,
    token: ApiToken,
    t: &gslb_core::policy::CloudflareTarget,
) -> Result<CloudflareProvider, Failure> {
    let binding = CloudflareBinding {
        account_id: t.account_id.clone(),
        zone_id: t.zone_id.clone(),
        load_balancer: LoadBalancerRef::parse(&t.load_balancer),
        pools: t
            .pools
            .iter()
            .map(|p| CloudflarePool {
                pool_id: p.pool_id.clone(),
            })
            .collect(),
    };
    let s = &settings.cloudflare;
    let cf = gslb_cloudflare::CloudflareSettings {
        api_base: s.api_base.clone(),
        requests_per_window: s.requests_per_window,
        ..gslb_cloudflare::CloudflareSettings::new(token)
    };
    CloudflareProvider::new(cf, binding).map_err(bad_config)
}

async fn plan(config: &std::path::Path, rounds: Option<u32>) -> Result<(), Failure> {
    let (settings, policies) = load(config)?;
    let drills = StateFile::new(settings.state.overrides_file())
        .load()
        .map_err(bad_config)?;
    let prober = Arc::new(
        Prober::with_limits(&settings.dns, &settings.probing).context("building the prober")?,
    );
    let mut gathered = Vec::new();
    for p in &policies {
        let targets = controller::probe_targets(p, &prober).map_err(bad_config)?;
        let read = match bind(&settings, p).await? {
            Bound::Route53(x) => gslb::cli::plan::gather(p, x.as_ref(), targets, &prober).await,
            Bound::Cloudflare(x) => gslb::cli::plan::gather(p, x.as_ref(), targets, &prober).await,
        };
        gathered
            .push(read.with_context(|| format!("reading the provider of service {}", p.service))?);
    }
    let now = gslb::io::clock::Clock::system().now();
    let plans = gslb::cli::plan::evaluate(
        gathered,
        &settings.engine.engine_settings(),
        drills,
        &settings.vantage,
        now,
        rounds,
    );
    gslb::cli::plan::render(&plans, &mut std::io::stdout().lock()).context("writing the plan")?;
    Ok(())
}

async fn provision_all(settings: &Settings, policies: &[Policy]) -> Result<(), Failure> {
    for p in policies {
        let Target::Route53(t) = &p.target else {
            println!(
                "provisioned {}: nothing to do (Cloudflare pools and load balancers are made by their owners; gslb needs the gslb-managed tag in their descriptions)",
                p.service
            );
            continue;
        };
        let provider = route53(settings, t).await;
        let report = provider
            .provision()
            .await
            .with_context(|| format!("provisioning service {}", p.service))?;
        if report.is_noop() {
            println!("provisioned {}: nothing to change", p.service);
        }
        for pool in report.pools.iter().filter(|_| !report.is_noop()) {
            let action = match &pool.action {
                ProvisionAction::Unchanged => "unchanged".to_owned(),
                ProvisionAction::Created => "record created".to_owned(),
                ProvisionAction::Replaced { reason } => format!("record replaced ({reason})"),
            };
            let check = if pool.created_health_check {
                "new verdict check"
            } else {
                "verdict check"
            };
            println!(
                "provisioned {} {}: {action}; {check} {}",
                p.service, pool.set_identifier, pool.health_check_id
            );
        }
    }
    Ok(())
}

/// Runs the controller for `policies`; `reloader` tracks their files from when they were read
/// and `hangup` is SIGHUP, both set up before provisioning (see `Command::Run`).
async fn run(
    settings: Settings,
    policies: Vec<Policy>,
    mut reloader: gslb::daemon::reload::Reloader,
    mut hangup: tokio::sync::mpsc::Receiver<()>,
) -> Result<(), Failure> {
    let token = settings.admin_auth().map_err(bad_config)?;
    let sinks = Sinks {
        board: Arc::new(StatusBoard::default()),
        metrics: Metrics::new(),
        events: gslb::ops::events::channel(gslb::ops::events::CAPACITY),
        clock: gslb::io::clock::Clock::system(),
    };
    // The policies loaded (a failed load exits before here); reloads record theirs too.
    sinks.metrics.record_policy_load(true, unix_secs(&sinks));
    // This instance's vantage point reads "not suspect" from the start, not absent.
    sinks
        .metrics
        .record_vantage_points(&[(settings.vantage.clone(), None)]);
    match gslb::io::probe::raise_open_file_limit() {
        Ok(n) => tracing::debug!(open_files = n, "open-file limit"),
        Err(e) => tracing::warn!(error = %e, "cannot raise the open-file limit"),
    }
    let prober = Arc::new(
        Prober::with_limits(&settings.dns, &settings.probing).context("building the prober")?,
    );
    sinks
        .metrics
        .register_prober(&prober)
        .context("registering the probe metrics")?;
    tracing::info!(
        max_in_flight = prober.max_in_flight(),
        "probes in flight bounded"
    );
    let mut tasks = JoinSet::new();
    let webhooks = settings
        .notify
        .resolve(|v| std::env::var(v).ok())
        .map_err(bad_config)?;
    let notifier = gslb::ops::notify::spawn(
        &mut tasks,
        &webhooks,
        &sinks.events,
        &sinks.metrics,
        sinks.clock,
        &settings.vantage,
        &sinks.board,
    )?;
    let state = StateFile::new(settings.state.overrides_file());
    let saved = state.load().map_err(bad_config)?;
    let audit = AuditLog::open(settings.state.audit_log())
        .await
        .context("opening the audit log ([state] dir)")
        .map_err(bad_config)?;
    let recording = match &settings.record.observations {
        Some(path) => Some(
            JsonlWriter::open(path, gslb::io::jsonl::DEFAULT_CAPACITY)
                .await
                .context("opening the observation recording ([record] observations)")
                .map_err(bad_config)?,
        ),
        None => None,
    };
    let timeline_audit = audit.clone();
    let controller = Controller::start(
        &policies,
        &settings.engine.engine_settings(),
        sinks.clone(),
        Journal::new(recording, Some(audit), Some(state)),
        saved,
    );
    // Subscribed before any service is attached, so no switch is missed; a reload replaces
    // the policy set it reads.
    let (timelines, timeline_task) = gslb::ops::timeline::spawn(
        &sinks,
        Some(timeline_audit),
        settings.dns.clone(),
        controller.policies(),
    );
    let commands = controller.commands();
    let (canary_spec, canaries) = settings
        .engine
        .canary_endpoints()
        .map_err(|e| bad_config(anyhow::anyhow!(e)))?;
    let canaries = canaries
        .iter()
        .map(|e| prober.target(&canary_spec, e))
        .collect::<Result<Vec<_>, _>>()
        .map_err(bad_config)?;
    controller.attach_canaries(&mut tasks, canaries, &prober, &settings.vantage);
    for policy in &policies {
        let provider = bind(&settings, policy).await?;
        attach(
            &controller,
            &mut tasks,
            &settings,
            policy,
            provider,
            &prober,
        )
        .map_err(bad_config)?;
    }
    let admin = gslb::ops::admin::AdminState {
        board: sinks.board.clone(),
        metrics: sinks.metrics.clone(),
        commands: Some(commands),
        token,
        timelines,
    };
    let listener = tokio::net::TcpListener::bind(settings.admin.listen)
        .await
        .with_context(|| format!("binding the admin API on {}", settings.admin.listen))?;
    tasks.spawn(async move {
        if let Err(e) = gslb::ops::admin::serve(listener, admin).await {
            tracing::error!(error = %e, "admin API stopped");
        }
    });
    tracing::info!(vantage = %settings.vantage, "gslb running (policies reload on SIGHUP and file changes; daemon settings need a restart)");
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    let mut poll = tokio::time::interval(gslb::daemon::reload::POLL_INTERVAL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    poll.tick().await;
    let outcome = loop {
        let trigger = tokio::select! {
            () = &mut shutdown => {
                tracing::info!("shutting down");
                break Ok(());
            }
            r = tasks.join_next() => match r {
                // A reload stopped the tasks of a changed or removed service.
                Some(Err(e)) if e.is_cancelled() => continue,
                _ => break Err(anyhow::anyhow!("a controller task stopped unexpectedly").into()),
            },
            Some(()) = hangup.recv() => gslb::daemon::reload::Trigger::Signal,
            _ = poll.tick() => gslb::daemon::reload::Trigger::Poll,
        };
        let ctx = (&controller, &settings, &prober, &sinks);
        reload(&mut reloader, trigger, ctx, &mut tasks).await;
    };
    controller.stop(&mut tasks).await;
    // After the engine's last events: open timelines are audited as interrupted.
    timeline_task.stop().await;
    // Webhook messages still queued get a short, bounded chance to go out.
    notifier.drain(gslb::ops::notify::DRAIN_TIMEOUT).await;
    outcome
}

/// A policy target's provider.
enum Bound {
    Route53(Arc<Route53Provider>),
    Cloudflare(Arc<CloudflareProvider>),
}

async fn bind(settings: &Settings, policy: &Policy) -> Result<Bound, Failure> {
    Ok(match &policy.target {
        Target::Route53(t) => Bound::Route53(Arc::new(route53(settings, t).await)),
        Target::Cloudflare(t) => Bound::Cloudflare(Arc::new(cloudflare(
            settings,
            cloudflare_token(settings)?,
            t,
        )?)),
    })
}

fn attach(
    controller: &Controller,
    tasks: &mut JoinSet<()>,
    settings: &Settings,
    policy: &Policy,
    provider: Bound,
    prober: &Arc<Prober>,
) -> Result<(), gslb::io::probe::ProbeError> {
    let binding = controller::binding(policy, settings.reconcile.resync);
    let vantage = &settings.vantage;
    match provider {
        Bound::Route53(p) => controller.attach(tasks, policy, p, binding, prober, vantage),
        Bound::Cloudflare(p) => controller.attach(tasks, policy, p, binding, prober, vantage),
    }
}

fn unix_secs(sinks: &Sinks) -> f64 {
    Duration::from_millis(sinks.clock.now().0).as_secs_f64()
}

/// Reloads the policies when their files changed: the whole new set is loaded, validated and
/// bound to its providers and probe targets first; on any error the last good set keeps
/// running (logged with file, key and reason; `gslb_policy_reload_success` 0).
async fn reload(
    reloader: &mut gslb::daemon::reload::Reloader,
    trigger: gslb::daemon::reload::Trigger,
    (controller, settings, prober, sinks): (&Controller, &Settings, &Arc<Prober>, &Sinks),
    tasks: &mut JoinSet<()>,
) {
    let failed = |reloader: &mut gslb::daemon::reload::Reloader, error: &dyn std::fmt::Display| {
        tracing::error!(trigger = ?trigger, "policy reload failed; the last good policies keep running:\n{error}");
        sinks.metrics.record_policy_load(false, unix_secs(sinks));
        reloader.settle(false);
    };
    // Reads and parses files: off the async workers' hot path.
    let policies = match tokio::task::block_in_place(|| reloader.check(trigger)) {
        Ok(Some(p)) => p,
        Ok(None) => {
            if trigger == gslb::daemon::reload::Trigger::Signal {
                tracing::info!("SIGHUP: the policy files are unchanged; nothing to reload");
            }
            return;
        }
        Err(e) => return failed(reloader, &e),
    };
    let diff = controller.diff(policies);
    let mut bound = Vec::new();
    for p in diff.changed_policies() {
        let checked = match controller::probe_targets(p, prober) {
            Ok(_) => bind(settings, p).await.map_err(|f| f.error),
            Err(e) => Err(anyhow::Error::new(e)),
        };
        match checked {
            Ok(provider) => bound.push((p.clone(), provider)),
            Err(e) => {
                let e = format!("service {}: {e:#}", p.service);
                return failed(reloader, &e);
            }
        }
    }
    controller.reload(&diff).await;
    for (policy, provider) in bound {
        if let Err(e) = attach(controller, tasks, settings, &policy, provider, prober) {
            // Checked above; a target that builds once builds again.
            tracing::error!(service = %policy.service, error = %e, "cannot probe the reloaded service");
        }
    }
    tracing::info!(
        changed = ?diff.changed.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(),
        unchanged = ?diff.unchanged.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(),
        removed = ?diff.removed.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(),
        "policies reloaded"
    );
    sinks.metrics.record_policy_load(true, unix_secs(sinks));
    reloader.settle(true);
}

/// SIGHUP, as a stream (never yields where there is no such signal).
fn hangup_signal() -> Result<tokio::sync::mpsc::Receiver<()>, Failure> {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    #[cfg(unix)]
    {
        let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .context("listening for SIGHUP")?;
        tokio::spawn(async move {
            while hup.recv().await.is_some() {
                // A reload already queued covers this one too.
                let _ = tx.try_send(());
            }
        });
    }
    #[cfg(not(unix))]
    std::mem::forget(tx);
    Ok(rx)
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => return ctrl_c.await.unwrap_or(()),
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    ctrl_c.await.unwrap_or(());
}
