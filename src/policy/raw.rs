//! The policy as written in TOML. Every field has a named default function; nothing here
//! validates — [`super::validate`] does, and reports every problem at once.
//!
//! Unknown keys are not refused by serde (`deny_unknown_fields` stops at the first one):
//! [`super::parse`] collects every ignored key with `serde_ignored` and reports each as an error.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::types::Failback;

/// A policy file, top level.
#[derive(Debug, Deserialize)]
pub struct RawPolicy {
    pub service: String,
    pub hostname: String,
    #[serde(default)]
    pub failback: Failback,
    #[serde(default = "default_min_dwell", with = "humantime_serde")]
    pub min_dwell: Duration,
    #[serde(default, with = "humantime_serde")]
    pub rto_budget: Option<Duration>,
    #[serde(default)]
    pub probe: RawProbe,
    #[serde(default)]
    pub health: RawHealth,
    pub pools: Vec<RawPool>,
    pub target: RawTarget,
}

/// `[probe]`.
#[derive(Debug, Deserialize)]
pub struct RawProbe {
    #[serde(default = "default_interval", with = "humantime_serde")]
    pub interval: Duration,
    #[serde(default = "default_timeout", with = "humantime_serde")]
    pub timeout: Duration,
    #[serde(default = "default_expected_status")]
    pub expected_status: Vec<u16>,
    #[serde(default)]
    pub body_contains: Option<String>,
    #[serde(default)]
    pub host_header: Option<String>,
    #[serde(default)]
    pub tls_server_name: Option<String>,
    #[serde(default = "default_true")]
    pub tls_verify: bool,
    #[serde(default)]
    pub follow_redirects: bool,
}

impl Default for RawProbe {
    fn default() -> Self {
        Self {
            interval: default_interval(),
            timeout: default_timeout(),
            expected_status: default_expected_status(),
            body_contains: None,
            host_header: None,
            tls_server_name: None,
            tls_verify: true,
            follow_redirects: false,
        }
    }
}

/// `[health]`.
#[derive(Debug, Deserialize)]
pub struct RawHealth {
    #[serde(default = "default_fall")]
    pub fall: u32,
    #[serde(default = "default_rise")]
    pub rise: u32,
}

impl Default for RawHealth {
    fn default() -> Self {
        Self {
            fall: default_fall(),
            rise: default_rise(),
        }
    }
}

/// `[[pools]]`.
#[derive(Debug, Deserialize)]
pub struct RawPool {
    pub name: String,
    pub priority: u32,
    #[serde(default)]
    pub region: String,
    pub endpoints: Vec<String>,
}

/// `[target]`: exactly one provider table.
#[derive(Debug, Deserialize)]
pub struct RawTarget {
    #[serde(default)]
    pub route53: Option<RawRoute53>,
    #[serde(default)]
    pub cloudflare: Option<super::cloudflare::RawCloudflare>,
}

/// `[target.route53]`.
#[derive(Debug, Deserialize)]
pub struct RawRoute53 {
    pub hosted_zone_id: String,
    #[serde(default)]
    pub record_name: Option<String>,
    #[serde(default = "default_record_type")]
    pub record_type: String,
    #[serde(default = "default_ttl", with = "humantime_serde")]
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
}

/// 5 minutes: long enough that a recovered region is not trusted after one good minute.
pub fn default_min_dwell() -> Duration {
    Duration::from_secs(300)
}

/// 10 s: Route 53's "fast" health-check interval.
pub fn default_interval() -> Duration {
    Duration::from_secs(10)
}

/// 5 s: Cloudflare's monitor default timeout.
pub fn default_timeout() -> Duration {
    Duration::from_secs(5)
}

/// `[200]`: Cloudflare's monitor default `expected_codes`.
pub fn default_expected_status() -> Vec<u16> {
    vec![200]
}

/// 3: HAProxy's default `fall`.
pub fn default_fall() -> u32 {
    3
}

/// 2: HAProxy's default `rise`.
pub fn default_rise() -> u32 {
    2
}

/// `A`.
pub fn default_record_type() -> String {
    "A".into()
}

/// 60 s: AWS recommends a TTL of 60 s or less for records with health checks.
pub fn default_ttl() -> Duration {
    Duration::from_secs(60)
}

fn default_true() -> bool {
    true
}
