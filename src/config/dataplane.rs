//! `[route53.modes]` and `[route53.data_plane]`: which Route 53 bindings fail over through
//! Route 53's data plane (votes counted by Route 53 health checks) instead of gslb's verdict
//! checks, and the numbers that mode is built from: the vote strings and how Route 53 counts
//! them, the CALCULATED threshold, the worst-case failover and the monthly health-check cost.
//!
//! Plain data and arithmetic; the one I/O here is [`DataPlaneSettings::secret`], which reads a
//! pool's vote secret from its file or environment variable. See `docs/route53-data-plane.md`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// How one Route 53 binding takes a pool out of service (`[route53.modes] <service> = ...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailoverMode {
    /// The default: gslb inverts the pool's verdict check with `UpdateHealthCheck` (a Route 53
    /// control-plane call) when it decides.
    #[default]
    VerdictCheck,
    /// Every instance serves a vote URL per pool; Route 53's own health checks count the votes
    /// and a failover needs no Route 53 API call.
    DataPlane,
}

/// The path of `service`'s `pool` vote under an instance's base URL:
/// `/v1/vote/<service>/<pool>`.
pub fn vote_path(service: &str, pool: &str) -> String {
    format!("/v1/vote/{service}/{pool}")
}

/// What a vote URL answers while its instance decides the pool must not serve:
/// `gslb-drain <secret>`. It is the `SearchString` of the pool's inverted *drain checks* (at
/// most 255 characters, Route 53 API Reference, `HealthCheckConfig`).
pub fn drain_text(secret: &str) -> String {
    format!("gslb-drain {secret}")
}

/// What a vote URL answers while its instance lets the pool serve: `gslb-serve <secret>`, the
/// `SearchString` of the pool's (not inverted) *serve checks*. Never contains [`drain_text`].
pub fn serve_text(secret: &str) -> String {
    format!("gslb-serve {secret}")
}

/// What a vote URL answers while its instance gives no vote (its drain vote went stale, or it
/// has not decided since it started): neither string, so Route 53 counts it as a dead
/// instance.
pub const ABSTAIN_TEXT: &str = "gslb-abstain";

/// One instance's vote on one pool as Route 53's checkers read its URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Vote {
    /// [`serve_text`]: the pool may serve.
    Serve,
    /// [`drain_text`]: the pool must not serve.
    Drain,
    /// Neither string: dead, unreachable, stale, or [`ABSTAIN_TEXT`].
    Abstain,
}

impl Vote {
    /// The vote's word in status and logs: `serve`, `drain` or `no vote`.
    pub fn word(self) -> &'static str {
        match self {
            Self::Serve => "serve",
            Self::Drain => "drain",
            Self::Abstain => "no vote",
        }
    }

    /// How many of this instance's two checks for the pool are healthy: the serve check
    /// (healthy when its string is answered) and the inverted drain check (healthy unless its
    /// string is answered). Serve 2, abstain 1, drain 0.
    pub fn healthy_children(self) -> usize {
        match self {
            Self::Serve => 2,
            Self::Abstain => 1,
            Self::Drain => 0,
        }
    }
}

/// The pool's CALCULATED tally check's `HealthThreshold`: `instances`.
///
/// Its children are two checks per instance ([`Vote::healthy_children`]), so with `s` serve,
/// `d` drain and `a` abstaining instances `2s + a = instances + s - d` children are healthy,
/// and the pool serves while `s >= d`: **a pool drains when more of the instances that vote
/// say drain than serve.** An instance that is dead, unreachable or stale gives no vote either
/// way, so losing instances keeps the last serving pool as long as one instance votes (see
/// `docs/route53-data-plane.md`, "Losing instances").
pub fn health_threshold(instances: usize) -> usize {
    instances
}

/// Whether the tally check of a pool with these `votes` (one per instance) is healthy, as
/// Route 53 counts it: healthy children ([`Vote::healthy_children`]) at least
/// [`health_threshold`].
pub fn tally_healthy(votes: &[Vote]) -> bool {
    let healthy: usize = votes.iter().map(|v| v.healthy_children()).sum();
    healthy >= health_threshold(votes.len())
}

/// One gslb instance as Route 53's checkers reach it (`[[route53.data_plane.instances]]`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VoteInstance {
    /// The instance's name, e.g. its vantage point `aws-ap-northeast-2`.
    pub name: String,
    /// The base URL Route 53's checkers send requests to, e.g. `https://203.0.113.10:8443`:
    /// `https` gives `HTTPS_STR_MATCH` checks (Route 53 does not validate the certificate),
    /// `http` gives `HTTP_STR_MATCH`. The vote paths ([`vote_path`]) go under it.
    pub url: String,
}

/// `[route53.data_plane]`: this instance's vote listener, every instance's public URL, the
/// checks' timing and where the per-pool vote secrets are.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataPlaneSettings {
    /// This instance's name among `instances`.
    pub instance: String,
    /// Where this instance serves its vote URLs, e.g. `0.0.0.0:8443`. A listener of its own,
    /// never the admin API's: only Route 53's checkers need to reach it.
    pub listen: SocketAddr,
    /// PEM certificate chain for the vote listener (with `tls_key_file`); without both it
    /// speaks plain HTTP. Relative to the settings file.
    #[serde(default)]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key for the vote listener (with `tls_cert_file`).
    #[serde(default)]
    pub tls_key_file: Option<PathBuf>,
    /// Folder of vote secrets, one file per pool named `<service>.<pool>` (contents trimmed).
    /// Without it, or when a file is missing, the environment variable
    /// `GSLB_VOTE_SECRET_<SERVICE>_<POOL>` (upper case, other characters `_`). Relative to the
    /// settings file.
    #[serde(default)]
    pub secrets_dir: Option<PathBuf>,
    /// The checks' `RequestInterval`: `10s` (fast, extra cost) or `30s`. Default `30s`
    /// (Route 53 API Reference, `HealthCheckConfig`; fixed at creation).
    #[serde(
        default = "default_request_interval",
        with = "gslb_core::policy::duration"
    )]
    pub request_interval: Duration,
    /// The checks' `FailureThreshold`: consecutive checks to change status, 1 to 10.
    /// Default 3 (Route 53's default).
    #[serde(default = "default_failure_threshold")]
    pub failure_threshold: u32,
    /// Every instance, this one included; at least one, three or more to survive one's loss.
    pub instances: Vec<VoteInstance>,
}

/// 30 s, Route 53's standard `RequestInterval`.
fn default_request_interval() -> Duration {
    Duration::from_secs(30)
}

/// 3, Route 53's default `FailureThreshold`.
fn default_failure_threshold() -> u32 {
    3
}

/// Longest vote secret: `SearchString` holds 255 characters (Route 53 API Reference) and
/// [`drain_text`] and [`serve_text`] add 11.
pub const SECRET_MAX: usize = 244;

/// Shortest vote secret accepted: 16 characters.
pub const SECRET_MIN: usize = 16;

impl DataPlaneSettings {
    /// Checks names, URLs, timing and TLS files.
    ///
    /// # Errors
    /// The first problem, as `route53.data_plane.<key>: reason`.
    pub(super) fn check(&self) -> Result<(), String> {
        let key = "route53.data_plane";
        if self.instances.is_empty() {
            return Err(format!("{key}.instances: lists no instance"));
        }
        for (i, inst) in self.instances.iter().enumerate() {
            if inst.name.is_empty() || self.instances[..i].iter().any(|o| o.name == inst.name) {
                return Err(format!(
                    "{key}.instances[{i}].name: '{}' is empty or used twice",
                    inst.name
                ));
            }
            check_base_url(&inst.url)
                .map_err(|why| format!("{key}.instances[{i}].url: '{}' {why}", inst.url))?;
        }
        if !self.instances.iter().any(|i| i.name == self.instance) {
            return Err(format!(
                "{key}.instance: '{}' is not one of the instances' names",
                self.instance
            ));
        }
        if ![10, 30].contains(&self.request_interval.as_secs())
            || self.request_interval.subsec_nanos() != 0
        {
            return Err(format!(
                "{key}.request_interval: must be 10s or 30s (Route 53's only intervals)"
            ));
        }
        if !(1..=10).contains(&self.failure_threshold) {
            return Err(format!(
                "{key}.failure_threshold: must be 1 to 10 (Route 53's range)"
            ));
        }
        if self.tls_cert_file.is_some() != self.tls_key_file.is_some() {
            return Err(format!(
                "{key}.tls_cert_file: give both tls_cert_file and tls_key_file, or neither"
            ));
        }
        Ok(())
    }

    /// Makes the TLS files and `secrets_dir` relative to `base`, the settings file's folder.
    pub(super) fn relative_to(&mut self, base: &Path) {
        for p in [
            &mut self.tls_cert_file,
            &mut self.tls_key_file,
            &mut self.secrets_dir,
        ]
        .into_iter()
        .flatten()
        {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
    }

    /// The vote secret of `service`'s `pool`: the file `<secrets_dir>/<service>.<pool>`, else
    /// [`secret_env`]`(service, pool)`; trimmed.
    ///
    /// # Errors
    /// Neither is set, or the secret is shorter than [`SECRET_MIN`], longer than
    /// [`SECRET_MAX`] or holds whitespace or a non-ASCII character; the message names the
    /// file and the variable, never the secret.
    pub fn secret(&self, service: &str, pool: &str) -> Result<String, String> {
        let var = secret_env(service, pool);
        let file = self
            .secrets_dir
            .as_ref()
            .map(|d| d.join(format!("{service}.{pool}")));
        let from_file = file
            .as_ref()
            .and_then(|f| gslb_core::policy::file::read_text(f, 64 << 10).ok());
        let Some(raw) = from_file.or_else(|| std::env::var(&var).ok()) else {
            let file = file.map_or_else(
                || "no secrets_dir".to_owned(),
                |f| format!("no file {}", f.display()),
            );
            return Err(format!(
                "vote secret of service {service} pool {pool}: {file} and no environment variable {var}"
            ));
        };
        let s = raw.trim();
        if s.len() < SECRET_MIN || s.len() > SECRET_MAX || !s.chars().all(|c| c.is_ascii_graphic())
        {
            return Err(format!(
                "vote secret of service {service} pool {pool}: must be {SECRET_MIN} to {SECRET_MAX} printable ASCII characters without spaces"
            ));
        }
        Ok(s.to_owned())
    }

    /// This instance's entry in `instances` (checked by validation to exist).
    pub fn own_url(&self) -> Option<&str> {
        self.instances
            .iter()
            .find(|i| i.name == self.instance)
            .map(|i| i.url.as_str())
    }
}

/// One instance's vote URL of one pool, split as a Route 53 check names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoteTarget {
    /// The instance's name.
    pub instance: String,
    /// Whether the URL is `https`.
    pub https: bool,
    /// Host: an IP address or a name, without brackets.
    pub host: String,
    /// Port (the scheme's default when the URL has none).
    pub port: u16,
    /// The base URL's path followed by [`vote_path`].
    pub path: String,
}

/// One pool's vote checks as provisioning needs them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolVotes {
    /// The pool's record's set identifier.
    pub set_identifier: String,
    /// One per instance.
    pub targets: Vec<VoteTarget>,
    /// [`drain_text`] of the pool's secret: the drain checks' search string.
    pub drain_string: String,
    /// [`serve_text`] of the pool's secret: the serve checks' search string.
    pub serve_string: String,
}

impl DataPlaneSettings {
    /// The vote checks of `service`'s pools, given as `(pool name, set identifier)` in the
    /// binding's order, their secrets read.
    ///
    /// # Errors
    /// A secret cannot be read ([`Self::secret`]) or an instance URL is not usable.
    pub fn pool_votes(
        &self,
        service: &str,
        pools: &[(String, String)],
    ) -> Result<Vec<PoolVotes>, String> {
        let mut out = Vec::new();
        for (pool, set_identifier) in pools {
            let secret = self.secret(service, pool)?;
            let mut targets = Vec::new();
            for inst in &self.instances {
                targets.push(vote_target(inst, service, pool)?);
            }
            out.push(PoolVotes {
                set_identifier: set_identifier.clone(),
                targets,
                drain_string: drain_text(&secret),
                serve_string: serve_text(&secret),
            });
        }
        Ok(out)
    }
}

fn vote_target(inst: &VoteInstance, service: &str, pool: &str) -> Result<VoteTarget, String> {
    let bad = || {
        format!(
            "route53.data_plane: instance {} url '{}' is not usable",
            inst.name, inst.url
        )
    };
    let url = url::Url::parse(&inst.url).map_err(|_| bad())?;
    let host = url.host_str().ok_or_else(bad)?;
    Ok(VoteTarget {
        instance: inst.name.clone(),
        https: url.scheme() == "https",
        host: host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned(),
        port: url.port_or_known_default().ok_or_else(bad)?,
        path: format!(
            "{}{}",
            url.path().trim_end_matches('/'),
            vote_path(service, pool)
        ),
    })
}

/// The environment variable holding a pool's vote secret when no file does:
/// `GSLB_VOTE_SECRET_<SERVICE>_<POOL>`, upper case, every other character `_`.
pub fn secret_env(service: &str, pool: &str) -> String {
    let up = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect()
    };
    format!("GSLB_VOTE_SECRET_{}_{}", up(service), up(pool))
}

/// Route 53 health-check list prices, US dollars per check and month, from the Amazon Route 53
/// pricing page (<https://aws.amazon.com/route53/pricing/>, "Health checks"), recorded on
/// 2026-12-01 (re-check the page before budgeting; the first 50 checks on AWS endpoints are
/// free, not deducted here):
/// basic check on an AWS endpoint 0.50, on another endpoint 0.75; each optional feature
/// (HTTPS, string matching, fast interval) 1.00 on an AWS endpoint, 2.00 on another.
/// A CALCULATED check is billed as a basic check on an AWS endpoint.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CheckPrices {
    /// Basic check on an AWS endpoint.
    pub aws_basic: f64,
    /// Basic check on a non-AWS endpoint.
    pub other_basic: f64,
    /// One optional feature on an AWS endpoint.
    pub aws_feature: f64,
    /// One optional feature on a non-AWS endpoint.
    pub other_feature: f64,
}

/// The prices of [`CheckPrices`]' doc, recorded on 2026-12-01.
pub const PRICES: CheckPrices = CheckPrices {
    aws_basic: 0.50,
    other_basic: 0.75,
    aws_feature: 1.00,
    other_feature: 2.00,
};

impl DataPlaneSettings {
    /// Health checks per service: two string-match checks (serve and drain) per pool and
    /// instance, and one CALCULATED check per pool.
    pub fn checks_per_service(&self, pools: usize) -> usize {
        pools * (2 * self.instances.len() + 1)
    }

    /// Monthly cost of one service's checks in US dollars, `(on AWS endpoints, on non-AWS
    /// endpoints)`: per pool and instance two checks, each a basic check plus string matching,
    /// plus HTTPS for an `https` instance URL, plus the fast interval at `10s`; per pool one
    /// CALCULATED check.
    /// Free-tier checks are not deducted.
    pub fn monthly_cost(&self, pools: usize) -> (f64, f64) {
        let fast = usize::from(self.request_interval.as_secs() == 10);
        let (mut aws, mut other) = (0.0, 0.0);
        for inst in &self.instances {
            let https = usize::from(inst.url.starts_with("https:"));
            let features = (1 + https + fast) as f64;
            aws += 2.0 * (PRICES.aws_basic + features * PRICES.aws_feature);
            other += 2.0 * (PRICES.other_basic + features * PRICES.other_feature);
        }
        let p = pools as f64;
        (p * (aws + PRICES.aws_basic), p * (other + PRICES.aws_basic))
    }

    /// The checkers' share of a worst-case failover: `RequestInterval x FailureThreshold`
    /// for the children to change status, plus one `RequestInterval` allowed for the
    /// CALCULATED parent to aggregate them (Route 53 publishes no figure for it; this is
    /// gslb's margin, see `docs/route53-data-plane.md`).
    pub fn checker_delay(&self) -> (Duration, Duration) {
        (
            self.request_interval.saturating_mul(self.failure_threshold),
            self.request_interval,
        )
    }

    /// The worst-case failover of a data-plane binding: `detection` (gslb's own, up to the
    /// decision) + [`Self::checker_delay`] + `ttl`. No API call is in it.
    pub fn worst_case_failover(&self, detection: Duration, ttl: Duration) -> Duration {
        let (checkers, aggregation) = self.checker_delay();
        detection
            .saturating_add(checkers)
            .saturating_add(aggregation)
            .saturating_add(ttl)
    }
}

/// Why `u` is not a usable base URL: not http(s), no host, or a query or fragment.
fn check_base_url(u: &str) -> Result<(), &'static str> {
    let url = url::Url::parse(u).map_err(|_| "is not a URL")?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("is not an http(s) URL");
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("has no host");
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("must not have a query or fragment");
    }
    Ok(())
}

/// Checks `[route53.modes]` against `[route53.data_plane]`.
///
/// # Errors
/// A service set to `data_plane` without a `[route53.data_plane]` table.
pub(super) fn check_modes(
    modes: &BTreeMap<String, FailoverMode>,
    data_plane: Option<&DataPlaneSettings>,
) -> Result<(), String> {
    match modes.iter().find(|(_, m)| **m == FailoverMode::DataPlane) {
        Some((service, _)) if data_plane.is_none() => Err(format!(
            "route53.modes.{service}: data_plane needs a [route53.data_plane] table (instances, listen)"
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> DataPlaneSettings {
        DataPlaneSettings {
            instance: "a".into(),
            listen: "127.0.90.1:0".parse().expect("addr"),
            tls_cert_file: None,
            tls_key_file: None,
            secrets_dir: None,
            request_interval: Duration::from_secs(30),
            failure_threshold: 3,
            instances: ["a", "b", "c"]
                .iter()
                .map(|n| VoteInstance {
                    name: (*n).into(),
                    url: format!("https://{n}.gslb.example.com:8443"),
                })
                .collect(),
        }
    }

    #[test]
    fn a_pool_drains_when_more_voting_instances_say_drain_than_serve() {
        use Vote::{Abstain, Drain, Serve};
        for n in 1..=9usize {
            for drains in 0..=n {
                for serves in 0..=n - drains {
                    let mut votes = vec![Drain; drains];
                    votes.extend(vec![Serve; serves]);
                    votes.resize(n, Abstain);
                    assert_eq!(
                        tally_healthy(&votes),
                        serves >= drains,
                        "{n} instances: {serves} serve, {drains} drain"
                    );
                }
            }
        }
        assert!(
            tally_healthy(&[Abstain, Abstain, Abstain]),
            "no votes: serves"
        );
        assert!(!tally_healthy(&[Drain, Abstain, Abstain]), "one voter left");
        assert!(tally_healthy(&[Drain, Serve, Abstain]), "a tie serves");
        assert_eq!(Drain.word(), "drain");
        assert_eq!(Abstain.word(), "no vote");
    }

    #[test]
    fn neither_string_contains_the_other() {
        let (s, d) = (
            serve_text("0123456789abcdef"),
            drain_text("0123456789abcdef"),
        );
        assert!(!s.contains(&d) && !d.contains(&s));
        assert!(!ABSTAIN_TEXT.contains(&s) && !ABSTAIN_TEXT.contains(&d));
        assert_eq!(s.len(), "gslb-serve ".len() + 16);
    }

    #[test]
    fn settings_problems_name_the_key() {
        assert_eq!(settings().check(), Ok(()));
        let mut s = settings();
        s.instance = "z".into();
        assert!(
            s.check()
                .unwrap_err()
                .contains("route53.data_plane.instance:")
        );
        let mut s = settings();
        s.request_interval = Duration::from_secs(20);
        assert!(s.check().unwrap_err().contains("10s or 30s"));
        let mut s = settings();
        s.instances[1].name = "a".into();
        assert!(s.check().unwrap_err().contains("instances[1].name"));
        let mut s = settings();
        s.instances[2].url = "ftp://x".into();
        assert!(s.check().unwrap_err().contains("instances[2].url"));
        let mut s = settings();
        s.tls_key_file = Some("k.pem".into());
        assert!(s.check().unwrap_err().contains("tls_cert_file"));
        let modes = BTreeMap::from([("api".to_owned(), FailoverMode::DataPlane)]);
        assert!(
            check_modes(&modes, None)
                .unwrap_err()
                .contains("route53.modes.api")
        );
        assert_eq!(check_modes(&modes, Some(&settings())), Ok(()));
    }

    #[test]
    fn cost_and_bound_add_up() {
        let s = settings();
        assert_eq!(s.checks_per_service(2), 14);
        // https + string match: non-AWS 0.75 + 2 x 2.00 = 4.75 per child, 6 children and a
        // 0.50 parent per pool, 2 pools.
        let (aws, other) = s.monthly_cost(2);
        assert!((other - 2.0 * (6.0 * 4.75 + 0.5)).abs() < 1e-9, "{other}");
        assert!((aws - 2.0 * (6.0 * 2.5 + 0.5)).abs() < 1e-9, "{aws}");
        assert_eq!(
            s.worst_case_failover(Duration::from_secs(31), Duration::from_secs(60)),
            Duration::from_secs(31 + 90 + 30 + 60)
        );
    }

    #[test]
    fn secrets_come_from_their_file_and_are_checked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut s = settings();
        s.secrets_dir = Some(dir.path().to_owned());
        std::fs::write(dir.path().join("api.seoul"), "0123456789abcdef\n").expect("write");
        assert_eq!(s.secret("api", "seoul").as_deref(), Ok("0123456789abcdef"));
        std::fs::write(dir.path().join("api.tokyo"), "short").expect("write");
        let e = s.secret("api", "tokyo").unwrap_err();
        assert!(e.contains("16 to 244") && !e.contains("short"), "{e}");
        let e = s.secret("api", "osaka").unwrap_err();
        assert!(e.contains("GSLB_VOTE_SECRET_API_OSAKA"), "{e}");
        assert_eq!(
            secret_env("my-api", "eu.west"),
            "GSLB_VOTE_SECRET_MY_API_EU_WEST"
        );
    }
}
