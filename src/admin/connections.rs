//! The admin API's connections, bounded: how many are open at once, how long a client may take
//! to send a request head (and may sit idle between requests), how long a request may take, and
//! how long one connection may live. A flood of idle or slow clients (over TLS too) therefore
//! holds at most [`MAX_CONNECTIONS`] descriptors per listener, each for a bounded time, and
//! never the descriptors the probes need.
//!
//! Must not: read a request or judge it; the router does.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::serve::Listener;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::sync::Semaphore;

/// Most connections one admin listener holds open at once: 256. At the cap it stops accepting
/// (new connections wait in the kernel's backlog, holding none of gslb's descriptors) until a
/// connection closes. Far below the probes' share of the open-file limit (half of it, at
/// least 512 of the usual 1,024, see `io::probe::limits`), so a flood of the admin API cannot
/// starve the probes.
pub const MAX_CONNECTIONS: usize = 256;

/// Longest a client may take to send a request's head, and to start the next request on a
/// kept-alive connection: 10 s (hyper's `header_read_timeout`, which also runs while a
/// connection is idle between requests). Then the connection is closed.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest one request may take from its head to its response head, its body read included:
/// 30 s, then `408 Request Timeout`. A drill answers in milliseconds and `/v1/status` at 5,000
/// services in well under a second.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Longest one connection lives: 5 min. Then it is asked to close after its current response
/// (a graceful shutdown), and is closed at once [`CLOSE_GRACE`] later, so a client that stops
/// reading a response does not hold its connection for ever. Prometheus reconnects at its next
/// scrape.
pub const MAX_LIFETIME: Duration = Duration::from_secs(300);

/// How long a connection asked to close may finish its response: 30 s.
pub const CLOSE_GRACE: Duration = Duration::from_secs(30);

/// The limits of one listener; [`Limits::default`] gives the constants above (tests shorten
/// them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// [`MAX_CONNECTIONS`].
    pub max_connections: usize,
    /// [`HEADER_TIMEOUT`].
    pub header_timeout: Duration,
    /// [`REQUEST_TIMEOUT`].
    pub request_timeout: Duration,
    /// [`MAX_LIFETIME`].
    pub max_lifetime: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: MAX_CONNECTIONS,
            header_timeout: HEADER_TIMEOUT,
            request_timeout: REQUEST_TIMEOUT,
            max_lifetime: MAX_LIFETIME,
        }
    }
}

/// Serves `app` on `listener` (plain TCP, or TLS with handshakes done by the listener) over HTTP/1.1 within
/// `limits`, until the task is dropped (connections already open finish on their own tasks,
/// within their lifetime).
pub async fn serve<L>(mut listener: L, app: Router, limits: Limits)
where
    L: Listener,
{
    let request_timeout = limits.request_timeout;
    let app = app.layer(axum::middleware::from_fn(
        move |req: Request, next: Next| within(request_timeout, req, next),
    ));
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let (io, _peer) = listener.accept().await;
        let service = TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout);
            let conn = builder.serve_connection(TokioIo::new(io), service);
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                result = conn.as_mut() => log_end(result),
                () = tokio::time::sleep(limits.max_lifetime) => {
                    conn.as_mut().graceful_shutdown();
                    if let Ok(result) = tokio::time::timeout(CLOSE_GRACE, conn).await {
                        log_end(result);
                    }
                }
            }
            drop(slot);
        });
    }
}

/// Runs `req` through `next`, answering `408` when it takes longer than `limit`.
async fn within(limit: Duration, req: Request, next: Next) -> Result<Response, Infallible> {
    Ok(match tokio::time::timeout(limit, next.run(req)).await {
        Ok(response) => response,
        Err(_) => (StatusCode::REQUEST_TIMEOUT, "request timed out\n").into_response(),
    })
}

fn log_end(result: Result<(), hyper::Error>) {
    if let Err(e) = result {
        tracing::debug!(error = %e, "admin API connection ended");
    }
}
