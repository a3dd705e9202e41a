//! The paced, retrying edge around the Cloudflare REST API: every call goes through
//! [`Api::call`], which waits for the rate limiter, refuses to send while a `Retry-After`
//! block is running, unwraps the response envelope, classifies a failure once
//! ([`crate::classify`]) and backs off before trying a transient failure again.
//!
//! It knows nothing of pools or load balancers: callers pass a method, a path and a body, and
//! name the type the envelope's `result` is read as (straight from the response body, with no
//! JSON tree in between).

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use governor::clock::Clock;
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use gslb_provider::{Backoff, ProviderError, RETRY_AFTER_MAX};
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::time::Instant;

use crate::CloudflareSettings;
use crate::classify::{classify_answer, classify_transport, retry_after, retry_in_place};
use crate::config::RATE_LIMIT_WINDOW;
use crate::models::Envelope;

/// Requests allowed at once before the even pace applies.
const BURST: u32 = 10;

/// The largest answer read: 32 MiB. A page of Cloudflare's list endpoints holds at most 1,000
/// objects of a few KiB (the pools of an account, 5,000 at most); anything larger is not an
/// answer of the API and is refused as [`ProviderError::Invalid`] before it fills memory.
const ANSWER_LIMIT: usize = 32 << 20;

/// A [`governor`] clock that reads tokio's clock, so a test that pauses time also pauses the
/// rate limiter.
#[derive(Debug, Clone)]
struct TokioClock {
    start: Instant,
}

impl Clock for TokioClock {
    type Instant = Nanos;

    fn now(&self) -> Nanos {
        Nanos::from(self.start.elapsed())
    }
}

type Limiter = RateLimiter<NotKeyed, InMemoryState, TokioClock, NoOpMiddleware<Nanos>>;

/// The HTTP client plus the rate limiter, `Retry-After` block and retry policy every call on
/// one API token shares (one per [`crate::CloudflareAccount`]).
#[derive(Debug)]
pub(crate) struct Api {
    http: reqwest::Client,
    settings: CloudflareSettings,
    limiter: Limiter,
    clock: TokioClock,
    /// No request is sent before this instant (set from a 429's `Retry-After`).
    blocked_until: Mutex<Option<Instant>>,
}

impl Api {
    /// A client for `settings`.
    ///
    /// # Errors
    /// [`ProviderError::Invalid`] when the TLS stack cannot be set up.
    pub(crate) fn new(settings: CloudflareSettings) -> Result<Self, ProviderError> {
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("gslb/", env!("CARGO_PKG_VERSION")))
            .redirect(reqwest::redirect::Policy::none());
        if let Some(t) = settings.attempt_timeout {
            builder = builder.timeout(t);
        }
        let http = builder
            .build()
            .map_err(|e| ProviderError::Invalid(format!("building the HTTP client: {e}")))?;
        let per_request = RATE_LIMIT_WINDOW / settings.requests_per_window.get();
        let quota = Quota::with_period(per_request)
            .unwrap_or_else(|| Quota::per_second(settings.requests_per_window))
            .allow_burst(
                std::num::NonZeroU32::new(BURST.min(settings.requests_per_window.get()))
                    .unwrap_or(std::num::NonZeroU32::MIN),
            );
        let clock = TokioClock {
            start: Instant::now(),
        };
        Ok(Self {
            http,
            limiter: RateLimiter::direct_with_clock(quota, clock.clone()),
            clock,
            settings,
            blocked_until: Mutex::new(None),
        })
    }

    /// Sends `method path` with `body` (JSON) and returns the envelope's `result` read as `T`
    /// (a missing `result` reads as `null`; [`serde::de::IgnoredAny`] when the caller does
    /// not need it, [`crate::models::Listed`] for a list read item by item).
    ///
    /// # Errors
    /// The classified failure of the last attempt; [`ProviderError::RateLimited`] without
    /// sending while a `Retry-After` block runs; [`ProviderError::Invalid`] (`"{op}: why"`,
    /// not retried) when `result` cannot be read as `T`.
    pub(crate) async fn call<T: DeserializeOwned>(
        &self,
        op: &'static str,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<T, ProviderError> {
        let mut backoff = Backoff::new(self.settings.backoff_base, self.settings.backoff_max);
        let mut attempt = 1;
        loop {
            if let Some(left) = self.blocked_for() {
                return Err(ProviderError::RateLimited {
                    retry_after: Some(left),
                });
            }
            self.wait_for_permit().await;
            let err = match self.send(op, method.clone(), path, body).await {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            if let ProviderError::RateLimited {
                retry_after: Some(d),
            } = &err
            {
                // Capped where it is parsed; checked all the same, an overflow must not panic.
                let until = Instant::now().checked_add((*d).min(RETRY_AFTER_MAX));
                *self.block() = until;
            }
            if !retry_in_place(&err) || attempt >= self.settings.max_attempts.max(1) {
                tracing::debug!(op, attempt, error = %err, "cloudflare call failed");
                return Err(err);
            }
            let delay = backoff.next_delay(rand::random::<f64>(), None);
            tracing::info!(op, attempt, delay = %format_args!("{}ms", delay.as_millis()), error = %err, "cloudflare call failed; retrying");
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    async fn send<T: DeserializeOwned>(
        &self,
        op: &'static str,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<T, ProviderError> {
        let url = format!("{}{path}", self.settings.api_base.trim_end_matches('/'));
        let mut req = self
            .http
            .request(method, url)
            .header(reqwest::header::AUTHORIZATION, self.settings.token.bearer())
            .header(reqwest::header::ACCEPT, "application/json");
        if let Some(b) = body {
            let bytes = serde_json::to_vec(b)
                .map_err(|e| ProviderError::Invalid(format!("{op}: encoding the body: {e}")))?;
            req = req
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(bytes);
        }
        let mut resp = req.send().await.map_err(|e| classify_transport(op, &e))?;
        let status = resp.status().as_u16();
        let wait = retry_after(resp.headers());
        let mut bytes = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| classify_transport(op, &e))? {
            if bytes.len() + chunk.len() > ANSWER_LIMIT {
                return Err(ProviderError::Invalid(format!(
                    "{op}: HTTP {status}, an answer larger than {ANSWER_LIMIT} bytes"
                )));
            }
            bytes.extend_from_slice(&chunk);
        }
        let envelope = serde_json::from_slice::<Envelope>(&bytes).ok();
        match envelope {
            Some(e) if (200..300).contains(&status) && e.success => {
                serde_json::from_str(e.result.map_or("null", RawValue::get))
                    .map_err(|err| ProviderError::Invalid(format!("{op}: {err}")))
            }
            Some(e) if (200..300).contains(&status) => Err(ProviderError::Invalid(format!(
                "{op}: HTTP {status} with success false: {}",
                e.describe()
            ))),
            None if (200..300).contains(&status) => Err(ProviderError::Invalid(format!(
                "{op}: HTTP {status}, body is not a Cloudflare envelope"
            ))),
            e => Err(classify_answer(op, status, wait, e.as_ref())),
        }
    }

    fn block(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        // A poisoned lock only means a panic elsewhere; the instant itself is always whole.
        self.blocked_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn blocked_for(&self) -> Option<Duration> {
        let until = (*self.block())?;
        let now = Instant::now();
        (until > now).then(|| until - now)
    }

    async fn wait_for_permit(&self) {
        while let Err(not_until) = self.limiter.check() {
            tokio::time::sleep(not_until.wait_time_from(self.clock.now())).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::de::IgnoredAny;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;
    use crate::ApiToken;
    use crate::models::{Listed, Pool};

    /// A client (one attempt per call) for an HTTP server on 127.0.0.1 that answers every
    /// request with `status` and `body`.
    async fn answering(status: u16, body: &'static str) -> Api {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut head, mut buf) = (Vec::new(), [0; 1024]);
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match conn.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let answer = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n\
                         content-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = conn.write_all(answer.as_bytes()).await;
                });
            }
        });
        Api::new(CloudflareSettings {
            api_base: format!("http://{addr}"),
            max_attempts: 1,
            ..CloudflareSettings::new(ApiToken::new("t"))
        })
        .expect("client")
    }

    async fn list(status: u16, body: &'static str) -> Result<Listed<Pool>, ProviderError> {
        answering(status, body)
            .await
            .call("list pools", Method::GET, "/pools", None)
            .await
    }

    #[tokio::test]
    async fn a_list_is_read_item_by_item_and_a_malformed_item_is_skipped_with_its_id() {
        let listed = list(
            200,
            r#"{"success": true, "errors": [], "messages": [], "result": [
                {"id": "a", "enabled": true, "origins": [{"name": "o", "port": 8443}]},
                {"id": "b", "enabled": "sometimes"},
                {"id": "c", "health_sources": ["regional"]}
            ], "result_info": {"page": 1, "count": 3}}"#,
        )
        .await
        .expect("list");
        let ids: Vec<_> = listed.items.iter().map(|p| p.id.as_deref()).collect();
        assert_eq!(ids, [Some("a"), Some("c")]);
        assert_eq!(
            listed.items[0].origins.as_ref().unwrap()[0].extra["port"],
            8443
        );
        assert_eq!(listed.items[1].extra["health_sources"][0], "regional");
        assert_eq!(listed.skipped.len(), 1);
        assert_eq!(listed.skipped[0].0.as_deref(), Some("b"));
    }

    #[tokio::test]
    async fn envelopes_without_a_readable_result_are_invalid_and_other_answers_classified() {
        let invalid = |r: Result<Listed<Pool>, ProviderError>| match r {
            Err(ProviderError::Invalid(m)) => m,
            other => panic!("not invalid: {other:?}"),
        };
        let missing = invalid(list(200, r#"{"success": true, "errors": []}"#).await);
        assert!(
            missing.starts_with("list pools: invalid type: null, expected a sequence"),
            "{missing}"
        );
        let not_a_list = invalid(list(200, r#"{"success": true, "result": {"id": "a"}}"#).await);
        assert!(not_a_list.contains("expected a sequence"), "{not_a_list}");
        let refused =
            r#"{"success": false, "errors": [{"code": 1000, "message": "no"}], "result": []}"#;
        let refused = invalid(list(200, refused).await);
        assert!(refused.ends_with("success false: 1000: no"), "{refused}");
        let odd = invalid(list(200, "[1, 2]").await);
        assert!(odd.ends_with("body is not a Cloudflare envelope"), "{odd}");
        let gone = r#"{"success": false, "errors": [{"code": 1001, "message": "gone"}]}"#;
        assert_eq!(list(404, gone).await.unwrap_err().code(), "not_found");
        assert_eq!(list(502, "oops").await.unwrap_err().code(), "transient");
        // A write's answer is not read at all: any `result`, or none, is fine.
        for body in [
            r#"{"success": true}"#,
            r#"{"success": true, "result": {"x": [1]}}"#,
        ] {
            let api = answering(200, body).await;
            api.call::<IgnoredAny>("patch pool", Method::PATCH, "/p", None)
                .await
                .expect(body);
        }
    }
}
