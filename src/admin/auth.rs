//! Bearer-token authentication of the admin API: the drill routes (`/v1/drills`, `/v1/rearm`)
//! whenever a token is configured, the read routes (`/v1/status`, `/v1/events`, `/metrics`)
//! when `admin.require_token_for_reads` is set; `/healthz` and `/readyz` never.
//!
//! Tokens ([`AdminTokens`], read by the settings) are compared in constant time and never
//! printed; refusals do not echo what the caller sent. An accepted request carries the token's
//! name as its [`Caller`]: the actor the drill routes record.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::Caller;
use super::drills::ApiError;
use crate::config::AdminTokens;

/// The name of the token `headers` carry as `Authorization: Bearer <token>` (scheme
/// case-insensitive), if it is one of `tokens`.
pub fn authorized<'a>(tokens: &'a AdminTokens, headers: &HeaderMap) -> Option<&'a str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .and_then(|(_, value)| tokens.identify(value.trim()))
}

/// Middleware: with tokens configured, refuses requests without one of them with `401` and
/// `WWW-Authenticate: Bearer`, and marks the others with their [`Caller`]; without any, lets
/// everything through (the daemon only listens on loopback then, see
/// [`crate::config::check_admin_listen`]).
pub(crate) async fn require_token(
    State(tokens): State<AdminTokens>,
    mut request: Request,
    next: Next,
) -> Response {
    if tokens.is_empty() {
        return next.run(request).await;
    }
    match authorized(&tokens, request.headers()) {
        Some(name) => {
            let caller = Caller(name.to_owned());
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        None => {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AdminToken;

    fn headers(auth: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, auth.parse().expect("header"));
        h
    }

    #[test]
    fn only_the_right_bearer_token_is_authorized() {
        let t = AdminTokens::single(AdminToken::new("s3cret\n", "test").expect("token"));
        assert_eq!(authorized(&t, &headers("Bearer s3cret")), Some("admin"));
        assert_eq!(authorized(&t, &headers("bearer s3cret")), Some("admin"));
        assert_eq!(authorized(&t, &headers("Bearer s3cre")), None);
        assert_eq!(authorized(&t, &headers("Bearer s3cret2")), None);
        assert_eq!(authorized(&t, &headers("Basic s3cret")), None);
        assert_eq!(authorized(&t, &headers("s3cret")), None);
        assert_eq!(authorized(&t, &HeaderMap::new()), None);
    }
}
