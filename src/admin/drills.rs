//! The drill routes of the admin API: `POST /v1/drills`, `GET /v1/drills`,
//! `DELETE /v1/drills/{id}`, `POST /v1/rearm`, and the JSON shapes they take and answer (the
//! CLI client uses the same types).
//!
//! Handlers only translate HTTP into [`Message`]s for the engine loop's inbox and its replies back
//! into HTTP: they validate the shape of a request (reason present, duration parses) and leave
//! every rule about overrides to the engine. They never hold engine state and never panic when the
//! engine loop is gone (`503`).

use std::time::Duration;

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use super::{AdminState, Caller};
use crate::daemon::inbox::{Message, MessageSender, ReplyTo};
use crate::ops::status::{StatusBoard, TallyView};
use gslb_core::engine::{
    Input, Override, OverrideAction, OverrideError, OverrideId, OverrideRequest,
};
use gslb_core::model::{PoolId, ServiceId};

/// How long a handler waits for the engine loop to take and answer a command: 10 s. The loop
/// answers in milliseconds; longer means it is stuck, and the caller gets `503`.
pub const ENGINE_REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// The actor recorded when a request names none.
pub const DEFAULT_API_ACTOR: &str = "api";

/// Body of `POST /v1/drills`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DrillRequest {
    /// The service (policy name).
    pub service: ServiceId,
    /// `drain`, `restore` or `force`.
    pub action: OverrideAction,
    /// The pool.
    pub pool: PoolId,
    /// Why; required, non-empty.
    #[serde(default)]
    pub reason: String,
    /// How long, as a humantime string (`"30m"`, `"2h"`); default 4 h, at most 24 h.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    /// Who asks; default [`DEFAULT_API_ACTOR`]. Ignored when tokens are configured: the
    /// actor is then the caller's token's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
}

/// Body (or query string) of `DELETE /v1/drills/{id}`, and of `POST /v1/rearm` without the
/// service.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndRequest {
    /// Why; required, non-empty.
    #[serde(default)]
    pub reason: String,
    /// Who; default [`DEFAULT_API_ACTOR`]. Ignored when tokens are configured (the token's
    /// name is the actor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
}

/// Body of `POST /v1/rearm`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RearmRequest {
    /// The service to re-arm; all (and the controller-wide budget) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceId>,
    /// Why; required, non-empty.
    #[serde(default)]
    pub reason: String,
    /// Who; default [`DEFAULT_API_ACTOR`]. Ignored when tokens are configured (the token's
    /// name is the actor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
}

/// Answer of `GET /v1/drills`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrillList {
    /// Every active override, by id.
    pub overrides: Vec<Override>,
}

/// Answer of `POST /v1/drills`: the override, and whether it is in effect right after the
/// engine evaluated it. An accepted drill that is not in effect names why in `held` (the engine
/// holds it: a drain of the only healthy pool, a force or restore of a pool that is not healthy,
/// a safety rail) or `ignored` (the provider never applies it: a drain of the Cloudflare load
/// balancer's fallback pool) or `one_vote` (Route 53 data-plane mode without coordination
/// through etcd: the drill is this instance's vote, and Route 53 counts every instance's);
/// `gslb drill` then exits 3. It stays active either way, and applies as soon as it can.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrillCreated {
    /// The override.
    #[serde(flatten)]
    pub drill: Override,
    /// Why the engine holds it, when it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<String>,
    /// Why the provider ignores it, when it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignored: Option<String>,
    /// Why it moves only this instance's vote, when it does (Route 53 data-plane mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_vote: Option<String>,
}

impl DrillCreated {
    /// `o` as the status board shows its service after the step that started it: held by the
    /// last decision ([`Override::held_by`]), or a drain of the provider's fallback pool as of
    /// the reconciler's last read (none before the first read).
    pub fn of(o: Override, board: &StatusBoard) -> Self {
        let status = board.snapshot_of(Some(&o.service), true).remove(&o.service);
        let held = status.as_ref().and_then(|s| {
            let order: Vec<PoolId> = s.pools.iter().map(|p| p.pool.clone()).collect();
            o.held_by(&order, s.last_decision.as_ref()?)
        });
        let one_vote = status
            .as_ref()
            .filter(|s| s.apply.provider == crate::daemon::dataplane::VOTES)
            .and_then(|s| one_vote(s.apply.route53_tally.as_ref(), board));
        let fallback = status.and_then(|s| s.apply.fallback_pool);
        let ignored = (held.is_none()
            && o.action == OverrideAction::Drain
            && fallback.as_ref() == Some(&o.pool))
        .then(|| gslb_core::planner::fallback::ignored_drain(&o.pool.0));
        Self {
            drill: o,
            held,
            ignored,
            one_vote,
        }
    }
}

/// Why a drill on a Route 53 data-plane service moves only this instance's vote: it runs alone
/// among several instances (each votes its own drills; how many, from `tally`, the votes last
/// read, when there is one yet), or in a cluster that lost coordination (votes then follow
/// this instance's own verdicts). `None` with one instance, or while coordinated (the drill is
/// shared and every instance votes it).
fn one_vote(tally: Option<&TallyView>, board: &StatusBoard) -> Option<String> {
    let now = tally.map_or(String::new(), |t| format!(" (now: {})", t.summary()));
    match board.cluster() {
        None if tally.is_none_or(|t| t.instances > 1) => Some(format!(
            "Route 53 data-plane mode: a drill is this instance's vote only, and Route 53 serves a pool while at least as many voting instances say serve as drain; start it on the other instances too, or run them with [cluster]{now}"
        )),
        Some(c) if !c.coordinated => Some(format!(
            "Route 53 data-plane mode: coordination through etcd is lost, so votes follow this instance's own probes and a drill moves no vote until it is back{now}"
        )),
        _ => None,
    }
}

/// Answer of `POST /v1/rearm`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RearmResponse {
    /// The services re-armed.
    pub rearmed: Vec<ServiceId>,
}

/// The body of every refusal: `{"error": "<code>", "message": "<for humans>"}`.
///
/// Codes: `bad_request`, `missing_reason`, `bad_duration` (400), `unauthorized` (401),
/// `unknown_service`, `unknown_pool`, `not_found` (404), `duplicate_id`, `conflict` (409),
/// `unavailable` (503).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiErrorBody {
    /// Stable code.
    pub error: String,
    /// What went wrong.
    pub message: String,
}

/// A refusal: status and [`ApiErrorBody`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// JSON body.
    pub body: ApiErrorBody,
}

impl ApiError {
    /// A refusal with `status`, `code` and `message`.
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            body: ApiErrorBody {
                error: code.into(),
                message: message.into(),
            },
        }
    }

    fn unavailable(why: &str) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            format!("drills unavailable: {why}"),
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body)).into_response()
    }
}

impl From<OverrideError> for ApiError {
    fn from(e: OverrideError) -> Self {
        let (status, code) = match &e {
            OverrideError::UnknownService(_) => (StatusCode::NOT_FOUND, "unknown_service"),
            OverrideError::UnknownPool { .. } => (StatusCode::NOT_FOUND, "unknown_pool"),
            OverrideError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            OverrideError::MissingReason => (StatusCode::BAD_REQUEST, "missing_reason"),
            OverrideError::BadText(_) => (StatusCode::BAD_REQUEST, "bad_text"),
            OverrideError::BadDuration(_) => (StatusCode::BAD_REQUEST, "bad_duration"),
            OverrideError::DuplicateId(_) => (StatusCode::CONFLICT, "duplicate_id"),
            OverrideError::Conflict { .. } => (StatusCode::CONFLICT, "conflict"),
            OverrideError::NotSaved(_) => (StatusCode::INTERNAL_SERVER_ERROR, "not_saved"),
        };
        Self::new(status, code, e.to_string())
    }
}

/// A body that is not the documented JSON is `400 bad_request` (axum says 422 for a body that
/// parses but has the wrong shape; one status for "fix your request" is simpler for callers).
/// A missing `Content-Type: application/json` stays 415, an oversized body 413.
impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        let status = match r.status() {
            StatusCode::UNPROCESSABLE_ENTITY => StatusCode::BAD_REQUEST,
            s => s,
        };
        Self::new(status, "bad_request", r.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        Self::new(r.status(), "bad_request", r.body_text())
    }
}

/// A new override id: `d-` and 8 random hex digits (short enough to type in `gslb drill end`).
pub fn new_override_id() -> OverrideId {
    OverrideId(format!("d-{:08x}", rand::random::<u32>()))
}

/// Who asks: the name of the caller's token when tokens are configured (what the client says
/// is then ignored), else what the client says, else [`DEFAULT_API_ACTOR`].
fn actor(caller: Option<Extension<Caller>>, a: Option<String>) -> String {
    if let Some(Extension(Caller(name))) = caller {
        return name;
    }
    a.map(|a| a.trim().to_owned())
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| DEFAULT_API_ACTOR.into())
}

fn reason(r: &str) -> Result<String, ApiError> {
    match r.trim() {
        "" => Err(OverrideError::MissingReason.into()),
        r => Ok(r.to_owned()),
    }
}

/// Sends a message built around a fresh reply channel and waits (at most
/// [`ENGINE_REPLY_TIMEOUT`]) for the answer.
async fn ask<T>(
    commands: Option<&MessageSender>,
    command: impl FnOnce(oneshot::Sender<T>) -> Message,
) -> Result<T, ApiError> {
    let Some(tx) = commands else {
        return Err(ApiError::unavailable("this server runs no engine loop"));
    };
    let (reply, answer) = oneshot::channel();
    let exchange = async {
        tx.send(command(reply)).await.ok()?;
        answer.await.ok()
    };
    match tokio::time::timeout(ENGINE_REPLY_TIMEOUT, exchange).await {
        Ok(Some(v)) => Ok(v),
        Ok(None) => Err(ApiError::unavailable("the engine loop is not running")),
        Err(_) => Err(ApiError::unavailable(&format!(
            "the engine loop did not answer within {}",
            humantime::format_duration(ENGINE_REPLY_TIMEOUT)
        ))),
    }
}

/// `POST /v1/drills`: 201 with the override and whether it is in effect ([`DrillCreated`],
/// and `Location`), or a refusal.
pub(crate) async fn create(
    State(s): State<AdminState>,
    caller: Option<Extension<Caller>>,
    body: Result<Json<DrillRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(body) = body?;
    let duration = match body.duration.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(d) => Some(humantime::parse_duration(d).map_err(|e| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_duration",
                format!("duration '{d}': {e} (write it like \"30m\" or \"2h\")"),
            )
        })?),
    };
    let mut request = OverrideRequest {
        id: new_override_id(),
        service: body.service,
        action: body.action,
        pool: body.pool,
        reason: reason(&body.reason)?,
        actor: actor(caller, body.actor),
        duration,
    };
    // A random id can collide with an active one; draw again rather than refuse.
    let mut attempts = 0;
    let created = loop {
        attempts += 1;
        let req = request.clone();
        match ask(s.commands.as_ref(), |reply| {
            Message::command(Input::AddOverride(req), ReplyTo::Override(reply))
        })
        .await?
        {
            Err(OverrideError::DuplicateId(_)) if attempts < 3 => request.id = new_override_id(),
            other => break other?,
        }
    };
    let location = HeaderValue::try_from(format!("/v1/drills/{}", created.id));
    let created = DrillCreated::of(created, &s.board);
    let mut response = (StatusCode::CREATED, Json(&created)).into_response();
    if let Ok(location) = location {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

/// `GET /v1/drills`: every active override.
pub(crate) async fn list(State(s): State<AdminState>) -> Result<Json<DrillList>, ApiError> {
    let overrides = ask(s.commands.as_ref(), Message::ListOverrides).await?;
    Ok(Json(DrillList { overrides }))
}

/// `DELETE /v1/drills/{id}`: reason and actor from a JSON body or the query string (the body
/// wins); 200 with the ended override, 404 when none is active with this id.
pub(crate) async fn end(
    State(s): State<AdminState>,
    Path(id): Path<String>,
    caller: Option<Extension<Caller>>,
    query: Result<Query<EndRequest>, QueryRejection>,
    body: Result<Option<Json<EndRequest>>, JsonRejection>,
) -> Result<Json<Override>, ApiError> {
    let req = match body? {
        Some(Json(b)) => b,
        None => query?.0,
    };
    let reason = reason(&req.reason)?;
    let actor = actor(caller, req.actor);
    let ended = ask(s.commands.as_ref(), |reply| {
        let end = Input::EndOverride {
            id: OverrideId(id),
            actor,
            reason,
        };
        Message::command(end, ReplyTo::Override(reply))
    })
    .await??;
    Ok(Json(ended))
}

/// `POST /v1/rearm`: 200 with the services re-armed; 404 for an unknown service.
pub(crate) async fn rearm(
    State(s): State<AdminState>,
    caller: Option<Extension<Caller>>,
    body: Result<Json<RearmRequest>, JsonRejection>,
) -> Result<Json<RearmResponse>, ApiError> {
    let Json(body) = body?;
    let reason = reason(&body.reason)?;
    let actor = actor(caller, body.actor);
    let rearmed = ask(s.commands.as_ref(), |reply| {
        let rearm = Input::Rearm {
            service: body.service,
            actor,
            reason,
        };
        Message::command(rearm, ReplyTo::Rearmed(reply))
    })
    .await??;
    Ok(Json(RearmResponse { rearmed }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_override_error_maps_to_a_status_and_code() {
        let cases = [
            (
                OverrideError::UnknownService("x".into()),
                404,
                "unknown_service",
            ),
            (
                OverrideError::UnknownPool {
                    service: "api".into(),
                    pool: "x".into(),
                },
                404,
                "unknown_pool",
            ),
            (
                OverrideError::NotFound(OverrideId("d".into())),
                404,
                "not_found",
            ),
            (OverrideError::MissingReason, 400, "missing_reason"),
            (OverrideError::BadDuration("2d".into()), 400, "bad_duration"),
            (
                OverrideError::DuplicateId(OverrideId("d".into())),
                409,
                "duplicate_id",
            ),
            (
                OverrideError::Conflict {
                    id: OverrideId("d".into()),
                    action: OverrideAction::Force,
                    pool: "seoul".into(),
                },
                409,
                "conflict",
            ),
        ];
        for (e, status, code) in cases {
            let message = e.to_string();
            let a = ApiError::from(e);
            assert_eq!((a.status.as_u16(), a.body.error.as_str()), (status, code));
            assert_eq!(a.body.message, message);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_engine_loop_that_does_not_answer_is_503_after_the_timeout() {
        let (tx, _rx) = tokio::sync::mpsc::channel(1);
        let started = tokio::time::Instant::now();
        let e = ask(Some(&tx), Message::ListOverrides)
            .await
            .expect_err("no answer");
        assert_eq!(started.elapsed(), ENGINE_REPLY_TIMEOUT);
        assert_eq!(
            (e.status.as_u16(), e.body.error.as_str()),
            (503, "unavailable")
        );
        assert_eq!(
            e.body.message,
            "drills unavailable: the engine loop did not answer within 10s"
        );
    }

    #[tokio::test]
    async fn no_or_a_stopped_engine_loop_is_503() {
        let e = ask(None, Message::ListOverrides)
            .await
            .expect_err("no loop");
        assert_eq!(e.status, StatusCode::SERVICE_UNAVAILABLE);
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        drop(rx);
        let e = ask(Some(&tx), Message::ListOverrides)
            .await
            .expect_err("stopped loop");
        assert_eq!(
            e.body.message,
            "drills unavailable: the engine loop is not running"
        );
    }

    #[test]
    fn ids_are_short_and_distinct() {
        let a = new_override_id();
        assert!(a.0.starts_with("d-") && a.0.len() == 10, "{a}");
        let many: std::collections::BTreeSet<_> = (0..1000).map(|_| new_override_id()).collect();
        assert!(many.len() > 990);
    }
}
