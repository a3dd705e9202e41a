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
    /// Reconciler settings.
    #[serde(default)]
    pub reconcile: ReconcileSettings,
    /// Controller-wide engine settings.
    #[serde(default)]
    pub engine: EngineConfig,
}

/// `[engine]`: what the engine decides controller-wide.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineConfig {
    /// The suspect-vantage window: every pool going down within it makes this vantage point
    /// suspect; it is also the half-life of the prober-side failure share. Default 1 min.
    #[serde(default = "default_suspect_window", with = "humantime_serde")]
    pub suspect_window: Duration,
    /// Canary targets (`https://…`, `http://…`, `tcp://host:port`) outside every policy that
    /// this vantage point probes to check its own network; all of them failing makes it
    /// suspect. Any HTTP answer passes. Default none.
    #[serde(default)]
    pub canaries: Vec<String>,
    /// How often canaries are probed. Default 10 s.
    #[serde(default = "default_canary_interval", with = "humantime_serde")]
    pub canary_interval: Duration,
    /// Controller-wide velocity limit: at most `services` automatic switches within
    /// `window`. Default off (a real regional outage moves every service of the region).
    #[serde(default)]
    pub global_velocity: Option<GlobalVelocity>,
}

/// `[engine.global_velocity]`.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GlobalVelocity {
    /// Switches allowed within the window.
    pub services: u32,
    /// The sliding window, e.g. `"10m"`.
    #[serde(with = "humantime_serde")]
    pub window: Duration,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            suspect_window: default_suspect_window(),
            canaries: Vec::new(),
            canary_interval: default_canary_interval(),
            global_velocity: None,
        }
    }
}

impl EngineConfig {
    /// The engine's settings.
    pub fn engine_settings(&self) -> crate::engine::EngineSettings {
        crate::engine::EngineSettings {
            suspect_window: self.suspect_window,
            canaries: self
                .canaries
                .iter()
                .map(|c| crate::model::EndpointId(c.clone()))
                .collect(),
            global_velocity: self.global_velocity.map(|g| (g.services, g.window)),
        }
    }

    /// The canary targets as probe endpoints, with the probe settings they use: every HTTP
    /// status passes (a canary checks reachability, not an application), 5 s timeout.
    ///
    /// # Errors
    /// A canary that is not a valid endpoint, naming `engine.canaries[i]`.
    pub fn canary_endpoints(
        &self,
    ) -> Result<(crate::policy::ProbeSpec, Vec<crate::policy::Endpoint>), String> {
        let spec = crate::policy::ProbeSpec {
            interval: self.canary_interval,
            timeout: (self.canary_interval / 2).min(Duration::from_secs(5)),
            expected_status: (100..=599).collect(),
            body_contains: None,
            host_header: None,
            tls_server_name: None,
            tls_verify: true,
            follow_redirects: false,
        };
        let endpoints = self
            .canaries
            .iter()
            .enumerate()
            .map(|(i, c)| crate::policy::endpoint(c, &format!("engine.canaries[{i}]")))
            .collect::<Result<_, _>>()?;
        Ok((spec, endpoints))
    }
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
fn default_suspect_window() -> Duration {
    Duration::from_secs(60)
}
fn default_canary_interval() -> Duration {
    Duration::from_secs(10)
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
        if settings.route53.region.is_empty() {
            return Err(invalid("route53.region: must not be empty".into()));
        }
        if settings.reconcile.resync < Duration::from_millis(100) {
            return Err(invalid("reconcile.resync: must be at least 100ms".into()));
        }
        if settings.engine.suspect_window < Duration::from_secs(1) {
            return Err(invalid("engine.suspect_window: must be at least 1s".into()));
        }
        if settings.engine.canary_interval < Duration::from_secs(1) {
            return Err(invalid(
                "engine.canary_interval: must be at least 1s".into(),
            ));
        }
        if let Some(g) = settings.engine.global_velocity {
            if g.services == 0 || g.window < Duration::from_secs(1) {
                return Err(invalid(
                    "engine.global_velocity: services must be at least 1 and window at least 1s"
                        .into(),
                ));
            }
        }
        settings.engine.canary_endpoints().map_err(invalid)?;
        let base = file.parent().unwrap_or(Path::new("."));
        for p in &mut settings.policies {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
        Ok(settings)
    }
}
