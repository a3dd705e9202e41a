//! Bearer-token authentication of the admin API's write routes (`/v1/drills`, `/v1/rearm`).
//!
//! The token is compared in constant time and never printed: [`AdminToken`] has no `Display`,
//! its `Debug` is redacted, and refusals do not echo what the caller sent. Read-only routes
//! (`/metrics`, `/healthz`, `/v1/status`) are not guarded here.

use std::fmt;
use std::path::{Path, PathBuf};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq as _;

use super::drills::ApiError;

/// A shared secret callers present as `Authorization: Bearer <token>`.
#[derive(Clone, PartialEq, Eq)]
pub struct AdminToken(String);

impl fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AdminToken(<redacted>)")
    }
}

/// A token could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The token file could not be read.
    #[error("cannot read the admin token file {}: {source}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The token (file or variable) is empty or only whitespace.
    #[error("the admin token from {from} is empty")]
    Empty {
        /// Where it came from: a file path or `GSLB_ADMIN_TOKEN`.
        from: String,
    },
}

impl AdminToken {
    /// The token `value` with surrounding whitespace trimmed; `from` names its source in errors
    /// (e.g. `GSLB_ADMIN_TOKEN`).
    ///
    /// # Errors
    /// [`TokenError::Empty`] when nothing is left after trimming.
    pub fn new(value: &str, from: &str) -> Result<Self, TokenError> {
        let t = value.trim();
        if t.is_empty() {
            return Err(TokenError::Empty { from: from.into() });
        }
        Ok(Self(t.to_owned()))
    }

    /// Reads a token file (its contents trimmed, so a trailing newline does not count).
    ///
    /// # Errors
    /// [`TokenError::Unreadable`] naming the file, or [`TokenError::Empty`].
    pub fn read_file(path: &Path) -> Result<Self, TokenError> {
        let text = std::fs::read_to_string(path).map_err(|source| TokenError::Unreadable {
            path: path.to_path_buf(),
            source,
        })?;
        Self::new(&text, &path.display().to_string())
    }

    /// Whether `candidate` is this token, in time independent of where they differ.
    pub fn matches(&self, candidate: &str) -> bool {
        self.0.as_bytes().ct_eq(candidate.as_bytes()).into()
    }

    /// The secret, for the one place that sends it (the CLI's `Authorization` header).
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

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

    #[test]
    fn the_token_never_shows_in_debug_or_errors() {
        let t = AdminToken::new("s3cret", "test").expect("token");
        assert_eq!(format!("{t:?}"), "AdminToken(<redacted>)");
        assert_eq!(format!("{:?}", Some(t)), "Some(AdminToken(<redacted>))");
    }

    #[test]
    fn token_files_are_trimmed_and_must_not_be_empty() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("token");
        std::fs::write(&path, "  abc \n").expect("write");
        assert!(AdminToken::read_file(&path).expect("read").matches("abc"));
        std::fs::write(&path, "\n").expect("write");
        let e = AdminToken::read_file(&path).expect_err("empty");
        assert_eq!(
            e.to_string(),
            format!("the admin token from {} is empty", path.display())
        );
        let missing = dir.path().join("missing");
        let e = AdminToken::read_file(&missing).expect_err("missing");
        assert!(
            e.to_string().starts_with(&format!(
                "cannot read the admin token file {}: ",
                missing.display()
            )),
            "{e}"
        );
    }
}
