//! A webhook receiver on loopback: records every POSTed JSON body with its path. A hanging
//! receiver records each request, then holds it unanswered until [`Receiver::release`].

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{Path, State};
use serde_json::Value;
use tokio::sync::watch;

/// Every body received, as `(path, JSON)`, in arrival order.
type Seen = Arc<Mutex<Vec<(String, Value)>>>;

/// A running receiver; it stops with the test's runtime.
pub struct Receiver {
    pub addr: SocketAddr,
    seen: Seen,
    release: watch::Sender<bool>,
}

impl Receiver {
    /// Answers every request `200 ok` at once.
    pub async fn start() -> Self {
        Self::serve(true).await
    }

    /// Records each request, then answers only once released.
    pub async fn hanging() -> Self {
        Self::serve(false).await
    }

    async fn serve(released: bool) -> Self {
        let seen: Seen = Arc::default();
        let (release, gate) = watch::channel(released);
        let app = axum::Router::new()
            .route("/{*path}", axum::routing::post(receive))
            .with_state((seen.clone(), gate));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self {
            addr,
            seen,
            release,
        }
    }

    /// `http://<addr>/<path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}/{path}", self.addr)
    }

    /// The bodies received on `path`, in order.
    pub fn bodies(&self, path: &str) -> Vec<Value> {
        self.seen
            .lock()
            .expect("lock")
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Answers the held requests and every later one at once.
    pub fn release(&self) {
        self.release.send_replace(true);
    }
}

async fn receive(
    State((seen, mut gate)): State<(Seen, watch::Receiver<bool>)>,
    Path(path): Path<String>,
    body: Bytes,
) -> &'static str {
    let json = serde_json::from_slice(&body).unwrap_or(Value::Null);
    seen.lock().expect("lock").push((path, json));
    let _ = gate.wait_for(|open| *open).await;
    "ok"
}
