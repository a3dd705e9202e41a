//! A reload through the controller, live: real loopback origins and probes, the in-process
//! provider. The tasks of a changed and a removed service stop (and only theirs), the removed
//! service leaves the status, the changed one re-adopts the provider's serving pool and decides
//! again without a write, an unchanged one keeps its tasks, and the new set is published.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use gslb::io::journal::Journal;
use gslb::io::origin::Origin;
use gslb_core::model::ServiceId;
use support::policy::fast_seoul_tokyo as policy;
use support::{controller, eventually};

const DEADLINE: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_restarts_changed_services_stops_removed_ones_and_keeps_the_rest() {
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let seoul = Origin::start(loopback, "seoul").await.expect("seoul");
    let tokyo = Origin::start(loopback, "tokyo").await.expect("tokyo");
    let (s, t) = (seoul.addr(), tokyo.addr());
    let before = vec![
        policy("api", 2, s, t),
        policy("web", 2, s, t),
        policy("img", 2, s, t),
    ];
    let sinks = controller::sinks(1024);
    let board = sinks.board.clone();
    let mut daemon = controller::start(&before, &sinks, Journal::default(), Vec::new());
    let mut published = daemon.controller().policies();
    let provider = controller::provider();
    for p in &before {
        daemon.attach(p, provider.clone()).expect("attach");
    }
    let decided = |service: &'static str| {
        let board = board.clone();
        async move {
            let s = board.snapshot().remove(&ServiceId(service.into()))?;
            (s.last_decision.is_some() && s.active.is_some()).then_some(s)
        }
    };
    for service in ["api", "web", "img"] {
        let found = eventually(DEADLINE, || decided(service)).await;
        assert!(found.is_some(), "{service} never decided");
    }

    // api changes (fall 3), web is removed, img is unchanged.
    let after = vec![policy("api", 3, s, t), policy("img", 2, s, t)];
    let reloaded = daemon.controller().diff(after.clone());
    daemon.controller().reload(&reloaded).await;
    assert_eq!(
        reloaded.changed_policies().cloned().collect::<Vec<_>>(),
        vec![after[0].clone()]
    );
    assert_eq!(reloaded.unchanged, vec![ServiceId("img".into())]);
    assert_eq!(reloaded.removed, vec![ServiceId("web".into())]);
    assert!(published.has_changed().expect("sender alive"));
    assert_eq!(**published.borrow_and_update(), after);
    for p in reloaded.changed_policies() {
        daemon.attach(p, provider.clone()).expect("attach");
    }

    // Exactly the old tasks of api and web end, cancelled: two probe loops and a reconciler
    // each (adoption reads are kept apart).
    let mut cancelled = 0;
    while cancelled < 6 {
        let next = tokio::time::timeout(DEADLINE, daemon.tasks().join_next()).await;
        match next.expect("tasks end in time").expect("tasks left") {
            Err(e) if e.is_cancelled() => cancelled += 1,
            other => panic!("a task ended otherwise: {other:?}"),
        }
    }
    let web_gone = eventually(DEADLINE, || async {
        let snapshot = board.snapshot();
        (!snapshot.contains_key(&ServiceId("web".into()))).then_some(())
    })
    .await;
    assert!(web_gone.is_some(), "web still in the status");
    // The changed service re-adopts and decides again; nothing was written.
    let again = eventually(DEADLINE, || decided("api")).await;
    assert!(again.is_some(), "api never decided after the reload");
    // The new reconciler's status survives the engine loop's reset of the service.
    let applied = eventually(DEADLINE, || async {
        let s = board.snapshot().remove(&ServiceId("api".into()))?;
        (s.apply.state == gslb::ops::status::ApplyState::Applied).then_some(s)
    })
    .await
    .expect("api applied after the reload");
    assert_eq!(applied.apply.provider, "memory", "{:?}", applied.apply);
    assert!(decided("img").await.is_some());
    // No task of the reloaded set ends.
    let quiet = tokio::time::timeout(Duration::from_millis(500), daemon.tasks().join_next()).await;
    assert!(quiet.is_err(), "a task ended: {quiet:?}");
    assert!(provider.writes().is_empty(), "{:?}", provider.writes());
    daemon.stop().await;
}
