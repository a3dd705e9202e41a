//! The reconciler under provider faults, in paused tokio time: rate limiting with Retry-After,
//! write conflicts, fatal auth errors, stale decisions, and holds that must not write.
//!
//! The provider here is the in-memory provider wrapped with a fault script: these tests are
//! about the reconciler's error policy, not about a provider's wire protocol. Every
//! `tokio::time::sleep` below runs in paused time: it advances the simulated clock instantly
//! (auto-advance when idle) and stands for "this much time passes", never for a condition: a
//! pass that must have happened is awaited as its event (`Applied`, `InSync`, `ShadowPlan`).

mod support;

use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gslb::daemon::reconcile::Steering;
use gslb::ops::status::ApplyState;
use gslb::ops::telemetry::Telemetry;
use gslb_core::engine::{Decision, Rule};
use gslb_core::event::Event;
use gslb_core::model::{ByPool, Millis, PoolId, ServiceId};
use gslb_core::planner::ProviderPools;
use gslb_provider::{
    FailoverStyle, MemoryProvider, ObservedState, Plan, Provider, ProviderError, Served,
};

/// The in-memory provider with scripted failures for `apply`, and a call counter.
struct Faulty {
    inner: MemoryProvider,
    apply_faults: Mutex<VecDeque<ProviderError>>,
    always_fail: Option<ProviderError>,
    applies: Mutex<u32>,
    /// How long each read takes (a provider that stopped answering, until its timeouts).
    observe_delay: Mutex<Duration>,
    /// While set, reads (`.0`) or writes (`.1`) never answer (a hung connection no adapter
    /// timeout ends).
    hang: Mutex<(bool, bool)>,
    /// What each read says the provider's answers serve (Route 53 data-plane mode's tally).
    served: Mutex<Option<Served>>,
}

impl Faulty {
    fn new(faults: Vec<ProviderError>, always_fail: Option<ProviderError>) -> Self {
        Self {
            inner: MemoryProvider::new(
                FailoverStyle::Enablement,
                &["seoul".into(), "tokyo".into()],
            ),
            apply_faults: Mutex::new(faults.into()),
            always_fail,
            applies: Mutex::new(0),
            observe_delay: Mutex::new(Duration::ZERO),
            hang: Mutex::new((false, false)),
            served: Mutex::new(None),
        }
    }

    /// Never answers while `hang` is set for reads (`write` false) or writes.
    async fn hang_while_set(&self, write: bool) {
        let (reads, writes) = *self.hang.lock().expect("lock");
        if if write { writes } else { reads } {
            std::future::pending::<()>().await;
        }
    }

    fn applies(&self) -> u32 {
        *self.applies.lock().expect("lock")
    }
}

impl Provider for Faulty {
    fn name(&self) -> &'static str {
        "faulty"
    }
    fn style(&self) -> FailoverStyle {
        FailoverStyle::Enablement
    }
    async fn observe(&self) -> Result<ObservedState, ProviderError> {
        let delay = *self.observe_delay.lock().expect("lock");
        tokio::time::sleep(delay).await;
        self.hang_while_set(false).await;
        let mut state = self.inner.observe().await?;
        state.served = self.served.lock().expect("lock").clone();
        Ok(state)
    }
    async fn apply(&self, plan: &Plan) -> Result<(), ProviderError> {
        *self.applies.lock().expect("lock") += 1;
        self.hang_while_set(true).await;
        if let Some(e) = &self.always_fail {
            return Err(e.clone());
        }
        let fault = self.apply_faults.lock().expect("lock").pop_front();
        match fault {
            Some(e) => Err(e),
            None => self.inner.apply(plan).await,
        }
    }
}

fn pools() -> ProviderPools {
    ProviderPools {
        service: ServiceId("api".into()),
        priority: vec!["seoul".into(), "tokyo".into()],
        refs: ByPool::from_iter([
            (PoolId("seoul".into()), "seoul".into()),
            (PoolId("tokyo".into()), "tokyo".into()),
        ]),
    }
}

fn binding() -> Steering {
    Steering {
        pools: pools(),
        shadow: false,
        health_votes: None,
        seat: None,
        follow: None,
        calls_per_minute: gslb::daemon::reconcile::DEFAULT_CALLS_PER_MINUTE,
        resync: Duration::from_secs(60),
    }
}

fn decision(active: &str, rule: Rule) -> Decision {
    Decision {
        service: ServiceId("api".into()),
        at: Millis(0),
        active: Some(PoolId(active.into())),
        previous: None,
        rule,
        blocked: None,
        drained: BTreeSet::new(),
        reasons: vec![],
        pools: ByPool::default(),
    }
}

fn sinks() -> Telemetry {
    support::reconcile::sinks(include_str!("../policies/api-seoul-tokyo.toml"))
}

fn state(s: &Telemetry) -> gslb::ops::status::ApplyStatus {
    s.board.snapshot()[&ServiceId("api".into())].apply.clone()
}

/// A reconciler running against `provider` (see [`support::reconcile::start`]).
type Harness = support::reconcile::Harness<Faulty>;

/// Starts a reconciler with `decision` as the latest decision.
fn start(provider: Faulty, decision: Decision) -> Harness {
    start_with(provider, decision, binding())
}

fn start_with(provider: Faulty, decision: Decision, binding: Steering) -> Harness {
    support::reconcile::start(Arc::new(provider), binding, sinks(), &decision)
}

#[tokio::test(start_paused = true)]
async fn rate_limited_writes_wait_for_retry_after_and_then_apply() {
    let limited = ProviderError::RateLimited {
        retry_after: Some(Duration::from_secs(30)),
    };
    let started = tokio::time::Instant::now();
    let mut h = start(
        Faulty::new(vec![limited.clone(), limited.clone(), limited], None),
        decision("tokyo", Rule::Failover),
    );
    let (provider, sinks) = (h.provider.clone(), h.sinks.clone());

    // While it is rate limited, the decision shows as decided but not applied.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let pending = state(&sinks);
    assert_eq!(pending.state, ApplyState::Pending);
    assert!(
        pending
            .last_error
            .as_deref()
            .unwrap_or("")
            .contains("rate limited"),
        "{pending:?}"
    );

    h.next_applied().await;
    assert!(
        started.elapsed() >= Duration::from_secs(90),
        "three Retry-After of 30 s were honoured"
    );
    assert_eq!(provider.applies(), 4);
    assert_eq!(
        provider
            .inner
            .snapshot()
            .active(&pools().priority)
            .map(String::as_str),
        Some("tokyo")
    );
    h.read_back().await;
    assert_eq!(state(&sinks).state, ApplyState::Applied);
    assert_eq!(provider.inner.writes().len(), 1);
    drop(h.decisions);
    h.task
        .await
        .expect("reconciler ends when the decision channel closes");
}

#[tokio::test(start_paused = true)]
async fn a_conflict_is_re_observed_and_re_planned_not_retried_blindly() {
    let mut h = start(
        Faulty::new(vec![ProviderError::Conflict("version moved".into())], None),
        decision("tokyo", Rule::Failover),
    );
    h.next_applied().await;
    let (provider, sinks) = (h.provider, h.sinks);
    assert_eq!(provider.applies(), 2);
    let conflicts = sinks
        .metrics
        .provider_errors_total
        .with_label_values(&["faulty", "api", "apply", "conflict"])
        .get();
    assert_eq!(conflicts, 1);
}

#[tokio::test(start_paused = true)]
async fn auth_failures_are_not_retried_in_a_hot_loop() {
    let h = start(
        Faulty::new(vec![], Some(ProviderError::Auth("expired token".into()))),
        decision("tokyo", Rule::Failover),
    );
    let (provider, sinks) = (&h.provider, &h.sinks);
    tokio::time::sleep(Duration::from_secs(600)).await;
    // One try, then one per 60 s resync: 11 in ten minutes at most.
    assert!(
        provider.applies() <= 11,
        "{} applies in 10 minutes",
        provider.applies()
    );
    assert!(provider.applies() >= 2, "it keeps trying on resync");
    assert_eq!(state(sinks).state, ApplyState::Pending);
}

#[tokio::test(start_paused = true)]
async fn holds_write_nothing_and_the_latest_decision_wins() {
    let h = start(Faulty::new(vec![], None), decision("tokyo", Rule::Failover));
    // Replaced before the reconciler ever runs: the stale failover must never be applied.
    h.decide(&decision("tokyo", Rule::FailStatic));
    let (provider, sinks) = (&h.provider, &h.sinks);
    tokio::time::sleep(Duration::from_secs(300)).await;
    assert_eq!(provider.applies(), 0);
    assert!(provider.inner.writes().is_empty());
    assert_eq!(state(sinks).state, ApplyState::NotPushed);
}

#[tokio::test(start_paused = true)]
async fn shadow_mode_records_the_plan_and_writes_nothing() {
    let binding = Steering {
        shadow: true,
        ..binding()
    };
    let mut h = start_with(
        Faulty::new(vec![], None),
        decision("tokyo", Rule::Failover),
        binding,
    );
    let plan = loop {
        if let Ok(Event::ShadowPlan { plan, .. }) = h.events.recv().await {
            break plan;
        }
    };
    assert_eq!(plan.len(), 1, "{plan:?}");
    tokio::time::sleep(Duration::from_secs(300)).await;
    assert_eq!(h.provider.applies(), 0);
    assert!(h.provider.inner.writes().is_empty());
    let status = state(&h.sinks);
    assert_eq!(status.state, ApplyState::Shadow);
    assert_eq!(status.would_write, Some(plan));
    let counted = h
        .sinks
        .metrics
        .shadow_plans_total
        .with_label_values(&["api"])
        .get();
    assert_eq!(counted, 1, "one distinct plan, counted once across resyncs");
}

#[tokio::test(start_paused = true)]
async fn drained_pools_are_disabled_but_never_the_active_one() {
    let mut d = decision("seoul", Rule::Drain);
    d.drained = [PoolId("tokyo".into())].into();
    let mut h = start(Faulty::new(vec![], None), d);
    h.next_applied().await;
    let observed = h.provider.inner.snapshot();
    assert!(!observed.pools["tokyo"].enabled);
    assert!(observed.pools["seoul"].enabled);
}

#[tokio::test(start_paused = true)]
async fn unapplied_age_rises_while_the_provider_fails_and_is_zero_once_applied() {
    let limited = ProviderError::RateLimited {
        retry_after: Some(Duration::from_secs(30)),
    };
    // Decided at 0 s; three writes rate limited (Retry-After 30 s), the fourth, at 90 s, lands.
    let mut h = start(
        Faulty::new(vec![limited.clone(), limited.clone(), limited], None),
        decision("tokyo", Rule::Failover),
    );
    let age = h
        .sinks
        .metrics
        .decision_unapplied_age_seconds
        .with_label_values(&["api"]);
    let passes = h
        .sinks
        .metrics
        .reconcile_duration_seconds
        .with_label_values(&["faulty"]);
    // Between two tries as well as at them, the age keeps rising (refreshed every second).
    let started = tokio::time::Instant::now();
    for at in [10, 45, 80] {
        tokio::time::sleep_until(started + Duration::from_secs(at)).await;
        assert_eq!(state(&h.sinks).state, ApplyState::Pending);
        let (seen, at) = (age.get(), at as f64);
        assert!(
            (at - 1.0..=at).contains(&seen),
            "age {seen} s at {at} s while the provider refuses"
        );
    }
    h.next_applied().await;
    h.read_back().await;
    h.tick();
    assert_eq!(state(&h.sinks).state, ApplyState::Applied);
    assert_eq!(age.get(), 0.0, "applied: nothing waits");
    // Four tries and the read-back, each timed.
    assert!(
        passes.get_sample_count() >= 5,
        "{}",
        passes.get_sample_count()
    );
}

#[tokio::test(start_paused = true)]
async fn a_switch_the_provider_already_matches_is_announced_in_sync() {
    // Serving seoul and in sync with it.
    let mut h = start(Faulty::new(vec![], None), decision("seoul", Rule::Stay));
    let (_, pool) = h
        .next_in_sync(Duration::from_secs(5))
        .await
        .expect("the first read is in sync");
    assert_eq!(pool, PoolId("seoul".into()));
    // A switch to tokyo and straight back (a drill started and ended) coalesce in the watch:
    // the reconciler only sees the switch back to seoul, which needs no write. Its failover
    // timeline still waits for the provider's in-sync read.
    let mut back = decision("seoul", Rule::Restore);
    back.at = Millis(2_000);
    back.previous = Some(PoolId("tokyo".into()));
    tokio::time::sleep(Duration::from_secs(2)).await;
    h.decide(&back);
    let seen = h.next_in_sync(Duration::from_secs(5)).await;
    assert!(
        matches!(&seen, Some((at, p)) if at.0 >= 2_000 && p.0 == "seoul"),
        "no write needed, yet the new decision is in sync: {seen:?}"
    );
    assert_eq!(h.provider.applies(), 0);
}

#[tokio::test(start_paused = true)]
async fn unapplied_age_counts_from_when_the_provider_stopped_matching_not_from_an_old_decision() {
    // Decided at 0 s and applied at once (nothing to write).
    let mut h = start(Faulty::new(vec![], None), decision("seoul", Rule::Stay));
    h.next_in_sync(Duration::from_secs(5))
        .await
        .expect("in sync");
    let age = h
        .sinks
        .metrics
        .decision_unapplied_age_seconds
        .with_label_values(&["api"]);
    // An hour later another writer disables seoul, and the provider refuses writes for a while.
    tokio::time::sleep(Duration::from_secs(3_600)).await;
    let drift = vec![gslb_provider::Change::SetEnabled {
        pool: "seoul".into(),
        enabled: false,
        expected_version: h.provider.inner.snapshot().pools["seoul"].version.clone(),
    }];
    h.provider.inner.apply(&drift).await.expect("drift");
    h.provider
        .apply_faults
        .lock()
        .expect("lock")
        .extend((0..20).map(|_| ProviderError::Transient("503".into())));
    // The next resync sees the drift within 60 s and starts failing to correct it.
    tokio::time::sleep(Duration::from_secs(90)).await;
    assert_eq!(state(&h.sinks).state, ApplyState::Pending);
    let seen = age.get();
    assert!(
        seen <= 90.0,
        "unapplied for at most 90 s, not since the decision an hour ago: {seen} s"
    );
}

#[tokio::test(start_paused = true)]
async fn a_new_decision_shows_pending_and_ages_while_the_provider_read_hangs() {
    // Serving seoul and in sync with it.
    let mut h = start(Faulty::new(vec![], None), decision("seoul", Rule::Stay));
    h.next_in_sync(Duration::from_secs(5))
        .await
        .expect("in sync");
    let labels = ["api"];
    let age = h
        .sinks
        .metrics
        .decision_unapplied_age_seconds
        .with_label_values(&labels);
    let applied = h.sinks.metrics.decision_applied.with_label_values(&labels);
    // The provider stops answering: each read takes 40 s (a stopped emulator, three attempts
    // of 10 s and more), so each fails at the reconciler's 12 s deadline. The 60 s resync read
    // starts and hangs; at 65 s a failover to tokyo is decided while that read is in flight.
    *h.provider.observe_delay.lock().expect("lock") = Duration::from_secs(40);
    let started = tokio::time::Instant::now();
    tokio::time::sleep_until(started + Duration::from_secs(65)).await;
    let mut failover = decision("tokyo", Rule::Failover);
    failover.at = Millis(65_000);
    h.decide(&failover);
    // Decided but not applied from that moment, the age rising, through the end of the old
    // read (cut at 90 s; seoul was last seen serving) and the reads retried after it.
    for at in [66, 90, 120, 135] {
        tokio::time::sleep_until(started + Duration::from_secs(at)).await;
        let status = state(&h.sinks);
        assert_eq!(status.state, ApplyState::Pending, "at {at} s");
        assert_eq!(status.pending_since, Some(Millis(65_000)), "at {at} s");
        assert_eq!(status.observed_active, Some(PoolId("seoul".into())));
        assert_eq!(applied.get(), 0.0, "at {at} s");
        let (seen, waited) = (age.get(), (at - 65) as f64);
        assert!(
            (waited - 1.0..=waited).contains(&seen),
            "age {seen} s at {at} s, decided at 65 s"
        );
    }
    *h.provider.observe_delay.lock().expect("lock") = Duration::ZERO;
    h.next_applied().await;
    h.read_back().await;
    h.tick();
    let status = state(&h.sinks);
    assert_eq!(status.state, ApplyState::Applied);
    assert_eq!(status.observed_active, Some(PoolId("tokyo".into())));
    assert_eq!(age.get(), 0.0, "applied: nothing waits");
    assert_eq!(applied.get(), 1.0);
}

#[tokio::test(start_paused = true)]
async fn a_provider_call_that_never_answers_fails_as_transient_at_its_deadline() {
    use gslb::daemon::reconcile::CALL_DEADLINE;
    let mut h = start(Faulty::new(vec![], None), decision("seoul", Rule::Stay));
    h.next_in_sync(Duration::from_secs(5))
        .await
        .expect("in sync");
    let errors = |operation: &str| {
        h.sinks
            .metrics
            .provider_errors_total
            .with_label_values(&["faulty", "api", operation, "transient"])
            .get()
    };
    // The provider stops answering; a failover to tokyo is decided. The read hangs: at its
    // deadline it is a transient error, in the status and the metrics at once.
    *h.provider.hang.lock().expect("lock") = (true, false);
    let started = tokio::time::Instant::now();
    let mut failover = decision("tokyo", Rule::Failover);
    failover.at = Millis(10_000);
    h.decide(&failover);
    tokio::time::sleep(CALL_DEADLINE - Duration::from_secs(1)).await;
    assert_eq!(errors("observe"), 0);
    assert_eq!(state(&h.sinks).last_error, None);
    tokio::time::sleep_until(started + CALL_DEADLINE + Duration::from_millis(10)).await;
    let s = state(&h.sinks);
    assert_eq!(s.state, ApplyState::Pending, "{s:?}");
    let error = s.last_error.unwrap_or_default();
    assert!(error.contains("no answer within 12s"), "{error}");
    assert_eq!(errors("observe"), 1);

    // Reads answer again, the write hangs: the same at the write's deadline.
    *h.provider.hang.lock().expect("lock") = (false, true);
    while h.provider.applies() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let writing = tokio::time::Instant::now();
    tokio::time::sleep_until(writing + CALL_DEADLINE - Duration::from_secs(1)).await;
    assert_eq!(errors("apply"), 0);
    tokio::time::sleep_until(writing + CALL_DEADLINE + Duration::from_millis(20)).await;
    assert_eq!(errors("apply"), 1);
    let s = state(&h.sinks);
    assert_eq!(s.state, ApplyState::Pending, "{s:?}");
    assert!(s.last_error.is_some_and(|e| e.contains("no answer")));

    // The provider answers again: retried, applied.
    *h.provider.hang.lock().expect("lock") = (false, false);
    h.next_applied().await;
    h.read_back().await;
    assert_eq!(state(&h.sinks).state, ApplyState::Applied);
}

/// Route 53 data-plane mode: the provider stores this instance's vote at once, but serves
/// what every instance's votes give. The decision stays decided but not applied, with why,
/// while the answers serve another pool or have not settled, and is announced in sync once
/// they serve its pool and settled, without another write.
#[tokio::test(start_paused = true)]
async fn a_decision_is_applied_only_once_the_providers_answers_serve_it() {
    let provider = Faulty::new(vec![], None);
    let serves = |pool: &str, settled: bool| Served {
        pool: pool.into(),
        settled,
        why: format!("Route 53's tally serves {pool}"),
    };
    *provider.served.lock().expect("lock") = Some(serves("seoul", true));
    let mut h = start(provider, decision("tokyo", Rule::Failover));
    let (provider, sinks) = (h.provider.clone(), h.sinks.clone());
    h.next_applied().await;
    assert_eq!(
        h.next_in_sync(Duration::from_secs(60)).await,
        None,
        "the vote is not the answer"
    );
    let pending = state(&sinks);
    assert_eq!(pending.state, ApplyState::Pending);
    assert_eq!(pending.observed_active, Some(PoolId("seoul".into())));
    assert_eq!(
        pending.awaiting.as_deref(),
        Some("Route 53's tally serves seoul")
    );

    // The tally turns to tokyo: still pending until the checkers have had time to follow.
    *provider.served.lock().expect("lock") = Some(serves("tokyo", false));
    assert_eq!(h.next_in_sync(Duration::from_secs(30)).await, None);
    assert_eq!(state(&sinks).observed_active, Some(PoolId("tokyo".into())));
    *provider.served.lock().expect("lock") = Some(serves("tokyo", true));
    let (_, active) = h
        .next_in_sync(Duration::from_secs(10))
        .await
        .expect("in sync within a recheck of the answers settling");
    assert_eq!(active, PoolId("tokyo".into()));
    let applied = state(&sinks);
    assert_eq!(
        (applied.state, applied.awaiting),
        (ApplyState::Applied, None)
    );
    assert_eq!(
        provider.applies(),
        1,
        "waiting for the answers writes nothing"
    );
}
