//! `GET /v1/status`: every service's status ([`crate::ops::status`]), and `cluster` in a
//! cluster.
//!
//! Query (both optional; without them the answer is the whole status, as before):
//! `service` (only this service; `services` is empty when none has that name) and
//! `endpoints=false` (each pool without its `endpoints` list, so without the recent probes:
//! the compact view, about a tenth of the size for a service with two endpoints). Answer:
//! `{"cluster": ..., "services": {"<name>": ServiceStatus, ...}}`, `cluster` only in a cluster.
//! Serialized straight from the board, a batch of services at a time (no copy of the whole
//! board, no intermediate JSON tree), off the runtime's workers.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde::ser::{SerializeMap, SerializeStruct, Serializer};
use serde::{Deserialize, Serialize};

use super::drills::ApiError;
use super::{AdminState, encoding};
use crate::ops::cluster::ClusterStatus;
use crate::ops::status::StatusBoard;
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

/// The answer of `GET /v1/status`, serialized as
/// `{"cluster": ClusterStatus, "services": {"<name>": ServiceStatus, ...}}` straight from the
/// board, a batch of services at a time ([`StatusBoard::for_each_of`]): never a copy of the
/// whole board.
pub struct StatusResponse<'a> {
    /// The cluster's status; absent alone.
    pub cluster: Option<ClusterStatus>,
    /// The board the services are read from.
    pub board: &'a StatusBoard,
    /// What the query selected.
    pub query: &'a StatusQuery,
}

impl Serialize for StatusResponse<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut top = s.serialize_struct("StatusResponse", 2)?;
        match &self.cluster {
            Some(c) => top.serialize_field("cluster", c)?,
            None => top.skip_field("cluster")?,
        }
        top.serialize_field("services", &Services(self))?;
        top.end()
    }
}

/// The `services` object of a [`StatusResponse`].
struct Services<'r, 'a>(&'r StatusResponse<'a>);

impl Serialize for Services<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let StatusResponse { board, query, .. } = self.0;
        let mut map = s.serialize_map(None)?;
        board.for_each_of(query.service.as_ref(), query.endpoints, |status| {
            map.serialize_entry(&status.service, &status)
        })?;
        map.end()
    }
}

/// `GET /v1/status`: serialized off the runtime's workers, gzip-compressed when asked
/// ([`super::encoding`]).
///
/// # Errors
/// `400 bad_request` for a query that does not parse (e.g. `endpoints=maybe` or an unknown
/// key).
pub async fn status(
    State(s): State<AdminState>,
    headers: HeaderMap,
    query: Result<Query<StatusQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query?;
    let answer = encoding::off_runtime(&headers, encoding::JSON, move |out| {
        let response = StatusResponse {
            cluster: s.board.cluster(),
            board: &s.board,
            query: &query,
        };
        serde_json::to_writer(out, &response).map_err(|e| e.to_string())
    });
    Ok(answer.await)
}
