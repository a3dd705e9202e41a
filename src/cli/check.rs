//! `gslb check`: validates the daemon settings (with `--config`) and policy files or folders,
//! and prints every file's result: each problem, or per policy its worst-case
//! failover with each engine wait named, with warnings for an exceeded `rto_budget`, an
//! `[observe]` table that watches nothing, or an IP-literal endpoint of an address family this
//! host has no route for.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use gslb_core::policy::{self, EndpointKind, Policy, Target};

use crate::cli::preflight;
use crate::config::Settings;
use crate::config::dataplane::DataPlaneSettings;
use crate::io::probe::{family_routable, route_to};

/// Why `gslb check` failed.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// Files are invalid (their problems are in the report; exit code 2).
    #[error("{failed} of {checked} files invalid (see above)")]
    Invalid {
        /// Files with problems.
        failed: usize,
        /// Files checked.
        checked: usize,
    },
    /// Writing the report failed (exit code 1).
    #[error("writing the report: {0}")]
    Write(#[from] std::io::Error),
}

/// Checks the settings file `config` when given, then every policy in `paths` (default: the
/// settings' `policies`, none when the settings are invalid; without `config`, `policies`),
/// and prints every file's result to `out`: `ok:` with
/// each policy's worst-case failover and its warnings, or `error:` and each problem.
///
/// # Errors
/// [`CheckError::Invalid`] when any file has a problem (every file is reported first).
pub fn run(
    paths: &[PathBuf],
    config: Option<&Path>,
    out: &mut impl Write,
) -> Result<(), CheckError> {
    let (mut checked, mut failed) = (0, 0);
    // Without paths: the settings' policies, none when the settings cannot be read.
    let mut default = vec![PathBuf::from("policies")];
    let mut route53 = None;
    if let Some(file) = config {
        checked += 1;
        match Settings::load(file) {
            Ok(settings) => {
                match preflight::check(&settings) {
                    Ok(_) => writeln!(out, "ok: {} (settings)", file.display())?,
                    Err(problems) => {
                        failed += 1;
                        for problem in &problems {
                            writeln!(out, "error: {}: {problem}", file.display())?;
                        }
                    }
                }
                default = settings.policies;
                route53 = Some(settings.route53);
            }
            Err(e) => {
                failed += 1;
                default.clear();
                for problem in &e.problems {
                    writeln!(out, "error: {problem}")?;
                }
            }
        }
    }
    let paths = if paths.is_empty() { &default } else { paths };
    for (file, result) in policy::load_each(paths) {
        checked += 1;
        match result {
            Ok(p) => {
                report(&file, &p, out)?;
                let dp = route53.as_ref().and_then(|r| r.data_plane_of(&p.service.0));
                if let Some(dp) = dp.filter(|_| matches!(p.target, Target::Route53(_))) {
                    writeln!(out, "{}", data_plane_line(&p, dp))?;
                }
            }
            Err(errors) => {
                failed += 1;
                for e in &errors.0 {
                    writeln!(out, "error: {e}")?;
                }
            }
        }
    }
    if failed > 0 {
        return Err(CheckError::Invalid { failed, checked });
    }
    Ok(())
}

/// One valid policy's `ok:` line and its warnings.
fn report(file: &Path, p: &Policy, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(
        out,
        "ok: {} (service {}, {} pools, worst-case failover {}: detection and TTL {} + {} + expected apply time {})",
        file.display(),
        p.service,
        p.pools.len(),
        humantime::format_duration(p.worst_case_rto()),
        humantime::format_duration(p.worst_case_failover()),
        p.failover_waits_text(),
        humantime::format_duration(p.target.expected_apply_time()),
    )?;
    if let Some(w) = p.rto_warning() {
        writeln!(out, "warning: {}: rto_budget: {w}", file.display())?;
    }
    if let Some(w) = p.observe_warning() {
        writeln!(out, "warning: {}: observe: {w}", file.display())?;
    }
    if let Some(w) = alias_ttl_warning(p) {
        writeln!(out, "warning: {}: target.route53.ttl: {w}", file.display())?;
    }
    let route = |ip| route_to(SocketAddr::new(ip, 53));
    for w in family_warnings(p, route, family_routable) {
        writeln!(out, "warning: {}: {w}", file.display())?;
    }
    Ok(())
}

/// The `data-plane:` line of a policy in Route 53 data-plane mode: its worst-case failover
/// (gslb detection + the checkers' `RequestInterval x FailureThreshold` + aggregation + TTL;
/// no Route 53 API call) and its health checks' monthly cost.
pub fn data_plane_line(p: &Policy, dp: &DataPlaneSettings) -> String {
    let ttl = p.target.ttl();
    let detection = data_plane_detection(p);
    let (checkers, aggregation) = dp.checker_delay();
    let (aws, other) = dp.monthly_cost(p.pools.len());
    let f = humantime::format_duration;
    format!(
        "data-plane: service {}: worst-case failover {}: detection {} + checkers {} ({} x {}) + aggregation {} + TTL {}, no Route 53 API call; {} health checks, {aws:.2} USD/month on AWS endpoints, {other:.2} USD/month on other endpoints (Route 53 list prices recorded 2026-12-01, free tier not deducted)",
        p.service,
        f(dp.worst_case_failover(detection, ttl)),
        f(detection),
        f(checkers),
        f(dp.request_interval),
        dp.failure_threshold,
        f(aggregation),
        f(ttl),
        dp.checks_per_service(p.pools.len()),
    )
}

/// gslb's share of a data-plane failover, up to this instance's decision: the policy's
/// worst-case failover without the TTL, plus the engine's waits (`confirm_target`).
pub fn data_plane_detection(p: &Policy) -> std::time::Duration {
    p.failover_waits().iter().fold(
        p.worst_case_failover().saturating_sub(p.target.ttl()),
        |t, (_, w)| t.saturating_add(*w),
    )
}

/// The TTL of an Alias answer for a load balancer: the target's TTL, 60 s for Elastic Load
/// Balancing names (Route 53 developer guide: an Alias record answers with its target's TTL;
/// Elastic Load Balancing names are served with 60 s).
const ALIAS_TARGET_TTL: std::time::Duration = std::time::Duration::from_secs(60);

/// A warning when every pool of a Route 53 target is an Alias record and `ttl` is below
/// [`ALIAS_TARGET_TTL`]: resolvers cache the answer for the target's TTL, while the failover
/// bound and the 2 x TTL spacing of writes are computed from `ttl`.
fn alias_ttl_warning(p: &Policy) -> Option<String> {
    let policy::Target::Route53(t) = &p.target else {
        return None;
    };
    let all_alias = t.pools.iter().all(|r| r.alias_target.is_some());
    (all_alias && t.ttl < ALIAS_TARGET_TTL).then(|| {
        format!(
            "{} is below the {} an Alias answer for a load balancer is cached (the target's \
             TTL, not this one); the worst-case failover and the 2 x TTL spacing of writes use \
             ttl, so they are understated: set ttl = \"60s\"",
            humantime::format_duration(t.ttl),
            humantime::format_duration(ALIAS_TARGET_TTL)
        )
    })
}

/// One warning per endpoint whose host is an IP literal this host has no route to
/// (`route`, see [`route_to`]: a route lookup, no packet sent) while it can use the other
/// family (`family`, see [`family_routable`]): probed from here, it would be `unprobeable`.
/// Only what is known without the network: names are not resolved (whether a name is
/// AAAA-only is the resolver's answer at run time; the probe reports `unprobeable` then), and
/// the answer is this host's, so run `check` on the vantage point's host for it to mean
/// something.
fn family_warnings(
    p: &Policy,
    route: impl Fn(IpAddr) -> bool,
    family: impl Fn(bool) -> bool,
) -> Vec<String> {
    let mut out = Vec::new();
    for pool in p.pools.iter() {
        for e in &pool.endpoints {
            let host = match &e.kind {
                EndpointKind::Http(url) => url.host_str().unwrap_or_default(),
                EndpointKind::Tcp { host, .. } => host.as_str(),
            };
            let bare = host.trim_start_matches('[').trim_end_matches(']');
            let Ok(ip) = bare.parse::<IpAddr>() else {
                continue;
            };
            let v6 = ip.is_ipv6();
            if !route(ip) && family(!v6) {
                let family = if v6 { "IPv6" } else { "IPv4" };
                out.push(format!(
                    "pools.{}: endpoint {} is an {family} address and this host has no {family} route: probed from here it is unprobeable (never counted, never failed over)",
                    pool.id, e.id
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    const DATA_PLANE: &str = "[route53.modes]\napi = \"data_plane\"\n[route53.data_plane]\n\
        instance = \"a\"\nlisten = \"127.0.90.1:8443\"\n[[route53.data_plane.instances]]\n\
        name = \"a\"\nurl = \"https://127.0.90.1:8443\"\n";

    fn load(text: &str) -> Result<Settings, crate::config::SettingsError> {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("gslb.toml");
        std::fs::write(&file, text).expect("write");
        Settings::load(&file)
    }

    #[test]
    fn data_plane_settings_are_checked_and_accepted_with_a_cluster() {
        let alone = load(DATA_PLANE).expect("valid");
        assert!(alone.route53.data_plane_of("api").is_some());
        assert!(
            alone.route53.data_plane_of("web").is_none(),
            "verdict_check by default"
        );
        let cluster = format!(
            "vantage = \"a\"\n{DATA_PLANE}[cluster]\nendpoints = [\"http://127.0.0.1:2379\"]\nvantages = [\"a\", \"b\"]\n"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("gslb.toml");
        std::fs::create_dir(dir.path().join("p")).expect("policies folder");
        std::fs::write(&file, format!("policies = [\"p\"]\n{cluster}")).expect("write");
        let mut out = Vec::new();
        // The empty policy folder is an error of its own; the settings line is what counts.
        let _ = run(&[], Some(&file), &mut out);
        let text = String::from_utf8_lossy(&out);
        assert!(
            text.contains("(settings)") && !text.contains("warning"),
            "data-plane votes work without etcd, no warning: {text}"
        );
        let e = load("[route53.modes]\napi = \"data_plane\"\n").unwrap_err();
        assert!(
            e.to_string()
                .contains("route53.modes.api: data_plane needs a [route53.data_plane] table"),
            "{e}"
        );
        let e = load("[route53.modes]\napi = \"dataplane\"\n").unwrap_err();
        assert!(e.to_string().contains("route53.modes.api"), "{e}");
        let e = load(&DATA_PLANE.replace("instance = \"a\"", "instance = \"z\"")).unwrap_err();
        assert!(
            e.to_string().contains("route53.data_plane.instance: 'z'"),
            "{e}"
        );
    }

    #[test]
    fn check_warns_of_an_ipv6_literal_endpoint_on_a_host_without_ipv6() {
        let text = include_str!("../../policies/api-seoul-tokyo.toml").replace(
            "https://seoul.api.example.com:443/api/v1/health",
            "https://[2001:db8::5]:443/api/v1/health",
        );
        let p = policy::parse(Path::new("api.toml"), &text).expect("valid");
        let no_v6 = |v6: bool| !v6;
        let warnings = family_warnings(&p, |ip: IpAddr| no_v6(ip.is_ipv6()), no_v6);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with(
                "pools.seoul: endpoint https://[2001:db8::5]:443/api/v1/health is an IPv6 address and this host has no IPv6 route"
            ),
            "{warnings:?}"
        );
        assert!(
            family_warnings(&p, |_| true, |_| true).is_empty(),
            "IPv6 works here"
        );
        assert!(
            family_warnings(&p, |_| false, |_| false).is_empty(),
            "no network at all: not a family question"
        );
        // The real route lookup: loopback is always routable, nothing is sent.
        assert!(route_to(SocketAddr::from(([127, 0, 0, 70], 53))));
    }
}
