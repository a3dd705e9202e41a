//! The timeline task against a live event channel: phase histograms, audit lines, stop.

use std::time::Duration;

use gslb_core::engine::Rule;
use gslb_core::model::{Millis, ProbeReason};
use gslb_core::timeline::Status;
use gslb_core::timeline::fixtures::{api_policy, applied, decision, in_sync, probe};

use super::spawn;

/// A temporary folder with an audit log in it, and telemetry whose clock reads 5 s.
async fn task_fixture() -> (
    tempfile::TempDir,
    crate::io::audit::AuditLog,
    crate::ops::telemetry::Telemetry,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let audit = crate::io::audit::AuditLog::open(dir.path().join("audit.jsonl"))
        .await
        .expect("audit log");
    let telemetry = crate::ops::telemetry::Telemetry::new(
        crate::io::clock::Clock::anchored_at(Millis(5_000)),
        64,
    );
    (dir, audit, telemetry)
}

#[tokio::test]
async fn the_task_observes_phase_histograms_and_audits_closed_timelines() {
    use std::sync::Arc;

    let (dir, audit, telemetry) = task_fixture().await;
    let policy = api_policy();
    let (_set, policies) = tokio::sync::watch::channel(Arc::new(vec![policy]));
    let (store, task) = spawn(
        &telemetry,
        Some(audit.clone()),
        crate::io::probe::DnsSettings::default(),
        policies,
    );
    let count = |phase: &str, n: u64| {
        format!("gslb_failover_phase_seconds_count{{phase=\"{phase}\",service=\"api\"}} {n}")
    };
    let metrics = telemetry.metrics.render();
    assert!(
        !metrics.contains("gslb_failover_phase_seconds_bucket"),
        "no phase series before the service's first switch: {metrics}"
    );

    for e in [
        probe("seoul", "s1", 500, ProbeReason::ConnectionRefused),
        decision(1_000, Rule::Failover, "seoul", "tokyo", Some(800)),
        in_sync(1_500, "tokyo"),
    ] {
        telemetry.events.send(e).expect("the task listens");
    }
    tokio::time::timeout(Duration::from_secs(5), async {
        while store
            .list(None, 1)
            .first()
            .is_none_or(|t| t.status != Status::Complete)
        {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the timeline completes (no observers: in sync is the last phase)");
    let metrics = telemetry.metrics.render();
    assert!(metrics.contains(&count("provider_in_sync", 1)), "{metrics}");
    assert!(
        metrics.contains(
            "gslb_failover_phase_seconds_sum{phase=\"provider_in_sync\",service=\"api\"} 1"
        ),
        "one second from the first failed probe: {metrics}"
    );
    assert!(metrics.contains(&count("dns_observed", 0)), "{metrics}");
    assert!(
        metrics.contains(&count("served_by_observed", 0)),
        "every phase reads 0 once a timeline opened: {metrics}"
    );
    audit.flush().await.expect("flush");
    let text = std::fs::read_to_string(dir.path().join("audit.jsonl")).expect("audit");
    let line: serde_json::Value = serde_json::from_str(text.trim()).expect("one line");
    assert_eq!(line["action"], "failover.timeline");
    assert_eq!(line["result"], "complete");
    assert_eq!(
        line["detail"]["phases"]["first_failed_probe"],
        "1970-01-01T00:00:00.500Z"
    );
    task.stop().await;
}

#[tokio::test]
async fn stopping_the_task_audits_open_timelines_as_interrupted() {
    use std::sync::Arc;

    let (dir, audit, telemetry) = task_fixture().await;
    let (_set, policies) = tokio::sync::watch::channel(Arc::new(vec![api_policy()]));
    let (store, task) = spawn(
        &telemetry,
        Some(audit),
        crate::io::probe::DnsSettings::default(),
        policies,
    );
    telemetry
        .events
        .send(decision(1_000, Rule::Failover, "seoul", "tokyo", Some(800)))
        .expect("the task listens");
    // Events already sent when the stop arrives are still recorded, then the timeline closes.
    telemetry
        .events
        .send(applied(1_100, "tokyo"))
        .expect("the task listens");
    task.stop().await;
    let t = &store.list(None, 1)[0];
    assert_eq!(t.status, Status::Interrupted);
    let text = std::fs::read_to_string(dir.path().join("audit.jsonl")).expect("audit");
    let line: serde_json::Value = serde_json::from_str(text.trim()).expect("one line, flushed");
    assert_eq!(line["action"], "failover.timeline");
    assert_eq!(line["result"], "interrupted");
    assert_eq!(
        line["detail"]["phases"]["provider_accepted"],
        "1970-01-01T00:00:01.100Z"
    );
}

/// `gslb events` (`GET /v1/events`) after a restart: the earlier run audited its closed
/// timeline; the new run reads the audit log back and lists it, behind its own.
#[tokio::test]
async fn events_show_a_timeline_after_a_restart() {
    use std::sync::Arc;

    let (dir, audit, telemetry) = task_fixture().await;
    let (_set, policies) = tokio::sync::watch::channel(Arc::new(vec![api_policy()]));
    let (store, task) = spawn(
        &telemetry,
        Some(audit.clone()),
        crate::io::probe::DnsSettings::default(),
        policies.clone(),
    );
    for e in [
        decision(1_000, Rule::Failover, "seoul", "tokyo", Some(800)),
        in_sync(1_500, "tokyo"),
    ] {
        telemetry.events.send(e).expect("the task listens");
    }
    task.stop().await;
    let before = store.list(None, 10);
    assert_eq!(before.len(), 1);
    assert_eq!(before[0].status, Status::Complete);
    audit.close().await.expect("close");

    // The restart: a new store, fed nothing yet but the audit log.
    let past = crate::io::audit::Past::read(&dir.path().join("audit.jsonl")).expect("read back");
    assert_eq!(past.skipped, 0);
    let (_dir2, audit2, telemetry2) = task_fixture().await;
    let (store, task) = spawn(
        &telemetry2,
        Some(audit2),
        crate::io::probe::DnsSettings::default(),
        policies,
    );
    assert!(
        store.list(None, 10).is_empty(),
        "nothing before the read-back"
    );
    store.restore(past.timelines);
    assert_eq!(store.list(None, 10), before);
    let state = crate::admin::AdminState::new(
        &telemetry2,
        None,
        crate::config::AdminAuth::default(),
        store.clone(),
    );
    let answer = crate::admin::events::list(
        axum::extract::State(state),
        axum::http::HeaderMap::new(),
        Ok(axum::extract::Query(
            crate::admin::events::EventsQuery::default(),
        )),
    )
    .await
    .expect("answered");
    let body = axum::body::to_bytes(answer.into_body(), usize::MAX)
        .await
        .expect("body");
    let answer: crate::admin::events::EventsResponse =
        serde_json::from_slice(&body).expect("events JSON");
    assert_eq!(answer.timelines, before);
    task.stop().await;
}
