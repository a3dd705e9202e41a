//! `[route53]` and `[cloudflare]`: the provider client settings an operator chooses, as plain
//! data. Credentials are never here.
//!
//! The library never names the adapters (its package depends on them for the binary only;
//! `tests/layout.rs` checks it): the binary, the one place that names `gslb_route53` and
//! `gslb_cloudflare`, turns each table into the adapter's own settings with one call (see
//! [`Route53Settings`] and [`CloudflareSettings`]). The defaults below are the adapters'
//! defaults, written again here as named functions that cite their source; a test
//! (`tests/provider_settings.rs`) checks that the two agree.

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::dataplane::{DataPlaneSettings, FailoverMode, check_modes};

/// The most `route53.requests_per_second` may ask for against Route 53 itself: 5, the API's
/// limit per AWS account (Route 53 Developer Guide, "Quotas").
pub const ROUTE53_MAX_RPS: u32 = 5;

/// `[route53]`.
///
/// The binary's conversion point: `gslb_route53::Route53Settings::configured(endpoint_url,
/// region, requests_per_second, change_timeout)`; the adapter's other settings (polling,
/// retries, backoff, attempt timeout) keep their defaults.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route53Settings {
    /// API endpoint override (an emulator in tests). Default: the AWS endpoint.
    #[serde(default)]
    pub endpoint_url: Option<String>,
    /// Signing region. Default `us-east-1` (Route 53's control plane lives there).
    #[serde(default = "default_region")]
    pub region: String,
    /// Calls per second through the account's one rate limiter, shared by every Route 53
    /// binding (no burst). Default 2, well under Route 53's 5 requests per second per AWS
    /// account; at most [`ROUTE53_MAX_RPS`] unless `endpoint_url` names an emulator.
    #[serde(default = "default_rps")]
    pub requests_per_second: NonZeroU32,
    /// Deadline for a change batch to reach INSYNC. Default 120 s (changes are typically
    /// INSYNC within 60 s).
    #[serde(
        default = "default_change_timeout",
        with = "gslb_core::policy::duration"
    )]
    pub change_timeout: Duration,
    /// The failover mode per service (`[route53.modes] api = "data_plane"`); a service not
    /// named keeps the default, `verdict_check`. See [`FailoverMode`].
    #[serde(default)]
    pub modes: BTreeMap<String, FailoverMode>,
    /// The data-plane mode's vote listener and instances; needed when a mode is
    /// `data_plane`. Default: none.
    #[serde(default)]
    pub data_plane: Option<DataPlaneSettings>,
}

impl Default for Route53Settings {
    fn default() -> Self {
        Self {
            endpoint_url: None,
            region: default_region(),
            requests_per_second: default_rps(),
            change_timeout: default_change_timeout(),
            modes: BTreeMap::new(),
            data_plane: None,
        }
    }
}

impl Route53Settings {
    /// Checks that `endpoint_url`, when set, is an http(s) URL, `region` is not empty and
    /// `requests_per_second` is within Route 53's limit (or an emulator is named).
    ///
    /// # Errors
    /// The first value out of range, as `route53.<key>: reason`.
    pub(super) fn check(&self) -> Result<(), String> {
        if let Some(u) = &self.endpoint_url
            && !is_http_url(u)
        {
            return Err(format!("route53.endpoint_url: '{u}' is not an http(s) URL"));
        }
        if self.region.is_empty() {
            return Err("route53.region: must not be empty".into());
        }
        let rps = self.requests_per_second.get();
        if rps > ROUTE53_MAX_RPS && self.endpoint_url.is_none() {
            return Err(format!(
                "route53.requests_per_second: {rps} is more than the {ROUTE53_MAX_RPS} requests per \
                 second Route 53 allows per AWS account; more is allowed only with \
                 route53.endpoint_url (an emulator)"
            ));
        }
        if let Some(dp) = &self.data_plane {
            dp.check()?;
        }
        check_modes(&self.modes, self.data_plane.as_ref())
    }

    /// `service`'s failover mode (default `verdict_check`).
    pub fn mode(&self, service: &str) -> FailoverMode {
        self.modes.get(service).copied().unwrap_or_default()
    }

    /// `[route53.data_plane]` when `service` is in data-plane mode.
    pub fn data_plane_of(&self, service: &str) -> Option<&DataPlaneSettings> {
        self.data_plane
            .as_ref()
            .filter(|_| self.mode(service) == FailoverMode::DataPlane)
    }
}

/// `[cloudflare]`. The API token is never in this file: it comes from the environment
/// variable `token_env` or from `token_file`.
///
/// The binary's conversion point: the token from
/// `gslb_cloudflare::ApiToken::from_file_or_env(token_file.as_deref(), &token_env)`, then
/// `gslb_cloudflare::CloudflareSettings::configured(api_base, requests_per_window, token)`;
/// the adapter's other settings (retries, backoff, attempt timeout) keep their defaults.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloudflareSettings {
    /// API base URL. Default `https://api.cloudflare.com/client/v4`; tests point it at a fake.
    #[serde(default = "default_cloudflare_api")]
    pub api_base: String,
    /// Environment variable holding the API token. Default `CLOUDFLARE_API_TOKEN`.
    #[serde(default = "default_token_env")]
    pub token_env: String,
    /// A file holding the API token (e.g. a mounted secret), read instead of `token_env` when
    /// set; relative to the settings file.
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// Requests per 5 minutes through the token's one rate limiter, shared by every binding on
    /// the token. Default 300, a quarter of Cloudflare's 1,200 requests per 5 minutes per
    /// token; at most 1,200.
    #[serde(default = "default_cloudflare_requests")]
    pub requests_per_window: NonZeroU32,
}

impl Default for CloudflareSettings {
    fn default() -> Self {
        Self {
            api_base: default_cloudflare_api(),
            token_env: default_token_env(),
            token_file: None,
            requests_per_window: default_cloudflare_requests(),
        }
    }
}

/// Cloudflare's rate limit: 1,200 requests per 5 minutes per user or token (Cloudflare API
/// docs, "Rate limits"); the most `cloudflare.requests_per_window` may ask for.
const CLOUDFLARE_REQUESTS_LIMIT: u32 = 1200;

impl CloudflareSettings {
    /// Checks that `api_base` is an http(s) URL and `requests_per_window` is at most
    /// [`CLOUDFLARE_REQUESTS_LIMIT`].
    ///
    /// # Errors
    /// The first value out of range, as `cloudflare.<key>: reason`.
    pub(super) fn check(&self) -> Result<(), String> {
        if !is_http_url(&self.api_base) {
            return Err(format!(
                "cloudflare.api_base: '{}' is not an http(s) URL",
                self.api_base
            ));
        }
        if self.requests_per_window.get() > CLOUDFLARE_REQUESTS_LIMIT {
            return Err(format!(
                "cloudflare.requests_per_window: at most {CLOUDFLARE_REQUESTS_LIMIT} (Cloudflare's limit per token and 5 minutes)"
            ));
        }
        Ok(())
    }
}

/// Whether `u` parses as a URL with the `http` or `https` scheme.
fn is_http_url(u: &str) -> bool {
    url::Url::parse(u).is_ok_and(|u| matches!(u.scheme(), "http" | "https"))
}

/// `https://api.cloudflare.com/client/v4`, Cloudflare's API base (Cloudflare API docs), the
/// value of `gslb_cloudflare::DEFAULT_API_BASE`.
fn default_cloudflare_api() -> String {
    "https://api.cloudflare.com/client/v4".into()
}

/// `CLOUDFLARE_API_TOKEN`, the variable Cloudflare's Terraform provider and wrangler read.
fn default_token_env() -> String {
    "CLOUDFLARE_API_TOKEN".into()
}

/// 300 requests per 5 minutes, a quarter of [`CLOUDFLARE_REQUESTS_LIMIT`], leaving room for
/// other bindings, Terraform and the dashboard on the same token; the value of
/// `gslb_cloudflare::DEFAULT_REQUESTS_PER_WINDOW`.
fn default_cloudflare_requests() -> NonZeroU32 {
    NonZeroU32::new(300).unwrap_or(NonZeroU32::MIN)
}

/// `us-east-1`, where Route 53's control plane is served (Route 53 API Reference,
/// "Endpoints"); `gslb_route53::Route53Settings::default()`'s region.
fn default_region() -> String {
    "us-east-1".into()
}

/// 2 requests per second, well under the 5 per second per account Route 53 historically
/// allowed (Route 53 Developer Guide, "Quotas"); `gslb_route53::Route53Settings::default()`'s.
fn default_rps() -> NonZeroU32 {
    NonZeroU32::new(2).unwrap_or(NonZeroU32::MIN)
}

/// 120 s (AWS says changes are typically INSYNC within 60 s);
/// `gslb_route53::Route53Settings::default()`'s change timeout.
fn default_change_timeout() -> Duration {
    Duration::from_secs(120)
}
