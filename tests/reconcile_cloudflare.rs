//! The reconciler against the fake Cloudflare API on 127.0.0.1, in paused tokio time: a
//! 3-minute 429 storm, a concurrent reverter (write fight), the fallback-pool refusal, steady
//! state without writes, and auth failures without a hot loop.
//!
//! The fake runs on the test's own runtime, so its 429 window follows the simulated clock,
//! and it answers at once; the adapter runs without a per-attempt deadline
//! (`attempt_timeout: None`), because a pending deadline would be auto-advanced by paused time
//! while a socket waits. Every `tokio::time::sleep` below advances simulated time instantly
//! and stands for "this much time passes", never for a condition: a pass that must have
//! happened is awaited as its event.

mod support;

use std::sync::Arc;
use std::time::Duration;

use gslb::daemon::reconcile::{HealthVotes, Steering};
use gslb::ops::status::{ApplyState, ApplyStatus};
use gslb::ops::telemetry::Telemetry;
use gslb_cloudflare::CloudflareProvider;
use gslb_cloudflare::fake::{self as harness, Fake, ids, paused_settings};
use gslb_core::engine::{Decision, PoolVerdict, Rule};
use gslb_core::model::{ByPool, Millis, PoolId, ServiceId, Verdict};
use gslb_core::planner::{ProviderPools, WRITE_FIGHT_LIMIT, WRITE_FIGHT_WINDOW};
use tokio::time::Instant;

fn provider(fake: &Fake) -> CloudflareProvider {
    let binding = harness::binding(ids::LB_NAME);
    CloudflareProvider::new(paused_settings(fake), binding).expect("provider")
}

fn binding() -> Steering {
    Steering {
        pools: ProviderPools {
            service: ServiceId("web".into()),
            priority: vec![ids::NCP.into(), ids::GCP.into()],
            refs: ByPool::from_iter([
                (PoolId("ncp".into()), ids::NCP.into()),
                (PoolId("gcp".into()), ids::GCP.into()),
            ]),
        },
        resync: Duration::from_secs(60),
        shadow: false,
        health_votes: None,
        seat: None,
        follow: None,
        calls_per_minute: gslb::daemon::reconcile::DEFAULT_CALLS_PER_MINUTE,
    }
}

fn decision(active: &str, ncp: Verdict, gcp: Verdict) -> Decision {
    let v = |verdict| PoolVerdict {
        verdict,
        ..PoolVerdict::unknown(Millis(0))
    };
    Decision {
        service: ServiceId("web".into()),
        at: Millis(0),
        active: Some(PoolId(active.into())),
        previous: Some(PoolId("ncp".into())),
        rule: Rule::Failover,
        blocked: None,
        drained: Default::default(),
        reasons: vec![],
        pools: ByPool::from_iter([
            (PoolId("ncp".into()), v(ncp)),
            (PoolId("gcp".into()), v(gcp)),
        ]),
    }
}

fn failover() -> Decision {
    decision("gcp", Verdict::Unhealthy, Verdict::Healthy)
}

fn sinks() -> Telemetry {
    support::reconcile::sinks(include_str!("../policies/web-ncp-gcp.toml"))
}

fn status(s: &Telemetry) -> ApplyStatus {
    s.board.snapshot()[&ServiceId("web".into())].apply.clone()
}

/// The fake and a reconciler steering it (see [`support::reconcile::start`]).
struct Harness {
    fake: Fake,
    sinks: Telemetry,
    reconciler: support::reconcile::Harness<CloudflareProvider>,
}

/// Starts the fake (after `setup`) and a reconciler steering it towards `d`.
async fn start(d: Decision, setup: impl FnOnce(&Fake)) -> Harness {
    let fake = Fake::start().await;
    setup(&fake);
    let provider = provider(&fake);
    start_on(fake, provider, binding(), d)
}

/// A reconciler of `steering` steering `provider` (on `fake`) towards `d`.
fn start_on(fake: Fake, provider: CloudflareProvider, steering: Steering, d: Decision) -> Harness {
    let reconciler = support::reconcile::start(Arc::new(provider), steering, sinks(), &d);
    Harness {
        fake,
        sinks: reconciler.sinks.clone(),
        reconciler,
    }
}

fn failed_over() -> Vec<String> {
    vec![ids::GCP.into(), ids::NCP.into()]
}

#[tokio::test(start_paused = true)]
async fn a_three_minute_429_storm_is_survived_and_the_decision_applied_after_it() {
    let started = Instant::now();
    let mut h = start(failover(), |f| f.rate_limit_for(Duration::from_secs(180))).await;

    // A minute into the storm: decided, not applied, visibly rate limited.
    tokio::time::sleep(Duration::from_secs(60)).await;
    let pending = status(&h.sinks);
    assert_eq!(pending.state, ApplyState::Pending, "{pending:?}");
    assert!(pending.pending_since.is_some());
    assert!(
        pending
            .last_error
            .as_deref()
            .unwrap_or("")
            .contains("rate limited"),
        "{pending:?}"
    );
    let applied = h
        .sinks
        .metrics
        .decision_applied
        .with_label_values(&["web"])
        .get();
    assert_eq!(applied, 0.0);
    assert_eq!(
        h.fake.default_pools(),
        vec![ids::NCP.to_owned(), ids::GCP.to_owned()]
    );

    h.reconciler.next_applied().await;
    assert!(
        started.elapsed() >= Duration::from_secs(180),
        "applied only after the storm"
    );
    assert!(
        started.elapsed() < Duration::from_secs(240),
        "applied soon after the storm: {:?}",
        started.elapsed()
    );
    assert_eq!(h.fake.default_pools(), failed_over());
    // Retry-After was honoured: a handful of requests during three minutes, not a hot loop.
    let limited = h.fake.requests().iter().filter(|r| r.status == 429).count();
    assert!(
        (1..=3).contains(&limited),
        "{limited} requests answered 429"
    );
    let rate_limited = h
        .sinks
        .metrics
        .provider_errors_total
        .with_label_values(&["cloudflare", "web", "observe", "rate_limited"])
        .get();
    assert!(rate_limited >= 1);
    h.reconciler.read_back().await;
    assert_eq!(status(&h.sinks).state, ApplyState::Applied);
    assert_eq!(h.fake.writes(), 1);
    assert!(h.fake.violations().is_empty(), "{:?}", h.fake.violations());
}

#[tokio::test(start_paused = true)]
async fn a_concurrent_reverter_is_detected_bounded_and_reported() {
    let h = start(failover(), |f| f.reverter(true)).await;
    // A minute: the first write, then WRITE_FIGHT_LIMIT re-applies, then gslb stops.
    tokio::time::sleep(Duration::from_secs(60)).await;
    let limit = WRITE_FIGHT_LIMIT as u32;
    assert_eq!(h.fake.reverts(), 1 + limit);
    let s = status(&h.sinks);
    assert_eq!(s.drift, u64::from(limit));
    assert!(
        s.write_fight
            .as_deref()
            .unwrap_or("")
            .contains("another writer"),
        "{s:?}"
    );
    assert_eq!(s.state, ApplyState::Pending);
    let fights = || {
        h.sinks
            .metrics
            .provider_write_fights_total
            .with_label_values(&["cloudflare", "web"])
            .get()
    };
    assert_eq!(fights(), 1);
    assert!(
        h.sinks
            .metrics
            .render()
            .contains("gslb_provider_write_fights_total")
    );

    // Bounded: two more minutes inside the window, no more writes.
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_eq!(h.fake.reverts(), 1 + limit);

    // The other writer stops; once the window has passed gslb applies its decision.
    h.fake.reverter(false);
    tokio::time::sleep(WRITE_FIGHT_WINDOW).await;
    assert_eq!(h.fake.default_pools(), failed_over());
    let s = status(&h.sinks);
    assert_eq!(s.state, ApplyState::Applied, "{s:?}");
    assert_eq!(s.write_fight, None);
    assert_eq!(fights(), 1);
}

/// `gslb_decision_applied` tells the same story as the status: 0 whenever it reads `pending`,
/// whatever made it so (here a write-fight pause, then a refused plan), 1 once applied. The
/// other writer here is a console edit after gslb's read-back, so the pass before the pause
/// found the provider in sync.
#[tokio::test(start_paused = true)]
async fn the_applied_gauge_reads_0_whenever_the_status_says_pending() {
    let mut h = start(failover(), |_| {}).await;
    let applied = || {
        h.sinks
            .metrics
            .decision_applied
            .with_label_values(&["web"])
            .get()
    };
    let revert = || {
        h.fake
            .edit_load_balancer(serde_json::json!({ "default_pools": [ids::NCP, ids::GCP] }))
    };
    h.reconciler.read_back().await;
    assert_eq!(applied(), 1.0);
    // Reverted after each read-back until gslb stops writing: the write-fight pause.
    for _ in 0..=WRITE_FIGHT_LIMIT {
        revert();
        tokio::time::sleep(Duration::from_secs(61)).await;
    }
    let s = status(&h.sinks);
    assert_eq!(s.state, ApplyState::Pending, "{s:?}");
    assert!(s.write_fight.is_some(), "{s:?}");
    assert_eq!(applied(), 0.0, "write-fight pause: {s:?}");

    // The window passes and the decision is applied again.
    tokio::time::sleep(WRITE_FIGHT_WINDOW).await;
    assert_eq!(status(&h.sinks).state, ApplyState::Applied);
    assert_eq!(applied(), 1.0);

    // Every pool goes down with gcp serving: applied as it is. Then an edit puts ncp first;
    // the fix would leave the unhealthy fallback pool serving, so it is refused: pending.
    let mut down = decision("gcp", Verdict::Unhealthy, Verdict::Unhealthy);
    down.at = Millis(900_000);
    h.reconciler.decide(&down);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(status(&h.sinks).state, ApplyState::Applied);
    revert();
    tokio::time::sleep(Duration::from_secs(61)).await;
    let s = status(&h.sinks);
    assert_eq!(s.state, ApplyState::Pending, "{s:?}");
    assert!(s.refused.is_some(), "{s:?}");
    assert_eq!(applied(), 0.0, "refused plan: {s:?}");
}

#[tokio::test(start_paused = true)]
async fn traffic_is_never_sent_to_an_unhealthy_fallback_pool() {
    // Every pool down by gslb's probes (e.g. a forced drill while both regions fail): with
    // every default pool unhealthy, Cloudflare would use its fallback pool (GCP) unchecked.
    let h = start(
        decision("gcp", Verdict::Unhealthy, Verdict::Unhealthy),
        |_| {},
    )
    .await;
    tokio::time::sleep(Duration::from_secs(300)).await;
    assert_eq!(h.fake.writes(), 0);
    let s = status(&h.sinks);
    assert_eq!(s.state, ApplyState::Pending);
    assert!(
        s.refused.as_deref().unwrap_or("").contains("fallback pool"),
        "{s:?}"
    );
    let refused = h
        .sinks
        .metrics
        .plans_refused_total
        .with_label_values(&["web", "fallback_unhealthy"])
        .get();
    assert!(refused >= 1);
}

#[tokio::test(start_paused = true)]
async fn steady_state_writes_nothing() {
    let h = start(decision("ncp", Verdict::Healthy, Verdict::Healthy), |_| {}).await;
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(h.fake.writes(), 0);
    assert_eq!(status(&h.sinks).state, ApplyState::Applied);
    // One observe per 60 s resync, two requests each (+1 name lookup): no call per pool.
    let n = h.fake.requests().len();
    assert!(n <= 2 * 11 + 1, "{n} requests in 10 minutes");
}

#[tokio::test(start_paused = true)]
async fn auth_failures_are_reported_and_not_retried_in_a_hot_loop() {
    let h = start(failover(), |f| f.auth_failure(true)).await;
    tokio::time::sleep(Duration::from_secs(600)).await;
    let n = h.fake.requests().len();
    assert!(n <= 11, "{n} requests in 10 minutes");
    let s = status(&h.sinks);
    assert!(
        s.last_error
            .as_deref()
            .unwrap_or("")
            .contains("Authentication error"),
        "{s:?}"
    );
    assert_eq!(h.fake.writes(), 0);
}

#[tokio::test(start_paused = true)]
async fn pool_health_is_reported_as_a_vote_when_the_policy_asks() {
    let fake = Fake::start().await;
    let votes = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = votes.clone();
    let binding = Steering {
        health_votes: Some(HealthVotes(Arc::new(move |pool, healthy| {
            sink.lock().expect("lock").push((pool.clone(), healthy));
        }))),
        ..binding()
    };
    let provider = provider(&fake);
    let d = decision("ncp", Verdict::Healthy, Verdict::Healthy);
    let mut h = start_on(fake, provider, binding, d);
    // The first pass reads the provider (and votes), then finds it in sync.
    h.reconciler.read_back().await;
    let seen = votes.lock().expect("lock").clone();
    assert!(
        seen.contains(&(PoolId("ncp".into()), true))
            && seen.contains(&(PoolId("gcp".into()), true)),
        "{seen:?}"
    );
}

/// A third managed pool the fixture lacks, for the three-pool case below.
const AWS: &str = "3a0c5e7f9b1d3f5a7c9e1b3d5f7a9c1e";

#[tokio::test(start_paused = true)]
async fn a_drained_fallback_pool_does_not_block_a_failover() {
    // Pools ncp > gcp > aws, fallback aws. A drill drains aws, then ncp goes down: the
    // failover to gcp is written, and aws (the fallback) stays enabled.
    let fake = Fake::start().await;
    let mut aws = fake.pool(ids::NCP);
    aws["id"] = serde_json::json!(AWS);
    aws["name"] = serde_json::json!("aws");
    fake.put_pool(AWS, aws);
    fake.edit_load_balancer(serde_json::json!({
        "default_pools": [ids::NCP, ids::GCP, AWS], "fallback_pool": AWS
    }));
    let mut cf = harness::binding(ids::LB_NAME);
    cf.pools.push(gslb_cloudflare::CloudflarePool {
        pool_id: AWS.into(),
    });
    let provider = CloudflareProvider::new(paused_settings(&fake), cf).expect("provider");
    let mut b = binding();
    b.pools.priority.push(AWS.into());
    b.pools.refs.insert(PoolId("aws".into()), AWS.into());
    let mut d = failover();
    d.drained.insert(PoolId("aws".into()));
    d.pools.insert(
        PoolId("aws".into()),
        PoolVerdict {
            verdict: Verdict::Healthy,
            ..PoolVerdict::unknown(Millis(0))
        },
    );
    let mut h = start_on(fake, provider, b, d);
    h.reconciler.next_applied().await;
    h.reconciler.read_back().await;
    // Two resyncs pass: the ignored drain is not counted again.
    tokio::time::sleep(Duration::from_secs(120)).await;
    let (fake, sinks) = (&h.fake, &h.sinks);

    assert_eq!(
        fake.default_pools(),
        vec![ids::GCP.to_owned(), ids::NCP.to_owned(), AWS.to_owned()]
    );
    assert_eq!(fake.pool(AWS)["enabled"], true);
    let s = status(sinks);
    assert_eq!(s.state, ApplyState::Applied, "{s:?}");
    assert_eq!(s.refused, None);
    assert!(
        s.ignored_drain
            .as_deref()
            .unwrap_or("")
            .contains("drain of pool aws ignored"),
        "{s:?}"
    );
    let ignored = |reason: &str| {
        sinks
            .metrics
            .plans_refused_total
            .with_label_values(&["web", reason])
            .get()
    };
    assert_eq!(
        ignored("fallback_drain_ignored"),
        1,
        "counted once, not per pass"
    );
    assert_eq!(ignored("fallback_disabled"), 0);
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

/// Issue 14, item 3: a burst of decisions that do not change the desired state (the
/// `hold_unknown` / `stay` churn of an overloaded daemon, new reasons, another verdict of a pool
/// that does not serve) makes no provider call, neither read nor write, counted at the fake;
/// each is still reported on the status. A decision that does change it is read and written at
/// once.
#[tokio::test(start_paused = true)]
async fn a_burst_of_decisions_that_do_not_change_the_desired_state_makes_no_provider_call() {
    let mut h = start(failover(), |_| {}).await;
    h.reconciler.read_back().await;
    let before = h.fake.requests().len();
    for i in 1..=300_u64 {
        let mut d = failover();
        d.at = Millis(i * 10);
        d.rule = if i % 2 == 0 {
            Rule::Stay
        } else {
            Rule::HoldUnknown
        };
        d.reasons = vec![format!("churn {i}")];
        d.pools.get_mut(&PoolId("ncp".into())).expect("ncp").verdict = match i % 3 {
            0 => Verdict::Unknown,
            1 => Verdict::Unhealthy,
            _ => Verdict::Healthy,
        };
        h.reconciler.decide(&d);
        tokio::time::sleep(Duration::from_millis(10)).await;
        let s = status(&h.sinks);
        assert_eq!(s.decision_at, Some(d.at), "decision {i} taken up: {s:?}");
        let want = if d.rule.pushes() {
            ApplyState::Applied
        } else {
            ApplyState::NotPushed
        };
        assert_eq!(s.state, want, "decision {i}: {s:?}");
    }
    let calls = h.fake.requests().len() - before;
    assert_eq!(calls, 0, "{:?}", &h.fake.requests()[before..]);

    // A decision that changes the desired state is read and written at once.
    let mut back = decision("ncp", Verdict::Healthy, Verdict::Healthy);
    back.at = Millis(10_000);
    h.reconciler.decide(&back);
    h.reconciler.next_applied().await;
    assert_eq!(
        h.fake.default_pools(),
        vec![ids::NCP.to_owned(), ids::GCP.to_owned()]
    );
}

/// Issue 14, item 3: decision churn (the active pool flipping every 500 ms for three minutes)
/// never makes more provider calls than the binding's budget per minute, besides the resync
/// read, counted at the fake (each call is at most two requests: two lists, or a PATCH and
/// its read-back). Exhaustion is visible: "decided but not applied" with the reason, and
/// `gslb_provider_budget_exhausted_total`. Once the churn stops, the last decision is applied.
#[tokio::test(start_paused = true)]
async fn decision_churn_never_exceeds_the_provider_call_budget() {
    const BUDGET: u32 = 6;
    let fake = Fake::start().await;
    let provider = provider(&fake);
    let steering = Steering {
        calls_per_minute: BUDGET,
        ..binding()
    };
    let h = start_on(fake, provider, steering, failover());
    let mut seen_budget = false;
    let mut flip = 0_u64;
    for minute in 0..3 {
        let before = h.fake.requests().len();
        for _ in 0..120 {
            flip += 1;
            let active = if flip.is_multiple_of(2) { "gcp" } else { "ncp" };
            let mut d = decision(active, Verdict::Healthy, Verdict::Healthy);
            d.at = Millis(flip * 500);
            h.reconciler.decide(&d);
            tokio::time::sleep(Duration::from_millis(500)).await;
            let s = status(&h.sinks);
            if let Some(reason) = &s.budget {
                assert_eq!(s.state, ApplyState::Pending, "{s:?}");
                assert!(reason.contains("budget spent"), "{reason}");
                seen_budget = true;
            }
        }
        let requests = h.fake.requests().len() - before;
        let most = 2 * (BUDGET as usize + 1);
        assert!(
            requests <= most,
            "minute {minute}: {requests} requests (at most {most})"
        );
    }
    assert!(seen_budget, "the status never showed the spent budget");
    let held = h
        .sinks
        .metrics
        .provider_budget_exhausted_total
        .with_label_values(&["cloudflare", "web"])
        .get();
    assert!(held > 0);
    // The churn stops on gcp: applied within a minute, the budget shown no more.
    tokio::time::sleep(Duration::from_secs(61)).await;
    let s = status(&h.sinks);
    assert_eq!(s.state, ApplyState::Applied, "{s:?}");
    assert_eq!(s.budget, None);
    assert_eq!(h.fake.default_pools(), failed_over());
}

/// Issue 15, item 4: a decision that comes while the reconciler reads (here a `stay` right
/// after the failover, as the engine makes one) is judged against that read, never discarded:
/// the switch is written after one read and one write (the lists, then the PATCH), counted at
/// the fake, whose answers take 2 s each.
#[tokio::test(start_paused = true)]
async fn a_decision_during_a_read_is_judged_against_that_read() {
    let mut h = start(failover(), |f| f.slow(Some(Duration::from_secs(2)))).await;
    // A second into the first read, the engine confirms the failover with a `stay`.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut stay = failover();
    stay.at = Millis(1_000);
    stay.rule = Rule::Stay;
    h.reconciler.decide(&stay);
    h.reconciler.next_applied().await;
    let requests = h.fake.requests();
    let until_write: Vec<String> = requests
        .iter()
        .take_while(|r| r.method != "PATCH")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(
        until_write,
        vec![
            format!("GET /zones/{}/load_balancers", ids::ZONE),
            format!("GET /accounts/{}/load_balancers/pools", ids::ACCOUNT),
        ],
        "one read before the write"
    );
    assert_eq!(h.fake.default_pools(), failed_over());
    assert_eq!(status(&h.sinks).decision_at, Some(Millis(1_000)));
}
