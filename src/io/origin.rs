//! A real HTTP origin on loopback whose behaviour can be switched at run time: for
//! `gslb demo` and for tests that need an endpoint to fail in a particular way.
//!
//! `GET <any path>` answers `200` with body `ok region=<region>` and header
//! `X-Served-By: <region>` until told otherwise ([`Mode`]); [`Origin::stop`] closes the port
//! (connections are refused) and [`Origin::start_again`] re-binds it.
//! Must not: be used as a production server (no limits, no TLS, HTTP/1.1 only, one request
//! per connection).

use std::collections::BTreeSet;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_TYPE, HOST, HeaderValue, LOCATION};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// The path [`Mode::Redirect`] points to; it is always served as healthy.
pub const REDIRECT_TARGET: &str = "/elsewhere";

/// How the origin behaves, switchable with [`Origin::set_mode`]. Applies to connections
/// accepted (and requests read) after the switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// `200`, body `ok region=<region>\n`.
    #[default]
    Healthy,
    /// This status (e.g. `503`; an invalid code becomes `500`), body
    /// `status <code> region=<region>\n`.
    Status(u16),
    /// `200`, body `maintenance region=<region>\n` (no `ok region=`).
    WrongBody,
    /// Accept the connection, read, never answer.
    Hang,
    /// Accept, read the request head, then close with a TCP RST (`SO_LINGER` 0) unanswered.
    Reset,
    /// `302 Found` with `Location: /elsewhere`, except for [`REDIRECT_TARGET`] itself.
    Redirect,
}

/// A running (or stopped) origin. Dropping it stops it.
#[derive(Debug)]
pub struct Origin {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
    region: String,
    mode: Mutex<Mode>,
    /// Clients (by source address) answered `503` whatever the mode.
    failing_for: Mutex<BTreeSet<IpAddr>>,
    connections: AtomicU64,
    requests: AtomicU64,
    last_host: Mutex<Option<String>>,
}

impl Shared {
    fn mode(&self) -> Mode {
        *self.mode.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The mode for a client at `peer`: `503` when it is in `failing_for`.
    fn mode_for(&self, peer: IpAddr) -> Mode {
        let failing = self
            .failing_for
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&peer);
        if failing {
            Mode::Status(503)
        } else {
            self.mode()
        }
    }
}

impl Origin {
    /// Binds `addr` (port 0 picks a free port; see [`Origin::addr`]) with `SO_REUSEADDR` and
    /// starts serving in [`Mode::Healthy`].
    ///
    /// # Errors
    /// Binding or listening fails (address in use, permission).
    pub async fn start(addr: SocketAddr, region: &str) -> io::Result<Origin> {
        let listener = bind(addr)?;
        let shared = Arc::new(Shared {
            region: region.to_owned(),
            mode: Mutex::new(Mode::Healthy),
            failing_for: Mutex::new(BTreeSet::new()),
            connections: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            last_host: Mutex::new(None),
        });
        let addr = listener.local_addr()?;
        let task = tokio::spawn(serve(listener, shared.clone()));
        Ok(Origin {
            addr,
            shared,
            task: Some(task),
        })
    }

    /// The bound address, e.g. `127.0.0.1:41234`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>`, without a trailing slash.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The region label served in bodies and `X-Served-By`.
    pub fn region(&self) -> &str {
        &self.shared.region
    }

    /// Switches behaviour for what is accepted from now on.
    pub fn set_mode(&self, mode: Mode) {
        *self.shared.mode.lock().unwrap_or_else(|p| p.into_inner()) = mode;
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        self.shared.mode()
    }

    /// Answers `503` to requests from `sources` (client addresses), whatever the mode; others
    /// are served as the mode says. With each gslb instance's probes bound to its own address
    /// (`[probing] source_address`), one vantage point sees the origin down while the others
    /// see it up. An empty set serves everyone by the mode again.
    pub fn fail_for(&self, sources: impl IntoIterator<Item = IpAddr>) {
        *self
            .shared
            .failing_for
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = sources.into_iter().collect();
    }

    /// TCP connections accepted since [`Origin::start`].
    pub fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// HTTP requests read since [`Origin::start`] (not counting [`Mode::Hang`] and
    /// [`Mode::Reset`] connections).
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::SeqCst)
    }

    /// The `Host` header of the last request read, if any.
    pub fn last_host(&self) -> Option<String> {
        self.shared
            .last_host
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Closes the listener and every open connection. When this returns, connections to
    /// [`Origin::addr`] are refused. Idempotent.
    pub async fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            // Resolves once the task, its listener and its connections' join set are dropped.
            let _ = task.await;
        }
    }

    /// Listens again on the same address (after [`Origin::stop`]); a no-op while running.
    ///
    /// # Errors
    /// The port was taken by someone else meanwhile, or binding fails.
    pub async fn start_again(&mut self) -> io::Result<()> {
        if self.task.is_none() {
            let listener = bind(self.addr)?;
            self.task = Some(tokio::spawn(serve(listener, self.shared.clone())));
        }
        Ok(())
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

/// Accepts until aborted; connection tasks live in a join set so aborting this task closes
/// them too.
async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    shared.connections.fetch_add(1, Ordering::SeqCst);
                    connections.spawn(connection(stream, peer.ip(), shared.clone()));
                }
                Err(e) => {
                    // E.g. out of file descriptors: back off instead of spinning.
                    tracing::debug!(error = %e, "origin accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn connection(mut stream: TcpStream, peer: IpAddr, shared: Arc<Shared>) {
    match shared.mode_for(peer) {
        Mode::Hang => {
            // Read and discard until the client gives up.
            let _ = tokio::io::copy(&mut stream, &mut tokio::io::sink()).await;
        }
        Mode::Reset => {
            read_head(&mut stream).await;
            // Closing with SO_LINGER 0 sends RST instead of FIN.
            let _ = stream.set_zero_linger();
            drop(stream);
        }
        _ => {
            let service = hyper::service::service_fn(move |req| respond(shared.clone(), peer, req));
            let _ = hyper::server::conn::http1::Builder::new()
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        }
    }
}

/// Reads until the end of an HTTP request head (or EOF, or 16 KiB).
async fn read_head(stream: &mut TcpStream) {
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while head.len() < 16 * 1024 && !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
}

/// Error returned to hyper to drop a connection unanswered.
#[derive(Debug, thiserror::Error)]
#[error("origin in reset mode: closing unanswered")]
struct Unanswered;

async fn respond(
    shared: Arc<Shared>,
    peer: IpAddr,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Unanswered> {
    shared.requests.fetch_add(1, Ordering::SeqCst);
    let host = req
        .headers()
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned);
    *shared.last_host.lock().unwrap_or_else(|p| p.into_inner()) = host;
    let region = &shared.region;
    let (status, body) = match shared.mode_for(peer) {
        // The mode changed after this connection was accepted.
        Mode::Hang => std::future::pending().await,
        Mode::Reset => return Err(Unanswered),
        Mode::Healthy => (StatusCode::OK, format!("ok region={region}\n")),
        Mode::Status(code) => (
            StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            format!("status {code} region={region}\n"),
        ),
        Mode::WrongBody => (StatusCode::OK, format!("maintenance region={region}\n")),
        Mode::Redirect if req.uri().path() == REDIRECT_TARGET => {
            (StatusCode::OK, format!("ok region={region}\n"))
        }
        Mode::Redirect => (StatusCode::FOUND, format!("moved region={region}\n")),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    if let Ok(v) = HeaderValue::from_str(region) {
        headers.insert("x-served-by", v);
    }
    if status == StatusCode::FOUND {
        headers.insert(LOCATION, HeaderValue::from_static(REDIRECT_TARGET));
    }
    Ok(response)
}
