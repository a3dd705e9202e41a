//! The admin HTTP API (axum): `GET /metrics` (Prometheus text), `GET /healthz`,
//! `GET /v1/status` (JSON). Read-only; it never changes a decision.

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};

use crate::metrics::Metrics;
use crate::status::StatusBoard;

/// What the handlers read.
#[derive(Debug, Clone)]
pub struct AdminState {
    /// Status board.
    pub board: Arc<StatusBoard>,
    /// Metrics.
    pub metrics: Metrics,
}

/// The router.
pub fn router(state: AdminState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/v1/status", get(status))
        .with_state(state)
}

/// Serves on `listener` until the task is dropped.
///
/// # Errors
/// Accepting connections fails.
pub async fn serve(listener: tokio::net::TcpListener, state: AdminState) -> std::io::Result<()> {
    tracing::info!(addr = %listener.local_addr()?, "admin API listening");
    axum::serve(listener, router(state)).await
}

async fn metrics(State(s): State<AdminState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        s.metrics.render(),
    )
}

async fn status(State(s): State<AdminState>) -> impl IntoResponse {
    Json(serde_json::json!({ "services": s.board.snapshot() }))
}
