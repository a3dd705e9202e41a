//! A counting HTTP proxy on 127.0.0.1 placed between gslb and a provider emulator, so tests
//! count the calls gslb really sends (by method), independently of gslb's own metrics, or
//! refuse every call (the provider's API unreachable).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::Response;

/// Counts of proxied requests.
#[derive(Debug, Default)]
pub struct Counts {
    /// GET requests (reads).
    pub reads: AtomicU64,
    /// POST, PUT, PATCH and DELETE requests (writes, creations included).
    pub writes: AtomicU64,
    /// Requests refused with `503` after [`CountingProxy::refuse_all`] (not counted above).
    pub refused: AtomicU64,
    /// Whether every request is refused.
    refusing: std::sync::atomic::AtomicBool,
    /// When each request arrived, in arrival order.
    pub arrivals: std::sync::Mutex<Vec<std::time::Instant>>,
}

impl Counts {
    /// (reads, writes) now.
    pub fn get(&self) -> (u64, u64) {
        (
            self.reads.load(Ordering::SeqCst),
            self.writes.load(Ordering::SeqCst),
        )
    }

    /// The most requests that arrived within any `window` (a sliding window).
    pub fn most_within(&self, window: std::time::Duration) -> usize {
        let times = self.arrivals.lock().expect("arrivals").clone();
        let mut first = 0;
        let mut most = 0;
        for (last, t) in times.iter().enumerate() {
            while t.duration_since(times[first]) >= window {
                first += 1;
            }
            most = most.max(last + 1 - first);
        }
        most
    }
}

/// A running proxy; stops when dropped.
pub struct CountingProxy {
    /// Base URL of the proxy, e.g. `http://127.0.0.1:41234`.
    pub url: String,
    /// The counters.
    pub counts: Arc<Counts>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Clone)]
struct Upstream {
    base: String,
    client: reqwest::Client,
    counts: Arc<Counts>,
}

impl CountingProxy {
    /// From now on, answers every request `503 Service Unavailable` without forwarding it:
    /// the provider's API is unreachable.
    pub fn refuse_all(&self) {
        self.counts.refusing.store(true, Ordering::SeqCst);
    }

    /// Starts a proxy forwarding every request to `upstream` (a base URL).
    pub async fn start(upstream: &str) -> Self {
        let counts = Arc::new(Counts::default());
        let state = Upstream {
            base: upstream.trim_end_matches('/').to_owned(),
            client: reqwest::Client::new(),
            counts: counts.clone(),
        };
        let app = axum::Router::new().fallback(forward).with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind proxy");
        let url = format!("http://{}", listener.local_addr().expect("proxy addr"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { url, counts, task }
    }
}

async fn forward(State(up): State<Upstream>, req: Request) -> Response {
    if up.counts.refusing.load(Ordering::SeqCst) {
        up.counts.refused.fetch_add(1, Ordering::SeqCst);
        return Response::builder()
            .status(StatusCode::SERVICE_UNAVAILABLE)
            .body(Body::empty())
            .unwrap_or_default();
    }
    let counter = if req.method() == Method::GET || req.method() == Method::HEAD {
        &up.counts.reads
    } else {
        &up.counts.writes
    };
    counter.fetch_add(1, Ordering::SeqCst);
    up.counts
        .arrivals
        .lock()
        .expect("arrivals")
        .push(std::time::Instant::now());
    let url = format!(
        "{}{}",
        up.base,
        req.uri().path_and_query().map_or("/", |p| p.as_str())
    );
    let method = reqwest::Method::from_bytes(req.method().as_str().as_bytes()).expect("method");
    let mut headers = reqwest::header::HeaderMap::new();
    for (k, v) in req.headers() {
        if k != "host"
            && let (Ok(k), Ok(v)) = (
                reqwest::header::HeaderName::from_bytes(k.as_str().as_bytes()),
                reqwest::header::HeaderValue::from_bytes(v.as_bytes()),
            )
        {
            headers.append(k, v);
        }
    }
    let body = to_bytes(req.into_body(), 16 << 20)
        .await
        .unwrap_or_default();
    match up
        .client
        .request(method, url)
        .headers(headers)
        .body(body.to_vec())
        .send()
        .await
    {
        Ok(r) => {
            let status =
                StatusCode::from_u16(r.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
            let mut builder = Response::builder().status(status);
            for (k, v) in r.headers() {
                if k != "transfer-encoding" && k != "content-length" && k != "connection" {
                    builder = builder.header(k.as_str(), v.as_bytes());
                }
            }
            let bytes = r.bytes().await.unwrap_or_default();
            builder.body(Body::from(bytes)).unwrap_or_default()
        }
        Err(_) => Response::builder()
            .status(StatusCode::BAD_GATEWAY)
            .body(Body::empty())
            .unwrap_or_default(),
    }
}
