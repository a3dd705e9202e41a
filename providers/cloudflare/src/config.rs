//! Plain configuration for one Cloudflare binding and for how the adapter talks to the API.
//!
//! Filled in by the `gslb` crate from its validated policy and settings; this module reads no
//! policy. The only I/O is [`ApiToken::from_env`] and [`ApiToken::from_file`]. A token is never
//! printed: its `Debug` is redacted and it has no `Display`.

use std::num::NonZeroU32;
use std::path::Path;
use std::time::Duration;

use gslb_provider::ProviderError;

/// Cloudflare's API base, `https://api.cloudflare.com/client/v4` (Cloudflare API docs).
pub const DEFAULT_API_BASE: &str = "https://api.cloudflare.com/client/v4";

/// The marker a pool's or load balancer's `description` must contain for gslb to touch it.
/// An operator adds it (e.g. `"web LB [gslb-managed]"`); gslb never adds or removes it.
pub const MANAGED_TAG: &str = "gslb-managed";

/// Cloudflare's rate-limit window: 1,200 requests per 5 minutes per user or token; over it
/// every call answers HTTP 429 for the next 5 minutes (Cloudflare API docs, "Rate limits").
pub const RATE_LIMIT_WINDOW: Duration = Duration::from_secs(300);

/// Default requests per [`RATE_LIMIT_WINDOW`] from one binding: 300, a quarter of
/// Cloudflare's 1,200, leaving room for other bindings, Terraform and the dashboard on the
/// same token. One observe is 2 requests, so a 60 s resync uses 10 per window.
pub const DEFAULT_REQUESTS_PER_WINDOW: u32 = 300;

/// How a binding names its load balancer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadBalancerRef {
    /// The load balancer's id (32 lower-case hex digits).
    Id(String),
    /// The load balancer's name, its DNS hostname (e.g. `web.example.com`); resolved to an id
    /// with one list call, then remembered.
    Name(String),
}

impl LoadBalancerRef {
    /// An id when `s` is 32 hex digits, a name otherwise.
    pub fn parse(s: &str) -> Self {
        if s.len() == 32 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
            Self::Id(s.to_ascii_lowercase())
        } else {
            Self::Name(s.trim_end_matches('.').to_ascii_lowercase())
        }
    }
}

/// One gslb pool's Cloudflare pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudflarePool {
    /// The Cloudflare pool id; also the pool's [`gslb_provider::PoolRef`].
    pub pool_id: String,
}

/// One load balancer gslb steers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudflareBinding {
    /// The account that owns the pools (`/accounts/{account_id}/load_balancers/pools`).
    pub account_id: String,
    /// The zone that owns the load balancer (`/zones/{zone_id}/load_balancers/{id}`).
    pub zone_id: String,
    /// The load balancer, by id or name.
    pub load_balancer: LoadBalancerRef,
    /// The pools in the policy's priority order, most preferred first. At least two.
    pub pools: Vec<CloudflarePool>,
}

impl CloudflareBinding {
    /// Checks the binding's shape and reports every problem at once.
    ///
    /// # Errors
    /// [`ProviderError::Invalid`] for an empty account, zone, load balancer or pool id, fewer
    /// than two pools, or a pool id used twice.
    pub fn validate(&self) -> Result<(), ProviderError> {
        let mut problems = Vec::new();
        if self.account_id.trim().is_empty() {
            problems.push("account_id is empty".to_owned());
        }
        if self.zone_id.trim().is_empty() {
            problems.push("zone_id is empty".to_owned());
        }
        let (LoadBalancerRef::Id(lb) | LoadBalancerRef::Name(lb)) = &self.load_balancer;
        if lb.trim().is_empty() {
            problems.push("load_balancer is empty".to_owned());
        }
        if self.pools.len() < 2 {
            problems.push(format!("{} pools given; at least 2", self.pools.len()));
        }
        for (i, p) in self.pools.iter().enumerate() {
            if p.pool_id.trim().is_empty() {
                problems.push(format!("pools[{i}].pool_id is empty"));
            } else if self.pools[..i].iter().any(|q| q.pool_id == p.pool_id) {
                problems.push(format!("pools[{i}].pool_id {:?} is used twice", p.pool_id));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ProviderError::Invalid(format!(
                "cloudflare binding: {}",
                problems.join("; ")
            )))
        }
    }

    /// The pool ids in priority order.
    pub fn pool_ids(&self) -> Vec<String> {
        self.pools.iter().map(|p| p.pool_id.clone()).collect()
    }
}

/// A Cloudflare API token. Sent only as `Authorization: Bearer`; never logged (`Debug` prints
/// `ApiToken(***)`).
#[derive(Clone, PartialEq, Eq)]
pub struct ApiToken(String);

impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiToken(***)")
    }
}

/// Why no token could be read. The messages name the variable or file, never the value.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenError {
    /// The environment variable is unset or empty.
    #[error("environment variable {0} is not set or empty")]
    MissingEnv(String),
    /// The file could not be read.
    #[error("cannot read the token file {file}: {reason}")]
    File {
        /// The file.
        file: String,
        /// Why.
        reason: String,
    },
    /// The file is empty.
    #[error("the token file {0} is empty")]
    EmptyFile(String),
}

impl ApiToken {
    /// A token from a string (tests). Surrounding whitespace is dropped.
    pub fn new(token: impl Into<String>) -> Self {
        Self(token.into().trim().to_owned())
    }

    /// The token in environment variable `var` (gslb uses `CLOUDFLARE_API_TOKEN`).
    ///
    /// # Errors
    /// [`TokenError::MissingEnv`] when unset or empty.
    pub fn from_env(var: &str) -> Result<Self, TokenError> {
        match std::env::var(var) {
            Ok(v) if !v.trim().is_empty() => Ok(Self::new(v)),
            _ => Err(TokenError::MissingEnv(var.to_owned())),
        }
    }

    /// The token in `file` (e.g. a mounted Kubernetes secret); surrounding whitespace dropped.
    ///
    /// # Errors
    /// [`TokenError::File`] when unreadable, [`TokenError::EmptyFile`] when empty.
    pub fn from_file(file: &Path) -> Result<Self, TokenError> {
        let text = std::fs::read_to_string(file).map_err(|e| TokenError::File {
            file: file.display().to_string(),
            reason: e.to_string(),
        })?;
        if text.trim().is_empty() {
            return Err(TokenError::EmptyFile(file.display().to_string()));
        }
        Ok(Self::new(text))
    }

    /// The token in `file` when set, else in environment variable `var`: gslb's
    /// `[cloudflare] token_file` and `token_env`.
    ///
    /// # Errors
    /// As [`ApiToken::from_file`] or [`ApiToken::from_env`].
    pub fn from_file_or_env(file: Option<&Path>, var: &str) -> Result<Self, TokenError> {
        match file {
            Some(f) => Self::from_file(f),
            None => Self::from_env(var),
        }
    }

    pub(crate) fn bearer(&self) -> String {
        format!("Bearer {}", self.0)
    }
}

/// How the adapter talks to the Cloudflare API.
#[derive(Debug, Clone)]
pub struct CloudflareSettings {
    /// API base without a trailing `/`. Default [`DEFAULT_API_BASE`]; tests point it at the
    /// fake on 127.0.0.1.
    pub api_base: String,
    /// The API token (permissions: see `docs/providers.md`).
    pub token: ApiToken,
    /// Requests per [`RATE_LIMIT_WINDOW`] (5 minutes) from every binding sharing one
    /// [`crate::CloudflareAccount`] (the daemon makes one per token), every call counted,
    /// spread evenly with a burst of 10. Default [`DEFAULT_REQUESTS_PER_WINDOW`] (300), well
    /// under Cloudflare's 1,200 per token.
    pub requests_per_window: NonZeroU32,
    /// Attempts per call, the first included, for 5xx, timeouts and connection failures.
    /// Default 3; 0 is treated as 1. A 429 is never retried in place: the call fails at once
    /// with `RateLimited { retry_after }` and no request is sent until `Retry-After` passes.
    pub max_attempts: u32,
    /// First backoff step between attempts (full jitter, [`gslb_provider::Backoff`]).
    /// Default 200 ms.
    pub backoff_base: Duration,
    /// Cap on one backoff delay. Default 5 s.
    pub backoff_max: Duration,
    /// Deadline for one HTTP attempt; a slower answer counts as a timeout (transient). Default
    /// 10 s. `None`: no deadline (tests in paused tokio time, where a pending deadline would
    /// be auto-advanced while the socket waits).
    pub attempt_timeout: Option<Duration>,
}

impl CloudflareSettings {
    /// Production settings with `token`.
    pub fn new(token: ApiToken) -> Self {
        Self {
            api_base: DEFAULT_API_BASE.to_owned(),
            token,
            requests_per_window: NonZeroU32::new(DEFAULT_REQUESTS_PER_WINDOW)
                .unwrap_or(NonZeroU32::MIN),
            max_attempts: 3,
            backoff_base: Duration::from_millis(200),
            backoff_max: Duration::from_secs(5),
            attempt_timeout: Some(Duration::from_secs(10)),
        }
    }

    /// The settings an operator chooses (gslb's `[cloudflare]` table) with `token`, every
    /// other one as in [`CloudflareSettings::new`]: the binary's one call from its settings to
    /// the adapter's.
    pub fn configured(api_base: String, requests_per_window: NonZeroU32, token: ApiToken) -> Self {
        Self {
            api_base,
            requests_per_window,
            ..Self::new(token)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_names_are_told_apart() {
        assert_eq!(
            LoadBalancerRef::parse("699d98642c564d2e855e9661899b7252"),
            LoadBalancerRef::Id("699d98642c564d2e855e9661899b7252".into())
        );
        assert_eq!(
            LoadBalancerRef::parse("Web.Example.com."),
            LoadBalancerRef::Name("web.example.com".into())
        );
    }

    #[test]
    fn the_token_is_never_printed() {
        let t = ApiToken::new("s3cr3t-value");
        assert_eq!(format!("{t:?}"), "ApiToken(***)");
        let s = CloudflareSettings::new(t);
        assert!(!format!("{s:?}").contains("s3cr3t"));
    }

    #[test]
    fn configured_settings_keep_the_other_defaults_and_tokens_come_from_file_or_env() {
        let rpw = NonZeroU32::new(60).expect("non-zero");
        let s =
            CloudflareSettings::configured("http://127.0.0.1:1".into(), rpw, ApiToken::new("t"));
        let d = CloudflareSettings::new(ApiToken::new("t"));
        assert_eq!(
            (s.api_base.as_str(), s.requests_per_window, &s.token),
            ("http://127.0.0.1:1", rpw, &d.token)
        );
        assert_eq!(
            (
                s.max_attempts,
                s.backoff_base,
                s.backoff_max,
                s.attempt_timeout
            ),
            (
                d.max_attempts,
                d.backoff_base,
                d.backoff_max,
                d.attempt_timeout
            )
        );
        let file = std::env::temp_dir().join(format!("gslb-cf-token-{}", std::process::id()));
        std::fs::write(&file, "from-file\n").expect("write");
        let var = "GSLB_TEST_UNSET_CLOUDFLARE_TOKEN";
        let from_file = ApiToken::from_file_or_env(Some(&file), var);
        let _ = std::fs::remove_file(&file);
        assert_eq!(from_file, Ok(ApiToken::new("from-file")));
        assert_eq!(
            ApiToken::from_file_or_env(None, var),
            Err(TokenError::MissingEnv(var.into()))
        );
    }

    #[test]
    fn every_binding_problem_is_reported() {
        let b = CloudflareBinding {
            account_id: String::new(),
            zone_id: "z".into(),
            load_balancer: LoadBalancerRef::Name("web.example.com".into()),
            pools: vec![
                CloudflarePool {
                    pool_id: "a".into(),
                },
                CloudflarePool {
                    pool_id: "a".into(),
                },
            ],
        };
        let msg = b.validate().unwrap_err().to_string();
        assert!(msg.contains("account_id is empty"), "{msg}");
        assert!(msg.contains("used twice"), "{msg}");
    }
}
