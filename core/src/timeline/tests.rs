//! The recorder in simulated time: events with explicit instants, no clock.

use super::fixtures::*;
use super::*;
use crate::engine::Rule;
use crate::event::ObservedPhase;
use crate::model::ProbeReason;

fn observed_recorder() -> Recorder {
    let mut r = Recorder::default();
    r.expect(
        "api".into(),
        Expect {
            dns: true,
            served_by: true,
            ..Expect::default()
        },
    );
    r
}

fn feed(r: &mut Recorder, events: &[Event]) -> Vec<Update> {
    events.iter().flat_map(|e| r.apply(e)).collect()
}

#[test]
fn an_automatic_failover_records_every_phase_in_order_and_completes() {
    let mut r = observed_recorder();
    let id = "api-1600";
    let updates = feed(
        &mut r,
        &[
            probe("seoul", "s1", 900, ProbeReason::Ok),
            probe("seoul", "s1", 1_000, ProbeReason::ConnectionRefused),
            // A prober-side failure neither starts nor ends a run.
            probe("seoul", "s2", 1_050, ProbeReason::LocalResources),
            probe("seoul", "s1", 1_200, ProbeReason::ConnectionRefused),
            probe("tokyo", "t1", 1_100, ProbeReason::Timeout),
            probe("tokyo", "t1", 1_300, ProbeReason::Ok),
            decision(1_600, Rule::Failover, "seoul", "tokyo", Some(1_400)),
            applied(1_650, "tokyo"),
            in_sync(1_700, "tokyo"),
            observed(id, ObservedPhase::Dns, 2_000),
            observed(id, ObservedPhase::ServedBy, 2_500),
        ],
    );
    let t = &r.list(None, 10)[0];
    assert_eq!(t.id, id);
    assert_eq!(t.kind, SwitchKind::Automatic);
    assert_eq!(t.status, Status::Complete);
    let times: Vec<_> = Phase::ALL.iter().map(|p| t.phases.get(*p)).collect();
    assert_eq!(
        times,
        [1_000, 1_400, 1_600, 1_650, 1_700, 2_000, 2_500].map(|m| Some(Millis(m)))
    );
    assert_eq!(t.observed["dns_observed"], "seen");
    let seconds: Vec<_> = updates
        .iter()
        .filter_map(|u| match u {
            Update::Phase { phase, seconds, .. } => Some((*phase, *seconds)),
            _ => None,
        })
        .collect();
    assert_eq!(
        seconds,
        [
            (Phase::MarkedDown, 0.4),
            (Phase::Decision, 0.6),
            (Phase::ProviderAccepted, 0.65),
            (Phase::ProviderInSync, 0.7),
            (Phase::DnsObserved, 1.0),
            (Phase::ServedByObserved, 1.5),
        ]
    );
    assert!(matches!(updates.last(), Some(Update::Closed(c)) if c.status == Status::Complete));
    let report = report::render(t);
    assert!(report.contains("detection time         400 ms"), "{report}");
    assert!(report.contains("read RTO              1500 ms"), "{report}");
}

#[test]
fn a_shadow_services_switch_is_marked_and_observes_no_phase_histogram() {
    let mut r = Recorder::default();
    r.expect(
        "api".into(),
        Expect {
            provider: false,
            dns: true,
            ..Expect::default()
        },
    );
    let updates = feed(
        &mut r,
        &[
            probe("seoul", "s1", 1_000, ProbeReason::ConnectionRefused),
            decision(1_600, Rule::Failover, "seoul", "tokyo", Some(1_400)),
            // The writer's switch, seen by this instance's observer.
            observed("api-1600", ObservedPhase::Dns, 2_000),
        ],
    );
    let t = &r.list(None, 10)[0];
    assert_eq!(t.mode, Mode::Shadow);
    assert_eq!(t.status, Status::Complete);
    assert_eq!(t.phases.marked_down, Some(Millis(1_400)));
    assert_eq!(t.phases.dns_observed, Some(Millis(2_000)));
    assert!(
        !updates.iter().any(|u| matches!(u, Update::Phase { .. })),
        "{updates:?}"
    );
    assert_eq!(
        serde_json::to_value(t).expect("json")["mode"],
        serde_json::json!("shadow")
    );
    assert!(
        report::render(t).contains("(automatic, failover, shadow: not written)"),
        "{}",
        report::render(t)
    );
}

#[test]
fn a_drill_starts_at_its_decision_and_ignores_phases_of_other_pools_or_before_it() {
    let mut r = Recorder::default();
    feed(
        &mut r,
        &[
            probe("seoul", "s1", 100, ProbeReason::ConnectionRefused),
            decision(1_000, Rule::Drain, "seoul", "tokyo", None),
            applied(900, "tokyo"),
            in_sync(1_100, "seoul"),
        ],
    );
    let t = &r.list(None, 10)[0];
    assert_eq!(t.kind, SwitchKind::Drill);
    assert_eq!(t.start(), Millis(1_000));
    assert_eq!(t.phases.first_failed_probe, None);
    assert_eq!(t.phases.marked_down, None);
    assert_eq!(t.phases.provider_accepted, None, "before the decision");
    assert_eq!(t.phases.provider_in_sync, None, "the old pool");
    assert_eq!(t.status, Status::Open);
    let updates = r.apply(&in_sync(1_200, "tokyo"));
    assert!(
        matches!(&updates[..], [Update::Phase { seconds, .. }, Update::Closed(c)]
        if (*seconds - 0.2).abs() < 1e-9 && c.status == Status::Complete)
    );
}

#[test]
fn a_newer_switch_supersedes_the_open_timeline() {
    let mut r = observed_recorder();
    feed(
        &mut r,
        &[
            decision(1_000, Rule::Failover, "seoul", "tokyo", Some(900)),
            applied(1_100, "tokyo"),
        ],
    );
    let updates = r.apply(&decision(2_000, Rule::Restore, "tokyo", "seoul", None));
    assert!(
        matches!(&updates[0], Update::Closed(t) if t.id == "api-1000" && t.status == Status::Superseded)
    );
    assert!(matches!(updates.last(), Some(Update::Opened(t)) if t.id == "api-2000"));
    // A late observation of the superseded timeline is not recorded anywhere.
    assert!(
        r.apply(&observed("api-1000", ObservedPhase::Dns, 2_100))
            .is_empty()
    );
    let all = r.list(None, 10);
    assert_eq!(
        all.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        ["api-2000", "api-1000"]
    );
    assert_eq!(all[1].phases.provider_in_sync, None);
    assert_eq!(all[0].phases.dns_observed, None);
}

#[test]
fn open_timelines_time_out_after_their_window() {
    let mut r = Recorder::default();
    r.apply(&decision(
        1_000,
        Rule::Failover,
        "seoul",
        "tokyo",
        Some(900),
    ));
    assert!(r.expire(Millis(1_000 + 599_999)).is_empty());
    let closed = r.expire(Millis(1_000 + 600_000));
    assert!(matches!(&closed[..], [Update::Closed(t)] if t.status == Status::TimedOut));
    assert!(r.expire(Millis(2_000_000)).is_empty(), "closed once");
}

#[test]
fn only_the_last_timelines_are_kept() {
    let mut r = Recorder::default();
    for i in 0..(CAPACITY as u64 + 10) {
        let (from, to) = if i % 2 == 0 {
            ("seoul", "tokyo")
        } else {
            ("tokyo", "seoul")
        };
        r.apply(&decision(1_000 * (i + 1), Rule::Force, from, to, None));
    }
    let all = r.list(None, usize::MAX);
    assert_eq!(all.len(), CAPACITY);
    assert_eq!(all[0].id, format!("api-{}", 1_000 * (CAPACITY as u64 + 10)));
    assert_eq!(r.list(Some(&"web".into()), 10).len(), 0);
    assert_eq!(r.list(Some(&"api".into()), 3).len(), 3);
}

#[test]
fn decisions_that_do_not_switch_open_nothing() {
    let mut r = Recorder::default();
    let Event::Decision(mut d) = decision(1_000, Rule::Stay, "seoul", "seoul", None) else {
        unreachable!()
    };
    assert!(r.apply(&Event::Decision(d.clone())).is_empty());
    d.previous = None;
    d.rule = Rule::ServePreferred;
    assert!(r.apply(&Event::Decision(d)).is_empty());
    assert!(r.list(None, 10).is_empty());
}

#[test]
fn an_endpoint_failing_long_before_the_pool_went_down_does_not_start_the_timeline() {
    let mut r = Recorder::default();
    feed(
        &mut r,
        &[
            // s2 has been broken for ages; the pool stayed up on s1.
            probe("seoul", "s2", 100, ProbeReason::ConnectionRefused),
            probe("seoul", "s1", 4_900, ProbeReason::Ok),
            probe("seoul", "s2", 4_900, ProbeReason::ConnectionRefused),
            // Then s1 fails too: this is the failure that takes the pool down.
            probe("seoul", "s1", 5_000, ProbeReason::Timeout),
            probe("seoul", "s1", 5_200, ProbeReason::Timeout),
            decision(5_600, Rule::Failover, "seoul", "tokyo", Some(5_400)),
        ],
    );
    let t = &r.list(None, 1)[0];
    assert_eq!(
        t.phases.first_failed_probe,
        Some(Millis(5_000)),
        "the run that started after the pool's last success, not s2's stale one"
    );
}

#[test]
fn a_write_for_the_superseded_switch_is_not_the_new_ones_provider_accepted() {
    let mut r = Recorder::default();
    feed(
        &mut r,
        &[
            decision(1_000, Rule::Failover, "seoul", "tokyo", Some(900)),
            // Back to seoul while the write for tokyo is still in flight at the provider.
            decision(2_000, Rule::Restore, "tokyo", "seoul", None),
            applied(2_100, "tokyo"),
            applied(2_300, "seoul"),
        ],
    );
    let t = &r.list(None, 1)[0];
    assert_eq!(t.id, "api-2000");
    assert_eq!(t.phases.provider_accepted, Some(Millis(2_300)));
}

/// The endpoint of [`api_policy`]'s `seoul` pool.
const SEOUL: &str = "http://127.0.0.1:1/api/v1/health";

#[test]
fn a_reload_forgets_removed_endpoints_and_interrupts_removed_services() {
    let mut r = Recorder::default();
    let mut other = probe("seoul", "s1", 100, ProbeReason::Timeout);
    if let Event::Probe { service, .. } = &mut other {
        *service = "old".into();
    }
    let mut old_switch = decision(1_000, Rule::Failover, "seoul", "tokyo", Some(900));
    if let Event::Decision(d) = &mut old_switch {
        d.service = "old".into();
    }
    feed(
        &mut r,
        &[
            probe("seoul", SEOUL, 50, ProbeReason::Ok),
            probe("seoul", SEOUL, 100, ProbeReason::Timeout),
            probe("seoul", "removed", 100, ProbeReason::Timeout),
            probe("gone-pool", "x", 100, ProbeReason::Ok),
            other,
            old_switch,
        ],
    );
    r.expect("old".into(), Expect::default());
    let closed = r.retain(&[api_policy()]);
    assert!(
        matches!(&closed[..], [Update::Closed(t)] if t.id == "old-1000" && t.status == Status::Interrupted),
        "{closed:?}"
    );
    let with = |f: fn(&History) -> bool| {
        r.services
            .iter()
            .filter(|(_, h)| f(h))
            .map(|(s, _)| s.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(with(|h| !h.failing.is_empty()), ["api"]);
    let api = r.history(&ServiceId::from("api")).expect("kept");
    let kept: Vec<_> = (api.failing.iter())
        .map(|f| format!("{}/{}", f.pool, f.endpoint))
        .collect();
    assert_eq!(kept, [format!("seoul/{SEOUL}")]);
    let pools: Vec<_> = api.last_ok.iter().map(|o| o.pool.to_string()).collect();
    assert_eq!(pools, ["seoul"]);
    assert_eq!(with(|h| !h.last_ok.is_empty()), ["api"]);
    assert!(with(|h| h.expect.is_some()).iter().all(|s| s != "old"));
    assert!(r.retain(&[api_policy()]).is_empty(), "closed once");
    assert_eq!(r.list(None, 10).len(), 1, "closed timelines stay listed");
}

#[test]
fn interrupt_closes_every_open_timeline_once() {
    let mut r = Recorder::default();
    feed(
        &mut r,
        &[
            decision(1_000, Rule::Failover, "seoul", "tokyo", Some(900)),
            in_sync(1_500, "tokyo"),
            decision(2_000, Rule::Restore, "tokyo", "seoul", None),
        ],
    );
    let closed = r.interrupt();
    assert!(
        matches!(&closed[..], [Update::Closed(t)] if t.id == "api-2000" && t.status == Status::Interrupted),
        "the complete one stays complete: {closed:?}"
    );
    assert!(r.interrupt().is_empty());
}

/// Issue 12, part 3: the decision phase says which wait applied: a failover that waited for a
/// probe of the target to pass names `confirm_target`; one decided at once names none.
#[test]
fn the_decision_phase_names_the_wait_it_applied() {
    let mut r = Recorder::default();
    feed(
        &mut r,
        &[
            decision(1_000, Rule::Stay, "seoul", "seoul", None),
            decision(1_400, Rule::ConfirmTarget, "seoul", "seoul", Some(1_400)),
            decision(1_600, Rule::Failover, "seoul", "tokyo", Some(1_400)),
        ],
    );
    let t = &r.list(None, 1)[0];
    assert_eq!(t.waited, ["confirm_target"]);
    let report = report::render(t);
    assert!(
        report.contains("decision (waited: confirm_target)"),
        "{report}"
    );
    let json = serde_json::to_string(t).expect("serialises");
    assert!(json.contains(r#""waited":["confirm_target"]"#), "{json}");
    feed(
        &mut r,
        &[
            decision(2_000, Rule::Stay, "tokyo", "tokyo", None),
            decision(2_500, Rule::Failover, "tokyo", "seoul", Some(2_500)),
        ],
    );
    let t = &r.list(None, 1)[0];
    assert!(t.waited.is_empty(), "{:?}", t.waited);
    assert!(
        !serde_json::to_string(t)
            .expect("serialises")
            .contains("waited")
    );
}

#[test]
fn restored_timelines_come_before_new_ones_once_each_within_capacity() {
    let mut before = Recorder::default();
    feed(
        &mut before,
        &[decision(1_000, Rule::Failover, "seoul", "tokyo", Some(800))],
    );
    before.interrupt();
    let past = before.list(None, CAPACITY);
    let mut r = Recorder::default();
    feed(
        &mut r,
        &[decision(9_000, Rule::Failback, "tokyo", "seoul", None)],
    );
    r.restore(past.clone());
    r.restore(past);
    let ids: Vec<String> = r.list(None, CAPACITY).into_iter().map(|t| t.id).collect();
    assert_eq!(ids, ["api-9000", "api-1000"], "newest first, the past once");
    let newest = r.list(None, 1)[0].clone();
    let many = (0..CAPACITY as u64).map(|i| Timeline {
        id: format!("api-{i}"),
        ..newest.clone()
    });
    r.restore(many);
    let kept = r.list(None, usize::MAX);
    assert_eq!(kept.len(), CAPACITY);
    assert_eq!(
        kept[0].id, "api-9000",
        "the newest is never pushed out by the past"
    );
}

/// `e` as an event of `service`.
fn of(service: &str, mut e: Event) -> Event {
    match &mut e {
        Event::Probe { service: s, .. } => *s = service.into(),
        Event::Decision(d) => d.service = service.into(),
        _ => {}
    }
    e
}

/// What the recorder keeps for its services, in bytes: the list's room and, behind each
/// entry, the names, runs, successes and holds (the allocator's own overhead not counted).
fn history_bytes(r: &Recorder) -> usize {
    let heap = |(s, h): &(ServiceId, History)| {
        s.0.capacity()
            + h.holds.capacity() * size_of::<&str>()
            + h.failing.capacity() * size_of::<history::Run>()
            + (h.failing.iter())
                .map(|f| f.pool.0.capacity() + f.endpoint.0.capacity())
                .sum::<usize>()
            + h.last_ok.capacity() * size_of::<history::Pass>()
            + h.last_ok.iter().map(|o| o.pool.0.capacity()).sum::<usize>()
    };
    r.services.capacity() * size_of::<(ServiceId, History)>()
        + r.services.iter().map(heap).sum::<usize>()
}

#[test]
fn a_steady_service_of_two_pools_costs_the_recorder_under_256_bytes() {
    // Issue 14: at 5,000 services of 2 pools x 1 endpoint the recorder kept about 1 kB per
    // service in maps (a BTreeMap node per service and its names copied per entry).
    let n = 1_000;
    let policies: Vec<Policy> = (0..n)
        .map(|i| Policy {
            service: format!("svc-{i:04}").as_str().into(),
            ..api_policy()
        })
        .collect();
    let mut r = Recorder::default();
    for p in &policies {
        r.expect(p.service.clone(), Expect::default());
    }
    r.retain(&policies);
    for p in &policies {
        let s = p.service.0.as_str();
        let events = [
            of(
                s,
                decision(10, Rule::ServePreferred, "seoul", "seoul", None),
            ),
            of(s, probe("seoul", SEOUL, 1_000, ProbeReason::Ok)),
            of(
                s,
                probe(
                    "tokyo",
                    "http://127.0.0.1:2/api/v1/health",
                    1_000,
                    ProbeReason::Ok,
                ),
            ),
            of(s, probe("seoul", SEOUL, 2_000, ProbeReason::Ok)),
            of(s, probe("seoul", SEOUL, 3_000, ProbeReason::Timeout)),
            of(s, probe("seoul", SEOUL, 4_000, ProbeReason::Ok)),
        ];
        assert!(feed(&mut r, &events).is_empty());
    }
    let per_service = history_bytes(&r) / n;
    println!("timeline recorder: {per_service} B per steady service");
    assert!(per_service < 256, "{per_service} B per service");
    let api = r.history(&policies[0].service).expect("kept");
    assert!(api.failing.is_empty(), "the run ended with the success");
    assert_eq!(
        api.last_ok.len(),
        2,
        "one success per pool and vantage point"
    );
}
