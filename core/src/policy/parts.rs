//! The validated parts of a policy that its targets and the engine share: pools and their
//! endpoints, how they are probed, thresholds and the tuning of the engine. Plain data with
//! their defaults; built only by the policy's validation, which lives above this module.

use std::time::Duration;

use url::Url;

use crate::model::{EndpointId, PoolId, ProbeOutcome, ProbeReason};

/// One pool: a region's own endpoints.
#[derive(Debug, Clone, PartialEq)]
pub struct Pool {
    /// Pool name (`pools.name`).
    pub id: PoolId,
    /// Priority, 1 = most preferred (`pools.priority`).
    pub priority: u32,
    /// Free-form region label, e.g. `aws-ap-northeast-2` (`pools.region`).
    pub region: String,
    /// The region's own endpoints.
    pub endpoints: Vec<Endpoint>,
}

/// One endpoint to probe.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    /// The endpoint as written in the policy; also its metric label.
    pub id: EndpointId,
    /// How to probe it.
    pub kind: EndpointKind,
}

/// The protocol of an endpoint, from its URL scheme.
#[derive(Debug, Clone, PartialEq)]
pub enum EndpointKind {
    /// `http://` or `https://`: an HTTP GET judged by status and optional body.
    Http(Url),
    /// `tcp://host:port`: a TCP connect.
    Tcp {
        /// Hostname or IP literal.
        host: String,
        /// Port.
        port: u16,
    },
}

/// How endpoints are probed (`[probe]`).
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeSpec {
    /// Time between two probes of one endpoint. Default 10 s (Route 53 "fast" health checks).
    pub interval: Duration,
    /// Hard limit for one probe, DNS to last body byte. Default 5 s (Cloudflare monitor
    /// default). Always below `interval`.
    pub timeout: Duration,
    /// Status codes that pass. Default `[200]` (Cloudflare monitor `expected_codes`).
    pub expected_status: Vec<u16>,
    /// A substring the body must contain, if any. Only the first 64 KiB are read.
    pub body_contains: Option<String>,
    /// A `Host` header to send instead of the URL's host.
    pub host_header: Option<String>,
    /// A TLS server name (SNI, and the name the certificate must match) instead of the URL's
    /// host; the connection still goes to the URL's host.
    pub tls_server_name: Option<String>,
    /// Verify certificates. Default `true`.
    pub tls_verify: bool,
    /// Follow redirects. Default `false`: a 3xx is judged as a status.
    pub follow_redirects: bool,
}

/// The most characters of `body_contains` an explanation quotes ([`ProbeSpec::explain`]);
/// a longer text is cut there and ends in `…`.
pub const QUOTED_BODY_CHARS: usize = 64;

impl ProbeSpec {
    /// What the check expected, for a failure the origin itself answered: `http_status` gives
    /// the status received and the `expected_status` list, `body_mismatch` the text the body
    /// lacked (at most [`QUOTED_BODY_CHARS`] characters, escaped like a TOML basic string) and
    /// the key to change. `None` for every other outcome (those say nothing about the check).
    ///
    /// E.g. `the body lacks "ok" (probe.body_contains, first 64 KiB read)`.
    pub fn explain(&self, outcome: &ProbeOutcome) -> Option<String> {
        match outcome.reason {
            ProbeReason::HttpStatus => {
                let got = outcome
                    .http_status
                    .map_or_else(|| "another status".to_owned(), |s| format!("HTTP {s}"));
                let want: Vec<String> = self.expected_status.iter().map(u16::to_string).collect();
                Some(format!(
                    "{got}, expected {} (probe.expected_status)",
                    want.join(" or ")
                ))
            }
            ProbeReason::BodyMismatch => {
                let needle = self.body_contains.as_deref().unwrap_or_default();
                let mut quoted: String = needle
                    .chars()
                    .take(QUOTED_BODY_CHARS)
                    .flat_map(char::escape_debug)
                    .collect();
                if needle.chars().nth(QUOTED_BODY_CHARS).is_some() {
                    quoted.push('…');
                }
                Some(format!(
                    "the body lacks \"{quoted}\" (probe.body_contains, first 64 KiB read)"
                ))
            }
            _ => None,
        }
    }
}

/// Rise/fall thresholds (HAProxy's `rise`/`fall`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// Consecutive failures that mark an endpoint down. Default 3 (HAProxy).
    pub fall: u32,
    /// Consecutive successes that mark an endpoint up. Default 2 (HAProxy).
    pub rise: u32,
}

/// Failback rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Failback {
    /// Never return automatically; an operator decides (default).
    #[default]
    Manual,
    /// Return to the most preferred healthy pool once it has been healthy for the failback
    /// hold, is not flap-suppressed, and the spacing rail allows it.
    Auto,
}

/// What the controller does with a policy's decisions (`mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Push decisions to the provider (default).
    #[default]
    Enforce,
    /// Probe, decide and plan, but never write: what would have been pushed is recorded in the
    /// status, the events and the log.
    Shadow,
}

/// Automatic failback hold (`failback_hold`, `failback_hold_max`): `step × n` where `n` is the
/// number of consecutive failovers, capped at `max`. Defaults 5 min and 30 min.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailbackHold {
    /// Added per consecutive failover. Default 5 min.
    pub step: Duration,
    /// The cap. Default 30 min; failovers further apart than this are not consecutive.
    pub max: Duration,
}

impl FailbackHold {
    /// The hold after `n` consecutive failovers (at least one step).
    pub fn after(self, n: u32) -> Duration {
        self.step.saturating_mul(n.max(1)).min(self.max)
    }
}

/// Vantage-point quorum (`[quorum]`). A pool is down (or up) when more than half of the
/// vantage points that reported freshly say so; a tie keeps the pool's current verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quorum {
    /// A vantage point's report is fresh for `fresh_intervals × interval + timeout`. Default 3.
    pub fresh_intervals: u32,
    /// Count the provider's own health signal (Cloudflare pool health, Route 53 health check
    /// status) as one more vote. Default `false`.
    pub provider_vote: bool,
}

/// Flap damping (`[damping]`), after BGP route flap damping (RFC 2439). A pool collects
/// `penalty` at each healthy→unhealthy transition; the penalty halves every `half_life`;
/// above `suppress` the pool cannot be chosen by automatic failback until the penalty decays
/// below `reuse`; the penalty is capped so no suppression outlasts `max_suppress`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Damping {
    /// Added per flap. Default 1000.
    pub penalty: u32,
    /// Decay half-life. Default 15 min.
    pub half_life: Duration,
    /// Suppress above this. Default 3000.
    pub suppress: u32,
    /// Reuse below this. Default 750.
    pub reuse: u32,
    /// Longest suppression. Default 60 min.
    pub max_suppress: Duration,
}

impl Damping {
    /// The penalty ceiling `reuse × 2^(max_suppress / half_life)` (RFC 2439 section 4.8): a
    /// penalty at the ceiling decays to `reuse` in exactly `max_suppress`.
    pub fn ceiling(&self) -> f64 {
        f64::from(self.reuse)
            * (self.max_suppress.as_secs_f64() / self.half_life.as_secs_f64()).exp2()
    }
}

/// Flapping detection (`[flapping]`), after Nagios: a weighted state-change percentage over the
/// last 21 probe results (recent changes weigh more); flapping starts above `high` and stops
/// below `low`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Flapping {
    /// Percent. Default 30 (Nagios).
    pub high: f64,
    /// Percent. Default 20 (Nagios).
    pub low: f64,
}

/// The per-service velocity limit (`[velocity]`): a token bucket of automatic switches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Velocity {
    /// Switches allowed at once. Default 2.
    pub burst: u32,
    /// One more switch becomes available per `refill`. Default 30 min.
    pub refill: Duration,
}

/// `fall × interval + timeout + ttl`: the worst case from the first failed probe to a DNS
/// answer naming the new region, before provider apply time. The one formula behind
/// `Policy::worst_case_failover` and the `rto_budget` check of validation.
pub(super) fn failover_bound(probe: &ProbeSpec, thresholds: Thresholds, ttl: Duration) -> Duration {
    probe
        .interval
        .saturating_mul(thresholds.fall)
        .saturating_add(probe.timeout)
        .saturating_add(ttl)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(body: Option<&str>) -> ProbeSpec {
        ProbeSpec {
            interval: Duration::from_secs(10),
            timeout: Duration::from_secs(5),
            expected_status: vec![200, 204],
            body_contains: body.map(str::to_owned),
            host_header: None,
            tls_server_name: None,
            tls_verify: true,
            follow_redirects: false,
        }
    }

    fn failed(reason: ProbeReason, status: Option<u16>) -> ProbeOutcome {
        ProbeOutcome {
            success: false,
            duration: Duration::from_millis(3),
            http_status: status,
            reason,
            dns_lookup: None,
            cert_expiry: None,
        }
    }

    #[test]
    fn a_body_mismatch_names_the_text_it_expected() {
        let why = spec(Some("ok"))
            .explain(&failed(ProbeReason::BodyMismatch, Some(200)))
            .expect("explained");
        assert_eq!(
            why,
            "the body lacks \"ok\" (probe.body_contains, first 64 KiB read)"
        );
    }

    #[test]
    fn a_long_or_odd_body_text_is_quoted_bounded_and_escaped() {
        let long = format!("\"{}\n", "x".repeat(500));
        let why = spec(Some(&long))
            .explain(&failed(ProbeReason::BodyMismatch, Some(200)))
            .expect("explained");
        assert!(why.starts_with("the body lacks \"\\\"xxx"), "{why}");
        assert!(why.contains("x…\" (probe.body_contains"), "{why}");
        assert!(!why.contains('\n'), "{why}");
        assert!(why.len() < 64 + 80, "{why}");
    }

    #[test]
    fn a_wrong_status_names_the_expected_ones_and_other_failures_say_nothing() {
        let s = spec(None);
        assert_eq!(
            s.explain(&failed(ProbeReason::HttpStatus, Some(503)))
                .as_deref(),
            Some("HTTP 503, expected 200 or 204 (probe.expected_status)")
        );
        assert_eq!(s.explain(&failed(ProbeReason::Timeout, None)), None);
    }
}
