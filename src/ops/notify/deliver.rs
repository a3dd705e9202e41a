//! Delivering one message to one webhook: attempts bounded by the sink's timeout, retries
//! with jittered exponential backoff ([`Backoff`]), `Retry-After` honoured on 429.
//!
//! Retried: connection errors, timeouts, 408, 429, 5xx. Not retried: other statuses (a 4xx
//! will not heal by itself: a revoked Slack URL answers 403/404, a bad payload 400; redirects
//! are not followed). Logs name the sink, never the URL: reqwest errors are stripped of it.

use std::time::Duration;

use gslb_provider::{Backoff, retry_after_secs};
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, RETRY_AFTER};

use crate::config::Webhook;
use crate::io::http_body::read_at_most;
use crate::ops::metrics::Metrics;

/// How much of an error response's body is logged: 200 characters.
const BODY_LOGGED: usize = 200;

/// How much of an error response's body is read: 4 KiB (enough for [`BODY_LOGGED`] characters
/// of any UTF-8). A receiver that streams a body without end costs no more memory than this.
const BODY_READ: usize = 4096;

/// One sink's HTTP side (no `Debug`: it holds the secret URL).
pub(super) struct Deliverer {
    name: String,
    url: url::Url,
    client: reqwest::Client,
    max_attempts: u32,
    backoff: Duration,
    max_backoff: Duration,
    metrics: Metrics,
    /// A number in `[0, 1)` per retry (tests pin it).
    jitter: fn() -> f64,
}

/// How one attempt went.
#[derive(Debug)]
enum Attempt {
    Delivered,
    Retry {
        retry_after: Option<Duration>,
        why: String,
    },
    Fatal(String),
}

impl Deliverer {
    /// The deliverer of `w`, counting into `metrics`.
    ///
    /// # Errors
    /// The HTTP client cannot be built (TLS setup).
    pub(super) fn new(w: &Webhook, metrics: Metrics) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder()
            .timeout(w.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("gslb/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(reqwest::Error::without_url)?;
        Ok(Self {
            name: w.name.clone(),
            url: w.url.clone(),
            client,
            max_attempts: w.max_attempts,
            backoff: w.backoff,
            max_backoff: w.max_backoff,
            metrics,
            jitter: rand::random::<f64>,
        })
    }

    /// Sends `body` (JSON) until it is accepted or the attempts are spent; counts `delivered`,
    /// each `retried`, or `failed`. Returns whether it was delivered.
    pub(super) async fn deliver(&self, body: &[u8]) -> bool {
        let mut backoff = Backoff::new(self.backoff, self.max_backoff);
        for attempt in 1..=self.max_attempts {
            match self.attempt(body).await {
                Attempt::Delivered => {
                    self.count("delivered");
                    tracing::debug!(sink = %self.name, attempt, "webhook delivered");
                    return true;
                }
                Attempt::Retry { retry_after, why } if attempt < self.max_attempts => {
                    self.count("retried");
                    let floor = retry_after.map(|d| d.min(self.max_backoff));
                    let delay = backoff.next_delay((self.jitter)(), floor);
                    tracing::warn!(sink = %self.name, attempt, error = %why, retry_in = %humantime::format_duration(delay), "webhook delivery failed; retrying");
                    tokio::time::sleep(delay).await;
                }
                Attempt::Retry { why, .. } | Attempt::Fatal(why) => {
                    self.count("failed");
                    tracing::error!(sink = %self.name, attempt, error = %why, "webhook delivery failed; message dropped");
                    return false;
                }
            }
        }
        false
    }

    async fn attempt(&self, body: &[u8]) -> Attempt {
        let sent = self
            .client
            .post(self.url.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_vec())
            .send()
            .await;
        let response = match sent {
            Ok(r) => r,
            Err(e) => {
                return Attempt::Retry {
                    retry_after: None,
                    why: e.without_url().to_string(),
                };
            }
        };
        let status = response.status();
        if status.is_success() {
            return Attempt::Delivered;
        }
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(retry_after_secs);
        let mut response = response;
        let body = read_at_most(&mut response, BODY_READ)
            .await
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&body.bytes);
        let why = format!(
            "HTTP {status}: {}",
            text.chars().take(BODY_LOGGED).collect::<String>()
        );
        if is_retryable(status) {
            Attempt::Retry { retry_after, why }
        } else {
            Attempt::Fatal(why)
        }
    }

    fn count(&self, result: &str) {
        self.metrics
            .webhook_deliveries_total
            .with_label_values(&[&self.name, result])
            .inc();
    }
}

/// 408, 429 and 5xx are worth another try; other statuses are not.
fn is_retryable(status: StatusCode) -> bool {
    status == StatusCode::REQUEST_TIMEOUT
        || status == StatusCode::TOO_MANY_REQUESTS
        || status.is_server_error()
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::http::HeaderMap;
    use tokio::time::Instant;

    use super::*;
    use crate::config::{NotifySettings, WebhookSettings};

    /// A receiver answering `script` in order (then 200), recording when each request came.
    async fn receiver(
        script: Vec<(u16, Option<&'static str>)>,
    ) -> (url::Url, Arc<Mutex<Vec<Instant>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(script.into_iter()));
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post({
                let seen = seen.clone();
                move || async move {
                    seen.lock().expect("lock").push(Instant::now());
                    let (code, retry_after) =
                        script.lock().expect("lock").next().unwrap_or((200, None));
                    let mut headers = HeaderMap::new();
                    if let Some(s) = retry_after {
                        headers.insert(RETRY_AFTER, s.parse().expect("header"));
                    }
                    (StatusCode::from_u16(code).expect("status"), headers, "ok")
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        (format!("http://{addr}/hook").parse().expect("url"), seen)
    }

    fn deliverer(url: url::Url, metrics: &Metrics) -> Deliverer {
        let settings: NotifySettings = toml::from_str(
            "[[webhooks]]\nname = \"ops\"\nurl = \"http://127.0.0.1/\"\nbackoff = \"1s\"\nmax_backoff = \"60s\"\n",
        )
        .expect("settings");
        let w: &WebhookSettings = &settings.webhooks[0];
        let mut webhook = settings.resolve(|_| None).expect("resolve").remove(0);
        assert_eq!(w.max_attempts, 5);
        webhook.url = url;
        let mut d = Deliverer::new(&webhook, metrics.clone()).expect("client");
        d.jitter = || 1.0;
        d
    }

    fn count(metrics: &Metrics, result: &str) -> u64 {
        metrics
            .webhook_deliveries_total
            .with_label_values(&["ops", result])
            .get()
    }

    #[tokio::test(start_paused = true)]
    async fn a_500_is_retried_after_the_backoff_and_delivered_once() {
        let metrics = Metrics::new();
        let (url, seen) = receiver(vec![(500, None), (503, None)]).await;
        let d = deliverer(url, &metrics);
        assert!(d.deliver(b"{}").await);
        let seen = seen.lock().expect("lock").clone();
        assert_eq!(seen.len(), 3, "two failures, then the delivery");
        // Full jitter pinned at its top: 1 s, then 2 s.
        assert!(seen[1] - seen[0] >= Duration::from_secs(1));
        assert!(seen[2] - seen[1] >= Duration::from_secs(2));
        assert_eq!(count(&metrics, "retried"), 2);
        assert_eq!(count(&metrics, "delivered"), 1);
        assert_eq!(count(&metrics, "failed"), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_429_waits_out_retry_after_capped_at_max_backoff() {
        let metrics = Metrics::new();
        let (url, seen) = receiver(vec![(429, Some("30")), (429, Some("86400"))]).await;
        let d = deliverer(url, &metrics);
        assert!(d.deliver(b"{}").await);
        let seen = seen.lock().expect("lock").clone();
        assert!(seen[1] - seen[0] >= Duration::from_secs(30));
        let capped = seen[2] - seen[1];
        assert!(
            capped >= Duration::from_secs(60) && capped < Duration::from_secs(65),
            "{capped:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_4xx_other_than_408_and_429_is_not_retried() {
        let metrics = Metrics::new();
        let (url, seen) = receiver(vec![(404, None)]).await;
        let d = deliverer(url, &metrics);
        assert!(!d.deliver(b"{}").await);
        assert_eq!(seen.lock().expect("lock").len(), 1);
        assert_eq!(count(&metrics, "failed"), 1);
        assert_eq!(count(&metrics, "retried"), 0);
        let (url, seen) = receiver(vec![(408, None)]).await;
        assert!(deliverer(url, &metrics).deliver(b"{}").await);
        assert_eq!(seen.lock().expect("lock").len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_closed_port_is_retried_until_the_attempts_are_spent() {
        let metrics = Metrics::new();
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr")
        };
        let d = deliverer(
            format!("http://{closed}/hook").parse().expect("url"),
            &metrics,
        );
        let start = Instant::now();
        assert!(!d.deliver(b"{}").await);
        assert_eq!(count(&metrics, "retried"), 4);
        assert_eq!(count(&metrics, "failed"), 1);
        // 1 + 2 + 4 + 8 s of backoff between the five attempts.
        assert!(start.elapsed() >= Duration::from_secs(15));
    }

    #[tokio::test(start_paused = true)]
    async fn a_receiver_that_never_answers_times_out_each_attempt() {
        let metrics = Metrics::new();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let accepted = Arc::new(Mutex::new(Vec::new()));
        tokio::spawn({
            let accepted = accepted.clone();
            async move {
                while let Ok((socket, _)) = listener.accept().await {
                    accepted.lock().expect("lock").push(socket);
                }
            }
        });
        let d = deliverer(
            format!("http://{addr}/hook").parse().expect("url"),
            &metrics,
        );
        let start = Instant::now();
        assert!(!d.deliver(b"{}").await);
        assert_eq!(
            accepted.lock().expect("lock").len(),
            5,
            "one connection per attempt"
        );
        assert_eq!(count(&metrics, "retried"), 4);
        assert_eq!(count(&metrics, "failed"), 1);
        // Five 5 s timeouts and 15 s of backoff.
        assert!(start.elapsed() >= Duration::from_secs(40));
    }

    /// A receiver answering 404 with a body that never ends: the attempt reads 4 KiB of it,
    /// logs the first 200 characters and is done at once, not at the sink's timeout, with its
    /// memory bounded (issue 28: 1.87 GB for one message before).
    #[tokio::test]
    async fn an_endless_error_body_is_read_only_so_far() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut request = [0u8; 4096];
                    let _ = socket.read(&mut request).await;
                    let head = "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n";
                    if socket.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    let chunk = format!("10000\r\n{}\r\n", "x".repeat(0x10000));
                    while socket.write_all(chunk.as_bytes()).await.is_ok() {}
                });
            }
        });
        let metrics = Metrics::new();
        let d = deliverer(
            format!("http://{addr}/hook").parse().expect("url"),
            &metrics,
        );
        let start = std::time::Instant::now();
        let attempt = d.attempt(b"{}").await;
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "read until the timeout: {:?}",
            start.elapsed()
        );
        let Attempt::Fatal(why) = attempt else {
            panic!("{attempt:?}");
        };
        assert_eq!(
            why,
            format!("HTTP 404 Not Found: {}", "x".repeat(BODY_LOGGED))
        );
    }
}
