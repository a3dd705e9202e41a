//! Cloudflare answers and transport failures → [`ProviderError`], decided in this one place.
//!
//! - HTTP 429 → [`ProviderError::RateLimited`] with the `Retry-After` header (whole seconds);
//! - 5xx, timeouts, connection failures → [`ProviderError::Transient`];
//! - 401, 403, and Cloudflare's authentication error codes (9103, 9106, 9109, 10000, 6003,
//!   6111, 6103) whatever the status → [`ProviderError::Auth`];
//! - 404 → [`ProviderError::NotFound`];
//! - 409 → [`ProviderError::Conflict`];
//! - every other 4xx (400/1002 validation, 412/1005 pool still referenced, ...), a
//!   `success: false` 2xx and unreadable bodies → [`ProviderError::Invalid`].

use std::time::Duration;

use gslb_provider::{ProviderError, retry_after_secs};

use crate::models::Envelope;

/// Cloudflare error codes that mean "bad, expired or under-privileged token" (Cloudflare API
/// docs and observed answers: 9103 unknown X-Auth-Key, 9106/9109 missing or invalid headers,
/// 10000 authentication error, 6003/6103/6111 malformed Authorization header).
const AUTH_CODES: [i64; 7] = [9103, 9106, 9109, 10000, 6003, 6103, 6111];

/// Classifies a non-success answer of operation `op` (e.g. `"list pools"`).
pub(crate) fn classify_answer(
    op: &str,
    status: u16,
    retry_after: Option<Duration>,
    envelope: Option<&Envelope>,
) -> ProviderError {
    let detail = match envelope {
        Some(e) if !e.errors.is_empty() => format!("{op}: HTTP {status}: {}", e.describe()),
        Some(_) => format!("{op}: HTTP {status}"),
        None => format!("{op}: HTTP {status}, body is not a Cloudflare envelope"),
    };
    let auth_code = envelope.is_some_and(|e| {
        e.errors
            .iter()
            .any(|m| m.code.is_some_and(|c| AUTH_CODES.contains(&c)))
    });
    let auth = || {
        ProviderError::Auth(format!(
            "{detail} (check the API token and its permissions: Load Balancing: Monitors and \
             Pools Edit on the account, Load Balancers Edit on the zone)"
        ))
    };
    match status {
        429 => ProviderError::RateLimited { retry_after },
        500..=599 => ProviderError::Transient(detail),
        401 | 403 => auth(),
        _ if auth_code => auth(),
        404 => ProviderError::NotFound(detail),
        409 => ProviderError::Conflict(detail),
        _ => ProviderError::Invalid(detail),
    }
}

/// Classifies a request that got no answer: timeouts and connection failures are transient,
/// a request that could not be built is invalid.
pub(crate) fn classify_transport(op: &str, err: &reqwest::Error) -> ProviderError {
    let mut detail = format!("{op}: {err}");
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        detail.push_str(&format!(": {s}"));
        source = s.source();
    }
    if err.is_builder() {
        ProviderError::Invalid(detail)
    } else {
        ProviderError::Transient(detail)
    }
}

/// `Retry-After` in whole seconds (Cloudflare sends seconds), capped at
/// [`RETRY_AFTER_MAX`](gslb_provider::RETRY_AFTER_MAX); an HTTP date is not used. A number
/// too large for `u64` is taken as the cap.
pub(crate) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let v = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        Some(retry_after_secs(v.parse::<u64>().unwrap_or(u64::MAX)))
    } else {
        None
    }
}

/// Whether the same call is tried again in place (after a backoff): transient failures only.
/// A 429 is not: Cloudflare keeps blocking for its whole window, so the call fails at once and
/// the reconciler waits out `Retry-After`.
pub(crate) fn retry_in_place(err: &ProviderError) -> bool {
    matches!(err, ProviderError::Transient(_))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::ApiMessage;

    fn env(code: i64) -> Envelope<'static> {
        Envelope {
            success: false,
            errors: vec![ApiMessage {
                code: Some(code),
                message: Some("m".into()),
            }],
            result: None,
        }
    }

    #[test]
    fn statuses_and_codes_map_to_classes() {
        let secs = Some(Duration::from_secs(42));
        assert_eq!(
            classify_answer("x", 429, secs, None),
            ProviderError::RateLimited { retry_after: secs }
        );
        assert_eq!(classify_answer("x", 502, None, None).code(), "transient");
        assert_eq!(
            classify_answer("x", 403, None, Some(&env(10000))).code(),
            "auth"
        );
        assert_eq!(
            classify_answer("x", 400, None, Some(&env(6003))).code(),
            "auth"
        );
        assert_eq!(
            classify_answer("x", 404, None, Some(&env(1001))).code(),
            "not_found"
        );
        assert_eq!(
            classify_answer("x", 412, None, Some(&env(1005))).code(),
            "invalid"
        );
        assert_eq!(
            classify_answer("x", 400, None, Some(&env(1002))).code(),
            "invalid"
        );
        assert!(!retry_in_place(&classify_answer("x", 429, secs, None)));
        assert!(retry_in_place(&classify_answer("x", 503, None, None)));
    }

    #[test]
    fn a_huge_retry_after_is_capped_at_an_hour() {
        let header = |v: &str| {
            let mut h = reqwest::header::HeaderMap::new();
            h.insert(reqwest::header::RETRY_AFTER, v.parse().unwrap());
            retry_after(&h)
        };
        let cap = Some(gslb_provider::RETRY_AFTER_MAX);
        assert_eq!(header("18446744073709551615"), cap);
        assert_eq!(header("99999999999999999999999"), cap);
        assert_eq!(header("31536000"), cap);
        assert_eq!(header(" 42 "), Some(Duration::from_secs(42)));
        assert_eq!(header("Wed, 21 Oct 2026 07:28:00 GMT"), None);
    }
}
