//! The admin HTTP API (axum), over plain HTTP or TLS ([`tls`]).
//!
//! Always open: `GET /healthz`, `GET /readyz` ([`health`]).
//! Read-only, behind a token when `admin.require_token_for_reads` is set ([`auth`]):
//! `GET /metrics` (Prometheus text; on `admin.metrics_listen` instead when set),
//! `GET /v1/status` (JSON, [`status`]), `GET /v1/events` (failover timelines, [`events`]);
//! these three are built off the runtime's workers and gzip-compressed when the request
//! accepts it ([`encoding`]).
//! Drills ([`drills`]), behind a token whenever one is configured: `POST /v1/drills`,
//! `GET /v1/drills`, `DELETE /v1/drills/{id}`, `POST /v1/rearm`. The API never changes a
//! decision itself: drill routes send [`crate::daemon::inbox::Message`]s to the engine loop and
//! relay its answer.

pub mod auth;
pub mod connections;
pub mod drills;
pub mod encoding;
pub mod events;
pub mod health;
pub mod status;
pub mod tls;
pub mod votes;

use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::{delete, get, post};
use axum::{Router, middleware};

use crate::config::AdminAuth;
use crate::daemon::inbox::MessageSender;
use crate::io::clock::Clock;
use crate::ops::health::Health;
use crate::ops::metrics::Metrics;
use crate::ops::status::StatusBoard;

/// The name of the token an accepted request presented (a request extension set by
/// [`auth`]): the actor the drill routes record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller(pub String);

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
    /// The bearer tokens the drill routes (and, when set, the read routes) require. No
    /// token: they are open, which [`crate::config::check_admin_listen`] allows on loopback
    /// addresses only.
    pub auth: AdminAuth,
    /// The failover timelines `GET /v1/events` answers (an empty store: none).
    pub timelines: crate::ops::timeline::TimelineStore,
    /// The loops' heartbeats and readiness (`/healthz`, `/readyz`).
    pub health: Health,
    /// The wall clock `/healthz` dates a stuck loop's last progress with.
    pub clock: Clock,
}

impl AdminState {
    /// An admin API over `telemetry` (status board, metrics, health, clock), with `auth`,
    /// the engine loop's inbox `commands` and the failover `timelines`.
    pub fn new(
        telemetry: &crate::ops::telemetry::Telemetry,
        commands: Option<MessageSender>,
        auth: AdminAuth,
        timelines: crate::ops::timeline::TimelineStore,
    ) -> Self {
        Self {
            board: telemetry.board.clone(),
            metrics: telemetry.metrics.clone(),
            commands,
            auth,
            timelines,
            health: telemetry.health.clone(),
            clock: telemetry.clock,
        }
    }
}

/// The router: every route, `/metrics` included when `with_metrics`.
pub fn router(state: AdminState, with_metrics: bool) -> Router {
    let guarded = Router::new()
        .route("/v1/drills", get(drills::list).post(drills::create))
        .route("/v1/drills/{id}", delete(drills::end))
        .route("/v1/rearm", post(drills::rearm))
        .route_layer(middleware::from_fn_with_state(
            state.auth.tokens.clone(),
            auth::require_token,
        ));
    let reads = Router::new()
        .route("/v1/status", get(status::status))
        .route("/v1/events", get(events::list));
    let reads = if with_metrics {
        reads.merge(metrics_router())
    } else {
        reads
    };
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .merge(guard_reads(reads, &state.auth))
        .merge(guarded)
        .with_state(state)
}

/// `/metrics` alone, for `admin.metrics_listen` (token rules as on the admin listener).
pub fn metrics_only(state: AdminState) -> Router {
    guard_reads(metrics_router(), &state.auth).with_state(state)
}

fn metrics_router() -> Router<AdminState> {
    Router::new().route("/metrics", get(metrics))
}

/// `reads` behind the tokens when `admin.require_token_for_reads` is set.
fn guard_reads(reads: Router<AdminState>, auth: &AdminAuth) -> Router<AdminState> {
    if auth.protect_reads {
        reads.route_layer(middleware::from_fn_with_state(
            auth.tokens.clone(),
            auth::require_token,
        ))
    } else {
        reads
    }
}

/// Which routes a listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routes {
    /// Every route; `/metrics` only when `with_metrics` (else `admin.metrics_listen` has it).
    All {
        /// Whether `/metrics` is served here.
        with_metrics: bool,
    },
    /// `/metrics` alone (`admin.metrics_listen`).
    Metrics,
}

impl Routes {
    /// Every route, `/metrics` included (no `admin.metrics_listen`).
    pub const ALL: Self = Self::All { with_metrics: true };

    /// The routes as the log names them: `all`, `all but metrics`, `metrics`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::All { with_metrics: true } => "all",
            Self::All {
                with_metrics: false,
            } => "all but metrics",
            Self::Metrics => "metrics",
        }
    }
}

/// Serves every route on `listener` over plain HTTP until the task is dropped.
///
/// # Errors
/// See [`serve_on`].
pub async fn serve(listener: tokio::net::TcpListener, state: AdminState) -> std::io::Result<()> {
    serve_on(listener, None, state, Routes::ALL).await
}

/// Serves `routes` on `listener`, over TLS with `tls` when given, until the task is dropped,
/// within [`connections::Limits::default`] (connection cap, header, idle, request and lifetime
/// timeouts).
///
/// # Errors
/// The listener's address cannot be read, or (`InvalidInput`) a listener with the drill routes is on a
/// non-loopback address and `state` has no token: [`crate::config::check_admin_listen`] is
/// enforced here too, so no wiring can expose the drill routes unauthenticated.
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    state: AdminState,
    routes: Routes,
) -> std::io::Result<()> {
    let addr = listener.local_addr()?;
    let app = match routes {
        Routes::All { with_metrics } => {
            crate::config::check_admin_listen(addr, &state.auth.tokens).map_err(|e| {
                std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string())
            })?;
            router(state.clone(), with_metrics)
        }
        Routes::Metrics => metrics_only(state.clone()),
    };
    tracing::info!(
        %addr,
        routes = routes.as_str(),
        drills = state.commands.is_some(),
        token = !state.auth.tokens.is_empty(),
        reads_need_token = state.auth.protect_reads,
        tls = tls.is_some(),
        "admin API listening"
    );
    let limits = connections::Limits::default();
    match tls {
        Some(acceptor) => {
            connections::serve(tls::TlsListener::new(listener, acceptor)?, app, limits).await;
        }
        None => connections::serve(listener, app, limits).await,
    }
    Ok(())
}

/// `GET /metrics`: rendered a family at a time (and compressed when asked) off the runtime's
/// workers, streamed.
async fn metrics(State(s): State<AdminState>, headers: HeaderMap) -> Response {
    encoding::off_runtime(&headers, encoding::PROMETHEUS_TEXT, move |out| {
        s.metrics.render_to(out).map_err(|e| e.to_string())
    })
    .await
}
