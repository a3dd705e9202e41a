//! The CLI side of drills: `gslb drill drain|restore|force|list|end`, `gslb rearm` and
//! `gslb events`, a small client of the admin API ([`crate::admin::drills`] defines the JSON it
//! sends and reads).
//!
//! It only talks HTTP to a running `gslb run`; it never reads the state file or the audit log
//! and decides nothing itself. Arguments are checked before anything is sent (exit code 2);
//! a refusal by the server is reported with the server's message (exit code 1); a drill the
//! server started but that is not in effect (held by the engine, ignored by the provider, or one
//! vote of several in Route 53 data-plane mode) is reported with the reason (exit code 3).

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

mod events;
mod http;

use clap::{Args, Subcommand};

pub use events::{EventsArgs, events};
pub(crate) use http::innermost_cause;
pub use http::{AdminClient, ClientError, REQUEST_TIMEOUT};

use crate::admin::drills::{DrillRequest, EndRequest, RearmRequest};
use crate::config::{ADMIN_TOKEN_ENV, AdminToken};
use gslb_core::engine::{MAX_OVERRIDE_TTL, Override, OverrideAction};
use gslb_core::model::{Millis, ServiceId};

/// Where the admin API is when neither `--admin` nor `GSLB_ADMIN_URL` says: the daemon's
/// default `admin.listen`.
pub const DEFAULT_ADMIN_URL: &str = "http://127.0.0.1:9464";

/// How to reach the admin API (shared by `gslb drill` and `gslb rearm`).
#[derive(Debug, Clone, Args)]
pub struct AdminArgs {
    /// Admin API base URL.
    #[arg(long = "admin", visible_alias = "admin-url", env = "GSLB_ADMIN_URL", default_value = DEFAULT_ADMIN_URL, global = true)]
    pub url: String,
    /// File holding the admin bearer token (default: the GSLB_ADMIN_TOKEN variable, if set).
    #[arg(long, global = true, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
}

/// `gslb drill ...`.
#[derive(Debug, Clone, Args)]
pub struct DrillArgs {
    /// The admin API.
    #[command(flatten)]
    pub admin: AdminArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: DrillCommand,
}

/// The drill subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum DrillCommand {
    /// Take a pool out of service; its traffic moves to the next healthy pool.
    Drain(StartArgs),
    /// Bring a pool back (ends its drains, authorises a failback to it).
    Restore(StartArgs),
    /// Pin traffic to a pool while it is healthy.
    Force(StartArgs),
    /// List the active drills.
    List,
    /// End a drill before its expiry.
    End {
        /// The drill's id (from `gslb drill list`).
        id: String,
        /// Why it ends (recorded in the audit log).
        #[arg(long, value_parser = non_blank)]
        reason: String,
        /// Who ends it (default: $USER, else "cli"); a daemon with tokens records the
        /// token's name instead.
        #[arg(long)]
        actor: Option<String>,
    },
}

/// Arguments of `drain`, `restore` and `force`.
#[derive(Debug, Clone, Args)]
pub struct StartArgs {
    /// The service (policy `service` name).
    #[arg(long)]
    pub service: String,
    /// The pool.
    #[arg(long)]
    pub pool: String,
    /// How long, e.g. 30m or 2h (at most 24h; default 4h).
    #[arg(long = "for", value_name = "DURATION", value_parser = drill_duration)]
    pub duration: Option<Duration>,
    /// Why (recorded in status and the audit log).
    #[arg(long, value_parser = non_blank)]
    pub reason: String,
    /// Who (default: $USER, else "cli"); a daemon with tokens records the token's name
    /// instead.
    #[arg(long)]
    pub actor: Option<String>,
}

/// `gslb rearm`.
#[derive(Debug, Clone, Args)]
pub struct RearmArgs {
    /// The admin API.
    #[command(flatten)]
    pub admin: AdminArgs,
    /// The service to re-arm (default: every service and the controller-wide budget).
    #[arg(long)]
    pub service: Option<String>,
    /// Why (recorded in the audit log).
    #[arg(long, value_parser = non_blank)]
    pub reason: String,
    /// Who (default: $USER, else "cli"); a daemon with tokens records the token's name
    /// instead.
    #[arg(long)]
    pub actor: Option<String>,
}

fn non_blank(s: &str) -> Result<String, String> {
    match s.trim() {
        "" => Err("must not be empty".into()),
        t => Ok(t.to_owned()),
    }
}

fn drill_duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("{e} (write it like 30m or 2h)"))?;
    if d < Duration::from_secs(1) || d > MAX_OVERRIDE_TTL {
        return Err("must be between 1s and 24h".into());
    }
    Ok(d)
}

/// The token: `--token-file` when given, else `env` (the value of `GSLB_ADMIN_TOKEN`), else
/// none.
///
/// # Errors
/// [`ClientError::Token`] when the file is unreadable or the token empty.
pub fn token(args: &AdminArgs, env: Option<String>) -> Result<Option<AdminToken>, ClientError> {
    if let Some(path) = &args.token_file {
        return Ok(Some(AdminToken::read_file(path)?));
    }
    Ok(env
        .map(|v| AdminToken::new(&v, ADMIN_TOKEN_ENV))
        .transpose()?)
}

/// The default actor: `$USER`, else `cli`.
pub fn default_actor() -> String {
    std::env::var("USER")
        .ok()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| "cli".into())
}

/// Runs `gslb drill ...` against the admin API and returns what to print.
///
/// # Errors
/// See [`ClientError`].
pub async fn drill(args: DrillArgs) -> Result<String, ClientError> {
    let client = AdminClient::new(
        &args.admin.url,
        token(&args.admin, std::env::var(ADMIN_TOKEN_ENV).ok())?,
    )?;
    let now = wall_now();
    let (action, start) = match args.command {
        DrillCommand::Drain(s) => (OverrideAction::Drain, s),
        DrillCommand::Restore(s) => (OverrideAction::Restore, s),
        DrillCommand::Force(s) => (OverrideAction::Force, s),
        DrillCommand::List => return Ok(table(&client.list().await?, now)),
        DrillCommand::End { id, reason, actor } => {
            let ended = client
                .end(
                    &id,
                    &EndRequest {
                        reason,
                        actor: Some(actor.unwrap_or_else(default_actor)),
                    },
                )
                .await?;
            return Ok(format!("{}\n", describe_ended(&ended)));
        }
    };
    let request = DrillRequest {
        service: ServiceId(start.service),
        action,
        pool: start.pool.as_str().into(),
        reason: start.reason,
        duration: start
            .duration
            .map(|d| humantime::format_duration(d).to_string()),
        actor: Some(start.actor.unwrap_or_else(default_actor)),
    };
    let created = client.start(&request).await?;
    let line = describe(&created.drill, now);
    match (created.held, created.ignored, created.one_vote) {
        (Some(why), _, _) => Err(ClientError::NotInEffect(format!(
            "started {line}, but it is held: {why}"
        ))),
        (None, Some(why), _) => Err(ClientError::NotInEffect(format!(
            "started {line}, but it is ignored: {why}"
        ))),
        (None, None, Some(why)) => Err(ClientError::NotInEffect(format!(
            "started {line}, but it is not in effect by itself: {why}"
        ))),
        (None, None, None) => Ok(format!("started {line}\n")),
    }
}

/// Runs `gslb rearm` against the admin API and returns what to print.
///
/// # Errors
/// See [`ClientError`].
pub async fn rearm(args: RearmArgs) -> Result<String, ClientError> {
    let client = AdminClient::new(
        &args.admin.url,
        token(&args.admin, std::env::var(ADMIN_TOKEN_ENV).ok())?,
    )?;
    let rearmed = client
        .rearm(&RearmRequest {
            service: args.service.map(ServiceId),
            reason: args.reason,
            actor: Some(args.actor.unwrap_or_else(default_actor)),
        })
        .await?;
    let names: Vec<_> = rearmed.iter().map(ServiceId::to_string).collect();
    Ok(format!("re-armed: {}\n", names.join(", ")))
}

/// The current wall-clock time (the CLI is not a loop; it has no tokio clock to follow).
pub fn wall_now() -> Millis {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    Millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `expires - now` in whole seconds (`29m 58s`), or `expired`.
pub fn expires_in(o: &Override, now: Millis) -> String {
    if o.expires <= now {
        return "expired".into();
    }
    let secs = o.expires.since(now).as_secs().max(1);
    humantime::format_duration(Duration::from_secs(secs)).to_string()
}

/// One line: `d-5f3a9c1e drain api/seoul, expires in 30m, by alice: quarterly DR drill`.
pub fn describe(o: &Override, now: Millis) -> String {
    format!(
        "{} {} {}/{}, expires in {}, by {}: {}",
        o.id,
        o.action,
        o.service,
        o.pool,
        expires_in(o, now),
        o.actor,
        o.reason
    )
}

/// One line for a drill just ended: `ended d-5f3a9c1e drain api/seoul (started by alice:
/// quarterly DR drill)`.
pub fn describe_ended(o: &Override) -> String {
    format!(
        "ended {} {} {}/{} (started by {}: {})",
        o.id, o.action, o.service, o.pool, o.actor, o.reason
    )
}

/// The `gslb drill list` table: one row per drill (id, service, action, pool, expires in,
/// actor, reason), or `no active drills`.
pub fn table(overrides: &[Override], now: Millis) -> String {
    if overrides.is_empty() {
        return "no active drills\n".into();
    }
    let header = [
        "ID",
        "SERVICE",
        "ACTION",
        "POOL",
        "EXPIRES IN",
        "ACTOR",
        "REASON",
    ]
    .map(String::from);
    let rows: Vec<[String; 7]> = overrides
        .iter()
        .map(|o| {
            [
                o.id.to_string(),
                o.service.to_string(),
                o.action.to_string(),
                o.pool.to_string(),
                expires_in(o, now),
                o.actor.clone(),
                o.reason.clone(),
            ]
        })
        .collect();
    let mut widths = [0usize; 7];
    for row in std::iter::once(&header).chain(&rows) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use gslb_core::engine::OverrideId;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        command: Top,
    }

    #[derive(Subcommand)]
    enum Top {
        Drill(DrillArgs),
        Rearm(RearmArgs),
    }

    fn parse(args: &[&str]) -> Result<Top, clap::Error> {
        Cli::try_parse_from(std::iter::once("gslb").chain(args.iter().copied())).map(|c| c.command)
    }

    #[test]
    fn drain_arguments_parse() {
        let Ok(Top::Drill(d)) = parse(&[
            "drill",
            "drain",
            "--service",
            "api",
            "--pool",
            "seoul",
            "--for",
            "30m",
            "--reason",
            "quarterly DR drill",
            "--admin",
            "http://127.0.0.1:1",
        ]) else {
            panic!("must parse");
        };
        assert_eq!(d.admin.url, "http://127.0.0.1:1");
        let DrillCommand::Drain(s) = d.command else {
            panic!("drain");
        };
        assert_eq!(s.duration, Some(Duration::from_secs(1800)));
        assert_eq!((s.service.as_str(), s.pool.as_str()), ("api", "seoul"));
    }

    #[test]
    fn bad_arguments_are_usage_errors() {
        let start = ["drill", "force", "--service", "api", "--pool", "seoul"];
        for extra in [
            &["--for", "25h", "--reason", "x"][..],
            &["--for", "soon", "--reason", "x"],
            &["--for", "0s", "--reason", "x"],
            &["--reason", "  "],
            &[],
        ] {
            let args: Vec<&str> = start.iter().chain(extra).copied().collect();
            let e = parse(&args)
                .err()
                .unwrap_or_else(|| panic!("{args:?} must fail"));
            assert_eq!(e.exit_code(), 2, "{args:?}");
        }
        assert!(
            parse(&["drill", "end", "d-1"]).is_err(),
            "end needs a reason"
        );
        assert!(parse(&["rearm", "--reason", "budget spent"]).is_ok());
    }

    #[test]
    fn the_token_file_wins_over_the_environment() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("token");
        std::fs::write(&file, "from-file\n").expect("write");
        let mut args = AdminArgs {
            url: DEFAULT_ADMIN_URL.into(),
            token_file: Some(file),
        };
        let t = token(&args, Some("from-env".into()))
            .expect("ok")
            .expect("some");
        assert!(t.matches("from-file"));
        args.token_file = None;
        let t = token(&args, Some("from-env".into()))
            .expect("ok")
            .expect("some");
        assert!(t.matches("from-env"));
        assert!(token(&args, None).expect("ok").is_none());
        assert_eq!(
            token(&args, Some(" ".into()))
                .expect_err("empty")
                .exit_code(),
            2
        );
    }

    #[test]
    fn the_table_has_one_aligned_row_per_drill() {
        let o = |id: &str, pool: &str, expires: u64| Override {
            id: OverrideId(id.into()),
            service: "api".into(),
            action: OverrideAction::Drain,
            pool: pool.into(),
            reason: "quarterly DR drill".into(),
            actor: "alice".into(),
            created: Millis(0),
            expires: Millis(expires),
        };
        let now = Millis(1_000_000);
        let t = table(
            &[
                o("d-1", "seoul", 1_000_000 + 1_800_000),
                o("d-22", "tokyo", 10),
            ],
            now,
        );
        assert_eq!(
            t,
            "ID    SERVICE  ACTION  POOL   EXPIRES IN  ACTOR  REASON\n\
             d-1   api      drain   seoul  30m         alice  quarterly DR drill\n\
             d-22  api      drain   tokyo  expired     alice  quarterly DR drill\n"
        );
        assert_eq!(table(&[], now), "no active drills\n");
    }
}
