//! `GET /v1/status`: every service's status ([`crate::ops::status`]), and `cluster` in a
//! cluster.
//!
//! Query (both optional; without them the answer is the whole status, as before):
//! `service` (only this service; `services` is empty when none has that name) and
//! `endpoints=false` (each pool without its `endpoints` list, so without the recent probes:
//! the compact view, about a tenth of the size for a service with two endpoints). Answer:
//! `{"cluster": ..., "services": {"<name>": ServiceStatus, ...}}`, `cluster` only in a cluster.
//! Serialized straight from the board's snapshot (no intermediate JSON tree).

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use serde::{Deserialize, Serialize};

use super::AdminState;
use super::drills::ApiError;
use crate::ops::cluster::ClusterStatus;
use crate::ops::status::ServiceStatus;
use gslb_core::model::ServiceId;

/// The query of `GET /v1/status`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatusQuery {
    /// Only this service's status.
    #[serde(default)]
    pub service: Option<ServiceId>,
    /// Whether each pool lists its endpoints (with their recent probes). Default `true`.
    #[serde(default = "yes")]
    pub endpoints: bool,
}

fn yes() -> bool {
    true
}

/// The answer of `GET /v1/status`.
#[derive(Debug, Serialize)]
pub struct StatusResponse {
    /// The cluster's status; absent alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterStatus>,
    /// Each service's status, by name.
    pub services: BTreeMap<ServiceId, ServiceStatus>,
}

/// `GET /v1/status`.
///
/// # Errors
/// `400 bad_request` for a query that does not parse (e.g. `endpoints=maybe` or an unknown
/// key).
pub async fn status(
    State(s): State<AdminState>,
    query: Result<Query<StatusQuery>, QueryRejection>,
) -> Result<Json<StatusResponse>, ApiError> {
    let Query(q) = query?;
    Ok(Json(StatusResponse {
        cluster: s.board.cluster(),
        services: s.board.snapshot_of(q.service.as_ref(), q.endpoints),
    }))
}
