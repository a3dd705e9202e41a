//! Plain configuration types for one Route 53 binding and for how the adapter talks to the API.
//!
//! These are filled in by the `gslb` crate from its validated policy; this module does no I/O
//! and knows nothing of the policy format. [`Route53Binding::validate`] is the only check made
//! here, and the adapter calls it before every observe and provision.

use std::num::NonZeroU32;
use std::time::Duration;

use gslb_provider::ProviderError;

/// One failover pair gslb steers: two records with the same name and type in one hosted zone,
/// `Failover = PRIMARY` for `pools[0]` and `SECONDARY` for `pools[1]`, each carrying a gslb
/// *verdict check* (a CALCULATED health check with no children that gslb inverts to take the
/// pool out of service).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route53Binding {
    /// The hosted zone id, e.g. `Z0123456789ABCDEFGHIJ` (a `/hostedzone/` prefix is accepted).
    pub hosted_zone_id: String,
    /// The failover record's name, a fully qualified domain name without the trailing dot,
    /// e.g. `api.example.com`. Compared case-insensitively and after undoing Route 53's
    /// `\ooo` octal escapes.
    pub record_name: String,
    /// The record type: `A`, `AAAA` or `CNAME`.
    pub record_type: String,
    /// The records' TTL, whole seconds (fractions are dropped). AWS recommends at most 60 s
    /// when a health check is attached (Route 53 Developer Guide, "How health checks work
    /// in simple configurations").
    pub ttl: Duration,
    /// The pools in priority order: `[0]` is the PRIMARY record, `[1]` the SECONDARY.
    /// Exactly two.
    pub pools: Vec<Route53Pool>,
}

/// One pool of a [`Route53Binding`]: one failover record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route53Pool {
    /// The record's `SetIdentifier`; also the pool's [`gslb_provider::PoolRef`].
    pub set_identifier: String,
    /// The record's values (IP addresses for `A`/`AAAA`, one host name for `CNAME`), written
    /// by [`crate::Route53Provider::provision`] only; order does not matter. Empty for an
    /// Alias record.
    pub values: Vec<String>,
    /// The Alias target when the record is an Alias record (then `values` is empty and the
    /// record has no TTL: Route 53 uses the target's); `None` for a record with values.
    pub alias: Option<Route53Alias>,
}

/// An Alias record's target (Route 53 `AliasTarget`), e.g. an ALB or NLB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route53Alias {
    /// The target's DNS name, e.g. `seoul-alb-1.ap-northeast-2.elb.amazonaws.com`; compared
    /// like a record name (case and trailing dot ignored).
    pub dns_name: String,
    /// The target's canonical hosted zone id (the load balancer's, not the record's zone).
    pub hosted_zone_id: String,
    /// `EvaluateTargetHealth`: Route 53 also treats the record as unhealthy when the target
    /// is.
    pub evaluate_target_health: bool,
}

/// The record types a binding may use.
const RECORD_TYPES: [&str; 3] = ["A", "AAAA", "CNAME"];

impl Route53Binding {
    /// Checks the binding's shape and reports every problem at once.
    ///
    /// # Errors
    /// [`ProviderError::Invalid`] listing each problem: empty zone id or record name, a record
    /// name ending in a dot, a record type other than `A`/`AAAA`/`CNAME`, not exactly two
    /// pools, an empty or duplicate set identifier, a pool with neither values nor an Alias
    /// target or with both, an Alias target with an empty DNS name or hosted zone id, or a
    /// `CNAME` pool with more than one value.
    pub fn validate(&self) -> Result<(), ProviderError> {
        let mut problems = Vec::new();
        if self.hosted_zone_id.trim().is_empty() {
            problems.push("hosted_zone_id is empty".to_owned());
        }
        if self.record_name.is_empty() {
            problems.push("record_name is empty".to_owned());
        } else if self.record_name.ends_with('.') {
            problems.push(format!(
                "record_name {:?} must not end with a dot",
                self.record_name
            ));
        }
        if !RECORD_TYPES.contains(&self.record_type.as_str()) {
            problems.push(format!(
                "record_type {:?} is not one of A, AAAA, CNAME",
                self.record_type
            ));
        }
        if self.pools.len() != 2 {
            problems.push(format!(
                "{} pools given; a failover pair has exactly 2",
                self.pools.len()
            ));
        }
        for (i, pool) in self.pools.iter().enumerate() {
            if pool.set_identifier.is_empty() {
                problems.push(format!("pools[{i}].set_identifier is empty"));
            }
            if self.pools[..i]
                .iter()
                .any(|p| p.set_identifier == pool.set_identifier)
            {
                problems.push(format!(
                    "pools[{i}].set_identifier {:?} is used twice",
                    pool.set_identifier
                ));
            }
            match (&pool.alias, pool.values.is_empty()) {
                (None, true) => problems.push(format!("pools[{i}].values is empty")),
                (Some(_), false) => {
                    problems.push(format!("pools[{i}] has both values and an Alias target"))
                }
                (Some(a), true) if a.dns_name.is_empty() || a.hosted_zone_id.is_empty() => {
                    problems.push(format!(
                        "pools[{i}] Alias target needs a DNS name and a hosted zone id"
                    ));
                }
                _ => {}
            }
            if self.record_type == "CNAME" && pool.values.len() > 1 {
                problems.push(format!(
                    "pools[{i}] has {} values; a CNAME has one",
                    pool.values.len()
                ));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ProviderError::Invalid(format!(
                "route53 binding {}: {}",
                self.record_name,
                problems.join("; ")
            )))
        }
    }
}

/// How the adapter talks to the Route 53 API. [`Default`] gives production values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route53Settings {
    /// Overrides the API endpoint (an emulator such as `http://127.0.0.1:5000`). Default
    /// `None`: the SDK's endpoint for the region.
    pub endpoint_url: Option<String>,
    /// The signing region. Default `us-east-1`, where Route 53's control plane is served
    /// (Route 53 API Reference, "Endpoints").
    pub region: String,
    /// Upper bound on API requests per second from every binding sharing one
    /// [`crate::Route53Account`] (the daemon makes one per AWS account), every operation
    /// counted, no burst. Default 2: well under the 5 requests per second per account Route 53
    /// allows (Route 53 Developer Guide, "Quotas"), leaving room for other tools on the
    /// account.
    pub requests_per_second: NonZeroU32,
    /// How long [`crate::Route53Provider::provision`] waits for a submitted change to reach
    /// `INSYNC`. Default 120 s (AWS says changes are typically `INSYNC` within 60 s).
    pub change_timeout: Duration,
    /// Interval between `GetChange` polls while waiting for `INSYNC`. Default 2 s.
    pub poll_interval: Duration,
    /// Attempts per API call, the first one included, for `Throttling`,
    /// `PriorRequestNotComplete`, 5xx, timeouts and connection failures. Default 5; 0 is
    /// treated as 1. The SDK's own retries are turned off so every attempt passes the rate
    /// limiter.
    pub max_attempts: u32,
    /// First backoff step between attempts; delays are full-jitter exponential
    /// ([`gslb_provider::Backoff`]). Default 200 ms.
    pub backoff_base: Duration,
    /// Cap on one backoff delay. Default 10 s.
    pub backoff_max: Duration,
    /// Deadline for one HTTP attempt (connect, send, read); an attempt that takes longer
    /// counts as a timeout and is retried like a 5xx. Default 10 s.
    pub attempt_timeout: Duration,
}

impl Default for Route53Settings {
    fn default() -> Self {
        Self {
            endpoint_url: None,
            region: default_region(),
            requests_per_second: NonZeroU32::new(2).unwrap_or(NonZeroU32::MIN),
            change_timeout: Duration::from_secs(120),
            poll_interval: Duration::from_secs(2),
            max_attempts: 5,
            backoff_base: Duration::from_millis(200),
            backoff_max: Duration::from_secs(10),
            attempt_timeout: Duration::from_secs(10),
        }
    }
}

impl Route53Settings {
    /// The settings an operator chooses (gslb's `[route53]` table), every other one at its
    /// [`Default`]: the binary's one call from its settings to the adapter's.
    pub fn configured(
        endpoint_url: Option<String>,
        region: String,
        requests_per_second: NonZeroU32,
        change_timeout: Duration,
    ) -> Self {
        Self {
            endpoint_url,
            region,
            requests_per_second,
            change_timeout,
            ..Self::default()
        }
    }
}

/// The default signing region, `us-east-1` (Route 53's control plane).
pub fn default_region() -> String {
    "us-east-1".to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding() -> Route53Binding {
        Route53Binding {
            hosted_zone_id: "Z1".into(),
            record_name: "api.example.com".into(),
            record_type: "A".into(),
            ttl: Duration::from_secs(60),
            pools: vec![
                Route53Pool {
                    set_identifier: "seoul".into(),
                    values: vec!["192.0.2.1".into()],
                    alias: None,
                },
                Route53Pool {
                    set_identifier: "tokyo".into(),
                    values: vec!["192.0.2.2".into()],
                    alias: None,
                },
            ],
        }
    }

    #[test]
    fn configured_settings_keep_the_other_defaults() {
        let rps = NonZeroU32::new(7).expect("non-zero");
        let s = Route53Settings::configured(
            Some("http://127.0.0.1:5000".into()),
            "eu-west-1".into(),
            rps,
            Duration::from_secs(30),
        );
        assert_eq!(
            s,
            Route53Settings {
                endpoint_url: Some("http://127.0.0.1:5000".into()),
                region: "eu-west-1".into(),
                requests_per_second: rps,
                change_timeout: Duration::from_secs(30),
                ..Route53Settings::default()
            }
        );
    }

    #[test]
    fn a_good_binding_validates() {
        assert_eq!(binding().validate(), Ok(()));
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let mut b = binding();
        b.record_name = "api.example.com.".into();
        b.record_type = "TXT".into();
        b.pools[1].set_identifier = "seoul".into();
        b.pools[1].values.clear();
        let Err(ProviderError::Invalid(msg)) = b.validate() else {
            panic!("expected Invalid")
        };
        for needle in [
            "must not end with a dot",
            "\"TXT\"",
            "used twice",
            "values is empty",
        ] {
            assert!(msg.contains(needle), "{needle} in {msg}");
        }
        b.pools.pop();
        assert!(b.validate().unwrap_err().to_string().contains("exactly 2"));
    }
}
