//! Bearer-token authentication of the admin API's write routes (`/v1/drills`, `/v1/rearm`).
//!
//! The token ([`AdminToken`], read by the settings) is compared in constant time and never
//! printed; refusals do not echo what the caller sent. Read-only routes (`/metrics`,
//! `/healthz`, `/v1/status`) are not guarded here.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::drills::ApiError;
use crate::config::AdminToken;

/// Whether `headers` carry `Authorization: Bearer <token>` (scheme case-insensitive).
pub fn authorized(token: &AdminToken, headers: &HeaderMap) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .is_some_and(|(scheme, value)| {
            scheme.eq_ignore_ascii_case("bearer") && token.matches(value.trim())
        })
}

/// Middleware: with a token configured, refuses requests without the right bearer token with
/// `401` and `WWW-Authenticate: Bearer`; without one, lets everything through (the daemon only
/// listens on loopback then, see [`crate::config::check_admin_listen`]).
pub(crate) async fn require_token(
    State(token): State<Option<AdminToken>>,
    request: Request,
    next: Next,
) -> Response {
    match &token {
        Some(t) if !authorized(t, request.headers()) => {
            tracing::warn!(
                method = %request.method(),
                path = %request.uri().path(),
                "admin API request refused: missing or wrong bearer token"
            );
            let mut response = ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "a valid bearer token is required (Authorization: Bearer <token>)",
            )
            .into_response();
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
            response
        }
        _ => next.run(request).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(auth: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, auth.parse().expect("header"));
        h
    }

    #[test]
    fn only_the_right_bearer_token_is_authorized() {
        let t = AdminToken::new("s3cret\n", "test").expect("token");
        assert!(authorized(&t, &headers("Bearer s3cret")));
        assert!(authorized(&t, &headers("bearer s3cret")));
        assert!(!authorized(&t, &headers("Bearer s3cre")));
        assert!(!authorized(&t, &headers("Bearer s3cret2")));
        assert!(!authorized(&t, &headers("Basic s3cret")));
        assert!(!authorized(&t, &headers("s3cret")));
        assert!(!authorized(&t, &HeaderMap::new()));
    }
}
