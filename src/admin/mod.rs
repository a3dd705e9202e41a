//! The admin HTTP API (axum).
//!
//! Open, read-only: `GET /metrics` (Prometheus text), `GET /healthz`, `GET /v1/status` (JSON),
//! `GET /v1/events` (failover timelines, [`events`]).
//! Drills ([`drills`]), behind the bearer token when one is configured ([`auth`]):
//! `POST /v1/drills`, `GET /v1/drills`, `DELETE /v1/drills/{id}`, `POST /v1/rearm`. The API
//! never changes a decision itself: drill routes send [`crate::daemon::inbox::Message`]s to the
//! engine loop and relay its answer.

pub mod auth;
pub mod drills;
pub mod events;

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::{delete, get, post};
use axum::{Json, Router, middleware};

use crate::config::AdminToken;
use crate::daemon::inbox::MessageSender;
use crate::ops::metrics::Metrics;
use crate::ops::status::StatusBoard;

/// What the handlers read.
#[derive(Debug, Clone)]
pub struct AdminState {
    /// Status board.
    pub board: Arc<StatusBoard>,
    /// Metrics.
    pub metrics: Metrics,
    /// The engine loop's inbox, for operators' inputs. `None`: the drill routes answer `503`
    /// ("drills unavailable").
    pub commands: Option<MessageSender>,
    /// The bearer token the drill routes require. `None`: they are open, which
    /// [`crate::config::check_admin_listen`] allows on loopback addresses only.
    pub token: Option<AdminToken>,
    /// The failover timelines `GET /v1/events` answers (an empty store: none).
    pub timelines: crate::ops::timeline::TimelineStore,
}

/// The router.
pub fn router(state: AdminState) -> Router {
    let guarded = Router::new()
        .route("/v1/drills", get(drills::list).post(drills::create))
        .route("/v1/drills/{id}", delete(drills::end))
        .route("/v1/rearm", post(drills::rearm))
        .route_layer(middleware::from_fn_with_state(
            state.token.clone(),
            auth::require_token,
        ));
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/v1/status", get(status))
        .route("/v1/events", get(events::list))
        .merge(guarded)
        .with_state(state)
}

/// Serves on `listener` until the task is dropped.
///
/// # Errors
/// Accepting connections fails, or (`InvalidInput`) `listener` is on a non-loopback address
/// and `state` has no token: [`crate::config::check_admin_listen`] is enforced here too, so no
/// wiring can expose the drill routes unauthenticated.
pub async fn serve(listener: tokio::net::TcpListener, state: AdminState) -> std::io::Result<()> {
    crate::config::check_admin_listen(listener.local_addr()?, state.token.as_ref())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
    tracing::info!(
        addr = %listener.local_addr()?,
        drills = state.commands.is_some(),
        token = state.token.is_some(),
        "admin API listening"
    );
    axum::serve(listener, router(state)).await
}

async fn metrics(State(s): State<AdminState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        s.metrics.render(),
    )
}

async fn status(State(s): State<AdminState>) -> impl IntoResponse {
    match s.board.cluster() {
        Some(cluster) => {
            Json(serde_json::json!({ "services": s.board.snapshot(), "cluster": cluster }))
        }
        None => Json(serde_json::json!({ "services": s.board.snapshot() })),
    }
}
