//! The one place where a failed Route 53 SDK call becomes a [`ProviderError`].
//!
//! [`classify`] decides both the class the reconciler sees and, through
//! [`retry_in_place`], whether [`crate::api`] tries the same call again. It must not retry or
//! log anything itself.

use std::error::Error as StdError;
use std::time::Duration;

use aws_credential_types::provider::error::CredentialsError;
use aws_sdk_route53::config::http::HttpResponse;
use aws_sdk_route53::error::{ProvideErrorMetadata, SdkError};
use gslb_provider::{ProviderError, retry_after_secs};

/// Error codes Route 53 (and the AWS front door before it) uses for "slow down". Route 53
/// answers HTTP 400 `Throttling` "Rate exceeded" (Route 53 API Reference, "Common Errors").
const THROTTLED: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "RequestLimitExceeded",
    "TooManyRequestsException",
];

/// Codes meaning "try again shortly": `PriorRequestNotComplete` (the zone is still applying
/// an earlier change, ChangeResourceRecordSets reference) and the generic AWS 5xx codes.
const TRANSIENT: &[&str] = &[
    "PriorRequestNotComplete",
    "ServiceUnavailable",
    "InternalFailure",
    "InternalError",
    "RequestTimeout",
];

/// Codes meaning a fence was lost: a stale `HealthCheckVersion`, or a change batch whose
/// DELETE no longer matches the record (ChangeResourceRecordSets: "InvalidChangeBatch").
const CONFLICT: &[&str] = &["HealthCheckVersionMismatch", "InvalidChangeBatch"];

/// Codes for objects that do not exist.
const NOT_FOUND: &[&str] = &["NoSuchHealthCheck", "NoSuchHostedZone", "NoSuchChange"];

/// Codes for missing, wrong or insufficient credentials (AWS common errors).
const AUTH: &[&str] = &[
    "AccessDenied",
    "AccessDeniedException",
    "InvalidClientTokenId",
    "UnrecognizedClientException",
    "SignatureDoesNotMatch",
    "IncompleteSignature",
    "InvalidSignatureException",
    "MissingAuthenticationToken",
    "ExpiredToken",
    "ExpiredTokenException",
    "NotAuthorized",
    "OptInRequired",
];

/// What an operator reads when the SDK's default credential chain found nothing usable.
const NO_CREDENTIALS: &str = "no usable AWS credentials (set AWS_ACCESS_KEY_ID and \
    AWS_SECRET_ACCESS_KEY, or AWS_PROFILE naming a profile in ~/.aws/config or \
    ~/.aws/credentials, or run with a web identity, container or instance role)";

/// Classifies a failed call to operation `op` (used in the message, e.g. `"GetHealthCheck"`)
/// sent to `endpoint` (named when the request was not delivered: a DNS failure or a refused
/// connection says which host it was for).
///
/// - `Throttling` and friends, HTTP 429 → [`ProviderError::RateLimited`] (with the
///   `Retry-After` header when present);
/// - `PriorRequestNotComplete`, 5xx, attempt timeouts, connection failures, credential
///   provider time-outs → [`ProviderError::Transient`];
/// - `HealthCheckVersionMismatch`, `InvalidChangeBatch` → [`ProviderError::Conflict`];
/// - `NoSuchHealthCheck`, `NoSuchHostedZone`, `NoSuchChange` → [`ProviderError::NotFound`];
/// - access denied, bad or expired tokens and signatures, HTTP 401/403, credentials that
///   could not be loaded → [`ProviderError::Auth`];
/// - `InvalidInput` and every other 4xx, unreadable responses, requests that could not be
///   built → [`ProviderError::Invalid`].
pub(crate) fn classify<E>(
    op: &str,
    endpoint: &str,
    err: &SdkError<E, HttpResponse>,
) -> ProviderError
where
    E: ProvideErrorMetadata + StdError + 'static,
{
    match err {
        SdkError::ServiceError(_) => {
            let code = err.code().unwrap_or("");
            let status = err.raw_response().map(|r| r.status().as_u16()).unwrap_or(0);
            let detail = if code.is_empty() {
                // No error code: the SDK could not read the answer (e.g. a malformed body).
                format!("{op}: unreadable answer (HTTP {status}): {}", chain(err))
            } else {
                format!(
                    "{op}: {code} (HTTP {status}): {}",
                    err.message().unwrap_or("")
                )
            };
            if THROTTLED.contains(&code) || status == 429 {
                ProviderError::RateLimited {
                    retry_after: retry_after(err.raw_response()),
                }
            } else if TRANSIENT.contains(&code) || status >= 500 {
                ProviderError::Transient(detail)
            } else if CONFLICT.contains(&code) {
                ProviderError::Conflict(detail)
            } else if NOT_FOUND.contains(&code) {
                ProviderError::NotFound(detail)
            } else if AUTH.contains(&code) || status == 401 || status == 403 {
                ProviderError::Auth(detail)
            } else {
                ProviderError::Invalid(detail)
            }
        }
        SdkError::TimeoutError(_) => ProviderError::Transient(format!("{op}: attempt timed out")),
        SdkError::DispatchFailure(failure) => match credentials_error(err) {
            Some(CredentialsError::ProviderTimedOut(_)) => {
                ProviderError::Transient(format!("{op}: credential provider timed out"))
            }
            Some(creds) => ProviderError::Auth(format!("{op}: {NO_CREDENTIALS}: {}", chain(creds))),
            None if failure.is_user() => {
                ProviderError::Invalid(format!("{op}: request rejected: {}", chain(err)))
            }
            None => ProviderError::Transient(format!(
                "{op}: request to {endpoint} not delivered: {}",
                chain(err)
            )),
        },
        SdkError::ResponseError(_) => {
            let status = err.raw_response().map(|r| r.status().as_u16()).unwrap_or(0);
            let detail = format!("{op}: unreadable response (HTTP {status}): {}", chain(err));
            if status >= 500 {
                ProviderError::Transient(detail)
            } else {
                ProviderError::Invalid(detail)
            }
        }
        _ => ProviderError::Invalid(format!("{op}: request could not be built: {}", chain(err))),
    }
}

/// Whether the same call should be tried again right away (after a backoff): only for
/// [`ProviderError::RateLimited`] and [`ProviderError::Transient`]. A conflict is retryable
/// by the reconciler, but only after a fresh observe, so never in place.
pub(crate) fn retry_in_place(err: &ProviderError) -> bool {
    matches!(
        err,
        ProviderError::RateLimited { .. } | ProviderError::Transient(_)
    )
}

/// The `Retry-After` header in whole seconds, when the response has one, capped at
/// [`RETRY_AFTER_MAX`](gslb_provider::RETRY_AFTER_MAX) (a number too large for `u64` is taken
/// as the cap). Route 53 itself does not send it; proxies in front of an emulator may.
fn retry_after(response: Option<&HttpResponse>) -> Option<Duration> {
    let value = response?.headers().get("retry-after")?.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        Some(retry_after_secs(value.parse::<u64>().unwrap_or(u64::MAX)))
    } else {
        None
    }
}

/// The credential-provider error somewhere in `err`'s source chain, if that is why the
/// request was never sent.
fn credentials_error<'a>(err: &'a (dyn StdError + 'static)) -> Option<&'a CredentialsError> {
    let mut next: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = next {
        if let Some(creds) = e.downcast_ref::<CredentialsError>() {
            return Some(creds);
        }
        next = e.source();
    }
    None
}

/// `err` and its sources joined with `: `, for messages (the SDK's own `Display` says only
/// "dispatch failure").
fn chain(err: &(dyn StdError + 'static)) -> String {
    let mut parts = vec![err.to_string()];
    let mut next = err.source();
    while let Some(e) = next {
        parts.push(e.to_string());
        next = e.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_route53::operation::get_health_check::GetHealthCheckError;

    #[test]
    fn timeouts_are_transient_and_retried_in_place() {
        let err = SdkError::<GetHealthCheckError, HttpResponse>::timeout_error("slow");
        let class = classify("GetHealthCheck", "http://127.0.0.1:1", &err);
        assert!(
            matches!(&class, ProviderError::Transient(m) if m.contains("GetHealthCheck")),
            "{class:?}"
        );
        assert!(retry_in_place(&class));
    }

    #[test]
    fn a_huge_retry_after_is_capped_at_an_hour() {
        let header = |v: &str| {
            let mut r = HttpResponse::new(
                429u16.try_into().expect("status"),
                aws_smithy_types::body::SdkBody::empty(),
            );
            r.headers_mut().insert("retry-after", v.to_owned());
            retry_after(Some(&r))
        };
        let cap = Some(gslb_provider::RETRY_AFTER_MAX);
        assert_eq!(header("18446744073709551615"), cap);
        assert_eq!(header("31536000"), cap);
        assert_eq!(header("7"), Some(Duration::from_secs(7)));
        assert_eq!(header("soon"), None);
    }

    #[test]
    fn conflicts_are_not_retried_in_place() {
        assert!(!retry_in_place(&ProviderError::Conflict("x".into())));
        assert!(retry_in_place(&ProviderError::RateLimited {
            retry_after: None
        }));
    }
}
