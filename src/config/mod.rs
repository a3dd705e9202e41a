//! Daemon settings (not policies): read with the `config` crate from a TOML file layered with
//! `GSLB_*` environment variables (`GSLB_VANTAGE`, `GSLB_ADMIN__LISTEN`,
//! `GSLB_ROUTE53__ENDPOINT_URL`, `GSLB_POLICIES=a.toml,b/`; `__` separates nesting levels).
//!
//! Credentials are never in this file: Route 53 uses the standard AWS credential chain
//! (environment, shared profile, web identity, container or instance role), and the admin
//! token comes from `admin.token_file` or `GSLB_ADMIN_TOKEN` (read directly, never a settings
//! key, never logged).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::io::probe::{DnsSettings, ProbingSettings};
use gslb_core::model::VantageId;

mod admin_auth;
mod cluster;
mod engine;
mod notify;
mod providers;

pub use admin_auth::{
    AdminAuthError, AdminToken, TokenError, check_admin_listen, resolve_admin_token,
};
pub use cluster::{ClusterSettings, HEARTBEATS_MISSED};
pub use engine::{EngineConfig, GlobalVelocity};
pub use notify::{
    NotifyKind, NotifySettings, Webhook, WebhookFormat, WebhookSettings, WebhookUrl,
    WebhookUrlError,
};
pub use providers::{CloudflareSettings, Route53Settings};

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
    /// Limits of the probe loops: probes in flight, the late threshold.
    #[serde(default)]
    pub probing: ProbingSettings,
    /// Route 53 client settings.
    #[serde(default)]
    pub route53: Route53Settings,
    /// Cloudflare client settings.
    #[serde(default)]
    pub cloudflare: CloudflareSettings,
    /// Reconciler settings.
    #[serde(default)]
    pub reconcile: ReconcileSettings,
    /// Controller-wide engine settings.
    #[serde(default)]
    pub engine: EngineConfig,
    /// Where drill state and the audit log live.
    #[serde(default)]
    pub state: StateSettings,
    /// Recording of observations (for `gslb replay`).
    #[serde(default)]
    pub record: RecordSettings,
    /// Webhook notifications.
    #[serde(default)]
    pub notify: NotifySettings,
    /// Several instances coordinated through etcd. Default: none, this instance runs alone.
    #[serde(default)]
    pub cluster: Option<ClusterSettings>,
}

/// `[admin]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminSettings {
    /// Listen address of the admin API (`/metrics`, `/healthz`, `/v1/status`, `/v1/drills`,
    /// `/v1/rearm`). Default `127.0.0.1:9464`. A non-loopback address requires a token (see
    /// [`check_admin_listen`]).
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    /// File holding the bearer token of the drill routes (contents trimmed); relative to the
    /// settings file. Default: none. `GSLB_ADMIN_TOKEN` takes precedence over it.
    #[serde(default)]
    pub token_file: Option<PathBuf>,
}

impl Default for AdminSettings {
    fn default() -> Self {
        Self {
            listen: default_listen(),
            token_file: None,
        }
    }
}

/// `[state]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateSettings {
    /// Folder of the drill state file ([`OVERRIDES_FILE`]) and the audit log ([`AUDIT_LOG`]);
    /// relative to the settings file, created when missing. Default `state`.
    #[serde(default = "default_state_dir")]
    pub dir: PathBuf,
}

impl Default for StateSettings {
    fn default() -> Self {
        Self {
            dir: default_state_dir(),
        }
    }
}

/// The drill state file's name in [`StateSettings::dir`].
pub const OVERRIDES_FILE: &str = "overrides.json";
/// The audit log's name in [`StateSettings::dir`].
pub const AUDIT_LOG: &str = "audit.jsonl";

impl StateSettings {
    /// `<dir>/overrides.json`: the active drills (see [`crate::io::state_file::StateFile`]).
    pub fn overrides_file(&self) -> PathBuf {
        self.dir.join(OVERRIDES_FILE)
    }

    /// `<dir>/audit.jsonl`: the audit log (see [`crate::io::audit`]).
    pub fn audit_log(&self) -> PathBuf {
        self.dir.join(AUDIT_LOG)
    }
}

/// `[record]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordSettings {
    /// JSON-lines file every observation is appended to, for `gslb replay`; relative to the
    /// settings file. Default: none (recording off).
    #[serde(default)]
    pub observations: Option<PathBuf>,
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
fn default_state_dir() -> PathBuf {
    PathBuf::from("state")
}
fn default_resync() -> Duration {
    Duration::from_secs(60)
}

/// The environment variable holding the admin API's bearer token (daemon and CLI).
pub const ADMIN_TOKEN_ENV: &str = "GSLB_ADMIN_TOKEN";

/// Environment variables that configure the command line, a secret, or the CLI client, not the
/// settings, and so are not read as settings keys.
pub const NOT_SETTINGS: [&str; 7] = [
    "GSLB_CONFIG",
    "GSLB_LOG",
    "GSLB_LOG_FORMAT",
    ADMIN_TOKEN_ENV,
    "GSLB_ADMIN_URL",
    // The test suite's emulator virtualenv (tests/support/emulators.rs).
    "GSLB_VENV",
    // Set by .ci/run: tests needing promtool and the linters fail instead of skipping.
    "GSLB_REQUIRE_TOOLS",
];

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
    /// Reads `file` (TOML), then `GSLB_*` environment variables over it, checks the ranges
    /// the types do not enforce, and makes relative paths relative to the file's folder.
    ///
    /// # Errors
    /// The file is missing or unreadable, a key is unknown, a value has the wrong type, or a
    /// value is out of range (the first one found).
    pub fn load(file: &Path) -> Result<Self, SettingsError> {
        let invalid = |reason: String| SettingsError {
            file: file.display().to_string(),
            reason,
        };
        let mut settings = Self::read(file).map_err(|e| invalid(e.to_string()))?;
        settings.check().map_err(invalid)?;
        settings.relative_to(file.parent().unwrap_or(Path::new(".")));
        Ok(settings)
    }

    /// `file` (TOML) with `GSLB_*` environment variables over it, as written.
    fn read(file: &Path) -> Result<Self, config::ConfigError> {
        config::Config::builder()
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
            .build()?
            .try_deserialize()
    }

    /// The ranges the types do not enforce, section by section.
    ///
    /// # Errors
    /// The first value out of range, as `key: reason`.
    fn check(&self) -> Result<(), String> {
        if self.policies.is_empty() {
            return Err("policies: lists no policy file or folder".into());
        }
        self.route53.check()?;
        self.cloudflare.check()?;
        if self.probing.max_in_flight == 0 {
            return Err("probing.max_in_flight: must be at least 1 (0 would never probe)".into());
        }
        if self.reconcile.resync < Duration::from_millis(100) {
            return Err("reconcile.resync: must be at least 100ms".into());
        }
        self.engine.check()?;
        if let Some(cluster) = &self.cluster {
            cluster.check(&self.vantage)?;
        }
        self.notify.check()
    }

    /// Makes every relative path (policies, state folder, token files, the observation
    /// record, webhook URL files) relative to `base`, the settings file's folder.
    fn relative_to(&mut self, base: &Path) {
        self.notify.relative_to(base);
        if let Some(cluster) = &mut self.cluster {
            cluster.relative_to(base);
        }
        let relative_to_file = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        self.policies.iter_mut().for_each(relative_to_file);
        relative_to_file(&mut self.state.dir);
        self.cloudflare
            .token_file
            .iter_mut()
            .for_each(relative_to_file);
        self.admin.token_file.iter_mut().for_each(relative_to_file);
        self.record
            .observations
            .iter_mut()
            .for_each(relative_to_file);
    }

    /// The admin token ([`resolve_admin_token`] with `GSLB_ADMIN_TOKEN` from the environment),
    /// checked against the listen address ([`check_admin_listen`]). Call once at start.
    ///
    /// # Errors
    /// See [`AdminAuthError`]; every one is a configuration error (exit code 2).
    pub fn admin_auth(&self) -> Result<Option<AdminToken>, AdminAuthError> {
        let token = resolve_admin_token(&self.admin, std::env::var(ADMIN_TOKEN_ENV).ok())?;
        check_admin_listen(self.admin.listen, token.as_ref())?;
        Ok(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> (tempfile::TempDir, Result<Settings, SettingsError>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("gslb.toml");
        std::fs::write(&file, text).expect("write");
        let s = Settings::load(&file);
        (dir, s)
    }

    #[test]
    fn state_and_record_default_next_to_the_settings_file() {
        let (dir, s) = load("");
        let s = s.expect("defaults");
        assert_eq!(s.state.dir, dir.path().join("state"));
        assert_eq!(
            s.state.overrides_file(),
            dir.path().join("state/overrides.json")
        );
        assert_eq!(s.state.audit_log(), dir.path().join("state/audit.jsonl"));
        assert_eq!(s.record.observations, None);
        assert_eq!(s.admin.token_file, None);
    }

    #[test]
    fn relative_paths_are_relative_to_the_settings_file_and_absolute_ones_stay() {
        let (dir, s) = load(
            "[admin]\ntoken_file = \"secrets/token\"\n[state]\ndir = \"/var/lib/gslb\"\n\
             [record]\nobservations = \"rec/obs.jsonl\"\n",
        );
        let s = s.expect("valid");
        assert_eq!(s.admin.token_file, Some(dir.path().join("secrets/token")));
        assert_eq!(s.state.dir, PathBuf::from("/var/lib/gslb"));
        assert_eq!(
            s.record.observations,
            Some(dir.path().join("rec/obs.jsonl"))
        );
    }

    #[test]
    fn cluster_is_optional_and_its_errors_name_file_and_key() {
        let (_dir, s) = load("");
        assert_eq!(s.expect("alone").cluster, None, "alone by default");
        let (dir, s) = load(
            "vantage = \"b\"\n[cluster]\nendpoints = [\"https://127.0.0.1:2379\"]\n\
             vantages = [\"a\", \"b\"]\n[cluster.tls]\nca = \"ca.pem\"\ncert = \"c.pem\"\n\
             key = \"/k.pem\"\n",
        );
        let c = s.expect("valid").cluster.expect("cluster");
        assert_eq!(c.min_voters(), 2);
        let tls = c.tls.expect("tls");
        assert_eq!(tls.ca, dir.path().join("ca.pem"));
        assert_eq!(tls.key, PathBuf::from("/k.pem"));
        let (dir, s) = load(
            "vantage = \"a\"\n[cluster]\nendpoints = [\"http://127.0.0.1:2379\"]\n\
             vantages = [\"a\"]\nmin_voters = 2\n",
        );
        let e = s.expect_err("min_voters").to_string();
        let file = dir.path().join("gslb.toml");
        assert_eq!(
            e,
            format!(
                "{}: cluster.min_voters: must be between 1 and 1",
                file.display()
            )
        );
        let (_dir, s) = load("[cluster]\nendpoints = []\nvantages = [\"local\"]\nttl = 3\n");
        assert!(s.expect_err("unknown").to_string().contains("ttl"));
        let (_dir, s) = load("[probing]\nsource_address = \"127.0.10.2\"\n");
        let ip = s.expect("valid").probing.source_address;
        assert_eq!(ip, Some([127, 0, 10, 2].into()));
    }

    #[test]
    fn probing_limits_default_and_are_checked() {
        let (_dir, s) = load("");
        let s = s.expect("defaults");
        assert_eq!(s.probing, ProbingSettings::default());
        assert_eq!(s.dns.cache_size, 20_000);
        let (_dir, s) = load("[probing]\nmax_in_flight = 64\nlate_after = \"20ms\"\n");
        let s = s.expect("valid");
        assert_eq!(s.probing.max_in_flight, 64);
        assert_eq!(s.probing.late_after, Duration::from_millis(20));
        let (_dir, s) = load("[probing]\nmax_in_flight = 0\n");
        let e = s.expect_err("zero").to_string();
        assert!(
            e.contains("probing.max_in_flight: must be at least 1"),
            "{e}"
        );
        let (_dir, s) = load("[probing]\nconcurrency = 4\n");
        assert!(s.expect_err("unknown").to_string().contains("concurrency"));
    }

    #[test]
    fn unknown_keys_in_the_new_sections_are_refused() {
        let (_dir, s) = load("[state]\nfolder = \"x\"\n");
        let e = s.expect_err("unknown key").to_string();
        assert!(e.contains("folder"), "{e}");
        let (_dir, s) = load("[admin]\ntoken = \"inline secrets are not a key\"\n");
        assert!(s.is_err());
    }

    #[test]
    fn the_environment_token_wins_over_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("token");
        std::fs::write(&file, "from-file\n").expect("write");
        let admin = AdminSettings {
            token_file: Some(file.clone()),
            ..AdminSettings::default()
        };
        let t = resolve_admin_token(&admin, None)
            .expect("file")
            .expect("some");
        assert!(t.matches("from-file"));
        let t = resolve_admin_token(&admin, Some(" from-env ".into()))
            .expect("env")
            .expect("some");
        assert!(t.matches("from-env"));
        assert!(
            resolve_admin_token(&AdminSettings::default(), None)
                .expect("none")
                .is_none()
        );
    }

    #[test]
    fn unreadable_or_empty_tokens_are_clear_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("missing");
        let admin = AdminSettings {
            token_file: Some(missing.clone()),
            ..AdminSettings::default()
        };
        let e = resolve_admin_token(&admin, None)
            .expect_err("missing")
            .to_string();
        assert!(
            e.starts_with(&format!(
                "admin.token_file: cannot read the admin token file {}: ",
                missing.display()
            )),
            "{e}"
        );
        let e = resolve_admin_token(&admin, Some("  ".into())).expect_err("empty env");
        assert_eq!(e.to_string(), "GSLB_ADMIN_TOKEN is set but empty");
    }

    #[test]
    fn a_non_loopback_listen_address_needs_a_token() {
        let token = AdminToken::new("t", "test").expect("token");
        for ok in [
            "127.0.0.1:9464",
            "127.3.4.5:1",
            "[::1]:9464",
            "[::ffff:127.0.0.1]:9464",
        ] {
            let addr: SocketAddr = ok.parse().expect("addr");
            assert!(check_admin_listen(addr, None).is_ok(), "{ok}");
        }
        for exposed in [
            "0.0.0.0:9464",
            "10.0.0.5:9464",
            "[::]:9464",
            "[2001:db8::1]:9464",
        ] {
            let addr: SocketAddr = exposed.parse().expect("addr");
            let e = check_admin_listen(addr, None)
                .expect_err(exposed)
                .to_string();
            assert!(
                e.starts_with(&format!("admin.listen: {addr} is not a loopback address")),
                "{e}"
            );
            assert!(
                e.contains("GSLB_ADMIN_TOKEN") && e.contains("admin.token_file"),
                "{e}"
            );
            assert!(check_admin_listen(addr, Some(&token)).is_ok(), "{exposed}");
        }
    }
}
