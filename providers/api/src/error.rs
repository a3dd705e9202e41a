//! [`ProviderError`]: the one place where retryable and fatal provider failures are told apart.

use std::time::Duration;

/// A failed provider call, classified so the reconciler can decide what to do next.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The provider asked us to slow down (HTTP 429, Route 53 `Throttling`). `retry_after` is
    /// the provider's own hint when it sent one.
    #[error("rate limited by the provider{}", retry_hint(*.retry_after))]
    RateLimited {
        /// The provider's `Retry-After`, when it sent one.
        retry_after: Option<Duration>,
    },
    /// A failure that may pass: a 5xx, a timeout, a dropped connection, Route 53
    /// `PriorRequestNotComplete`.
    #[error("transient provider failure: {0}")]
    Transient(String),
    /// A fence showed another writer got there first (Route 53 `HealthCheckVersionMismatch` or
    /// `InvalidChangeBatch` on a compare-and-swap, a Cloudflare read-back mismatch). Re-observe
    /// and re-plan; never retry the same write.
    #[error("write conflict: {0}")]
    Conflict(String),
    /// Credentials missing, expired or lacking permission. Not retried in a hot loop.
    #[error("authentication or authorisation failed: {0}")]
    Auth(String),
    /// An object the binding names does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// The provider rejected the request as malformed, or answered with something we cannot
    /// read.
    #[error("invalid request or response: {0}")]
    Invalid(String),
    /// The object exists but gslb does not manage it; gslb refuses to touch it.
    #[error("refusing to touch an object gslb does not manage: {0}")]
    Unowned(String),
}

/// ` (retry after 90s)` (whole seconds, rounded up) when the provider sent a hint, nothing
/// otherwise: operator text never shows `Some(..)` or `None`.
fn retry_hint(retry_after: Option<Duration>) -> String {
    retry_after.map_or_else(String::new, |d| {
        let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
        format!(" (retry after {secs}s)")
    })
}

impl ProviderError {
    /// Whether the same call may succeed if tried again after a backoff. Conflicts are
    /// retryable too, but only after a fresh observe and a new plan.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::RateLimited { .. } | Self::Transient(_) | Self::Conflict(_)
        )
    }

    /// Every value [`ProviderError::code`] returns, for pre-creating metric label sets.
    pub const CODES: [&'static str; 7] = [
        "rate_limited",
        "transient",
        "conflict",
        "auth",
        "not_found",
        "invalid",
        "unowned",
    ];

    /// A short, bounded label for metrics: `rate_limited`, `transient`, `conflict`, `auth`,
    /// `not_found`, `invalid`, `unowned` (see [`ProviderError::CODES`]).
    pub fn code(&self) -> &'static str {
        match self {
            Self::RateLimited { .. } => "rate_limited",
            Self::Transient(_) => "transient",
            Self::Conflict(_) => "conflict",
            Self::Auth(_) => "auth",
            Self::NotFound(_) => "not_found",
            Self::Invalid(_) => "invalid",
            Self::Unowned(_) => "unowned",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ProviderError;

    #[test]
    fn rate_limited_messages_never_print_rust_options() {
        let none = ProviderError::RateLimited { retry_after: None };
        assert_eq!(none.to_string(), "rate limited by the provider");
        let hint = ProviderError::RateLimited {
            retry_after: Some(std::time::Duration::from_millis(89_200)),
        };
        assert_eq!(
            hint.to_string(),
            "rate limited by the provider (retry after 90s)"
        );
    }

    #[test]
    fn every_code_is_listed() {
        let all = [
            ProviderError::RateLimited { retry_after: None },
            ProviderError::Transient(String::new()),
            ProviderError::Conflict(String::new()),
            ProviderError::Auth(String::new()),
            ProviderError::NotFound(String::new()),
            ProviderError::Invalid(String::new()),
            ProviderError::Unowned(String::new()),
        ];
        let codes: Vec<_> = all.iter().map(ProviderError::code).collect();
        assert_eq!(codes, ProviderError::CODES);
    }
}
