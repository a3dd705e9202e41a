//! Daemon settings (not policies): a TOML file layered with `GSLB_*` environment variables
//! (`GSLB_VANTAGE`, `GSLB_ADMIN__LISTEN`, `GSLB_ROUTE53__ENDPOINT_URL`,
//! `GSLB_POLICIES=a.toml,b/`; `__` separates nesting levels), read by `read` with the
//! policies' reader: every unknown key and wrong value at once, each at its line in the file or
//! naming its environment variable.
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
pub mod dataplane;
mod engine;
mod notify;
mod providers;
mod read;

pub use admin_auth::{
    AdminAuth, AdminAuthError, AdminToken, AdminTokens, SINGLE_TOKEN_NAME, TokenError,
    check_admin_listen, resolve_admin_auth, resolve_admin_token,
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
    /// settings file. Default: none. `GSLB_ADMIN_TOKEN` takes precedence over it. Its caller
    /// is named `admin` (the actor of its drills).
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// Files of named tokens, `name = "token"` per line (TOML); a caller presenting one is
    /// that name, the actor of its drills in the audit log. Relative to the settings file.
    /// Default: none.
    #[serde(default)]
    pub token_files: Vec<PathBuf>,
    /// Whether `/v1/status`, `/v1/events` and `/metrics` need a token too (`/healthz` and
    /// `/readyz` never do). Default `false`.
    #[serde(default)]
    pub require_token_for_reads: bool,
    /// PEM certificate chain of the admin API's TLS (with `tls_key_file`); reloaded when the
    /// file changes. Relative to the settings file. Default: none (plain HTTP).
    #[serde(default)]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key of the admin API's TLS (with `tls_cert_file`).
    #[serde(default)]
    pub tls_key_file: Option<PathBuf>,
    /// A listener of its own for `/metrics` (then not served on `listen`), with the same
    /// TLS and read-token rules. Default: none (`/metrics` on `listen`).
    #[serde(default)]
    pub metrics_listen: Option<SocketAddr>,
}

impl Default for AdminSettings {
    fn default() -> Self {
        Self {
            listen: default_listen(),
            token_file: None,
            token_files: Vec::new(),
            require_token_for_reads: false,
            tls_cert_file: None,
            tls_key_file: None,
            metrics_listen: None,
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
    #[serde(default = "default_resync", with = "gslb_core::policy::duration")]
    pub resync: Duration,
    /// Each binding's provider call budget: at most this many calls that decisions cause (a
    /// read woken by a changed decision, and every write) in any minute, whatever the
    /// decisions do; a pass over it waits and shows "decided but not applied" with the reason.
    /// Reads on a timer (the resync, a backoff) are paced by it and not counted. Default 20
    /// ([`DEFAULT_CALLS_PER_MINUTE`]); at least 3 (a switch is a
    /// read, a write and a read-back).
    #[serde(default = "default_calls_per_minute")]
    pub provider_calls_per_minute: u32,
}

impl Default for ReconcileSettings {
    fn default() -> Self {
        Self {
            resync: default_resync(),
            provider_calls_per_minute: default_calls_per_minute(),
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
fn default_calls_per_minute() -> u32 {
    DEFAULT_CALLS_PER_MINUTE
}

/// Default `[reconcile] provider_calls_per_minute`: 20. A switch costs three calls (read,
/// write, read-back), so a failover and a failback within the same minute, each retried
/// twice, fit; a binding that makes more is churning.
pub const DEFAULT_CALLS_PER_MINUTE: u32 = 20;

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

/// The `GSLB_*` environment variables read as settings keys, in name order.
fn settings_env() -> Vec<(String, String)> {
    let mut vars: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k.starts_with("GSLB_") && !NOT_SETTINGS.contains(&k.as_str()))
        .collect();
    vars.sort();
    vars
}

/// The settings are not valid: every problem found, each naming where it is.
#[derive(Debug, thiserror::Error)]
#[error("{}", problems.join("\n"))]
pub struct SettingsError {
    /// The settings file.
    pub file: String,
    /// Every problem, one line each: `file:line:column: key: reason` (the position when
    /// known), or `environment variable GSLB_X: key: reason` for a key an environment variable
    /// set. Never empty.
    pub problems: Vec<String>,
}

impl Settings {
    /// Reads `file` (TOML), then `GSLB_*` environment variables over it, checks the ranges
    /// the types do not enforce, and makes relative paths relative to the file's folder.
    ///
    /// # Errors
    /// Every problem: the file is missing or unreadable (alone), each TOML syntax error
    /// (alone), or each unknown key, each value of the wrong type and the first value out of
    /// range of each section; each blamed on its line in the file or on its environment
    /// variable.
    pub fn load(file: &Path) -> Result<Self, SettingsError> {
        Self::load_with(file, &settings_env())
    }

    /// [`Settings::load`] with `env` as the `GSLB_*` environment variables.
    fn load_with(file: &Path, env: &[(String, String)]) -> Result<Self, SettingsError> {
        let invalid = |problems: Vec<String>| SettingsError {
            file: file.display().to_string(),
            problems,
        };
        let mut settings: Self = read::read(file, env, &["policies"]).map_err(invalid)?;
        let problems: Vec<String> = settings
            .check()
            .iter()
            .map(|p| read::blame_range(p, file, env))
            .collect();
        if !problems.is_empty() {
            return Err(invalid(problems));
        }
        settings.relative_to(file.parent().unwrap_or(Path::new(".")));
        Ok(settings)
    }

    /// The ranges the types do not enforce, section by section: the first problem of each.
    fn check(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.policies.is_empty() {
            problems.push("policies: lists no policy file or folder".to_owned());
        }
        if self.probing.max_in_flight == 0 {
            problems
                .push("probing.max_in_flight: must be at least 1 (0 would never probe)".to_owned());
        }
        if self.reconcile.resync < Duration::from_millis(100) {
            problems.push("reconcile.resync: must be at least 100ms".to_owned());
        }
        if self.reconcile.provider_calls_per_minute < 3 {
            problems.push(
                "reconcile.provider_calls_per_minute: must be at least 3 (a switch is a read, a write and a read-back)"
                    .to_owned(),
            );
        }
        for section in [
            self.route53.check(),
            self.cloudflare.check(),
            self.admin.check(),
            self.engine.check(),
            self.notify.check(),
        ] {
            problems.extend(section.err());
        }
        if let Some(cluster) = &self.cluster {
            problems.extend(cluster.check(&self.vantage).err());
        }
        problems
    }

    /// Makes every relative path (policies, state folder, token files, the observation
    /// record, webhook URL files) relative to `base`, the settings file's folder.
    fn relative_to(&mut self, base: &Path) {
        self.notify.relative_to(base);
        if let Some(dp) = &mut self.route53.data_plane {
            dp.relative_to(base);
        }
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
        self.admin.token_files.iter_mut().for_each(relative_to_file);
        self.admin
            .tls_cert_file
            .iter_mut()
            .for_each(relative_to_file);
        self.admin
            .tls_key_file
            .iter_mut()
            .for_each(relative_to_file);
        self.record
            .observations
            .iter_mut()
            .for_each(relative_to_file);
    }

    /// The admin tokens ([`resolve_admin_auth`] with `GSLB_ADMIN_TOKEN` from the
    /// environment), checked against the listen address ([`check_admin_listen`]). Call once
    /// at start.
    ///
    /// # Errors
    /// See [`AdminAuthError`]; every one is a configuration error (exit code 2).
    pub fn admin_auth(&self) -> Result<AdminAuth, AdminAuthError> {
        let auth = resolve_admin_auth(&self.admin, std::env::var(ADMIN_TOKEN_ENV).ok())?;
        check_admin_listen(self.admin.listen, &auth.tokens)?;
        Ok(auth)
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
    fn admin_tls_needs_both_files_and_paths_are_relative_to_the_settings_file() {
        let (dir, s) = load(
            "[admin]\ntls_cert_file = \"tls/crt.pem\"\ntls_key_file = \"tls/key.pem\"\n\
             token_files = [\"tokens\"]\nmetrics_listen = \"0.0.0.0:9465\"\n",
        );
        let s = s.expect("valid");
        assert_eq!(s.admin.tls_cert_file, Some(dir.path().join("tls/crt.pem")));
        assert_eq!(s.admin.tls_key_file, Some(dir.path().join("tls/key.pem")));
        assert_eq!(s.admin.token_files, vec![dir.path().join("tokens")]);
        assert_eq!(
            s.admin.metrics_listen,
            Some("0.0.0.0:9465".parse().expect("addr"))
        );
        assert!(!s.admin.require_token_for_reads);
        let (_dir, s) = load("[admin]\ntls_cert_file = \"crt.pem\"\n");
        let e = s.expect_err("no key").to_string();
        assert!(
            e.contains("admin.tls_cert_file, admin.tls_key_file: set both"),
            "{e}"
        );
    }

    #[test]
    fn unknown_keys_in_the_new_sections_are_refused() {
        let (_dir, s) = load("[state]\nfolder = \"x\"\n");
        let e = s.expect_err("unknown key").to_string();
        assert!(e.contains("folder"), "{e}");
        let (_dir, s) = load("[admin]\ntoken = \"inline secrets are not a key\"\n");
        assert!(s.is_err());
    }

    fn load_env(text: &str, env: &[(&str, &str)]) -> Result<Settings, SettingsError> {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("gslb.toml");
        std::fs::write(&file, text).expect("write");
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Settings::load_with(&file, &env).map_err(|mut e| {
            // The temporary folder differs per run: keep the file name only.
            for p in &mut e.problems {
                *p = p.replace(&format!("{}/", dir.path().display()), "");
            }
            e
        })
    }

    #[test]
    fn every_unknown_key_and_wrong_value_is_reported_at_its_line() {
        let e = load_env(
            "vantage = \"x\"\nlisten = \"127.0.0.1:1\"\n[admin]\nlistn = \"127.0.0.1:1\"\n\
             [probing]\nmax_in_flight = \"many\"\n[state]\nfolder = \"x\"\n",
            &[],
        )
        .expect_err("four problems");
        assert_eq!(
            e.problems,
            [
                "gslb.toml:2:1: listen: unknown key",
                "gslb.toml:4:1: admin.listn: unknown key",
                "gslb.toml:6:1: probing.max_in_flight: must be an integer, not the string \"many\"",
                "gslb.toml:8:1: state.folder: unknown key",
            ]
        );
    }

    #[test]
    fn environment_variable_problems_name_the_variable() {
        let e = load_env(
            "[admin]\nlisten = \"127.0.0.1:9464\"\n",
            &[
                ("GSLB_ADMIN__LISTN", "127.0.0.1:1"),
                ("GSLB_PROBING__MAX_IN_FLIGHT", "many"),
                ("GSLB_RECONCILE__RESYNC", "1ms"),
            ],
        )
        .expect_err("env problems");
        assert_eq!(
            e.problems,
            [
                "environment variable GSLB_ADMIN__LISTN: admin.listn: unknown key",
                "environment variable GSLB_PROBING__MAX_IN_FLIGHT: probing.max_in_flight: must be an integer, not the string \"many\"",
            ]
        );
        let e = load_env("", &[("GSLB_RECONCILE__RESYNC", "1ms")]).expect_err("range");
        assert_eq!(
            e.problems,
            [
                "environment variable GSLB_RECONCILE__RESYNC: reconcile.resync: must be at least 100ms"
            ]
        );
    }

    #[test]
    fn environment_variables_are_read_as_the_keys_they_set() {
        let s = load_env(
            "vantage = \"file\"\n",
            &[
                ("GSLB_VANTAGE", "123"),
                ("GSLB_POLICIES", "a.toml,b/"),
                ("GSLB_PROBING__MAX_IN_FLIGHT", "64"),
                ("GSLB_ADMIN__LISTEN", "127.0.0.1:9999"),
            ],
        )
        .expect("valid");
        assert_eq!(s.vantage.0, "123", "a number is text where text is wanted");
        assert_eq!(s.policies.len(), 2);
        assert!(s.policies[1].ends_with("b/"), "{:?}", s.policies);
        assert_eq!(s.probing.max_in_flight, 64);
        assert_eq!(s.admin.listen.port(), 9999);
    }

    #[test]
    fn a_syntax_error_has_its_line_and_text() {
        let e = load_env("vantage = \"x\"\n[admin\n", &[]).expect_err("syntax");
        assert_eq!(e.problems.len(), 1, "{:?}", e.problems);
        assert!(
            e.problems[0].starts_with("gslb.toml:2:") && e.problems[0].contains("[admin"),
            "{:?}",
            e.problems
        );
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
            assert!(
                check_admin_listen(addr, &AdminTokens::default()).is_ok(),
                "{ok}"
            );
        }
        for exposed in [
            "0.0.0.0:9464",
            "10.0.0.5:9464",
            "[::]:9464",
            "[2001:db8::1]:9464",
        ] {
            let addr: SocketAddr = exposed.parse().expect("addr");
            let e = check_admin_listen(addr, &AdminTokens::default())
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
            assert!(
                check_admin_listen(addr, &AdminTokens::single(token.clone())).is_ok(),
                "{exposed}"
            );
        }
    }
}
