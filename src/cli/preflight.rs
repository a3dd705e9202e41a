//! What `gslb run` checks of its settings before it starts, beyond their syntax: the admin
//! tokens and the exposure of the admin API, the admin TLS certificate and key, and the webhook
//! URLs. `gslb check --config` runs the same checks, so a settings file it accepts is one `run`
//! accepts (issue 28: `check` used to pass settings `run` refused).
//!
//! Must not: start anything, bind an address or reach the network.

use crate::admin::tls::CertStore;
use crate::config::{AdminAuth, Settings};

/// Every problem of `settings` that would stop `gslb run` (exit code 2), as one line each, or
/// the admin tokens it resolved. `GSLB_ADMIN_TOKEN` and the webhooks' `url_env` variables are
/// read from the environment.
///
/// # Errors
/// Every problem found, each naming the key, and the file where one is involved; a secret is
/// never quoted.
pub fn check(settings: &Settings) -> Result<AdminAuth, Vec<String>> {
    let mut problems = Vec::new();
    let auth = settings
        .admin_auth()
        .map_err(|e| problems.push(e.to_string()))
        .ok();
    if let (Some(cert), Some(key)) = (&settings.admin.tls_cert_file, &settings.admin.tls_key_file)
        && let Err(e) = CertStore::load(cert, key)
    {
        problems.push(e.to_string());
    }
    if let Err(e) = settings.notify.resolve(|v| std::env::var(v).ok()) {
        problems.push(e.to_string());
    }
    match auth {
        Some(auth) if problems.is_empty() => Ok(auth),
        _ => Err(problems),
    }
}
