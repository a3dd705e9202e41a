//! The engine loop live: real loopback origins and probes, the in-process provider, drills
//! through the engine loop's inbox, the journal (recording, audit log, state file). Checks that a
//! drill survives a restart, that the audit log holds every step, and that replaying the
//! recording reproduces the live decisions exactly.

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use gslb::daemon::builder::Daemon;
use gslb::daemon::inbox::{Message, MessageSender, ReplyTo};
use gslb::io::audit::{AuditEntry, AuditLog};
use gslb::io::drill_store::DrillStore;
use gslb::io::journal::Journal;
use gslb::io::jsonl::{DEFAULT_CAPACITY, JsonlWriter};
use gslb::io::origin::Origin;
use gslb::io::state_file::StateFile;
use gslb_core::engine::{
    Decision, EngineSettings, Input, Override, OverrideAction, OverrideId, OverrideRequest, Rule,
};
use gslb_core::event::Event;
use gslb_core::model::{PoolId, ServiceId};
use gslb_core::policy::{self, Policy};
use gslb_provider::MemoryProvider;
use support::controller;
use tokio::sync::{broadcast, oneshot};

/// Any one wait may take this long before the test fails.
const DEADLINE: Duration = Duration::from_secs(15);

fn policy(seoul: SocketAddr, tokyo: SocketAddr) -> Policy {
    let text = format!(
        r#"service = "api"
hostname = "api.example.test"
min_dwell = "1s"

[probe]
interval = "100ms"
timeout = "80ms"

[health]
fall = 2
rise = 2
{pools}"#,
        pools = support::policy::seoul_tokyo_route53(
            &format!("http://{seoul}/api/v1/health"),
            &format!("http://{tokyo}/api/v1/health"),
            "ZTEST",
        ),
    );
    policy::parse(Path::new("api.toml"), &text).expect("valid policy")
}

struct Live {
    daemon: Daemon,
    events: broadcast::Receiver<Event>,
    commands: MessageSender,
    decisions: Vec<Decision>,
}

async fn start(
    policy: &Policy,
    provider: Arc<MemoryProvider>,
    dir: &Path,
    saved: Vec<Override>,
    recording: &str,
) -> Live {
    let sinks = controller::sinks(8192);
    let events = sinks.events.subscribe();
    let journal = Journal::new(
        Some(
            JsonlWriter::open(dir.join(recording), DEFAULT_CAPACITY)
                .await
                .expect("recording"),
        ),
        Some(
            AuditLog::open(dir.join("audit.jsonl"))
                .await
                .expect("audit"),
        ),
        DrillStore::File(StateFile::new(dir.join("overrides.json"))),
    );
    let mut daemon = controller::start(std::slice::from_ref(policy), &sinks, journal, saved);
    daemon.attach(policy, provider).expect("attach");
    let commands = daemon.commands();
    Live {
        daemon,
        events,
        commands,
        decisions: Vec::new(),
    }
}

impl Live {
    /// Waits for a decision `pick` accepts, keeping every decision seen.
    async fn decision(&mut self, what: &str, pick: impl Fn(&Decision) -> bool) -> Decision {
        self.event(what, |e| match e {
            Event::Decision(d) if pick(d) => Some(d.clone()),
            _ => None,
        })
        .await
    }

    /// Waits for an event `pick` takes, keeping every decision seen.
    async fn event<T>(&mut self, what: &str, pick: impl Fn(&Event) -> Option<T>) -> T {
        let found = async {
            loop {
                match self.events.recv().await {
                    Ok(e) => {
                        if let Event::Decision(d) = &e {
                            self.decisions.push(d.clone());
                        }
                        if let Some(found) = pick(&e) {
                            return found;
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        panic!("missed {n} events while waiting for {what}")
                    }
                    Err(broadcast::error::RecvError::Closed) => panic!("closed: {what}"),
                }
            }
        };
        tokio::time::timeout(DEADLINE, found)
            .await
            .unwrap_or_else(|_| {
                panic!("timed out waiting for {what}: {:#?}", self.decisions.last())
            })
    }

    async fn drill(&self, action: OverrideAction, pool: &str, duration: Duration) -> Override {
        let (reply, rx) = oneshot::channel();
        let request = OverrideRequest {
            id: OverrideId(format!("d-{action}-{pool}")),
            service: ServiceId("api".into()),
            action,
            pool: PoolId(pool.into()),
            reason: "quarterly DR drill".into(),
            actor: "alice".into(),
            duration: Some(duration),
        };
        self.commands
            .send(Message::command(
                Input::AddOverride(request),
                ReplyTo::Override(reply),
            ))
            .await
            .expect("engine loop running");
        rx.await.expect("answered").expect("accepted")
    }

    async fn list(&self) -> Vec<Override> {
        let (reply, rx) = oneshot::channel();
        self.commands
            .send(Message::ListOverrides(reply))
            .await
            .expect("engine loop running");
        rx.await.expect("answered")
    }

    /// Stops everything; the engine loop flushes its journal. Returns every decision seen.
    async fn stop(mut self) -> Vec<Decision> {
        self.daemon.stop().await;
        while let Ok(e) = self.events.try_recv() {
            if let Event::Decision(d) = e {
                self.decisions.push(d);
            }
        }
        self.decisions
    }
}

fn pool(p: &str) -> Option<PoolId> {
    Some(PoolId(p.into()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drills_survive_a_restart_are_audited_and_replay_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut seoul = Origin::start(loopback, "seoul").await.expect("origin");
    let tokyo = Origin::start(loopback, "tokyo").await.expect("origin");
    let policy = policy(seoul.addr(), tokyo.addr());
    let provider = controller::provider();

    // First run: an outage, a manual failback by restore, then a drain that outlives the run.
    let mut live = start(
        &policy,
        provider.clone(),
        dir.path(),
        vec![],
        "observations.jsonl",
    )
    .await;
    live.decision("seoul serving", |d| {
        d.rule == Rule::Stay && d.active == pool("seoul")
    })
    .await;
    seoul.stop().await;
    live.decision("failover", |d| d.rule == Rule::Failover)
        .await;
    seoul.start_again().await.expect("origin restarts");
    live.decision("manual failback hold", |d| d.rule == Rule::FailbackManual)
        .await;
    live.drill(OverrideAction::Restore, "seoul", Duration::from_secs(600))
        .await;
    live.decision("restore", |d| d.rule == Rule::Restore).await;
    let drain = live
        .drill(OverrideAction::Drain, "seoul", Duration::from_secs(3600))
        .await;
    live.decision("drain after spacing", |d| {
        d.rule == Rule::Drain && d.active == pool("tokyo")
    })
    .await;
    // Stop only once the provider serves tokyo, as it would by the time anyone restarts.
    live.event("the drain reaches the provider", |e| match e {
        Event::Applied { active, .. } if *active == pool("tokyo") => Some(()),
        _ => None,
    })
    .await;
    let first_run = live.stop().await;

    // The state file holds the drain; a restarted controller keeps it.
    let saved = StateFile::new(dir.path().join("overrides.json"))
        .load()
        .expect("state file");
    assert_eq!(saved, vec![drain.clone()]);
    let mut again = start(
        &policy,
        provider.clone(),
        dir.path(),
        saved,
        "observations.jsonl",
    )
    .await;
    // Whatever evidence the restarted engine has when it adopts tokyo, it settles on tokyo
    // with seoul still drained, and never serves seoul.
    let d = again
        .decision("tokyo serving with seoul drained", |d| d.rule == Rule::Stay)
        .await;
    assert_eq!(d.active, pool("tokyo"));
    assert_eq!(d.drained, [PoolId("seoul".into())].into());
    assert!(
        again.decisions.iter().all(|d| d.active == pool("tokyo")),
        "{:#?}",
        again
            .decisions
            .iter()
            .map(|d| (d.rule, d.active.clone(), d.reasons.clone()))
            .collect::<Vec<_>>()
    );
    assert_eq!(again.list().await, vec![drain.clone()]);
    let second_run = again.stop().await;

    // Both runs append to one recording, as a restarted daemon does; replaying it starts a
    // fresh engine at each run's start and reproduces both runs' decisions exactly.
    let recording = std::fs::File::open(dir.path().join("observations.jsonl")).expect("recording");
    let replayed = gslb::cli::replay::replay(
        vec![policy.clone()],
        &EngineSettings::default(),
        std::io::BufReader::new(recording),
    )
    .expect("replays");
    assert_eq!(replayed.runs, 2);
    assert_eq!(
        replayed.decisions,
        [first_run.clone(), second_run.clone()].concat()
    );

    // The audit log holds every decision and every drill step, in order.
    let audit: Vec<AuditEntry> = std::fs::read_to_string(dir.path().join("audit.jsonl"))
        .expect("audit log")
        .lines()
        .map(|l| serde_json::from_str(l).expect("audit line"))
        .collect();
    let decisions = audit.iter().filter(|e| e.action == "decision").count();
    assert_eq!(decisions, first_run.len() + second_run.len());
    let actions: Vec<&str> = audit
        .iter()
        .filter(|e| e.action.starts_with("drill."))
        .map(|e| e.action.as_str())
        .collect();
    assert_eq!(
        actions,
        ["drill.restore", "drill.complete", "drill.drain"],
        "{audit:#?}"
    );
    let failover = audit
        .iter()
        .find(|e| e.reason == "failover")
        .expect("the failover is audited");
    assert_eq!(failover.result, "failover seoul -> tokyo");
    assert!(audit.iter().all(|e| e.time.0 > 0));
}

#[tokio::test]
async fn a_drill_that_cannot_be_saved_is_refused_and_never_installed() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The state file's folder is a file: every save fails.
    std::fs::write(dir.path().join("not-a-dir"), "").expect("file");
    let policy = policy(
        SocketAddr::from(([127, 0, 0, 1], 1)),
        SocketAddr::from(([127, 0, 0, 1], 2)),
    );
    let sinks = controller::sinks(64);
    let journal = Journal::new(
        None,
        None,
        DrillStore::File(StateFile::new(dir.path().join("not-a-dir/overrides.json"))),
    );
    let daemon = controller::start(std::slice::from_ref(&policy), &sinks, journal, vec![]);
    let commands = daemon.commands();
    let (reply, rx) = oneshot::channel();
    let request = OverrideRequest {
        id: OverrideId("d-1".into()),
        service: ServiceId("api".into()),
        action: OverrideAction::Drain,
        pool: PoolId("seoul".into()),
        reason: "drill".into(),
        actor: "alice".into(),
        duration: None,
    };
    commands
        .send(Message::command(
            Input::AddOverride(request),
            ReplyTo::Override(reply),
        ))
        .await
        .expect("engine loop running");
    let answer = rx.await.expect("answered");
    assert!(
        matches!(&answer, Err(gslb_core::engine::OverrideError::NotSaved(_))),
        "{answer:?}"
    );
    let (reply, rx) = oneshot::channel();
    commands
        .send(Message::ListOverrides(reply))
        .await
        .expect("engine loop running");
    assert!(rx.await.expect("answered").is_empty(), "never installed");
    daemon.stop().await;
}
