//! `gslb plan` and the reconciler produce the same writes for the same inputs: for one
//! decision and one provider state, what `gslb plan` says would change
//! ([`gslb::cli::plan::outcome`]) equals what a reconciler writes to the provider (the plans
//! of its `Applied` events), or refuses (its status `refused`). Both call the core's write
//! planner; this shows nothing around it differs.
//!
//! Cases: a failover and a drain on the in-memory provider (Route 53's style: failover by
//! enablement), a refusal and an ignored drain of the fallback pool on the fake Cloudflare
//! API on 127.0.0.1 (order style, with a fallback pool). Paused tokio time; the only sleep
//! polls the status for a refusal, which has no event.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use gslb::cli::plan::{Gathered, Outcome, outcome};
use gslb::daemon::controller;
use gslb_cloudflare::CloudflareProvider;
use gslb_cloudflare::fake::{Fake, binding, ids, paused_settings};
use gslb_core::engine::{Decision, PoolVerdict, Rule};
use gslb_core::event::Event;
use gslb_core::model::{Millis, PoolId, ServiceId, Verdict};
use gslb_core::policy::Policy;
use gslb_provider::{FailoverStyle, MemoryProvider, Provider};

const API: &str = include_str!("../policies/api-seoul-tokyo.toml");
const WEB: &str = include_str!("../policies/web-ncp-gcp.toml");

fn parse(text: &str) -> Policy {
    gslb_core::policy::parse(Path::new("policy.toml"), text).expect("policy")
}

/// A decision for `service` making `active` serve by `rule`, draining `drained`, with
/// gslb's verdicts of its pools.
fn decision(
    service: &str,
    rule: Rule,
    active: &str,
    drained: &[&str],
    verdicts: &[(&str, Verdict)],
) -> Decision {
    Decision {
        service: ServiceId(service.into()),
        at: Millis(0),
        active: Some(PoolId(active.into())),
        previous: None,
        rule,
        blocked: None,
        drained: drained.iter().map(|p| PoolId((*p).into())).collect(),
        reasons: vec![],
        pools: verdicts
            .iter()
            .map(|(p, verdict)| {
                let v = PoolVerdict {
                    verdict: *verdict,
                    ..PoolVerdict::unknown(Millis(0))
                };
                (PoolId((*p).into()), v)
            })
            .collect(),
    }
}

/// What `gslb plan` says about `decision` under `policy` (TOML text) for `provider` in its
/// current state.
async fn planned<P: Provider>(policy: &str, provider: &P, decision: &Decision) -> Outcome {
    let gathered = Gathered {
        policy: parse(policy),
        provider: provider.name(),
        style: provider.style(),
        observed: provider.observe().await.expect("observe"),
        probes: vec![],
    };
    outcome(&gathered, Some(decision), Millis(0))
}

/// What a reconciler of `policy` (TOML text) does with `decision` against `provider`, in
/// `gslb plan`'s words: the plan it wrote, no change when it found the provider in sync
/// without writing, or the refusal on its status.
async fn reconciled<P: Provider>(policy: &str, provider: Arc<P>, decision: &Decision) -> Outcome {
    let steering = controller::steering(&parse(policy), Duration::from_secs(60));
    let sinks = support::reconcile::sinks(policy);
    let mut h = support::reconcile::start(provider, steering, sinks, decision);
    let mut written = Vec::new();
    loop {
        tokio::select! {
            event = h.events.recv() => match event.expect("event") {
                Event::Applied { plan, .. } => written.push(plan),
                Event::InSync { .. } => break,
                _ => {}
            },
            // A refusal has no event: poll the status (paused time, well within a resync).
            () = tokio::time::sleep(Duration::from_secs(1)) => {
                if let Some(reason) = h.status().refused {
                    assert!(written.is_empty(), "wrote before refusing: {written:?}");
                    return Outcome::Refused(reason);
                }
            }
        }
    }
    match written.len() {
        0 => Outcome::NoChange,
        1 => Outcome::Changes(written.remove(0)),
        n => panic!("{n} writes for one decision: {written:?}"),
    }
}

fn memory() -> Arc<MemoryProvider> {
    Arc::new(MemoryProvider::new(
        FailoverStyle::Enablement,
        &["seoul".into(), "tokyo".into()],
    ))
}

fn cloudflare(fake: &Fake) -> Arc<CloudflareProvider> {
    let (settings, binding) = (paused_settings(fake), binding(ids::LB_NAME));
    Arc::new(CloudflareProvider::new(settings, binding).expect("provider"))
}

#[tokio::test(start_paused = true)]
async fn a_failover_is_the_same_write() {
    let d = decision(
        "api",
        Rule::Failover,
        "tokyo",
        &[],
        &[("seoul", Verdict::Unhealthy), ("tokyo", Verdict::Healthy)],
    );
    let provider = memory();
    let plan = planned(API, provider.as_ref(), &d).await;
    assert!(
        matches!(&plan, Outcome::Changes(c) if c.len() == 1),
        "{plan:?}"
    );
    assert_eq!(reconciled(API, provider, &d).await, plan);
}

#[tokio::test(start_paused = true)]
async fn a_drain_is_the_same_write() {
    let d = decision(
        "api",
        Rule::Drain,
        "seoul",
        &["tokyo"],
        &[("seoul", Verdict::Healthy), ("tokyo", Verdict::Healthy)],
    );
    let provider = memory();
    let plan = planned(API, provider.as_ref(), &d).await;
    assert!(
        matches!(&plan, Outcome::Changes(c) if c.len() == 1),
        "{plan:?}"
    );
    assert_eq!(reconciled(API, provider, &d).await, plan);
}

#[tokio::test(start_paused = true)]
async fn a_refusal_is_the_same_refusal() {
    // Every pool down by gslb's probes: Cloudflare would send traffic to its fallback pool
    // (GCP) unchecked.
    let fake = Fake::start().await;
    let down = [("ncp", Verdict::Unhealthy), ("gcp", Verdict::Unhealthy)];
    let d = decision("web", Rule::Failover, "gcp", &[], &down);
    let provider = cloudflare(&fake);
    let plan = planned(WEB, provider.as_ref(), &d).await;
    assert!(
        matches!(&plan, Outcome::Refused(why) if why.contains("fallback pool")),
        "{plan:?}"
    );
    assert_eq!(reconciled(WEB, provider, &d).await, plan);
    assert_eq!(fake.writes(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_drain_of_the_fallback_pool_is_the_same_no_write() {
    // A drill drains GCP, the load balancer's fallback pool: gslb never disables it, and NCP
    // already serves, so neither writes anything.
    let fake = Fake::start().await;
    let up = [("ncp", Verdict::Healthy), ("gcp", Verdict::Healthy)];
    let d = decision("web", Rule::Drain, "ncp", &["gcp"], &up);
    let provider = cloudflare(&fake);
    let plan = planned(WEB, provider.as_ref(), &d).await;
    assert_eq!(plan, Outcome::NoChange);
    assert_eq!(reconciled(WEB, provider, &d).await, plan);
    assert_eq!(fake.writes(), 0);
}
