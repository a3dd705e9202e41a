//! `gslb events`: the failover timelines of a running `gslb run`, printed as drill reports
//! ([`gslb_core::timeline::report`]).

use clap::Args;

use super::{AdminArgs, AdminClient, ClientError, token};
use crate::config::ADMIN_TOKEN_ENV;
use gslb_core::model::ServiceId;

/// `gslb events`.
#[derive(Debug, Clone, Args)]
pub struct EventsArgs {
    /// The admin API.
    #[command(flatten)]
    pub admin: AdminArgs,
    /// Only this service's timelines.
    #[arg(long)]
    pub service: Option<String>,
    /// At most this many, newest first: at least 1 (the server caps it at 256).
    #[arg(long, default_value_t = crate::admin::events::DEFAULT_LIMIT, value_parser = at_least_one)]
    pub limit: usize,
    /// Print the JSON the admin API answered (`{"timelines": [...]}`) instead of the report.
    #[arg(long)]
    pub json: bool,
}

/// `--limit`: a whole number of at least 1 (`0` would print nothing, as a mistake would;
/// `GET /v1/events` refuses it too).
fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// Runs `gslb events` against the admin API and returns what to print.
///
/// # Errors
/// See [`ClientError`].
pub async fn events(args: EventsArgs) -> Result<String, ClientError> {
    let client = AdminClient::new(
        &args.admin.url,
        token(&args.admin, std::env::var(ADMIN_TOKEN_ENV).ok())?,
    )?;
    let answer = client
        .events(args.service.map(ServiceId).as_ref(), args.limit)
        .await?;
    if args.json {
        let json = serde_json::to_string_pretty(&answer).unwrap_or_default();
        return Ok(format!("{json}\n"));
    }
    Ok(gslb_core::timeline::report::render_all(&answer.timelines))
}
