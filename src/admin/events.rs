//! `GET /v1/events`: the failover timelines ([`crate::ops::timeline`]), newest first.
//!
//! Query: `service` (only this service's), `limit` (default [`DEFAULT_LIMIT`], at least 1, at
//! most [`gslb_core::timeline::CAPACITY`]). Answer: `{"timelines": [Timeline, ...]}`. Read-only and
//! open like `/v1/status`.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde::{Deserialize, Serialize};

use super::drills::ApiError;
use super::{AdminState, encoding};
use gslb_core::model::ServiceId;
use gslb_core::timeline::{CAPACITY, Timeline};

/// Timelines answered when the query names no `limit`: 50.
pub const DEFAULT_LIMIT: usize = 50;

/// The query of `GET /v1/events`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// Only this service's timelines.
    #[serde(default)]
    pub service: Option<ServiceId>,
    /// At most this many (at least 1; capped at [`CAPACITY`]).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// The answer of `GET /v1/events`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EventsResponse {
    /// Newest first.
    pub timelines: Vec<Timeline>,
}

/// `GET /v1/events`: read and serialized off the runtime's workers, gzip-compressed when
/// asked ([`super::encoding`]).
///
/// # Errors
/// `400 bad_request` for a query that does not parse (e.g. `limit=many`) or `limit=0` (which
/// would answer nothing, as a mistake would).
pub async fn list(
    State(s): State<AdminState>,
    headers: HeaderMap,
    query: Result<Query<EventsQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = query?;
    if q.limit == Some(0) {
        return Err(ApiError::new(
            axum::http::StatusCode::BAD_REQUEST,
            "bad_request",
            "limit: must be at least 1",
        ));
    }
    let limit = q.limit.unwrap_or(DEFAULT_LIMIT).min(CAPACITY);
    let answer = encoding::off_runtime(&headers, encoding::JSON, move |out| {
        let timelines = s.timelines.list(q.service.as_ref(), limit);
        serde_json::to_writer(out, &EventsResponse { timelines }).map_err(|e| e.to_string())
    });
    Ok(answer.await)
}
