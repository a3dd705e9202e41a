//! `gslb events`: the failover timelines of a running `gslb run`, printed as drill reports
//! ([`crate::timeline::report`]).

use clap::Args;

use super::{AdminArgs, AdminClient, ClientError, token};
use crate::config::ADMIN_TOKEN_ENV;
use crate::model::ServiceId;

/// `gslb events`.
#[derive(Debug, Clone, Args)]
pub struct EventsArgs {
    /// The admin API.
    #[command(flatten)]
    pub admin: AdminArgs,
    /// Only this service's timelines.
    #[arg(long)]
    pub service: Option<String>,
    /// At most this many, newest first (the server caps it at 256).
    #[arg(long, default_value_t = crate::admin::events::DEFAULT_LIMIT)]
    pub limit: usize,
    /// Print the JSON the admin API answered instead of the report.
    #[arg(long)]
    pub json: bool,
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
    let timelines = client
        .events(args.service.map(ServiceId).as_ref(), args.limit)
        .await?;
    if args.json {
        let json = serde_json::to_string_pretty(&timelines).unwrap_or_default();
        return Ok(format!("{json}\n"));
    }
    Ok(crate::timeline::report::render_all(&timelines))
}
