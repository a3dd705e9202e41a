//! Validation: [`RawPolicy`] -> [`Policy`], reporting every problem, never stopping at the first.
//! Orchestrates the checks of every table (tuning, `[target.*]` and `[observe]` have their own
//! module) and checks what spans tables: the probe, the pools and their endpoints, the
//! thresholds and the RTO budget.

use std::collections::BTreeSet;
use std::time::Duration;

use url::Url;

use super::error::Report;
use super::names::{is_dns_name, normalise_name};
use super::parts::{Endpoint, EndpointKind, Pool, ProbeSpec, Thresholds, failover_bound};
use super::raw::{RawHealth, RawPolicy, RawPool, RawProbe, RawTarget};
use super::types::{Policy, Target};
use super::{cloudflare, observe, route53, tuning};
use crate::model::{EndpointId, PoolId, ServiceId};

/// Shortest probe interval accepted: faster probing says more about the prober than the origin.
const MIN_INTERVAL: Duration = Duration::from_millis(100);
/// Longest probe interval accepted: an hour (a slower check cannot steer traffic).
const MAX_INTERVAL: Duration = Duration::from_secs(3600);
/// Largest `fall`/`rise` accepted.
const MAX_THRESHOLD: u32 = 100;

/// Validates `raw`, adding every problem to `report`. Returns the policy only when none was found.
pub(super) fn validate(raw: RawPolicy, report: &mut Report) -> Option<Policy> {
    let before = report.errors.len();
    let hostname = normalise_name(&raw.hostname);
    names(&raw, &hostname, report);
    let tuning = tuning::tuning(&raw, report);
    let probe = probe_spec(raw.probe, report);
    let thresholds = thresholds(&raw.health, report);
    let pools = pools(&raw.pools, &hostname, report);
    tls_server_name(&probe, &pools, report);
    let target = target(raw.target, &hostname, &pools, report);
    let observe = raw
        .observe
        .and_then(|o| observe::validate(o, &hostname, report));
    if let (Some(budget), Some(t)) = (raw.rto_budget, &target) {
        rto_budget(budget, &probe, thresholds, t.ttl(), report);
    }
    if report.errors.len() > before {
        return None;
    }
    Some(Policy {
        service: ServiceId(raw.service),
        hostname,
        pools: pools.into(),
        probe,
        thresholds,
        mode: raw.mode,
        failback: raw.failback,
        failback_hold: tuning.failback_hold,
        quorum: tuning.quorum,
        damping: tuning.damping,
        flapping: tuning.flapping,
        velocity: tuning.velocity,
        min_dwell: raw.min_dwell,
        rto_budget: raw.rto_budget,
        observe,
        target: target?,
    })
}

/// The longest service or pool name, and pool region: 63 characters (a DNS label's length;
/// names become metric labels, record set identifiers and etcd keys).
pub const MAX_NAME: usize = 63;

/// What a service or pool name must be.
const NAME_RULE: &str = "must be 1 to 63 characters, each a letter, a digit, '-' or '_'";

/// Whether `name` is a service or pool name ([`NAME_RULE`]).
fn is_name(name: &str) -> bool {
    (1..=MAX_NAME).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// `service` (a name for files, metrics and logs) and `hostname` (a fully qualified DNS name).
fn names(raw: &RawPolicy, hostname: &str, report: &mut Report) {
    if !is_name(&raw.service) {
        report.add("service", NAME_RULE);
    }
    if !is_dns_name(hostname) || !hostname.contains('.') {
        report.add(
            "hostname",
            format!(
                "'{}' is not a fully qualified DNS name (no scheme, path or IP address)",
                raw.hostname
            ),
        );
    }
}

/// `[health]`: `fall` and `rise` from 1 to [`MAX_THRESHOLD`].
fn thresholds(raw: &RawHealth, report: &mut Report) -> Thresholds {
    let thresholds = Thresholds {
        fall: raw.fall,
        rise: raw.rise,
    };
    for (key, value) in [
        ("health.fall", thresholds.fall),
        ("health.rise", thresholds.rise),
    ] {
        if value == 0 {
            report.add(key, "must be at least 1 (0 would never change a verdict)");
        } else if value > MAX_THRESHOLD {
            report.add(key, format!("{value} is above the {MAX_THRESHOLD} allowed"));
        }
    }
    thresholds
}

/// `probe.tls_server_name` applies to `https://` endpoints only.
fn tls_server_name(probe: &ProbeSpec, pools: &[Pool], report: &mut Report) {
    if probe.tls_server_name.is_none() {
        return;
    }
    for (i, pool) in pools.iter().enumerate() {
        for (j, e) in pool.endpoints.iter().enumerate() {
            if !matches!(&e.kind, EndpointKind::Http(u) if u.scheme() == "https") {
                report.add(
                    "probe.tls_server_name",
                    format!(
                        "applies to https:// endpoints only, but pools[{i}].endpoints[{j}] is '{}'",
                        e.id
                    ),
                );
            }
        }
    }
}

/// `[target]`: exactly one provider table, validated by its own module.
fn target(raw: RawTarget, hostname: &str, pools: &[Pool], report: &mut Report) -> Option<Target> {
    match (raw.route53, raw.cloudflare) {
        (Some(r), None) => Some(Target::Route53(route53::validate(
            r, hostname, pools, report,
        ))),
        (None, Some(cf)) => Some(Target::Cloudflare(cloudflare::validate(
            cf, hostname, pools, report,
        ))),
        (None, None) => {
            report.add(
                "target",
                "names no provider: add a [target.route53] or [target.cloudflare] table",
            );
            None
        }
        (Some(_), Some(_)) => {
            report.add(
                "target",
                "names two providers: keep exactly one of [target.route53] and [target.cloudflare]",
            );
            None
        }
    }
}

/// `rto_budget`: detection and TTL (`fall × interval + timeout + TTL`) must fit in it.
fn rto_budget(
    budget: Duration,
    probe: &ProbeSpec,
    thresholds: Thresholds,
    ttl: Duration,
    report: &mut Report,
) {
    let worst = failover_bound(probe, thresholds, ttl);
    if worst > budget {
        report.add(
            "rto_budget",
            format!(
                "TTL {} + fall {} x interval {} + timeout {} = {} exceeds the RTO budget of {}",
                humantime::format_duration(ttl),
                thresholds.fall,
                humantime::format_duration(probe.interval),
                humantime::format_duration(probe.timeout),
                humantime::format_duration(worst),
                humantime::format_duration(budget),
            ),
        );
    }
}

/// `probe.interval` and `probe.timeout` as in force (the defaults when not written), checked:
/// the interval within its range, the timeout more than 0 and shorter than the interval.
fn timing(raw: &RawProbe, report: &mut Report) -> (Duration, Duration) {
    let interval = raw.interval.unwrap_or_else(super::raw::default_interval);
    let timeout = raw.timeout.unwrap_or_else(super::raw::default_timeout);
    if interval < MIN_INTERVAL {
        report.add(
            "probe.interval",
            format!(
                "must be at least {}",
                humantime::format_duration(MIN_INTERVAL)
            ),
        );
    }
    if interval > MAX_INTERVAL {
        report.add(
            "probe.interval",
            format!(
                "must be at most {}",
                humantime::format_duration(MAX_INTERVAL)
            ),
        );
    }
    if timeout.is_zero() {
        report.add("probe.timeout", "must be more than 0s");
    }
    if timeout >= interval {
        let default = |written: Option<Duration>| match written {
            Some(_) => "",
            None => " (the default: probe.timeout is not set; a misspelt key is reported above)",
        };
        let interval_default = |written: Option<Duration>| match written {
            Some(_) => "",
            None => " (the default)",
        };
        report.add(
            "probe.timeout",
            format!(
                "timeout {}{} must be shorter than interval {}{} (a probe must end before the next starts)",
                humantime::format_duration(timeout),
                default(raw.timeout),
                humantime::format_duration(interval),
                interval_default(raw.interval),
            ),
        );
    }
    (interval, timeout)
}

fn probe_spec(raw: RawProbe, report: &mut Report) -> ProbeSpec {
    let (interval, timeout) = timing(&raw, report);
    if raw.expected_status.is_empty() {
        report.add(
            "probe.expected_status",
            "must list at least one status code",
        );
    }
    for (i, code) in raw.expected_status.iter().enumerate() {
        if !(100..=599).contains(code) {
            report.add(
                format!("probe.expected_status[{i}]"),
                format!("{code} is not an HTTP status (100-599)"),
            );
        }
    }
    if let Some(h) = &raw.host_header
        && (h.is_empty() || !h.bytes().all(|b| b.is_ascii_graphic()))
    {
        report.add(
            "probe.host_header",
            "must be a non-empty host[:port] of visible ASCII characters",
        );
    }
    if let Some(n) = &raw.tls_server_name
        && !is_dns_name(&normalise_name(n))
    {
        report.add("probe.tls_server_name", format!("'{n}' is not a DNS name"));
    }
    if raw.body_contains.as_deref() == Some("") {
        report.add(
            "probe.body_contains",
            "must not be empty (leave it out to skip the body check)",
        );
    }
    ProbeSpec {
        interval,
        timeout,
        expected_status: raw.expected_status,
        body_contains: raw.body_contains,
        host_header: raw.host_header,
        tls_server_name: raw.tls_server_name,
        tls_verify: raw.tls_verify,
        follow_redirects: raw.follow_redirects,
    }
}

fn pools(raw: &[RawPool], hostname: &str, report: &mut Report) -> Vec<Pool> {
    if raw.len() < 2 {
        report.add(
            "pools",
            format!("needs at least two pools for failover, found {}", raw.len()),
        );
    }
    let mut names = BTreeSet::new();
    let mut priorities = BTreeSet::new();
    let mut seen_endpoints = BTreeSet::new();
    let mut pools = Vec::new();
    for (i, p) in raw.iter().enumerate() {
        let key = format!("pools[{i}]");
        if !is_name(&p.name) {
            report.add(format!("{key}.name"), NAME_RULE);
        } else if !names.insert(p.name.as_str()) {
            report.add(
                format!("{key}.name"),
                format!("duplicate pool name '{}'", p.name),
            );
        }
        if p.region.chars().count() > MAX_NAME || p.region.chars().any(char::is_control) {
            report.add(
                format!("{key}.region"),
                format!("must be at most {MAX_NAME} characters, none of them a control character"),
            );
        }
        if p.priority == 0 {
            report.add(
                format!("{key}.priority"),
                "must be at least 1 (1 = most preferred)",
            );
        } else if !priorities.insert(p.priority) {
            report.add(
                format!("{key}.priority"),
                format!(
                    "duplicate priority {} (pool '{}'): failover order must be total",
                    p.priority, p.name
                ),
            );
        }
        if p.endpoints.is_empty() {
            report.add(
                format!("{key}.endpoints"),
                "must list at least one endpoint",
            );
        }
        let mut endpoints = Vec::new();
        for (j, e) in p.endpoints.iter().enumerate() {
            let ekey = format!("{key}.endpoints[{j}]");
            if !seen_endpoints.insert(e.as_str()) {
                report.add(
                    ekey,
                    format!("'{e}' is listed twice: an endpoint belongs to one pool"),
                );
            } else if let Some(ep) = endpoint(e, hostname, &ekey, report) {
                endpoints.push(ep);
            }
        }
        pools.push(Pool {
            id: PoolId(p.name.clone()),
            priority: p.priority,
            region: p.region.clone(),
            endpoints,
        });
    }
    pools.sort_by_key(|p| p.priority);
    pools
}

pub(super) fn endpoint(
    raw: &str,
    hostname: &str,
    key: &str,
    report: &mut Report,
) -> Option<Endpoint> {
    let url = match Url::parse(raw) {
        Ok(u) => u,
        Err(e) => {
            report.add(key, format!("'{raw}' is not a URL: {e}"));
            return None;
        }
    };
    if !url.username().is_empty() || url.password().is_some() {
        report.add(
            key,
            "must not carry user:password: it would show in logs, labels and status; use an allow-listed health path",
        );
        return None;
    }
    let Some(host) = url.host_str().filter(|h| !h.is_empty()).map(normalise_name) else {
        report.add(key, format!("'{raw}' has no host"));
        return None;
    };
    if url.port() == Some(0) {
        report.add(key, format!("'{raw}' has port 0"));
        return None;
    }
    if host == hostname {
        report.add(
            key,
            format!(
                "'{raw}' probes the public failover hostname '{hostname}': it turns healthy as soon as \
                 the standby answers; probe the region's own name or address instead"
            ),
        );
        return None;
    }
    let kind = match url.scheme() {
        "http" | "https" => EndpointKind::Http(url),
        "tcp" => match url.port() {
            Some(port) => EndpointKind::Tcp { host, port },
            None => {
                report.add(key, format!("'{raw}' needs a port (tcp://host:port)"));
                return None;
            }
        },
        other => {
            report.add(
                key,
                format!("scheme '{other}' is not supported (use http, https or tcp)"),
            );
            return None;
        }
    };
    Some(Endpoint {
        id: EndpointId(raw.to_owned()),
        kind,
    })
}
