//! The `gslb` command: run, check, provision, plan, demo, drill, rearm, events, healthcheck,
//! etcd-auth, replay.
//!
//! Exit codes: 0 ok, 1 runtime failure, 2 bad configuration or policy; `plan`'s and
//! `provision --dry-run`'s are `terraform plan -detailed-exitcode`'s: 0 no change, 2 changes pending, 1 any error. This binary (with its
//! [`adapters`] module) is the only code that names concrete providers.

mod adapters;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use adapters::Adapters;
use anyhow::Context as _;
use clap::{Parser, Subcommand};
use gslb::cli::run::{self, RunError};
use gslb::ops::logging::LogFormat;

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
        value_parser = LogFormat::parse
    )]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
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
    /// Validate policy files or folders, and with --config the daemon settings; print every
    /// file's result, each problem with file, line, key and reason.
    Check {
        /// Files or folders of *.toml policies (default: the settings' `policies` with
        /// --config, else `policies`).
        paths: Vec<PathBuf>,
        /// Daemon settings file (TOML) to lint, with the GSLB_* environment variables over it.
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
    /// Create or correct the failover records and verdict checks gslb owns, then exit.
    #[command(override_usage = "gslb provision --config <CONFIG> [--dry-run] [--adopt <NAME>]...")]
    Provision {
        /// Daemon settings file (TOML).
        #[arg(long, short, env = "GSLB_CONFIG")]
        config: PathBuf,
        /// Print the change batches and exit 0 (nothing to change), 2 (changes pending) or 1.
        #[arg(long)]
        dry_run: bool,
        /// Replace the records at this name (a record name or service) gslb does not own.
        #[arg(long, value_name = "NAME")]
        adopt: Vec<String>,
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
    Demo(gslb::cli::demo::DemoArgs),
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
    /// Set up etcd's access control for the cluster of a settings file, as etcd's root user:
    /// one user (the client certificate's CN) and role per vantage point, each allowed to write
    /// only its own keys; then turn auth on. Idempotent.
    EtcdAuth(gslb::cli::etcd_auth::EtcdAuthArgs),
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

fn run_failure(e: RunError) -> Failure {
    Failure {
        code: e.exit_code(),
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
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            let code = gslb::cli::plan::usage_exit_code(e.exit_code(), std::env::args());
            return ExitCode::from(code);
        }
    };
    init_tracing(matches!(cli.command, Command::Demo(_)), cli.log_format);
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
        // Whoever read the output stopped reading (`gslb plan | head`): nothing to report to.
        Err(f) if gslb::cli::closed_pipe(&f.error) => ExitCode::SUCCESS,
        Err(f) => {
            if cli.log_format == LogFormat::Json {
                // Every stderr line stays JSON for the log shipper.
                tracing::error!(
                    error = gslb::cli::describe(&f.error),
                    exit_code = f.code,
                    "exiting"
                );
            } else {
                eprintln!("error: {}", gslb::cli::describe(&f.error));
            }
            ExitCode::from(f.code)
        }
    }
}

/// Logs to stderr in `format`, filtered by `GSLB_LOG` (see [`gslb::ops::logging::filter`]);
/// default `info` (`warn` when `quiet`), the TLS verifier's per-probe errors left out.
fn init_tracing(quiet: bool, format: LogFormat) {
    let default = if quiet { "warn" } else { "info" };
    let (filter, bad) =
        gslb::ops::logging::filter(default, std::env::var("GSLB_LOG").ok().as_deref());
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(ansi).init(),
        LogFormat::Json => builder
            .with_ansi(false)
            .event_format(gslb::ops::logging::JsonLines)
            .init(),
    }
    if let Some(v) = bad {
        tracing::warn!(GSLB_LOG = %v, "not a valid log filter; using {default}");
    }
}

async fn dispatch(command: Command) -> Result<(), Failure> {
    let out = &mut std::io::stdout();
    match command {
        Command::Check { paths, config } => gslb::cli::check::run(&paths, config.as_deref(), out)
            .map_err(|e| match e {
                e @ gslb::cli::check::CheckError::Invalid { .. } => bad_config(e),
                e => e.into(),
            }),
        Command::Demo(args) => Ok(gslb::cli::demo::run(args, out).await?),
        Command::Drill(args) => print(gslb::cli::drill::drill(args).await),
        Command::EtcdAuth(args) => Ok(gslb::cli::etcd_auth::command(args, out).await?),
        Command::Rearm(args) => print(gslb::cli::drill::rearm(args).await),
        Command::Events(args) => print(gslb::cli::drill::events(args).await),
        Command::Healthcheck { url, config } => {
            let default = || gslb::cli::healthcheck::default_url(config.as_deref());
            let url = url.map_or_else(default, Ok)?;
            let healthy = gslb::cli::healthcheck::check(&url).await?;
            Ok(writeln!(out, "healthy: {healthy}")?)
        }
        Command::Replay {
            policy,
            observations,
            config,
        } => gslb::cli::replay::command(&policy, &observations, config.as_deref())
            .map_err(run_failure),
        Command::Provision {
            config,
            dry_run,
            adopt,
        } => {
            let (settings, policies, _) = run::load(&config)
                .map_err(|e| run_failure(if dry_run { e.with_exit_code(1) } else { e }))?;
            let adapters = Adapters::new(&settings);
            let pending = adapters.provision(&policies, dry_run, &adopt, out).await?;
            (!(pending && dry_run))
                .then_some(())
                .ok_or_else(|| Failure {
                    code: 2,
                    error: anyhow::anyhow!("changes pending (dry run: nothing was written)"),
                })
        }
        Command::Plan { config, rounds } => {
            let loaded = run::load(&config).map_err(|e| run_failure(e.with_exit_code(1)));
            let (settings, policies, _) = loaded?;
            let adapters = Adapters::new(&settings);
            gslb::cli::plan::run(&settings, &policies, &adapters, rounds, out)
                .await
                .map_err(run_failure)
        }
        Command::Run { config, provision } => {
            // First, so a SIGHUP during start-up (provisioning included) queues a reload
            // instead of ending the process.
            let hangup = gslb::io::signals::hangup().context("listening for SIGHUP")?;
            let (settings, policies, reloader) = run::load(&config).map_err(run_failure)?;
            let adapters = Adapters::new(&settings);
            if provision {
                adapters.provision(&policies, false, &[], out).await?;
            }
            run::run(settings.clone(), policies, &adapters, reloader, hangup)
                .await
                .map_err(run_failure)
        }
    }
}

/// A drill client's answer, printed; its failure with the client's exit code.
fn print(answer: Result<String, gslb::cli::drill::ClientError>) -> Result<(), Failure> {
    answer.map(|out| print!("{out}")).map_err(client_failure)
}
