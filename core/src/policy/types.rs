//! The validated policy, whole: [`Policy`] (one service's file) and its [`Target`] (where its
//! decisions go). What the rest of gslb reads; only the policy's validation constructs one.
//! The questions answered from a whole policy (spacing, freshness, worst-case failover time,
//! warnings) live here; the rules that refuse a policy do not.

use std::net::IpAddr;
use std::time::Duration;

use super::cloudflare::CloudflareTarget;
use super::observe::Observe;
use super::parts::{
    Damping, Failback, FailbackHold, Flapping, Mode, Pool, ProbeSpec, Quorum, Thresholds, Velocity,
    failover_bound,
};
use super::route53::Route53Target;
use crate::model::{ByPool, PoolId, ServiceId};

/// A validated service policy (one TOML file).
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// The service name (`service`).
    pub service: ServiceId,
    /// The public failover hostname users resolve (`hostname`), lower-case, no trailing dot.
    pub hostname: String,
    /// Pools in priority order, most preferred first.
    pub pools: std::sync::Arc<[Pool]>,
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
    pub observe: Option<Observe>,
}

/// Where a policy's decisions go.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// A Route 53 failover pair.
    Route53(Route53Target),
    /// A Cloudflare load balancer.
    Cloudflare(CloudflareTarget),
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
    /// Route 53 CNAME (the answer names a host), an Alias pair (the load balancers' addresses
    /// change) nor Cloudflare (a proxied load balancer answers with Cloudflare's addresses
    /// whichever pool serves).
    pub fn dns_names_the_pool(&self) -> bool {
        matches!(self, Self::Route53(r)
            if r.record_type != "CNAME" && r.pools.iter().all(|p| p.alias_target.is_none()))
    }

    /// The TTL of the answers the target serves: the records' TTL (Route 53) or the load
    /// balancer's (Cloudflare).
    pub fn ttl(&self) -> Duration {
        match self {
            Self::Route53(r) => r.ttl,
            Self::Cloudflare(c) => c.ttl,
        }
    }

    /// Each pool's name at the provider: its failover record's set identifier (Route 53) or
    /// its Cloudflare pool id.
    pub fn pool_refs(&self) -> ByPool<String> {
        match self {
            Self::Route53(r) => r
                .pools
                .iter()
                .map(|p| (p.pool.clone(), p.set_identifier.clone()))
                .collect(),
            Self::Cloudflare(c) => c
                .pools
                .iter()
                .map(|p| (p.pool.clone(), p.pool_id.clone()))
                .collect(),
        }
    }

    /// The addresses `pool` serves at, when a DNS answer can name them
    /// ([`Target::dns_names_the_pool`]): a Route 53 `A` or `AAAA` pair's `values`. `None` for
    /// CNAME records, Cloudflare, and a pool the target does not name.
    pub fn dns_values(&self, pool: &PoolId) -> Option<Vec<IpAddr>> {
        let Self::Route53(t) = self else {
            return None;
        };
        if !self.dns_names_the_pool() {
            return None;
        }
        let p = t.pools.iter().find(|p| &p.pool == pool)?;
        Some(p.values.iter().filter_map(|v| v.parse().ok()).collect())
    }

    /// Whether the provider names its pools' switch a failover record's verdict check (Route
    /// 53), rather than a pool's `enabled` flag (Cloudflare): how a write is described to an
    /// operator.
    pub fn switches_verdict_checks(&self) -> bool {
        matches!(self, Self::Route53(_))
    }
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
    /// from detection and TTL alone (no engine wait, no provider apply time): `fall × interval
    /// + timeout + TTL`. What validation holds against `rto_budget`.
    pub fn worst_case_failover(&self) -> Duration {
        failover_bound(&self.probe, self.thresholds, self.ttl())
    }

    /// The waits the engine adds to a failover once the serving pool is down by quorum, each
    /// with its rule's name: `confirm_target`, a probe of the target passing after the serving
    /// pool went down. The engine asks for that probe at once, out of schedule (the target's
    /// probe loops are woken, at most once per interval), so it ends within one `timeout`.
    /// No other wait applies to a failover away from a down pool: the spacing rail (`dwell`,
    /// `max(2 × TTL, min_dwell)`) exempts it, `failback_hold` and flap damping hold failbacks
    /// only, and a spent velocity budget (`velocity_limited`) holds until it refills or an
    /// operator re-arms, which no worst case can bound (it is reported in status and
    /// `gslb_velocity_limited_total`).
    pub fn failover_waits(&self) -> Vec<(&'static str, Duration)> {
        vec![("confirm_target", self.probe.timeout)]
    }

    /// Worst-case time from an endpoint failing to the engine's failover decision: `fall ×
    /// interval + timeout` (detection) plus every [engine wait](Self::failover_waits). What
    /// `gslb demo` prints as its detection bound.
    pub fn detection_bound(&self) -> Duration {
        self.failover_waits().iter().fold(
            self.probe
                .interval
                .saturating_mul(self.thresholds.fall)
                .saturating_add(self.probe.timeout),
            |t, (_, w)| t.saturating_add(*w),
        )
    }

    /// [`Self::worst_case_failover`] plus every [engine wait](Self::failover_waits) and the
    /// provider's expected apply time ([`Target::expected_apply_time`]): the worst case `gslb
    /// check` prints and holds against `rto_budget`.
    pub fn worst_case_rto(&self) -> Duration {
        self.failover_waits()
            .iter()
            .fold(self.worst_case_failover(), |t, (_, w)| t.saturating_add(*w))
            .saturating_add(self.target.expected_apply_time())
    }

    /// The engine's waits as `confirm_target 10s`, joined by ` + `.
    pub fn failover_waits_text(&self) -> String {
        self.failover_waits()
            .iter()
            .map(|(name, w)| format!("{name} {}", humantime::format_duration(*w)))
            .collect::<Vec<_>>()
            .join(" + ")
    }

    /// A warning when [`Self::worst_case_rto`] exceeds `rto_budget` (the policy is valid: the
    /// apply time is an estimate, detection and TTL alone already fit, or validation would
    /// have refused it). `None` without a budget or within it.
    pub fn rto_warning(&self) -> Option<String> {
        let budget = self.rto_budget?;
        let worst = self.worst_case_rto();
        (worst > budget).then(|| {
            format!(
                "worst-case failover {} (TTL {} + fall {} x interval {} + timeout {} + {} + expected apply time {}) exceeds rto_budget {}",
                humantime::format_duration(worst),
                humantime::format_duration(self.ttl()),
                self.thresholds.fall,
                humantime::format_duration(self.probe.interval),
                humantime::format_duration(self.probe.timeout),
                self.failover_waits_text(),
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
