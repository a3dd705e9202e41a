//! The CLI side of drills: `gslb drill drain|restore|force|list|end` and `gslb rearm`, a small
//! client of the admin API ([`crate::admin::drills`] defines the JSON it sends and reads).
//!
//! It only talks HTTP to a running `gslb run`; it never reads the state file or the audit log
//! and decides nothing itself. Arguments are checked before anything is sent (exit code 2);
//! a refusal by the server is reported with the server's message (exit code 1).

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Args, Subcommand};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::admin::drills::{
    ApiErrorBody, DrillList, DrillRequest, EndRequest, RearmRequest, RearmResponse,
};
use crate::admin::{AdminToken, TokenError};
use crate::config::ADMIN_TOKEN_ENV;
use crate::engine::{MAX_OVERRIDE_TTL, Override, OverrideAction};
use crate::model::{Millis, ServiceId};

/// Where the admin API is when neither `--admin` nor `GSLB_ADMIN_URL` says: the daemon's
/// default `admin.listen`.
pub const DEFAULT_ADMIN_URL: &str = "http://127.0.0.1:9464";

/// How long one request may take, connection included: 30 s (the server gives up on the
/// engine loop after 10 s).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How to reach the admin API (shared by `gslb drill` and `gslb rearm`).
#[derive(Debug, Clone, Args)]
pub struct AdminArgs {
    /// Admin API base URL.
    #[arg(long = "admin", env = "GSLB_ADMIN_URL", default_value = DEFAULT_ADMIN_URL, global = true)]
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
        /// Who ends it (default: $USER, else "cli").
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
    /// Who (default: $USER, else "cli").
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
    /// Who (default: $USER, else "cli").
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

/// The client failed; [`exit_code`](Self::exit_code) says how `gslb` exits.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The arguments are unusable (e.g. the admin URL). Exit code 2.
    #[error("{0}")]
    BadArguments(String),
    /// The token file is unreadable or empty, or `GSLB_ADMIN_TOKEN` is empty. Exit code 2.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// No connection or no answer. Exit code 1.
    #[error("cannot reach the admin API at {url}: {reason}")]
    Unreachable {
        /// The URL asked.
        url: String,
        /// Why, with its causes.
        reason: String,
    },
    /// The server refused, with its message. Exit code 1.
    #[error("refused by the admin API ({status} {code}): {message}")]
    Refused {
        /// HTTP status.
        status: u16,
        /// The error code (`unknown_pool`, `conflict`, `unauthorized`, ...).
        code: String,
        /// The server's message.
        message: String,
    },
    /// The answer is not what the API documents. Exit code 1.
    #[error("unexpected answer from {url}: {reason}")]
    Protocol {
        /// The URL asked.
        url: String,
        /// What was wrong.
        reason: String,
    },
}

impl ClientError {
    /// 2 for bad arguments or token, 1 for everything the server or the network did.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::BadArguments(_) | Self::Token(_) => 2,
            Self::Unreachable { .. } | Self::Refused { .. } | Self::Protocol { .. } => 1,
        }
    }
}

/// A client of one admin API.
#[derive(Debug, Clone)]
pub struct AdminClient {
    base: reqwest::Url,
    token: Option<AdminToken>,
    http: reqwest::Client,
}

impl AdminClient {
    /// A client of the admin API at `base` (e.g. `http://127.0.0.1:9464`), sending `token` as
    /// a bearer token when given. Proxies from the environment are not used.
    ///
    /// # Errors
    /// [`ClientError::BadArguments`] when `base` is not an http(s) URL.
    pub fn new(base: &str, token: Option<AdminToken>) -> Result<Self, ClientError> {
        let bad = |why: String| ClientError::BadArguments(format!("--admin '{base}': {why}"));
        let mut url = reqwest::Url::parse(base).map_err(|e| bad(e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") || url.cannot_be_a_base() {
            return Err(bad("not an http(s) URL".into()));
        }
        if !url.path().ends_with('/') {
            let path = format!("{}/", url.path());
            url.set_path(&path);
        }
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .no_proxy()
            .build()
            .map_err(|e| bad(e.to_string()))?;
        Ok(Self {
            base: url,
            token,
            http,
        })
    }

    /// `POST /v1/drills`: starts a drill.
    ///
    /// # Errors
    /// [`ClientError::Refused`] with the server's reason, [`ClientError::Unreachable`],
    /// [`ClientError::Protocol`].
    pub async fn start(&self, request: &DrillRequest) -> Result<Override, ClientError> {
        let url = self.url(&["v1", "drills"]);
        self.call(self.http.post(url.clone()), &url, Some(request))
            .await
    }

    /// `GET /v1/drills`: the active drills, by id.
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub async fn list(&self) -> Result<Vec<Override>, ClientError> {
        let url = self.url(&["v1", "drills"]);
        let list: DrillList = self
            .call(self.http.get(url.clone()), &url, None::<&()>)
            .await?;
        Ok(list.overrides)
    }

    /// `DELETE /v1/drills/{id}`: ends a drill.
    ///
    /// # Errors
    /// As [`start`](Self::start); `404 not_found` when no drill has this id.
    pub async fn end(&self, id: &str, request: &EndRequest) -> Result<Override, ClientError> {
        let url = self.url(&["v1", "drills", id]);
        self.call(self.http.delete(url.clone()), &url, Some(request))
            .await
    }

    /// `POST /v1/rearm`: the services re-armed.
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub async fn rearm(&self, request: &RearmRequest) -> Result<Vec<ServiceId>, ClientError> {
        let url = self.url(&["v1", "rearm"]);
        let r: RearmResponse = self
            .call(self.http.post(url.clone()), &url, Some(request))
            .await?;
        Ok(r.rearmed)
    }

    fn url(&self, segments: &[&str]) -> reqwest::Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        url
    }

    async fn call<T: DeserializeOwned>(
        &self,
        mut builder: reqwest::RequestBuilder,
        url: &reqwest::Url,
        body: Option<&impl Serialize>,
    ) -> Result<T, ClientError> {
        if let Some(token) = &self.token {
            if let Ok(mut value) = HeaderValue::try_from(format!("Bearer {}", token.expose())) {
                value.set_sensitive(true);
                builder = builder.header(AUTHORIZATION, value);
            }
        }
        if let Some(body) = body {
            let json = serde_json::to_vec(body).map_err(|e| ClientError::Protocol {
                url: url.to_string(),
                reason: e.to_string(),
            })?;
            builder = builder.header(CONTENT_TYPE, "application/json").body(json);
        }
        let unreachable = |e: reqwest::Error| ClientError::Unreachable {
            url: url.to_string(),
            reason: causes(&e),
        };
        let response = builder.send().await.map_err(unreachable)?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(unreachable)?;
        if status.is_success() {
            return serde_json::from_slice(&bytes).map_err(|e| ClientError::Protocol {
                url: url.to_string(),
                reason: format!("{status}: {e}"),
            });
        }
        Err(match serde_json::from_slice::<ApiErrorBody>(&bytes) {
            Ok(b) => ClientError::Refused {
                status: status.as_u16(),
                code: b.error,
                message: b.message,
            },
            Err(_) => ClientError::Refused {
                status: status.as_u16(),
                code: status
                    .canonical_reason()
                    .unwrap_or("error")
                    .to_lowercase()
                    .replace(' ', "_"),
                message: String::from_utf8_lossy(&bytes)
                    .trim()
                    .chars()
                    .take(300)
                    .collect(),
            },
        })
    }
}

/// The error and its causes, `a: b: c`.
fn causes(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(c) = source {
        s.push_str(": ");
        s.push_str(&c.to_string());
        source = c.source();
    }
    s
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
            return Ok(format!("ended {}\n", describe(&ended, now)));
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
    Ok(format!("started {}\n", describe(&created, now)))
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
    use crate::engine::OverrideId;
    use clap::Parser;

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
    fn a_bad_admin_url_is_a_bad_argument() {
        for url in ["127.0.0.1:9464", "ftp://host/", "not a url"] {
            let e = AdminClient::new(url, None).expect_err(url);
            assert_eq!(e.exit_code(), 2, "{url}");
            assert!(
                e.to_string().starts_with(&format!("--admin '{url}'")),
                "{e}"
            );
        }
    }

    #[test]
    fn urls_keep_a_base_path_and_escape_ids() {
        let c = AdminClient::new("http://127.0.0.1:9464/gslb", None).expect("client");
        assert_eq!(
            c.url(&["v1", "drills", "d-1/../x"]).as_str(),
            "http://127.0.0.1:9464/gslb/v1/drills/d-1%2F..%2Fx"
        );
        let c = AdminClient::new("http://127.0.0.1:9464", None).expect("client");
        assert_eq!(
            c.url(&["v1", "rearm"]).as_str(),
            "http://127.0.0.1:9464/v1/rearm"
        );
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
