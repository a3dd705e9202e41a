//! The Route 53 target of a policy (`[target.route53]`): the raw TOML table, its validated
//! form, and its validation. Kept apart from the Cloudflare target so each provider's rules
//! live in one file. Knows the policy's hostname and pools, nothing else of it.
//!
//! ```toml
//! [target.route53]
//! hosted_zone_id = "Z0123456789ABCDEFGHIJ"
//! record_name = "api.example.com"      # default: the hostname
//! record_type = "A"                    # A, AAAA or CNAME
//! ttl = "60s"
//! [target.route53.pools.seoul]
//! set_identifier = "seoul"             # default: the pool name
//! values = ["192.0.2.10"]
//! [target.route53.pools.tokyo.alias_target]  # instead of values: an Alias record
//! dns_name = "tokyo-alb-1.ap-northeast-1.elb.amazonaws.com"
//! hosted_zone_id = "Z14GRHDCWA56QT"    # the load balancer's canonical hosted zone id
//! evaluate_target_health = false       # default false
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use serde::Deserialize;

use super::error::Report;
use super::names::{is_dns_name, normalise_name};
use super::parts::Pool;
use crate::model::PoolId;

/// Route 53's largest TTL (2^31 - 1 seconds).
const MAX_TTL_SECS: u64 = 2_147_483_647;

/// `[target.route53]` as written.
#[derive(Debug, Deserialize)]
pub struct RawRoute53 {
    pub hosted_zone_id: String,
    #[serde(default)]
    pub record_name: Option<String>,
    #[serde(default = "default_record_type")]
    pub record_type: String,
    #[serde(default = "default_ttl", with = "crate::policy::duration")]
    pub ttl: Duration,
    #[serde(default)]
    pub pools: BTreeMap<String, RawRoute53Pool>,
}

/// `[target.route53.pools.<pool>]`.
#[derive(Debug, Deserialize)]
pub struct RawRoute53Pool {
    #[serde(default)]
    pub set_identifier: Option<String>,
    #[serde(default)]
    pub values: Vec<String>,
    #[serde(default)]
    pub alias_target: Option<RawAliasTarget>,
}

/// `[target.route53.pools.<pool>.alias_target]` as written; missing keys are reported by
/// [`validate`], naming the key.
#[derive(Debug, Deserialize)]
pub struct RawAliasTarget {
    #[serde(default)]
    pub dns_name: Option<String>,
    #[serde(default)]
    pub hosted_zone_id: Option<String>,
    #[serde(default)]
    pub evaluate_target_health: bool,
}

/// `A`.
pub fn default_record_type() -> String {
    "A".into()
}

/// 60 s: AWS recommends a TTL of 60 s or less for records with health checks.
pub fn default_ttl() -> Duration {
    Duration::from_secs(60)
}

/// A Route 53 failover pair (`[target.route53]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Route53Target {
    /// Hosted zone id, e.g. `Z0123456789ABCDEFGHIJ`.
    pub hosted_zone_id: String,
    /// Record name, the public hostname (lower-case, no trailing dot).
    pub record_name: String,
    /// Record type: `A`, `AAAA` or `CNAME`.
    pub record_type: String,
    /// Record TTL in seconds. Default 60 (AWS's advice for records with health checks).
    pub ttl: Duration,
    /// One entry per pool, in the policy's priority order (PRIMARY first).
    pub pools: Vec<Route53Pool>,
}

/// One pool's failover record (`[target.route53.pools.<pool>]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Route53Pool {
    /// The gslb pool.
    pub pool: PoolId,
    /// The record's `SetIdentifier`. Default: the pool name.
    pub set_identifier: String,
    /// The record's values, used when provisioning (IP addresses, or one name for CNAME).
    /// Empty for an Alias record.
    pub values: Vec<String>,
    /// The Alias target, for an Alias record (then `values` is empty); `None` for a record
    /// with values.
    pub alias_target: Option<AliasTarget>,
}

/// An Alias record's target (Route 53 `AliasTarget`), e.g. an ALB or NLB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliasTarget {
    /// The target's DNS name, lower-case, no trailing dot, e.g.
    /// `seoul-alb-1.ap-northeast-2.elb.amazonaws.com`.
    pub dns_name: String,
    /// The target's canonical hosted zone id (the load balancer's, not the record's zone).
    pub hosted_zone_id: String,
    /// Route 53 `EvaluateTargetHealth`: also fail over when the target itself is unhealthy.
    /// Default false.
    pub evaluate_target_health: bool,
}

/// Validates `[target.route53]` against the policy's `hostname` and `pools` (in priority
/// order), adding every problem to `report`.
pub(super) fn validate(
    r: RawRoute53,
    hostname: &str,
    pools: &[Pool],
    report: &mut Report,
) -> Route53Target {
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
    pool_names(&r.pools, pools, report);
    let records = records(&r.pools, &record_type, hostname, pools, report);
    Route53Target {
        hosted_zone_id: r.hosted_zone_id,
        record_name,
        record_type,
        ttl: r.ttl,
        pools: records,
    }
}

/// Reports a third pool and up (a failover pair has two), and records of unknown pools.
fn pool_names(raw: &BTreeMap<String, RawRoute53Pool>, pools: &[Pool], report: &mut Report) {
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
    for name in raw.keys() {
        if !pools.iter().any(|p| p.id.0 == *name) {
            report.add(
                format!("target.route53.pools.{name}"),
                format!("no pool named '{name}' in [[pools]]"),
            );
        }
    }
}

/// The failover records of the first two pools (PRIMARY, SECONDARY), each checked.
fn records(
    raw: &BTreeMap<String, RawRoute53Pool>,
    record_type: &str,
    hostname: &str,
    pools: &[Pool],
    report: &mut Report,
) -> Vec<Route53Pool> {
    let mut out = Vec::new();
    let mut set_ids: BTreeSet<String> = BTreeSet::new();
    for pool in pools.iter().take(2) {
        let key = format!("target.route53.pools.{}", pool.id);
        let Some(rp) = raw.get(&pool.id.0) else {
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
        let alias_target = match &rp.alias_target {
            Some(alias) if !rp.values.is_empty() => {
                report.add(
                    key.clone(),
                    "sets both values and alias_target: a record either has values or is an Alias",
                );
                alias_target(alias, &key, (record_type, hostname), report)
            }
            Some(alias) => alias_target(alias, &key, (record_type, hostname), report),
            None => {
                values(&rp.values, &key, record_type, hostname, report);
                None
            }
        };
        out.push(Route53Pool {
            pool: pool.id.clone(),
            set_identifier,
            values: rp.values.clone(),
            alias_target,
        });
    }
    out
}

/// Checks one pool's `alias_target` (`key` names the pool's record) and returns it when whole.
/// `(record_type, hostname)` are the record's type (upper case) and the policy's hostname.
fn alias_target(
    raw: &RawAliasTarget,
    key: &str,
    (record_type, hostname): (&str, &str),
    report: &mut Report,
) -> Option<AliasTarget> {
    let key = format!("{key}.alias_target");
    if record_type == "CNAME" {
        report.add(
            key.clone(),
            "an Alias to a load balancer is an A or AAAA record, not a CNAME: set \
             target.route53.record_type to A (or AAAA for a dual-stack load balancer)",
        );
    }
    let dns_name = raw.dns_name.as_deref().map(normalise_name);
    match &dns_name {
        None => report.add(
            format!("{key}.dns_name"),
            "must be set: the load balancer's DNS name",
        ),
        Some(name) if name == hostname => report.add(
            format!("{key}.dns_name"),
            format!("'{name}' is the policy's own name: the Alias record would point at itself"),
        ),
        Some(name) if !is_dns_name(name) => report.add(
            format!("{key}.dns_name"),
            format!("'{name}' is not a DNS name an Alias record here can point at"),
        ),
        Some(_) => {}
    }
    let zone = raw.hosted_zone_id.as_deref().map(str::trim);
    let zone_ok = zone.is_some_and(|z| {
        !z.is_empty() && z.len() <= 32 && z.bytes().all(|b| b.is_ascii_alphanumeric())
    });
    if let Some(z) = zone.filter(|z| zone_ok && z.bytes().any(|b| b.is_ascii_lowercase())) {
        report.add(
            format!("{key}.hosted_zone_id"),
            format!(
                "'{z}' has lower-case letters; hosted zone ids are upper case as AWS prints them \
                 (write '{}')",
                z.to_ascii_uppercase()
            ),
        );
    } else if !zone_ok {
        report.add(
            format!("{key}.hosted_zone_id"),
            "must be the target's canonical hosted zone id (letters and digits, e.g. \
             Z14GRHDCWA56QT; `aws elbv2 describe-load-balancers` shows it as CanonicalHostedZoneId)",
        );
    }
    Some(AliasTarget {
        dns_name: dns_name?,
        hosted_zone_id: zone.filter(|_| zone_ok)?.to_owned(),
        evaluate_target_health: raw.evaluate_target_health,
    })
}

/// Checks one record's values against its type (`key` names the pool's record).
fn values(values: &[String], key: &str, record_type: &str, hostname: &str, report: &mut Report) {
    if values.is_empty() {
        report.add(
            format!("{key}.values"),
            "must list the record's values (addresses, or one name for CNAME) or set alias_target",
        );
    }
    if record_type == "CNAME" && values.len() > 1 {
        report.add(
            format!("{key}.values"),
            "a CNAME record takes exactly one value",
        );
    }
    for (i, v) in values.iter().enumerate() {
        let ok = match record_type {
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
}
