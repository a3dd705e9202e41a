//! The Cloudflare target of a policy (`[target.cloudflare]`): the raw TOML table, its validated
//! form, and its validation. Kept apart from the Route 53 target so each provider's rules live
//! in one file. Knows the policy's hostname and pools, nothing else of it.
//!
//! ```toml
//! [target.cloudflare]
//! account_id = "023e105f4ecef8ad9ca31a8372d0c353"   # owns the pools
//! zone_id = "023e105f4ecef8ad9ca31a8372d0c354"      # owns the load balancer
//! load_balancer = "web.example.com"                 # name (default: hostname) or id
//! ttl = "30s"                                       # the load balancer's DNS TTL
//! [target.cloudflare.pools.ncp]
//! pool_id = "17b5962d775c646f3f9725cbc7a53df4"
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Deserialize;

use super::error::Report;
use super::names::{is_dns_name, normalise_name};
use super::parts::Pool;
use crate::model::PoolId;

/// `[target.cloudflare]` as written.
#[derive(Debug, Deserialize)]
pub struct RawCloudflare {
    pub account_id: String,
    pub zone_id: String,
    #[serde(default)]
    pub load_balancer: Option<String>,
    #[serde(default = "default_ttl", with = "crate::policy::duration")]
    pub ttl: Duration,
    #[serde(default)]
    pub pools: BTreeMap<String, RawCloudflarePool>,
}

/// `[target.cloudflare.pools.<pool>]`.
#[derive(Debug, Deserialize)]
pub struct RawCloudflarePool {
    pub pool_id: String,
}

/// 30 s: Cloudflare's default TTL for DNS-only (unproxied) load balancers (Cloudflare Load
/// Balancing docs; the API's `ttl` example). Proxied load balancers answer with Cloudflare's
/// own addresses, so a failover there does not wait for a TTL at all.
pub fn default_ttl() -> Duration {
    Duration::from_secs(30)
}

/// A Cloudflare load balancer (`[target.cloudflare]`).
#[derive(Debug, Clone, PartialEq)]
pub struct CloudflareTarget {
    /// The account that owns the pools (32 hex digits).
    pub account_id: String,
    /// The zone that owns the load balancer (32 hex digits).
    pub zone_id: String,
    /// The load balancer: its id (32 hex digits) or its name, which must be the policy's
    /// hostname. Default: the hostname.
    pub load_balancer: String,
    /// The load balancer's DNS TTL, used only for the worst-case failover time. Default 30 s.
    pub ttl: Duration,
    /// One entry per pool, in the policy's priority order.
    pub pools: Vec<CloudflarePoolRef>,
}

/// One gslb pool's Cloudflare pool (`[target.cloudflare.pools.<pool>]`).
#[derive(Debug, Clone, PartialEq)]
pub struct CloudflarePoolRef {
    /// The gslb pool.
    pub pool: PoolId,
    /// The Cloudflare pool id (32 hex digits).
    pub pool_id: String,
}

fn is_cloudflare_id(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

const ID_RULE: &str = "must be a Cloudflare id: 32 hexadecimal digits";

/// Validates `[target.cloudflare]` against the policy's `hostname` and `pools`, adding every
/// problem to `report`.
pub(super) fn validate(
    r: RawCloudflare,
    hostname: &str,
    pools: &[Pool],
    report: &mut Report,
) -> CloudflareTarget {
    for (key, value) in [("account_id", &r.account_id), ("zone_id", &r.zone_id)] {
        if !is_cloudflare_id(value) {
            report.add(
                format!("target.cloudflare.{key}"),
                format!("'{value}' {ID_RULE}"),
            );
        }
    }
    let load_balancer = load_balancer(r.load_balancer.as_deref(), hostname, report);
    if r.ttl.is_zero() || r.ttl.subsec_nanos() != 0 || r.ttl > Duration::from_secs(86_400) {
        report.add(
            "target.cloudflare.ttl",
            "must be a whole number of seconds from 1s to 86400s",
        );
    }
    CloudflareTarget {
        pools: pool_refs(&r.pools, pools, report),
        account_id: r.account_id.to_ascii_lowercase(),
        zone_id: r.zone_id.to_ascii_lowercase(),
        load_balancer,
        ttl: r.ttl,
    }
}

/// The load balancer: an id (lower-cased), or a name that must be the policy's hostname
/// (default).
fn load_balancer(raw: Option<&str>, hostname: &str, report: &mut Report) -> String {
    match raw {
        Some(lb) if is_cloudflare_id(lb) => lb.to_ascii_lowercase(),
        Some(lb) => {
            let name = normalise_name(lb);
            if !is_dns_name(&name) || name != hostname {
                report.add(
                    "target.cloudflare.load_balancer",
                    format!(
                        "'{lb}' is neither a load balancer id (32 hexadecimal digits) nor the \
                         policy hostname '{hostname}'"
                    ),
                );
            }
            name
        }
        None => hostname.to_owned(),
    }
}

/// Every pool's Cloudflare pool id, in the policy's priority order; ids of unknown pools,
/// missing ids, malformed ids and ids used twice are reported.
fn pool_refs(
    raw: &BTreeMap<String, RawCloudflarePool>,
    pools: &[Pool],
    report: &mut Report,
) -> Vec<CloudflarePoolRef> {
    for name in raw.keys() {
        if !pools.iter().any(|p| p.id.0 == *name) {
            report.add(
                format!("target.cloudflare.pools.{name}"),
                format!("no pool named '{name}' in [[pools]]"),
            );
        }
    }
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for pool in pools {
        let key = format!("target.cloudflare.pools.{}", pool.id);
        let Some(rp) = raw.get(&pool.id.0) else {
            report.add(
                key,
                format!(
                    "missing: every pool needs its Cloudflare pool id (pool '{}')",
                    pool.id
                ),
            );
            continue;
        };
        let pool_id = rp.pool_id.to_ascii_lowercase();
        if !is_cloudflare_id(&pool_id) {
            report.add(
                format!("{key}.pool_id"),
                format!("'{}' {ID_RULE}", rp.pool_id),
            );
        } else if !seen.insert(pool_id.clone()) {
            report.add(
                format!("{key}.pool_id"),
                format!("'{}' is used by another pool", rp.pool_id),
            );
        }
        out.push(CloudflarePoolRef {
            pool: pool.id.clone(),
            pool_id,
        });
    }
    out
}
