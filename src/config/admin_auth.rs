//! The admin API's bearer token: the secret itself ([`AdminToken`]: constant-time comparison,
//! never printed, no `Display`, a redacted `Debug`), where it comes from, and the refusal to
//! expose the admin API without one. Checking requests against it is the admin API's job
//! (`admin::auth`).

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use subtle::ConstantTimeEq as _;

use super::{ADMIN_TOKEN_ENV, AdminSettings};

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

/// The admin token could not be resolved, or the admin API would be exposed without one.
#[derive(Debug, thiserror::Error)]
pub enum AdminAuthError {
    /// `admin.token_file` is unreadable or empty.
    #[error("admin.token_file: {0}")]
    TokenFile(TokenError),
    /// `GSLB_ADMIN_TOKEN` is set but empty (unset it to use `admin.token_file`).
    #[error("{ADMIN_TOKEN_ENV} is set but empty")]
    EmptyTokenEnv,
    /// `admin.listen` is not a loopback address and no token is configured.
    #[error(
        "admin.listen: {listen} is not a loopback address and no admin token is configured; \
         set admin.token_file or {ADMIN_TOKEN_ENV}, or listen on 127.0.0.1 (the drill API \
         must not be reachable without authentication)"
    )]
    ExposedWithoutToken {
        /// The configured address.
        listen: SocketAddr,
    },
}

/// The admin token: `env` (the value of `GSLB_ADMIN_TOKEN`, when set) takes precedence over
/// `admin.token_file`; `None` when neither is set. Both are trimmed.
///
/// # Errors
/// [`AdminAuthError::TokenFile`] when the file is unreadable or empty,
/// [`AdminAuthError::EmptyTokenEnv`].
pub fn resolve_admin_token(
    admin: &AdminSettings,
    env: Option<String>,
) -> Result<Option<AdminToken>, AdminAuthError> {
    if let Some(v) = env {
        return AdminToken::new(&v, ADMIN_TOKEN_ENV)
            .map(Some)
            .map_err(|_| AdminAuthError::EmptyTokenEnv);
    }
    match &admin.token_file {
        Some(path) => AdminToken::read_file(path)
            .map(Some)
            .map_err(AdminAuthError::TokenFile),
        None => Ok(None),
    }
}

/// Refuses a non-loopback `listen` address (including `0.0.0.0` and `::`) without a token.
///
/// # Errors
/// [`AdminAuthError::ExposedWithoutToken`].
pub fn check_admin_listen(
    listen: SocketAddr,
    token: Option<&AdminToken>,
) -> Result<(), AdminAuthError> {
    let loopback = match listen.ip() {
        IpAddr::V4(ip) => ip.is_loopback(),
        IpAddr::V6(ip) => {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    };
    if loopback || token.is_some() {
        Ok(())
    } else {
        Err(AdminAuthError::ExposedWithoutToken { listen })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
