//! Daemon settings (not policies): read with the `config` crate from a TOML file layered with
//! `GSLB_*` environment variables (`GSLB_VANTAGE`, `GSLB_ADMIN__LISTEN`,
//! `GSLB_ROUTE53__ENDPOINT_URL`, `GSLB_POLICIES=a.toml,b/`; `__` separates nesting levels).
//!
//! Credentials are never in this file: Route 53 uses the standard AWS credential chain
//! (environment, shared profile, web identity, container or instance role).

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::model::VantageId;
use crate::probe::DnsSettings;

/// The daemon's settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// This instance's vantage-point name, e.g. `aws-ap-northeast-2`. Default `local`.
    #[serde(default = "default_vantage")]
    pub vantage: VantageId,
    /// Policy files or folders of `*.toml`; relative paths are relative to the settings file.
    /// Default `["policies"]`.
    #[serde(default = "default_policies")]
    pub policies: Vec<PathBuf>,
    /// Admin HTTP API.
    #[serde(default)]
    pub admin: AdminSettings,
    /// How probes resolve endpoint names.
    #[serde(default)]
    pub dns: DnsSettings,
    /// Route 53 client settings.
    #[serde(default)]
    pub route53: Route53Settings,
    /// Cloudflare client settings.
    #[serde(default)]
    pub cloudflare: CloudflareSettings,
    /// Reconciler settings.
    #[serde(default)]
    pub reconcile: ReconcileSettings,
}

/// `[admin]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminSettings {
    /// Listen address of `/metrics`, `/healthz`, `/v1/status`. Default `127.0.0.1:9464`.
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
}

impl Default for AdminSettings {
    fn default() -> Self {
        Self {
            listen: default_listen(),
        }
    }
}

/// `[route53]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route53Settings {
    /// API endpoint override (an emulator in tests). Default: the AWS endpoint.
    #[serde(default)]
    pub endpoint_url: Option<String>,
    /// Signing region. Default `us-east-1` (Route 53's control plane lives there).
    #[serde(default = "default_region")]
    pub region: String,
    /// Calls per second through the rate limiter. Default 2, well under the historical
    /// 5 requests/second per account.
    #[serde(default = "default_rps")]
    pub requests_per_second: NonZeroU32,
    /// Deadline for a change batch to reach INSYNC. Default 120 s (changes are typically
    /// INSYNC within 60 s).
    #[serde(default = "default_change_timeout", with = "humantime_serde")]
    pub change_timeout: Duration,
}

impl Default for Route53Settings {
    fn default() -> Self {
        Self {
            endpoint_url: None,
            region: default_region(),
            requests_per_second: default_rps(),
            change_timeout: default_change_timeout(),
        }
    }
}

/// `[cloudflare]`. The API token is never in this file: it comes from the environment
/// variable `token_env` or from `token_file`.
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
    /// Requests per 5 minutes per load balancer binding through the rate limiter. Default 300,
    /// a quarter of Cloudflare's 1,200 requests per 5 minutes per token; at most 1,200.
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

fn default_cloudflare_api() -> String {
    gslb_cloudflare::DEFAULT_API_BASE.into()
}
fn default_token_env() -> String {
    "CLOUDFLARE_API_TOKEN".into()
}
fn default_cloudflare_requests() -> NonZeroU32 {
    NonZeroU32::new(gslb_cloudflare::DEFAULT_REQUESTS_PER_WINDOW).unwrap_or(NonZeroU32::MIN)
}

/// `[reconcile]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReconcileSettings {
    /// Period of the resync read when nothing changes. Default 60 s; at least 100 ms.
    #[serde(default = "default_resync", with = "humantime_serde")]
    pub resync: Duration,
}

impl Default for ReconcileSettings {
    fn default() -> Self {
        Self {
            resync: default_resync(),
        }
    }
}

fn default_vantage() -> VantageId {
    VantageId("local".into())
}
fn default_policies() -> Vec<PathBuf> {
    vec![PathBuf::from("policies")]
}
fn default_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 9464))
}
fn default_region() -> String {
    "us-east-1".into()
}
fn default_rps() -> NonZeroU32 {
    NonZeroU32::new(2).unwrap_or(NonZeroU32::MIN)
}
fn default_change_timeout() -> Duration {
    Duration::from_secs(120)
}
fn default_resync() -> Duration {
    Duration::from_secs(60)
}

/// Environment variables that configure the command line, not the settings, and so are not
/// read as settings keys.
pub const NOT_SETTINGS: [&str; 2] = ["GSLB_CONFIG", "GSLB_LOG"];

fn settings_env() -> config::Map<String, String> {
    std::env::vars()
        .filter(|(k, _)| k.starts_with("GSLB_") && !NOT_SETTINGS.contains(&k.as_str()))
        .collect()
}

/// A settings problem, naming the file.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {reason}")]
pub struct SettingsError {
    /// The settings file.
    pub file: String,
    /// What is wrong (the `config` crate names the key).
    pub reason: String,
}

impl Settings {
    /// Reads `file` (TOML), then `GSLB_*` environment variables over it.
    ///
    /// # Errors
    /// The file is missing or unreadable, a key is unknown, or a value has the wrong type.
    pub fn load(file: &Path) -> Result<Self, SettingsError> {
        let err = |e: config::ConfigError| SettingsError {
            file: file.display().to_string(),
            reason: e.to_string(),
        };
        let mut settings: Settings = config::Config::builder()
            .add_source(config::File::from(file).format(config::FileFormat::Toml))
            .add_source(
                config::Environment::with_prefix("GSLB")
                    .source(Some(settings_env()))
                    .prefix_separator("_")
                    .separator("__")
                    .list_separator(",")
                    .with_list_parse_key("policies")
                    .try_parsing(true),
            )
            .build()
            .map_err(err)?
            .try_deserialize()
            .map_err(err)?;
        let invalid = |reason: String| SettingsError {
            file: file.display().to_string(),
            reason,
        };
        if settings.policies.is_empty() {
            return Err(invalid("policies: lists no policy file or folder".into()));
        }
        if let Some(u) = &settings.route53.endpoint_url {
            if url::Url::parse(u).map_or(true, |u| !matches!(u.scheme(), "http" | "https")) {
                return Err(invalid(format!(
                    "route53.endpoint_url: '{u}' is not an http(s) URL"
                )));
            }
        }
        let cf = &settings.cloudflare;
        if url::Url::parse(&cf.api_base).map_or(true, |u| !matches!(u.scheme(), "http" | "https")) {
            return Err(invalid(format!(
                "cloudflare.api_base: '{}' is not an http(s) URL",
                cf.api_base
            )));
        }
        if cf.requests_per_window.get() > 1200 {
            return Err(invalid(
                "cloudflare.requests_per_window: at most 1200 (Cloudflare's limit per token and 5 minutes)".into(),
            ));
        }
        if settings.route53.region.is_empty() {
            return Err(invalid("route53.region: must not be empty".into()));
        }
        if settings.reconcile.resync < Duration::from_millis(100) {
            return Err(invalid("reconcile.resync: must be at least 100ms".into()));
        }
        let base = file.parent().unwrap_or(Path::new("."));
        for p in settings
            .policies
            .iter_mut()
            .chain(settings.cloudflare.token_file.iter_mut())
        {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
        Ok(settings)
    }
}
