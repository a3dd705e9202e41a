//! The admin API's bearer token: where it comes from, and the refusal to expose the admin API
//! without one.

use std::net::{IpAddr, SocketAddr};

use crate::ops::admin::{AdminToken, TokenError};

use super::{ADMIN_TOKEN_ENV, AdminSettings};

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
