//! Validation: [`RawPolicy`] -> [`Policy`], reporting every problem, never stopping at the first.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use url::Url;

use super::error::Report;
use super::raw::{RawPolicy, RawProbe, RawRoute53};
use super::types::{
    Endpoint, EndpointKind, Policy, Pool, ProbeSpec, Route53Pool, Route53Target, Target, Thresholds,
};
use crate::model::{EndpointId, PoolId, ServiceId};

/// Shortest probe interval accepted: faster probing says more about the prober than the origin.
const MIN_INTERVAL: Duration = Duration::from_millis(100);
/// Longest probe interval accepted: an hour (a slower check cannot steer traffic).
const MAX_INTERVAL: Duration = Duration::from_secs(3600);
/// Largest `fall`/`rise` accepted.
const MAX_THRESHOLD: u32 = 100;
/// Route 53's largest TTL (2^31 - 1 seconds).
const MAX_TTL_SECS: u64 = 2_147_483_647;

/// Validates `raw`, adding every problem to `report`. Returns the policy only when none was found.
pub(super) fn validate(raw: RawPolicy, report: &mut Report) -> Option<Policy> {
    let before = report.errors.len();
    let hostname = normalise_name(&raw.hostname);
    if raw.service.is_empty()
        || !raw
            .service
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        report.add(
            "service",
            "must be non-empty and use only letters, digits, '-' and '_'",
        );
    }
    if !is_dns_name(&hostname) || !hostname.contains('.') {
        report.add(
            "hostname",
            format!(
                "'{}' is not a fully qualified DNS name (no scheme, path or IP address)",
                raw.hostname
            ),
        );
    }
    let tuning = super::tuning::tuning(&raw, report);
    let probe = probe_spec(raw.probe, report);
    let thresholds = Thresholds {
        fall: raw.health.fall,
        rise: raw.health.rise,
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
    let pools = pools(&raw.pools, &hostname, report);
    if probe.tls_server_name.is_some() {
        for (i, pool) in pools.iter().enumerate() {
            for (j, e) in pool.endpoints.iter().enumerate() {
                if !matches!(&e.kind, EndpointKind::Http(u) if u.scheme() == "https") {
                    report.add(
                        "probe.tls_server_name",
                        format!("applies to https:// endpoints only, but pools[{i}].endpoints[{j}] is '{}'", e.id),
                    );
                }
            }
        }
    }
    let target = match (raw.target.route53, raw.target.cloudflare) {
        (r53, None) => target(r53, &hostname, &pools, report),
        (None, Some(cf)) => super::cloudflare::validate(cf, &hostname, &pools, report),
        (Some(_), Some(_)) => {
            report.add(
                "target",
                "names two providers: keep exactly one of [target.route53] and [target.cloudflare]",
            );
            None
        }
    };
    let observe = raw
        .observe
        .and_then(|o| super::observe::validate(o, &hostname, report));
    if let (Some(budget), Some(t)) = (raw.rto_budget, &target) {
        let worst = super::types::failover_bound(&probe, thresholds, t.ttl());
        if worst > budget {
            report.add(
                "rto_budget",
                format!(
                    "TTL {} + fall {} x interval {} + timeout {} = {} exceeds the RTO budget of {}",
                    humantime::format_duration(t.ttl()),
                    thresholds.fall,
                    humantime::format_duration(probe.interval),
                    humantime::format_duration(probe.timeout),
                    humantime::format_duration(worst),
                    humantime::format_duration(budget),
                ),
            );
        }
    }
    if report.errors.len() > before {
        return None;
    }
    Some(Policy {
        service: ServiceId(raw.service),
        hostname,
        pools,
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

fn probe_spec(raw: RawProbe, report: &mut Report) -> ProbeSpec {
    if raw.interval < MIN_INTERVAL {
        report.add(
            "probe.interval",
            format!(
                "must be at least {}",
                humantime::format_duration(MIN_INTERVAL)
            ),
        );
    }
    if raw.interval > MAX_INTERVAL {
        report.add(
            "probe.interval",
            format!(
                "must be at most {}",
                humantime::format_duration(MAX_INTERVAL)
            ),
        );
    }
    if raw.timeout.is_zero() {
        report.add("probe.timeout", "must be more than 0s");
    }
    if raw.timeout >= raw.interval {
        report.add(
            "probe.timeout",
            format!(
                "timeout {} must be shorter than interval {} (a probe must end before the next starts)",
                humantime::format_duration(raw.timeout),
                humantime::format_duration(raw.interval)
            ),
        );
    }
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
    if let Some(h) = &raw.host_header {
        if h.is_empty() || !h.bytes().all(|b| b.is_ascii_graphic()) {
            report.add(
                "probe.host_header",
                "must be a non-empty host[:port] of visible ASCII characters",
            );
        }
    }
    if let Some(n) = &raw.tls_server_name {
        if !is_dns_name(&normalise_name(n)) {
            report.add("probe.tls_server_name", format!("'{n}' is not a DNS name"));
        }
    }
    if raw.body_contains.as_deref() == Some("") {
        report.add(
            "probe.body_contains",
            "must not be empty (leave it out to skip the body check)",
        );
    }
    ProbeSpec {
        interval: raw.interval,
        timeout: raw.timeout,
        expected_status: raw.expected_status,
        body_contains: raw.body_contains,
        host_header: raw.host_header,
        tls_server_name: raw.tls_server_name,
        tls_verify: raw.tls_verify,
        follow_redirects: raw.follow_redirects,
    }
}

fn pools(raw: &[super::raw::RawPool], hostname: &str, report: &mut Report) -> Vec<Pool> {
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
        if p.name.is_empty()
            || !p
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            report.add(
                format!("{key}.name"),
                "must be non-empty and use only letters, digits, '-' and '_'",
            );
        } else if !names.insert(p.name.as_str()) {
            report.add(
                format!("{key}.name"),
                format!("duplicate pool name '{}'", p.name),
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

fn target(
    raw: Option<RawRoute53>,
    hostname: &str,
    pools: &[Pool],
    report: &mut Report,
) -> Option<Target> {
    let Some(r) = raw else {
        report.add(
            "target",
            "names no provider: add a [target.route53] or [target.cloudflare] table",
        );
        return None;
    };
    let record_name = normalise_name(r.record_name.as_deref().unwrap_or(hostname));
    if record_name != hostname {
        report.add(
            "target.route53.record_name",
            format!("'{record_name}' differs from the policy hostname '{hostname}'"),
        );
    }
    if r.hosted_zone_id.trim().is_empty() {
        report.add("target.route53.hosted_zone_id", "must not be empty");
    }
    let record_type = r.record_type.to_ascii_uppercase();
    if !matches!(record_type.as_str(), "A" | "AAAA" | "CNAME") {
        report.add(
            "target.route53.record_type",
            format!("'{}' is not one of A, AAAA, CNAME", r.record_type),
        );
    }
    if r.ttl.as_secs() > MAX_TTL_SECS || r.ttl.subsec_nanos() != 0 {
        report.add(
            "target.route53.ttl",
            "must be a whole number of seconds up to 2147483647 (Route 53 limit)",
        );
    }
    if pools.len() > 2 {
        for extra in &pools[2..] {
            report.add(
                "target.route53.pools",
                format!(
                    "pool '{}' (priority {}) would be a third pool: a Route 53 failover pair has only a \
                     PRIMARY and a SECONDARY (chaining failover pairs is not supported)",
                    extra.id, extra.priority
                ),
            );
        }
    }
    for name in r.pools.keys() {
        if !pools.iter().any(|p| p.id.0 == *name) {
            report.add(
                format!("target.route53.pools.{name}"),
                format!("no pool named '{name}' in [[pools]]"),
            );
        }
    }
    let mut out = Vec::new();
    let mut set_ids: BTreeSet<String> = BTreeSet::new();
    for pool in pools.iter().take(2) {
        let key = format!("target.route53.pools.{}", pool.id);
        let Some(rp) = r.pools.get(&pool.id.0) else {
            report.add(
                key,
                format!(
                    "missing: every pool needs its failover record (pool '{}')",
                    pool.id
                ),
            );
            continue;
        };
        let set_identifier = rp
            .set_identifier
            .clone()
            .unwrap_or_else(|| pool.id.0.clone());
        if set_identifier.is_empty() || set_identifier.len() > 128 {
            report.add(
                format!("{key}.set_identifier"),
                "must be 1 to 128 characters (Route 53 limit)",
            );
        } else if !set_ids.insert(set_identifier.clone()) {
            report.add(
                format!("{key}.set_identifier"),
                format!("'{set_identifier}' is used by another pool"),
            );
        }
        if rp.values.is_empty() {
            report.add(
                format!("{key}.values"),
                "must list the record's values (addresses, or one name for CNAME)",
            );
        }
        if record_type == "CNAME" && rp.values.len() > 1 {
            report.add(
                format!("{key}.values"),
                "a CNAME record takes exactly one value",
            );
        }
        for (i, v) in rp.values.iter().enumerate() {
            let ok = match record_type.as_str() {
                "A" => v.parse::<Ipv4Addr>().is_ok(),
                "AAAA" => v.parse::<Ipv6Addr>().is_ok(),
                _ => is_dns_name(&normalise_name(v)) && normalise_name(v) != hostname,
            };
            if !ok {
                report.add(
                    format!("{key}.values[{i}]"),
                    format!("'{v}' is not a valid {record_type} value here"),
                );
            }
        }
        out.push(Route53Pool {
            pool: pool.id.clone(),
            set_identifier,
            values: rp.values.clone(),
        });
    }
    Some(Target::Route53(Route53Target {
        hosted_zone_id: r.hosted_zone_id,
        record_name,
        record_type,
        ttl: r.ttl,
        pools: out,
    }))
}

/// Whether `name` (normalised) is a DNS name: dot-separated labels of 1-63 letters, digits and
/// hyphens, not starting or ending with a hyphen, 253 characters at most, and not an IP address.
pub(super) fn is_dns_name(name: &str) -> bool {
    name.len() <= 253
        && name.parse::<std::net::IpAddr>().is_err()
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// Lower-case, without a trailing dot.
pub(super) fn normalise_name(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}
