//! `GET /healthz` (liveness) and `GET /readyz` (readiness), always open: what the container
//! HEALTHCHECK (`gslb healthcheck`) and the Kubernetes probes ask. Both answer JSON.
//!
//! - `/healthz`: `200 {"status": "ok", "loops": N}` while every loop makes progress within
//!   its bound; `503 {"status": "stuck", "stuck": [{"loop", "since", "stalled_seconds",
//!   "bound_seconds"}]}` otherwise (see [`crate::ops::health`]).
//! - `/readyz`: `200 {"status": "ready", "services": N}` once the policies are loaded and
//!   every binding adopted its provider's state; `503 {"status": "not_ready",
//!   "policies_loaded", "awaiting_count": N, "awaiting_provider": [service, ...]}` before
//!   (at most [`READYZ_LISTED`](crate::ops::health::READYZ_LISTED) names, in name order).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::AdminState;

/// `GET /healthz`.
pub(crate) async fn healthz(State(s): State<AdminState>) -> (StatusCode, Json<Value>) {
    let stuck = s.health.stuck(tokio::time::Instant::now(), s.clock.now());
    if stuck.is_empty() {
        let body = json!({ "status": "ok", "loops": s.health.loops() });
        return (StatusCode::OK, Json(body));
    }
    tracing::warn!(stuck = ?stuck.iter().map(|l| &l.name).collect::<Vec<_>>(), "liveness: loops make no progress");
    let body = json!({ "status": "stuck", "stuck": stuck });
    (StatusCode::SERVICE_UNAVAILABLE, Json(body))
}

/// `GET /readyz`.
pub(crate) async fn readyz(State(s): State<AdminState>) -> (StatusCode, Json<Value>) {
    match s.health.readiness() {
        Ok(services) => (
            StatusCode::OK,
            Json(json!({ "status": "ready", "services": services })),
        ),
        Err(why) => {
            let mut body = json!(why);
            body["status"] = "not_ready".into();
            (StatusCode::SERVICE_UNAVAILABLE, Json(body))
        }
    }
}
