//! The paced, retrying edge around the SDK client: every Route 53 call goes through
//! [`Api::call`], which waits for the rate limiter, sends, classifies a failure once
//! ([`crate::classify`]) and backs off before trying again.
//!
//! It knows nothing of records or health checks: callers pass a closure that builds and sends
//! one request.

use std::error::Error as StdError;
use std::future::Future;
use std::num::NonZeroU32;
use std::time::Duration;

use aws_sdk_route53::Client;
use aws_sdk_route53::config::endpoint::{DefaultResolver, Params, ResolveEndpoint};
use aws_sdk_route53::config::http::HttpResponse;
use aws_sdk_route53::config::retry::RetryConfig;
use aws_sdk_route53::config::timeout::TimeoutConfig;
use aws_sdk_route53::error::{ProvideErrorMetadata, SdkError};
use futures_util::FutureExt;
use governor::clock::Clock;
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use gslb_provider::{Backoff, ProviderError};

use crate::Route53Settings;
use crate::classify::{classify, retry_in_place};

/// A [`governor`] clock that reads tokio's clock, so a test that pauses time
/// (`tokio::time::pause`) also pauses the rate limiter instead of spinning against the wall
/// clock.
#[derive(Debug, Clone)]
struct TokioClock {
    start: tokio::time::Instant,
}

impl Clock for TokioClock {
    type Instant = Nanos;

    fn now(&self) -> Nanos {
        Nanos::from(self.start.elapsed())
    }
}

type Limiter = RateLimiter<NotKeyed, InMemoryState, TokioClock, NoOpMiddleware<Nanos>>;

/// A quota that never lets more than `per_second` requests into any one-second window, the
/// way Route 53 counts its per-account limit: a burst of `b` = a fifth of the rate (at least 1:
/// no burst at Route 53's 5 per second and below), then an even pace of `per_second - b + 1`
/// per second, so `b + (per_second - b + 1) - 1 = per_second` at most in any second.
fn account_quota(per_second: NonZeroU32) -> Quota {
    let burst = NonZeroU32::new(per_second.get() / 5).unwrap_or(NonZeroU32::MIN);
    let pace = NonZeroU32::new(per_second.get() - burst.get() + 1).unwrap_or(NonZeroU32::MIN);
    Quota::per_second(pace).allow_burst(burst)
}

/// The first pause of the whole account after a `Throttling` answer: 1 s; each throttled
/// answer in a row doubles it, up to [`THROTTLE_MAX`]. "Retry with exponential backoff" is
/// Route 53's own advice for `Throttling` (Route 53 API Reference, "Common Errors").
pub const THROTTLE_BASE: Duration = Duration::from_secs(1);

/// The longest pause of the account after throttled answers: 60 s.
pub const THROTTLE_MAX: Duration = Duration::from_secs(60);

/// The account's answer to throttling: while `until` is ahead, no call of any binding on the
/// account is sent. `level` counts throttled answers since the last success.
#[derive(Debug, Default)]
struct Throttle {
    level: u32,
    until: Option<tokio::time::Instant>,
}

/// The SDK client plus the rate limiter and retry policy every call of one AWS account
/// shares (one per [`crate::Route53Account`]).
#[derive(Debug)]
pub(crate) struct Api {
    client: Client,
    limiter: Limiter,
    clock: TokioClock,
    max_attempts: u32,
    backoff_base: Duration,
    backoff_max: Duration,
    /// Where requests go, named in "not delivered" errors (see [`endpoint_of`]).
    endpoint: String,
    /// The pause after throttled answers, shared by every binding of the account.
    throttle: std::sync::Mutex<Throttle>,
}

impl Api {
    /// Wraps `client`, turning off the SDK's own retries (each of our attempts must pass the
    /// limiter) and setting the per-attempt timeout from `settings`.
    pub(crate) fn new(client: &Client, settings: &Route53Settings) -> Self {
        let config = client
            .config()
            .to_builder()
            .retry_config(RetryConfig::disabled())
            .timeout_config(
                TimeoutConfig::builder()
                    .operation_attempt_timeout(settings.attempt_timeout)
                    .build(),
            )
            .build();
        let clock = TokioClock {
            start: tokio::time::Instant::now(),
        };
        let limiter = RateLimiter::direct_with_clock(
            account_quota(settings.requests_per_second),
            clock.clone(),
        );
        Self {
            endpoint: endpoint_of(client, settings),
            throttle: std::sync::Mutex::default(),
            client: Client::from_conf(config),
            limiter,
            clock,
            max_attempts: settings.max_attempts.max(1),
            backoff_base: settings.backoff_base,
            backoff_max: settings.backoff_max,
        }
    }

    /// Sends one request built by `send`, up to `max_attempts` times.
    ///
    /// Each attempt first waits out the account's throttle pause, then for the rate limiter.
    /// A failure is classified once; only rate limiting and transient failures are tried
    /// again. A throttled answer pauses the whole account ([`Api::throttled`]: exponential
    /// from [`THROTTLE_BASE`] to [`THROTTLE_MAX`], half of it random), so every binding waits,
    /// not only this call; a transient failure waits a full-jitter backoff of its own.
    ///
    /// # Errors
    /// The classified error of the last attempt (see [`crate::classify`]); a throttled one
    /// carries the pause still ahead as its `retry_after`.
    pub(crate) async fn call<T, E, F, Fut>(
        &self,
        op: &'static str,
        mut send: F,
    ) -> Result<T, ProviderError>
    where
        F: FnMut(&Client) -> Fut,
        Fut: Future<Output = Result<T, SdkError<E, HttpResponse>>>,
        E: ProvideErrorMetadata + StdError + 'static,
    {
        let mut backoff = Backoff::new(self.backoff_base, self.backoff_max);
        let mut attempt = 1;
        loop {
            self.wait_for_permit().await;
            let err = match send(&self.client).await {
                Ok(out) => {
                    self.lock_throttle().level = 0;
                    return Ok(out);
                }
                Err(sdk_err) => match classify(op, &self.endpoint, &sdk_err) {
                    ProviderError::RateLimited { retry_after } => ProviderError::RateLimited {
                        retry_after: Some(self.throttled(retry_after)),
                    },
                    other => other,
                },
            };
            if !retry_in_place(&err) || attempt >= self.max_attempts {
                tracing::debug!(op, attempt, error = %err, "route53 call failed");
                return Err(err);
            }
            // A throttled call waits out the account's pause before its next attempt.
            let delay = match &err {
                ProviderError::RateLimited { .. } => Duration::ZERO,
                _ => backoff.next_delay(rand::random::<f64>(), None),
            };
            tracing::info!(op, attempt, delay = %format_args!("{}ms", delay.as_millis()), error = %err, "route53 call failed; retrying");
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    /// Records a throttled answer: the account pauses for the next step of its backoff (at
    /// least `retry_after`, when the answer had one), counted from now unless an earlier pause
    /// ends later. Returns the pause still ahead.
    fn throttled(&self, retry_after: Option<Duration>) -> Duration {
        let now = tokio::time::Instant::now();
        let mut t = self.lock_throttle();
        t.level = t.level.saturating_add(1);
        let step = THROTTLE_BASE
            .saturating_mul(1u32 << (t.level - 1).min(16))
            .min(THROTTLE_MAX);
        let pause = (step / 2 + step.mul_f64(rand::random::<f64>() / 2.0))
            .max(retry_after.unwrap_or_default());
        let until = t.until.filter(|u| *u > now + pause).unwrap_or(now + pause);
        t.until = Some(until);
        tracing::info!(
            level = t.level,
            pause = %format_args!("{}ms", until.duration_since(now).as_millis()),
            "route53 throttled: every binding of the account pauses"
        );
        until.duration_since(now)
    }

    fn lock_throttle(&self) -> std::sync::MutexGuard<'_, Throttle> {
        self.throttle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn wait_for_permit(&self) {
        let until = self.lock_throttle().until;
        if let Some(until) = until {
            tokio::time::sleep_until(until).await;
        }
        while let Err(not_until) = self.limiter.check() {
            tokio::time::sleep(not_until.wait_time_from(self.clock.now())).await;
        }
    }
}

/// The URL requests go to, for error messages: `settings.endpoint_url` when set (an emulator or a
/// private endpoint), else what the SDK's endpoint rules give for the client's region
/// (`https://route53.amazonaws.com` in the `aws` partition), else "the Route 53 API".
fn endpoint_of(client: &Client, settings: &Route53Settings) -> String {
    if let Some(url) = &settings.endpoint_url {
        return url.clone();
    }
    let region = client
        .config()
        .region()
        .map_or_else(|| settings.region.clone(), ToString::to_string);
    Params::builder()
        .region(region)
        .build()
        .ok()
        .and_then(|params| {
            DefaultResolver::new()
                .resolve_endpoint(&params)
                .now_or_never()?
                .ok()
        })
        .map_or_else(|| "the Route 53 API".to_owned(), |e| e.url().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::emulator_client;

    #[test]
    fn the_default_endpoint_is_route53s_global_one() {
        let client = emulator_client("http://127.0.0.1:1");
        let settings = Route53Settings::default();
        assert_eq!(
            endpoint_of(&client, &settings),
            "https://route53.amazonaws.com"
        );
    }

    /// A request that cannot reach its endpoint (nothing listens there) says where it was
    /// going: the operator sees the mistyped or unreachable `[route53] endpoint_url`.
    #[tokio::test]
    async fn an_undelivered_request_names_its_endpoint() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", closed.local_addr().expect("addr"));
        drop(closed);
        let settings = Route53Settings {
            endpoint_url: Some(url.clone()),
            max_attempts: 1,
            ..Route53Settings::default()
        };
        let api = Api::new(&emulator_client(&url), &settings);
        let err = api
            .call("GetHealthCheck", |c| {
                c.get_health_check().health_check_id("hc").send()
            })
            .await
            .expect_err("nothing listens");
        assert!(
            matches!(&err, ProviderError::Transient(m)
                if m.contains(&format!("request to {url} not delivered"))),
            "{err}"
        );
    }
}
