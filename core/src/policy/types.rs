//! The validated policy: what the rest of gslb reads. Only [`super::load`] and
//! [`super::parse`] construct these.

use std::time::Duration;

use url::Url;

use crate::model::{EndpointId, PoolId, ServiceId};

/// A validated service policy (one TOML file).
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// The service name (`service`).
    pub service: ServiceId,
    /// The public failover hostname users resolve (`hostname`), lower-case, no trailing dot.
    pub hostname: String,
    /// Pools in priority order, most preferred first.
    pub pools: Vec<Pool>,
    /// How each endpoint is probed.
    pub probe: ProbeSpec,
    /// Consecutive thresholds.
    pub thresholds: Thresholds,
    /// `enforce` pushes decisions; `shadow` runs everything and records what it would push.
    pub mode: Mode,
    /// Whether traffic returns to a recovered preferred pool by itself.
    pub failback: Failback,
    /// How long a recovered preferred pool must stay healthy before an automatic failback.
    pub failback_hold: FailbackHold,
    /// Vantage-point quorum.
    pub quorum: Quorum,
    /// Flap damping of pools.
    pub damping: Damping,
    /// Flapping detection thresholds (for alerts).
    pub flapping: Flapping,
    /// The service's velocity limit on automatic switches.
    pub velocity: Velocity,
    /// Minimum time between two switches that are not a failover away from a down pool.
    pub min_dwell: Duration,
    /// The recovery-time objective the detection settings must fit in, if any.
    pub rto_budget: Option<Duration>,
    /// Where decisions are pushed.
    pub target: Target,
    /// How failovers are watched from the outside (`[observe]`), if at all.
    pub observe: Option<super::Observe>,
}

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

/// Where a policy's decisions go.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// A Route 53 failover pair.
    Route53(Route53Target),
    /// A Cloudflare load balancer.
    Cloudflare(super::CloudflareTarget),
}

impl Target {
    /// The provider's usual time from accepting a change to serving it everywhere, assumed by
    /// [`Policy::worst_case_rto`]: Route 53 60 s (AWS: changes reach all Route 53
    /// authoritative servers "generally within 60 seconds", `GetChange`/`INSYNC` docs);
    /// Cloudflare 5 s (Cloudflare: load balancer and pool changes apply globally within
    /// seconds).
    pub fn expected_apply_time(&self) -> Duration {
        match self {
            Self::Route53(_) => Duration::from_secs(60),
            Self::Cloudflare(_) => Duration::from_secs(5),
        }
    }

    /// Whether a DNS answer for the public name tells which pool serves, so the failover
    /// observer's DNS phase can run: Route 53 `A`/`AAAA` records (the pools' addresses). Not a
    /// Route 53 CNAME (the answer names a host) nor Cloudflare (a proxied load balancer answers
    /// with Cloudflare's addresses whichever pool serves).
    pub fn dns_names_the_pool(&self) -> bool {
        matches!(self, Self::Route53(r) if r.record_type != "CNAME")
    }

    /// The TTL of the answers the target serves: the records' TTL (Route 53) or the load
    /// balancer's (Cloudflare).
    pub fn ttl(&self) -> Duration {
        match self {
            Self::Route53(r) => r.ttl,
            Self::Cloudflare(c) => c.ttl,
        }
    }
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
    pub values: Vec<String>,
}

impl Policy {
    /// Whether `other` probes, decides and writes exactly as this policy does: equal but for
    /// `[observe]` and `rto_budget`, which only the failover timeline and `gslb check` read.
    /// A reload that changes nothing else keeps the service's probes, reconciler and engine
    /// state.
    pub fn controls_like(&self, other: &Policy) -> bool {
        let strip = |p: &Policy| Policy {
            observe: None,
            rto_budget: None,
            ..p.clone()
        };
        strip(self) == strip(other)
    }

    /// The pool with this id.
    pub fn pool(&self, id: &PoolId) -> Option<&Pool> {
        self.pools.iter().find(|p| &p.id == id)
    }

    /// The TTL of the record or load balancer the target steers.
    pub fn ttl(&self) -> Duration {
        self.target.ttl()
    }

    /// The spacing rail: failbacks and switches between two healthy pools are at least
    /// `max(2 × TTL, min_dwell)` apart, so resolvers that cached the previous answer expire it
    /// before the next change.
    pub fn spacing(&self) -> Duration {
        self.ttl().saturating_mul(2).max(self.min_dwell)
    }

    /// How long a vantage point's report stays fresh: `fresh_intervals × interval + timeout`.
    pub fn fresh_for(&self) -> Duration {
        self.probe
            .interval
            .saturating_mul(self.quorum.fresh_intervals)
            .saturating_add(self.probe.timeout)
    }

    /// Worst-case time from the first failed probe to a DNS answer that names the new region,
    /// ignoring provider apply time: `fall × interval + timeout + TTL`.
    pub fn worst_case_failover(&self) -> Duration {
        failover_bound(&self.probe, self.thresholds, self.ttl())
    }

    /// [`Self::worst_case_failover`] plus the provider's expected apply time
    /// ([`Target::expected_apply_time`]): the worst case `gslb check` prints and holds against
    /// `rto_budget`.
    pub fn worst_case_rto(&self) -> Duration {
        self.worst_case_failover()
            .saturating_add(self.target.expected_apply_time())
    }

    /// A warning when [`Self::worst_case_rto`] exceeds `rto_budget` (the policy is valid: the
    /// apply time is an estimate, detection and TTL alone already fit, or validation would
    /// have refused it). `None` without a budget or within it.
    pub fn rto_warning(&self) -> Option<String> {
        let budget = self.rto_budget?;
        let worst = self.worst_case_rto();
        (worst > budget).then(|| {
            format!(
                "worst-case failover {} (TTL {} + fall {} x interval {} + timeout {} + expected apply time {}) exceeds rto_budget {}",
                humantime::format_duration(worst),
                humantime::format_duration(self.ttl()),
                self.thresholds.fall,
                humantime::format_duration(self.probe.interval),
                humantime::format_duration(self.probe.timeout),
                humantime::format_duration(self.target.expected_apply_time()),
                humantime::format_duration(budget),
            )
        })
    }

    /// A warning when `[observe]` watches nothing: the DNS phase cannot run on this target
    /// ([`Target::dns_names_the_pool`]) and there is no `url` for the served-by phase. `None`
    /// without `[observe]` or when it has something to watch.
    pub fn observe_warning(&self) -> Option<String> {
        let observe = self.observe.as_ref()?;
        if observe.served_by.is_some() || self.target.dns_names_the_pool() {
            return None;
        }
        let why = match &self.target {
            Target::Cloudflare(_) => {
                "a proxied Cloudflare load balancer answers with Cloudflare's addresses"
            }
            Target::Route53(_) => "a CNAME answer names a host, not a pool",
        };
        Some(format!(
            "watches nothing: no DNS phase ({why}) and no url; add url with served_by_header or served_by_body, or remove [observe]"
        ))
    }
}

/// `fall × interval + timeout + ttl`: the worst case from the first failed probe to a DNS
/// answer naming the new region, before provider apply time. The one formula behind
/// [`Policy::worst_case_failover`] and the `rto_budget` check of validation.
pub(super) fn failover_bound(probe: &ProbeSpec, thresholds: Thresholds, ttl: Duration) -> Duration {
    probe
        .interval
        .saturating_mul(thresholds.fall)
        .saturating_add(probe.timeout)
        .saturating_add(ttl)
}
