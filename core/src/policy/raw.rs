//! The policy as written in TOML. Every field has a named default function; nothing here
//! validates: the policy's validation (`validate`, above this module) does, and reports every
//! problem at once. The tables of `[target.*]` and `[observe]` live with their validation, in
//! one module each.
//!
//! Unknown keys are not refused by serde (`deny_unknown_fields` stops at the first one):
//! `policy::parse` collects every ignored key with `serde_ignored` and reports each as an error,
//! and reads on past a value of the wrong type (see `lenient`).

use std::time::Duration;

use serde::Deserialize;

use super::cloudflare::RawCloudflare;
use super::observe::RawObserve;
use super::parts::{Failback, Mode};
use super::route53::RawRoute53;

/// A policy file, top level.
#[derive(Debug, Deserialize)]
pub struct RawPolicy {
    pub service: String,
    pub hostname: String,
    #[serde(default)]
    pub mode: Mode,
    #[serde(default)]
    pub failback: Failback,
    #[serde(default = "default_failback_hold", with = "crate::policy::duration")]
    pub failback_hold: Duration,
    #[serde(
        default = "default_failback_hold_max",
        with = "crate::policy::duration"
    )]
    pub failback_hold_max: Duration,
    #[serde(default = "default_min_dwell", with = "crate::policy::duration")]
    pub min_dwell: Duration,
    #[serde(default, with = "crate::policy::duration")]
    pub rto_budget: Option<Duration>,
    #[serde(default)]
    pub probe: RawProbe,
    #[serde(default)]
    pub health: RawHealth,
    #[serde(default)]
    pub quorum: RawQuorum,
    #[serde(default)]
    pub damping: RawDamping,
    #[serde(default)]
    pub flapping: RawFlapping,
    #[serde(default)]
    pub velocity: RawVelocity,
    pub pools: Vec<RawPool>,
    pub target: RawTarget,
    #[serde(default)]
    pub observe: Option<RawObserve>,
}

/// `[probe]`.
#[derive(Debug, Deserialize)]
pub struct RawProbe {
    /// `None` when not written: [`default_interval`] applies (and messages say so).
    #[serde(default, with = "crate::policy::duration")]
    pub interval: Option<Duration>,
    /// `None` when not written: [`default_timeout`] applies (and messages say so).
    #[serde(default, with = "crate::policy::duration")]
    pub timeout: Option<Duration>,
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
            interval: None,
            timeout: None,
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

/// `[quorum]`.
#[derive(Debug, Deserialize)]
pub struct RawQuorum {
    #[serde(default = "default_fresh_intervals")]
    pub fresh_intervals: u32,
    #[serde(default)]
    pub provider_vote: bool,
}

impl Default for RawQuorum {
    fn default() -> Self {
        Self {
            fresh_intervals: default_fresh_intervals(),
            provider_vote: false,
        }
    }
}

/// `[damping]`.
#[derive(Debug, Deserialize)]
pub struct RawDamping {
    #[serde(default = "default_penalty")]
    pub penalty: u32,
    #[serde(default = "default_half_life", with = "crate::policy::duration")]
    pub half_life: Duration,
    #[serde(default = "default_suppress")]
    pub suppress: u32,
    #[serde(default = "default_reuse")]
    pub reuse: u32,
    #[serde(default = "default_max_suppress", with = "crate::policy::duration")]
    pub max_suppress: Duration,
}

impl Default for RawDamping {
    fn default() -> Self {
        Self {
            penalty: default_penalty(),
            half_life: default_half_life(),
            suppress: default_suppress(),
            reuse: default_reuse(),
            max_suppress: default_max_suppress(),
        }
    }
}

/// `[flapping]`.
#[derive(Debug, Deserialize)]
pub struct RawFlapping {
    #[serde(default = "default_flap_high")]
    pub high: f64,
    #[serde(default = "default_flap_low")]
    pub low: f64,
}

impl Default for RawFlapping {
    fn default() -> Self {
        Self {
            high: default_flap_high(),
            low: default_flap_low(),
        }
    }
}

/// `[velocity]`.
#[derive(Debug, Deserialize)]
pub struct RawVelocity {
    #[serde(default = "default_burst")]
    pub burst: u32,
    #[serde(default = "default_refill", with = "crate::policy::duration")]
    pub refill: Duration,
}

impl Default for RawVelocity {
    fn default() -> Self {
        Self {
            burst: default_burst(),
            refill: default_refill(),
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
    pub cloudflare: Option<RawCloudflare>,
}

/// 5 minutes: long enough that a recovered region is not trusted after one good minute.
pub fn default_min_dwell() -> Duration {
    Duration::from_secs(300)
}

/// 5 minutes per consecutive failover before an automatic failback.
pub fn default_failback_hold() -> Duration {
    Duration::from_secs(300)
}

/// 30 minutes: the longest the failback hold grows.
pub fn default_failback_hold_max() -> Duration {
    Duration::from_secs(1800)
}

/// 3 intervals: the staleness window of issue 2's engine, kept for vantage freshness.
pub fn default_fresh_intervals() -> u32 {
    3
}

/// 1000 per flap: RFC 2439 / Cisco IOS `bgp dampening` figure of merit per flap.
pub fn default_penalty() -> u32 {
    1000
}

/// 15 minutes: RFC 2439 / Cisco IOS `bgp dampening` default half-life.
pub fn default_half_life() -> Duration {
    Duration::from_secs(15 * 60)
}

/// 3000: a pool must flap four times within about one half-life to be suppressed (Cisco's
/// default 2000 suppresses on the third; RIPE-580 argues for higher thresholds).
pub fn default_suppress() -> u32 {
    3000
}

/// 750: RFC 2439 / Cisco IOS `bgp dampening` default reuse limit.
pub fn default_reuse() -> u32 {
    750
}

/// 60 minutes: RFC 2439 / Cisco IOS `bgp dampening` default maximum suppress time.
pub fn default_max_suppress() -> Duration {
    Duration::from_secs(3600)
}

/// 30 %: Nagios' default `high_service_flap_threshold`.
pub fn default_flap_high() -> f64 {
    30.0
}

/// 20 %: Nagios' default `low_service_flap_threshold`.
pub fn default_flap_low() -> f64 {
    20.0
}

/// 2 switches in a burst: the first failover and one return are never blocked.
pub fn default_burst() -> u32 {
    2
}

/// One more switch per 30 minutes.
pub fn default_refill() -> Duration {
    Duration::from_secs(1800)
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

fn default_true() -> bool {
    true
}
