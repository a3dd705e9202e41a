//! Events and a policy for timeline tests, in simulated time (explicit instants). Test code
//! only: compiled for this crate's tests and, with the `test-util` feature, for the daemon's.

use std::time::Duration;

use crate::engine::{Decision, PoolVerdict, Rule};
use crate::event::{Event, ObservedPhase};
use crate::model::{ByPool, Millis, Observation, PoolId, ProbeOutcome, ProbeReason, Verdict};
use crate::policy::Policy;

/// A probe of `endpoint` in `pool` of service `api` from vantage `v1` at `at` ms.
pub fn probe(pool: &str, endpoint: &str, at: u64, reason: ProbeReason) -> Event {
    Event::Probe {
        service: "api".into(),
        pool: pool.into(),
        observation: Observation {
            endpoint: endpoint.into(),
            vantage: "v1".into(),
            at: Millis(at),
            outcome: ProbeOutcome {
                success: reason == ProbeReason::Ok,
                duration: Duration::from_millis(5),
                http_status: None,
                reason,
                dns_lookup: None,
                cert_expiry: None,
            },
        },
    }
}

/// A decision of service `api` at `at` ms from `from` (down since `from_down_since`, else
/// healthy) to `to` by `rule`.
pub fn decision(at: u64, rule: Rule, from: &str, to: &str, from_down_since: Option<u64>) -> Event {
    let mut pools = ByPool::default();
    let mut old = PoolVerdict::unknown(Millis(0));
    if let Some(since) = from_down_since {
        old.verdict = Verdict::Unhealthy;
        old.since = Millis(since);
    } else {
        old.verdict = Verdict::Healthy;
    }
    pools.insert(PoolId::from(from), old);
    let mut new = PoolVerdict::unknown(Millis(0));
    new.verdict = Verdict::Healthy;
    pools.insert(PoolId::from(to), new);
    Event::Decision(Decision {
        service: "api".into(),
        at: Millis(at),
        active: Some(to.into()),
        previous: Some(from.into()),
        rule,
        blocked: None,
        drained: Default::default(),
        reasons: Vec::new(),
        pools,
    })
}

/// The provider `memory` accepted a write making `pool` serve, at `at` ms.
pub fn applied(at: u64, pool: &str) -> Event {
    Event::Applied {
        service: "api".into(),
        provider: "memory".into(),
        at: Millis(at),
        active: Some(pool.into()),
        plan: Vec::new(),
    }
}

/// The provider `memory` read back `pool` serving, at `at` ms.
pub fn in_sync(at: u64, pool: &str) -> Event {
    Event::InSync {
        service: "api".into(),
        provider: "memory".into(),
        at: Millis(at),
        active: pool.into(),
    }
}

/// An observer saw `phase` of timeline `id` at `at` ms.
pub fn observed(id: &str, phase: ObservedPhase, at: u64) -> Event {
    Event::Observed {
        service: "api".into(),
        timeline: id.into(),
        phase,
        at: Millis(at),
        detail: "seen".into(),
    }
}

/// The demo policy as service `api`: pools `seoul` (endpoint `127.0.0.1:1`) and `tokyo`.
pub fn api_policy() -> Policy {
    crate::policy::parse(
        std::path::Path::new("demo.toml"),
        &include_str!("../../../src/cli/demo_policy.toml")
            .replace("demo-api", "api")
            .replace("{seoul}", "127.0.0.1:1")
            .replace("{tokyo}", "127.0.0.1:2"),
    )
    .expect("the demo policy is valid")
}
