//! `gslb healthcheck`: one `GET` of the admin API's `/healthz`, for a container `HEALTHCHECK`
//! in an image without curl or wget. It reads the settings only to find the admin address; it
//! never touches policies, providers or state.
//!
//! Exit codes (Docker's): 0 healthy (HTTP 200), 1 anything else; Docker reserves 2, so a
//! settings problem is 1 too.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use crate::cli::drill::{DEFAULT_ADMIN_URL, innermost_cause};
use crate::config::{Settings, SettingsError};

/// How long the whole check may take, connection included: 3 s, under the Dockerfile's
/// `HEALTHCHECK --timeout=5s`.
pub const TIMEOUT: Duration = Duration::from_secs(3);

/// Why the check failed.
#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    /// The settings file (for the admin address) cannot be read.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// No connection, no answer in time, or a bad URL.
    #[error("{url}: {reason}")]
    Unreachable {
        /// The URL asked.
        url: String,
        /// Why.
        reason: String,
    },
    /// An answer other than 200.
    #[error("{url}: HTTP {status}")]
    Status {
        /// The URL asked.
        url: String,
        /// The status received.
        status: u16,
    },
}

/// The URL checked when none is given: `/healthz` on `admin.listen` of `config` (an
/// unspecified address such as `0.0.0.0` is reached on the loopback address of its family;
/// `https` when `admin.tls_cert_file` is set), or on [`DEFAULT_ADMIN_URL`] without a settings
/// file.
///
/// # Errors
/// [`HealthError::Settings`] when `config` cannot be loaded.
pub fn default_url(config: Option<&Path>) -> Result<String, HealthError> {
    let Some(file) = config else {
        return Ok(format!("{DEFAULT_ADMIN_URL}/healthz"));
    };
    let admin = Settings::load(file)?.admin;
    let listen = admin.listen;
    let scheme = if admin.tls_cert_file.is_some() {
        "https"
    } else {
        "http"
    };
    let ip = match listen.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    Ok(format!(
        "{scheme}://{}/healthz",
        SocketAddr::new(ip, listen.port())
    ))
}

/// `GET url` once (no proxy, [`TIMEOUT`]); `Ok` with the URL on HTTP 200. Over `https` the
/// certificate is not verified: the check sends no secret and reads only the status, and the
/// admin API's certificate is rarely issued for the loopback address it is checked on.
///
/// # Errors
/// [`HealthError::Unreachable`] or [`HealthError::Status`].
pub async fn check(url: &str) -> Result<String, HealthError> {
    let unreachable = |reason: String| HealthError::Unreachable {
        url: url.to_owned(),
        reason,
    };
    let client = reqwest::Client::builder()
        .timeout(TIMEOUT)
        .no_proxy()
        .tls_danger_accept_invalid_certs(true)
        .build()
        .map_err(|e| unreachable(innermost_cause(&e)))?;
    let response = client
        .get(url)
        .send()
        .await
        .map_err(|e| unreachable(innermost_cause(&e)))?;
    match response.status().as_u16() {
        200 => Ok(url.to_owned()),
        status => Err(HealthError::Status {
            url: url.to_owned(),
            status,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_url_is_https_when_the_admin_api_has_tls() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("gslb.toml");
        std::fs::write(&file, "[admin]\nlisten = \"0.0.0.0:9464\"\n").expect("write");
        assert_eq!(
            default_url(Some(&file)).expect("url"),
            "http://127.0.0.1:9464/healthz"
        );
        std::fs::write(
            &file,
            "[admin]\nlisten = \"[::]:9464\"\ntls_cert_file = \"tls.crt\"\ntls_key_file = \"tls.key\"\n",
        )
        .expect("write");
        assert_eq!(
            default_url(Some(&file)).expect("url"),
            "https://[::1]:9464/healthz"
        );
    }
}
