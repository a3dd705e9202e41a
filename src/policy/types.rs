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
    /// Whether traffic returns to a recovered preferred pool by itself.
    pub failback: Failback,
    /// Minimum time between two switches that are not a failover away from a down pool.
    pub min_dwell: Duration,
    /// The recovery-time objective the detection settings must fit in, if any.
    pub rto_budget: Option<Duration>,
    /// Where decisions are pushed.
    pub target: Target,
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
    /// Return to the most preferred healthy pool once `min_dwell` has passed.
    Auto,
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
    /// The pool with this id.
    pub fn pool(&self, id: &PoolId) -> Option<&Pool> {
        self.pools.iter().find(|p| &p.id == id)
    }

    /// Worst-case time from the first failed probe to a DNS answer that names the new region,
    /// ignoring provider apply time: `fall × interval + timeout + TTL`.
    pub fn worst_case_failover(&self) -> Duration {
        self.probe.interval * self.thresholds.fall + self.probe.timeout + self.target.ttl()
    }
}
