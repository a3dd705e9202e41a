//! Webhook notifications against real loopback receivers: the JSON and Slack payloads of a
//! switch, a hold and a drill, and of a shadow instance's (marked shadow, also live); a receiver
//! that hangs and one that is down while the live controller keeps deciding; the real daemon;
//! a restart, which does not re-send the hold the earlier run ended in.
//! Settings: `notify_settings.rs`.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use gslb::config::{NotifySettings, Webhook};
use gslb::daemon::builder::Daemon;
use gslb::daemon::inbox::{Message, ReplyTo};
use gslb::io::clock::Clock;
use gslb::io::journal::Journal;
use gslb::io::origin::{Mode, Origin};
use gslb::ops::events::{self, EventSender};
use gslb::ops::metrics::Metrics;
use gslb::ops::notify::Notifier;
use gslb::ops::notify::message::Notification;
use gslb::ops::status::StatusBoard;
use gslb::ops::telemetry::Telemetry;
use gslb_cloudflare::fake::Fake;
use gslb_core::engine::{Decision, Input, OverrideAction, OverrideId, OverrideRequest, Rule};
use gslb_core::event::Event;
use gslb_core::model::{PoolId, ServiceId, VantageId};
use gslb_core::policy::Mode as PolicyMode;
use gslb_provider::MemoryProvider;
use serde_json::Value;
use support::cloudflare::WebDaemon;
use support::eventually;
use support::sim::{SEOUL, Sim, TOKYO};
use support::webhook::Receiver;
use tokio::sync::{broadcast, oneshot};
use tokio::task::JoinSet;

/// Any one wait may take this long before the test fails.
const DEADLINE: Duration = Duration::from_secs(15);

/// `[[webhooks]]` entries (TOML, without the `notify.` prefix), checked and resolved.
fn webhooks(toml_text: &str) -> Vec<Webhook> {
    let settings: NotifySettings = toml::from_str(toml_text).expect("notify settings");
    settings.check().expect("valid");
    settings.resolve(|_| None).expect("resolved")
}

/// The sinks' tasks and their notifier (to drain at a simulated shutdown).
fn start_sinks(
    webhooks: &[Webhook],
    events: &EventSender,
    metrics: &Metrics,
    board: &Arc<StatusBoard>,
) -> (JoinSet<()>, Notifier) {
    let mut tasks = JoinSet::new();
    let notifier = gslb::ops::notify::spawn(
        &mut tasks,
        webhooks,
        &telemetry(events, metrics, board),
        &VantageId("aws-ap-northeast-2".into()),
        &gslb::ops::notify::Notified::default(),
    )
    .expect("sinks start");
    (tasks, notifier)
}

/// The sinks' telemetry: these parts and the system clock.
fn telemetry(events: &EventSender, metrics: &Metrics, board: &Arc<StatusBoard>) -> Telemetry {
    Telemetry {
        board: board.clone(),
        metrics: metrics.clone(),
        events: events.clone(),
        ..Telemetry::new(Clock::system(), 16)
    }
}

fn count(metrics: &Metrics, sink: &str, result: &str) -> u64 {
    metrics
        .webhook_deliveries_total
        .with_label_values(&[sink, result])
        .get()
}

/// A real switch (seoul down: failover), a real hold (tokyo down too: fail static) and a
/// drill, from the engine in simulated time.
fn engine_events() -> (Decision, Decision, Event) {
    let mut sim = Sim::new(support::sim::policy(|s| s));
    for _ in 0..3 {
        sim.round(true, true);
    }
    let decision = |sim: &Sim, rule: Rule| {
        sim.decisions
            .iter()
            .find(|d| d.rule == rule)
            .map(|d| Decision::clone(d))
    };
    let mut rounds = 0;
    while decision(&sim, Rule::Failover).is_none() && rounds < 100 {
        sim.round(false, true);
        rounds += 1;
    }
    let switch = decision(&sim, Rule::Failover).expect("failover");
    while decision(&sim, Rule::FailStatic).is_none() && rounds < 200 {
        sim.round(false, false);
        rounds += 1;
    }
    let hold = decision(&sim, Rule::FailStatic).expect("fail static");
    sim.drill(OverrideAction::Drain, "seoul", 30);
    let drill = Event::Override(sim.overrides.last().expect("drill added").clone());
    (switch, hold, drill)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switch_a_hold_and_a_drill_reach_the_receiver_as_json_and_as_slack() {
    let receiver = Receiver::start().await;
    let events = events::channel(64);
    let metrics = Metrics::new();
    let _sinks = start_sinks(
        &webhooks(&format!(
            "[[webhooks]]\nname = \"ops-json\"\nurl = \"{}\"\n\n\
             [[webhooks]]\nname = \"ops-slack\"\nurl = \"{}\"\nformat = \"slack\"\n\n\
             [[webhooks]]\nname = \"drills-only\"\nurl = \"{}\"\nevents = [\"drill\"]\n",
            receiver.url("json"),
            receiver.url("slack"),
            receiver.url("drills")
        )),
        &events,
        &metrics,
        &Arc::default(),
    );
    let (switch, hold, drill) = engine_events();
    let quiet = Decision {
        rule: Rule::Stay,
        previous: None,
        ..switch.clone()
    };
    for e in [
        Event::Decision(quiet),
        Event::Decision(switch.clone()),
        Event::Decision(hold.clone()),
        drill,
    ] {
        events.send(e).expect("sinks listen");
    }
    // Counted once the receiver has answered.
    eventually(DEADLINE, || async {
        (count(&metrics, "ops-json", "delivered") == 3
            && count(&metrics, "ops-slack", "delivered") == 3
            && count(&metrics, "drills-only", "delivered") == 1)
            .then_some(())
    })
    .await
    .expect("every message delivered");

    // Generic JSON: the documented schema, every key present.
    let json = receiver.bodies("json");
    let keys = [
        "version", "kind", "service", "at", "vantage", "mode", "summary", "rule", "from", "to",
        "reasons", "drill",
    ];
    for m in &json {
        let mut found: Vec<_> = m.as_object().expect("object").keys().cloned().collect();
        found.sort();
        let mut want: Vec<_> = keys.iter().map(|k| k.to_string()).collect();
        want.sort();
        assert_eq!(found, want, "{m}");
        assert_eq!(m["version"], 1);
        assert_eq!(m["service"], "api");
        assert_eq!(m["vantage"], "aws-ap-northeast-2");
        assert_eq!(m["mode"], "enforce");
        assert!(m["at"].as_str().expect("at").ends_with('Z'), "{m}");
    }
    assert_eq!(json[0]["kind"], "switch");
    assert_eq!(json[0]["summary"], "api: switched seoul → tokyo (failover)");
    assert_eq!(json[0]["rule"], "failover");
    assert_eq!(json[0]["from"], "seoul");
    assert_eq!(json[0]["to"], "tokyo");
    assert_eq!(json[0]["at"], switch.at.rfc3339());
    assert_eq!(json[0]["reasons"], serde_json::json!(switch.reasons));
    assert!(!switch.reasons.is_empty());
    assert_eq!(json[0]["drill"], Value::Null);
    assert_eq!(json[1]["kind"], "hold");
    assert_eq!(json[1]["rule"], "fail_static");
    assert_eq!(json[1]["from"], "tokyo");
    assert_eq!(json[1]["to"], Value::Null);
    assert_eq!(json[2]["kind"], "drill");
    assert_eq!(json[2]["rule"], Value::Null);
    let d = &json[2]["drill"];
    assert_eq!(d["change"], "added");
    assert_eq!(d["action"], "drain");
    assert_eq!(d["pool"], "seoul");
    assert_eq!(d["actor"], "tester");
    assert_eq!(d["reason"], "quarterly DR drill");
    assert!(d["expires"].as_str().expect("expires").ends_with('Z'));
    assert_eq!(d["ended_by"], Value::Null);

    // Slack: an incoming-webhook message, with the limits of Block Kit.
    for m in receiver.bodies("slack") {
        assert!(m["text"].as_str().is_some_and(|t| !t.is_empty()), "{m}");
        let blocks = m["blocks"].as_array().expect("blocks");
        let types: Vec<_> = blocks
            .iter()
            .map(|b| b["type"].as_str().expect("type"))
            .collect();
        assert_eq!(types.first(), Some(&"header"), "{m}");
        assert_eq!(types.last(), Some(&"context"), "{m}");
        assert!(
            blocks[0]["text"]["text"]
                .as_str()
                .expect("header")
                .chars()
                .count()
                <= 150
        );
        for b in blocks.iter().filter(|b| b["type"] == "section") {
            assert_eq!(b["text"]["type"], "mrkdwn");
            assert!(b["text"]["text"].as_str().expect("text").chars().count() <= 3000);
            assert!(b["fields"].as_array().map_or(0, Vec::len) <= 10);
        }
    }
    let slack = receiver.bodies("slack");
    assert!(
        slack[0]["text"]
            .as_str()
            .expect("text")
            .contains("seoul → tokyo")
    );
    assert!(slack[2].to_string().contains("quarterly DR drill"));

    // The filter: the drills-only sink got the drill alone.
    assert_eq!(receiver.bodies("drills").len(), 1);
    assert_eq!(receiver.bodies("drills")[0]["kind"], "drill");
    assert_eq!(count(&metrics, "ops-json", "dropped"), 0);
    let rendered = metrics.render();
    for r in ["delivered", "retried", "failed", "dropped", "lagged"] {
        assert!(
            rendered.contains(&format!(
                "gslb_webhook_deliveries_total{{result=\"{r}\",sink=\"ops-slack\"}}"
            )),
            "{r} pre-created"
        );
    }
}

/// A shadow instance writes nothing: its switch, hold and drill messages are sent, marked
/// shadow in the JSON (`mode`), in the summary and in the Slack text and header.
#[test]
fn a_shadow_services_messages_say_it_would_switch() {
    let (switch, hold, drill) = engine_events();
    let vantage = VantageId("gcp-asia-northeast3".into());
    let shadow = |_: &ServiceId| PolicyMode::Shadow;
    let message = |e: &Event| Notification::from_event(e, &vantage, switch.at, shadow);
    let n = message(&Event::Decision(switch.clone())).expect("a switch is sent");
    let json = serde_json::to_value(&n).expect("json");
    assert_eq!(json["mode"], "shadow");
    assert_eq!(json["kind"], "switch");
    assert_eq!(
        json["summary"],
        "[shadow] api: would switch seoul → tokyo (failover)"
    );
    let slack = gslb::ops::notify::slack::payload(&n);
    assert_eq!(
        slack["text"],
        "[shadow] api: would switch seoul → tokyo (failover)"
    );
    assert_eq!(slack["blocks"][0]["text"]["text"], "api switch (shadow)");
    for e in [Event::Decision(hold), drill] {
        let n = message(&e).expect("sent");
        assert_eq!(n.mode, PolicyMode::Shadow);
        assert!(n.summary.starts_with("[shadow] api: "), "{}", n.summary);
        assert!(!n.summary.contains("switched"), "{}", n.summary);
    }
}

fn live_policy(seoul: SocketAddr, tokyo: SocketAddr) -> gslb_core::policy::Policy {
    support::sim::policy(|s| {
        s.replace(SEOUL, &format!("http://{seoul}/api/v1/health"))
            .replace(TOKYO, &format!("http://{tokyo}/api/v1/health"))
            .replace("interval = \"10s\"", "interval = \"100ms\"")
            .replace("timeout = \"4s\"", "timeout = \"80ms\"")
            .replace("min_dwell = \"5m\"", "min_dwell = \"1s\"")
            .replace("ttl = \"60s\"", "ttl = \"1s\"")
            .replace("fall = 3", "fall = 2")
    })
}

/// Waits for a decision `pick` accepts on `events`.
async fn decision(
    events: &mut broadcast::Receiver<Event>,
    pick: impl Fn(&Decision) -> bool,
) -> Decision {
    let found = async {
        loop {
            match events.recv().await {
                Ok(Event::Decision(d)) if pick(&d) => return d,
                Ok(_) => {}
                Err(e) => panic!("events: {e}"),
            }
        }
    };
    tokio::time::timeout(DEADLINE, found)
        .await
        .expect("the decision in time")
}

/// A controller for `policy` with its probes and reconciler (against `provider`).
fn live_controller(
    policy: &gslb_core::policy::Policy,
    sinks: &Telemetry,
    provider: &Arc<MemoryProvider>,
) -> Daemon {
    let mut daemon = support::controller::start(
        std::slice::from_ref(policy),
        sinks,
        Journal::default(),
        vec![],
    );
    daemon.attach(policy, provider.clone()).expect("attach");
    daemon
}

/// The live path: a shadow instance's real failover reaches the receiver marked shadow (the
/// mode read from the status board), while the provider keeps serving seoul and
/// `gslb_switches_total` does not move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_instances_failover_is_sent_as_would_switch_and_not_counted() {
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let seoul = Origin::start(loopback, "seoul").await.expect("origin");
    let tokyo = Origin::start(loopback, "tokyo").await.expect("origin");
    let mut policy = live_policy(seoul.addr(), tokyo.addr());
    policy.mode = PolicyMode::Shadow;
    let provider = support::controller::provider();
    let receiver = Receiver::start().await;
    let sinks = support::controller::sinks(8192);
    let mut events = sinks.events.subscribe();
    let (_tasks, _notifier) = start_sinks(
        &webhooks(&format!(
            "[[webhooks]]\nname = \"ops\"\nurl = \"{}\"\nevents = [\"switch\"]\n",
            receiver.url("hook")
        )),
        &sinks.events,
        &sinks.metrics,
        &sinks.board,
    );
    sinks.metrics.declare_service(&policy);
    let _controller = live_controller(&policy, &sinks, &provider);
    decision(&mut events, |d| d.rule == Rule::Stay).await;
    seoul.set_mode(Mode::Status(503));
    decision(&mut events, |d| d.rule == Rule::Failover).await;
    let message = eventually(DEADLINE, || async {
        receiver.bodies("hook").into_iter().next()
    })
    .await
    .expect("the shadow switch is sent");
    assert_eq!(message["mode"], "shadow", "{message}");
    assert_eq!(
        message["summary"],
        "[shadow] api: would switch seoul → tokyo (failover)"
    );
    let priority = ["seoul".to_owned(), "tokyo".to_owned()];
    assert_eq!(
        provider.snapshot().active(&priority).map(String::as_str),
        Some("seoul"),
        "shadow mode writes nothing"
    );
    let text = sinks.metrics.render();
    for line in [
        r#"gslb_switches_total{kind="automatic",service="api"} 0"#,
        r#"gslb_decisions_total{rule="failover",service="api"} 1"#,
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_and_a_dead_receiver_never_delay_decisions() {
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let seoul = Origin::start(loopback, "seoul").await.expect("origin");
    let tokyo = Origin::start(loopback, "tokyo").await.expect("origin");
    let policy = live_policy(seoul.addr(), tokyo.addr());
    let provider = support::controller::provider();
    let stuck = Receiver::hanging().await;
    let down = support::daemon::free_port();
    let sinks = support::controller::sinks(8192);
    let mut events = sinks.events.subscribe();
    let (mut tasks, _notifier) = start_sinks(
        &webhooks(&format!(
            "[[webhooks]]\nname = \"stuck\"\nurl = \"{}\"\ntimeout = \"5m\"\n\n\
             [[webhooks]]\nname = \"down\"\nurl = \"http://127.0.0.1:{down}/hook\"\n\
             max_attempts = 3\nbackoff = \"10ms\"\nmax_backoff = \"20ms\"\n",
            stuck.url("hook")
        )),
        &sinks.events,
        &sinks.metrics,
        &sinks.board,
    );
    let controller = live_controller(&policy, &sinks, &provider);
    let commands = controller.commands();
    decision(&mut events, |d| d.rule == Rule::Stay).await;

    // A drill: its message is the first the stuck receiver gets, and it never answers.
    let (reply, rx) = oneshot::channel();
    let request = OverrideRequest {
        id: OverrideId("d1".into()),
        service: ServiceId("api".into()),
        action: OverrideAction::Force,
        pool: PoolId("tokyo".into()),
        reason: "quarterly DR drill".into(),
        actor: "alice".into(),
        duration: Some(Duration::from_secs(600)),
    };
    commands
        .send(Message::command(
            Input::AddOverride(request),
            ReplyTo::Override(reply),
        ))
        .await
        .expect("engine loop running");
    rx.await.expect("answered").expect("accepted");
    eventually(DEADLINE, || async {
        (!stuck.bodies("hook").is_empty()).then_some(())
    })
    .await
    .expect("the stuck sink sent its first message");
    decision(&mut events, |d| d.rule == Rule::Force && d.switched()).await;

    // While that request hangs, a real outage of the forced pool fails over at once, the
    // provider is written and the status board shows it.
    tokyo.set_mode(Mode::Status(503));
    let failover = decision(&mut events, |d| d.rule == Rule::Failover).await;
    assert_eq!(failover.active, Some(PoolId("seoul".into())));
    let priority = ["seoul".to_owned(), "tokyo".to_owned()];
    eventually(DEADLINE, || async {
        (provider.snapshot().active(&priority).map(String::as_str) == Some("seoul")).then_some(())
    })
    .await
    .expect("the failover reaches the provider while the webhook hangs");
    let board = sinks.board.snapshot();
    assert_eq!(
        board[&ServiceId("api".into())].active,
        Some(PoolId("seoul".into()))
    );
    assert_eq!(
        stuck.bodies("hook").len(),
        1,
        "the stuck sink is still on its first message"
    );
    assert_eq!(count(&sinks.metrics, "stuck", "delivered"), 0);

    // The dead receiver: every message tried three times, then given up.
    eventually(DEADLINE, || async {
        (count(&sinks.metrics, "down", "failed") >= 3).then_some(())
    })
    .await
    .expect("the dead sink gives up on the drill, the force and the failover");
    assert!(count(&sinks.metrics, "down", "retried") >= 6);
    assert_eq!(count(&sinks.metrics, "down", "delivered"), 0);

    // Released, the stuck sink delivers what queued up, in order.
    stuck.release();
    eventually(DEADLINE, || async {
        let kinds: Vec<_> = stuck
            .bodies("hook")
            .iter()
            .map(|m| {
                format!(
                    "{}:{}",
                    m["kind"].as_str().unwrap_or(""),
                    m["rule"].as_str().unwrap_or("-")
                )
            })
            .collect();
        // The receiver records a body before it answers: wait for the answers too.
        (kinds.contains(&"switch:failover".to_owned())
            && count(&sinks.metrics, "stuck", "delivered") == kinds.len() as u64)
            .then_some(kinds)
    })
    .await
    .map(|kinds| {
        // In order (a rail hold may come between while tokyo rises).
        let at = |k: &str| kinds.iter().position(|x| x == k);
        assert_eq!(at("drill:-"), Some(0), "{kinds:?}");
        assert!(
            at("switch:force").is_some() && at("switch:force") < at("switch:failover"),
            "{kinds:?}"
        );
    })
    .expect("queued messages delivered after the release");
    controller.stop().await;
    tasks.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_sends_a_drill_and_its_switch_and_never_logs_the_url() {
    let receiver = Receiver::start().await;
    let secrets = tempfile::tempdir().expect("tempdir");
    let url_file = secrets.path().join("slack-url");
    std::fs::write(
        &url_file,
        format!("{}\n", receiver.url("services/T0/B0/s3cr3tPath")),
    )
    .expect("write");
    let fake = Fake::start().await;
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let ncp = Origin::start(loopback, "ncp").await.expect("origin");
    let gcp = Origin::start(loopback, "gcp").await.expect("origin");
    let web = WebDaemon::start_with(
        &fake,
        [
            &format!("http://{}/api/v1/health", ncp.addr()),
            &format!("http://{}/api/v1/health", gcp.addr()),
        ],
        "min_dwell = \"1s\"\n[probe]\ninterval = \"200ms\"\ntimeout = \"150ms\"",
        "ttl = \"1s\"",
        &format!(
            "[[notify.webhooks]]\nname = \"ops-slack\"\nformat = \"slack\"\nurl_file = \"{}\"\n",
            url_file.display()
        ),
        &[],
    );
    let admin = web.admin;
    eventually(DEADLINE, || async {
        support::daemon::status(admin, "web")
            .await
            .filter(|s| s["apply"]["state"] == "applied" && s["active"] == "ncp")
    })
    .await
    .unwrap_or_else(|| panic!("never applied on ncp:\n{}", web.log()));
    let started = reqwest::Client::new()
        .post(format!("http://{admin}/v1/drills"))
        .header("content-type", "application/json")
        .body(
            serde_json::json!({
                "service": "web", "action": "drain", "pool": "ncp",
                "reason": "quarterly DR drill", "duration": "10m", "actor": "alice"
            })
            .to_string(),
        )
        .send()
        .await
        .expect("admin API");
    assert!(started.status().is_success(), "{:?}", started.text().await);
    let path = "services/T0/B0/s3cr3tPath";
    let texts = eventually(DEADLINE, || async {
        let texts: Vec<String> = receiver
            .bodies(path)
            .iter()
            .map(|m| m["text"].as_str().unwrap_or("").to_owned())
            .collect();
        // A drain may first hold (rail_hold) until gcp is healthy by quorum.
        texts
            .iter()
            .any(|t| t.contains("switched ncp → gcp (drain)"))
            .then_some(texts)
    })
    .await
    .unwrap_or_else(|| panic!("no drill and switch messages:\n{}", web.log()));
    assert!(
        texts[0].contains("drill") && texts[0].contains("started by alice"),
        "{texts:?}"
    );
    let log = web.log();
    assert!(
        log.contains("webhook sink started") && log.contains("ops-slack"),
        "{log}"
    );
    assert!(
        !log.contains("s3cr3tPath"),
        "the URL is never logged:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_drops_its_oldest_message_and_counts_it() {
    let receiver = Receiver::hanging().await;
    let events = events::channel(64);
    let metrics = Metrics::new();
    let _sinks = start_sinks(
        &webhooks(&format!(
            "[[webhooks]]\nname = \"ops\"\nurl = \"{}\"\nqueue = 1\ntimeout = \"5m\"\n",
            receiver.url("hook")
        )),
        &events,
        &metrics,
        &Arc::default(),
    );
    let (switch, hold, drill) = engine_events();
    events.send(drill).expect("sink listens");
    eventually(DEADLINE, || async {
        (receiver.bodies("hook").len() == 1).then_some(())
    })
    .await
    .expect("the first message is in flight");
    // One waits in the queue; the next pushes it out.
    events.send(Event::Decision(switch)).expect("sink listens");
    events.send(Event::Decision(hold)).expect("sink listens");
    eventually(DEADLINE, || async {
        (count(&metrics, "ops", "dropped") == 1).then_some(())
    })
    .await
    .expect("the oldest queued message dropped");
    receiver.release();
    eventually(DEADLINE, || async {
        (count(&metrics, "ops", "delivered") == 2).then_some(())
    })
    .await
    .expect("the in-flight and the newest message delivered");
    let kinds: Vec<_> = receiver
        .bodies("hook")
        .iter()
        .map(|m| m["kind"].clone())
        .collect();
    assert_eq!(kinds, ["drill", "hold"]);
}

/// A reader that falls behind the broadcast counts the events it missed as `lagged`, not as
/// dropped messages, and still sends what it reads afterwards.
#[tokio::test]
async fn a_lagging_reader_counts_missed_events_as_lagged_not_dropped() {
    let receiver = Receiver::start().await;
    let events = events::channel(4);
    let metrics = Metrics::new();
    let _sinks = start_sinks(
        &webhooks(&format!(
            "[[webhooks]]\nname = \"ops\"\nurl = \"{}\"\n",
            receiver.url("hook")
        )),
        &events,
        &metrics,
        &Arc::new(StatusBoard::default()),
    );
    let (switch, _, _) = engine_events();
    let quiet = Decision {
        rule: Rule::Stay,
        previous: None,
        ..switch.clone()
    };
    // On this single-threaded runtime the reader has not run yet: 10 events, then the
    // switch, overflow its 4 slots by 7.
    for _ in 0..10 {
        events
            .send(Event::Decision(quiet.clone()))
            .expect("sink listens");
    }
    events.send(Event::Decision(switch)).expect("sink listens");
    eventually(DEADLINE, || async {
        (count(&metrics, "ops", "delivered") == 1).then_some(())
    })
    .await
    .expect("the switch read after the lag is delivered");
    assert_eq!(count(&metrics, "ops", "lagged"), 7);
    assert_eq!(count(&metrics, "ops", "dropped"), 0);
    assert_eq!(receiver.bodies("hook").len(), 1);
}

/// At shutdown the sinks' tasks stop; the message still queued is delivered by the drain, the
/// one in flight is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_still_queued_at_shutdown_is_delivered_by_the_drain() {
    let receiver = Receiver::hanging().await;
    let events = events::channel(64);
    let metrics = Metrics::new();
    let (mut tasks, notifier) = start_sinks(
        &webhooks(&format!(
            "[[webhooks]]\nname = \"ops\"\nurl = \"{}\"\ntimeout = \"5m\"\n",
            receiver.url("hook")
        )),
        &events,
        &metrics,
        &Arc::default(),
    );
    let (switch, _hold, drill) = engine_events();
    events.send(drill).expect("sink listens");
    eventually(DEADLINE, || async {
        (receiver.bodies("hook").len() == 1).then_some(())
    })
    .await
    .expect("the first message is in flight");
    events.send(Event::Decision(switch)).expect("sink listens");
    // The reader queues what it reads before its next await: once the broadcast holds
    // nothing for it, the switch is queued.
    eventually(DEADLINE, || async { events.is_empty().then_some(()) })
        .await
        .expect("the reader read the switch");
    tasks.shutdown().await;
    receiver.release();
    notifier.drain(gslb::ops::notify::DRAIN_TIMEOUT).await;
    assert_eq!(count(&metrics, "ops", "delivered"), 1);
    let kinds: Vec<_> = receiver
        .bodies("hook")
        .iter()
        .map(|m| m["kind"].clone())
        .collect();
    assert_eq!(kinds, ["drill", "switch"]);
}

/// A restart does not re-send a hold the earlier run ended in and notified: the audit log
/// (written by the earlier run's journal) is read back, and the same hold after the routine
/// `hold_unknown` of a start is not sent; a different hold still is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_does_not_re_send_a_hold_already_notified() {
    use gslb::io::audit::{AuditEntry, AuditLog, Past};

    let (_switch, hold, drill) = engine_events();
    let manual = Decision {
        rule: Rule::FailbackManual,
        ..hold.clone()
    };
    // The earlier run: its last decision of `api` was the manual-failback hold.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("audit.jsonl");
    let audit = AuditLog::open(&path).await.expect("audit log");
    audit.record(&AuditEntry::decision_made(&manual));
    audit.close().await.expect("close");
    let past = Past::read(&path).expect("read back");
    assert_eq!(past.decisions.len(), 1);

    let receiver = Receiver::start().await;
    let events = events::channel(64);
    let metrics = Metrics::new();
    let mut tasks = JoinSet::new();
    let _notifier = gslb::ops::notify::spawn(
        &mut tasks,
        &webhooks(&format!(
            "[[webhooks]]\nname = \"ops\"\nurl = \"{}\"\n",
            receiver.url("json")
        )),
        &telemetry(&events, &metrics, &Arc::default()),
        &VantageId("aws-ap-northeast-2".into()),
        &gslb::ops::notify::Notified::new(past.decisions),
    )
    .expect("sinks start");
    let unknown = Decision {
        rule: Rule::HoldUnknown,
        blocked: None,
        ..hold.clone()
    };
    for e in [
        Event::Decision(unknown),
        Event::Decision(manual.clone()),
        drill,
        Event::Decision(hold.clone()),
    ] {
        events.send(e).expect("sinks listen");
    }
    eventually(DEADLINE, || async {
        (count(&metrics, "ops", "delivered") == 2).then_some(())
    })
    .await
    .expect("the drill and the new hold delivered");
    let kinds: Vec<(Value, Value)> = receiver
        .bodies("json")
        .iter()
        .map(|m| (m["kind"].clone(), m["rule"].clone()))
        .collect();
    assert_eq!(
        kinds,
        [
            (Value::from("drill"), Value::Null),
            (Value::from("hold"), Value::from("fail_static"))
        ],
        "the manual-failback hold is not sent again"
    );
}

/// The real daemon, killed and started again while a service holds in `failback_manual` (ncp
/// failed over to gcp and came back; failback waits for an operator): the restarted process
/// reads its last decision back from the audit log and does not send the hold again. A drill
/// after the restart is the marker: its message arrives after the hold would have.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_daemon_does_not_re_send_its_hold_after_a_restart() {
    let receiver = Receiver::start().await;
    let fake = Fake::start().await;
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut ncp = Origin::start(loopback, "ncp").await.expect("origin");
    let gcp = Origin::start(loopback, "gcp").await.expect("origin");
    let [n, g] = support::cloudflare::health_urls(ncp.addr(), gcp.addr());
    let mut web = WebDaemon::start_with(
        &fake,
        [&n, &g],
        "failback = \"manual\"\nmin_dwell = \"1s\"\n[probe]\ninterval = \"200ms\"\ntimeout = \"150ms\"",
        "ttl = \"1s\"",
        &format!(
            "[[notify.webhooks]]\nname = \"ops\"\nurl = \"{}\"\n",
            receiver.url("hook")
        ),
        &[],
    );
    let sent = |kind: &'static str| {
        receiver
            .bodies("hook")
            .into_iter()
            .filter(move |m| m["kind"] == kind)
            .collect::<Vec<_>>()
    };
    let manual = || {
        sent("hold")
            .into_iter()
            .filter(|m| m["rule"] == "failback_manual")
            .count()
    };
    eventually(DEADLINE, || async {
        support::daemon::status(web.admin, "web")
            .await
            .filter(|s| s["apply"]["state"] == "applied" && s["active"] == "ncp")
    })
    .await
    .unwrap_or_else(|| panic!("never applied on ncp:\n{}", web.log()));
    ncp.stop().await;
    eventually(DEADLINE, || async {
        (!sent("switch").is_empty()).then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("no failover:\n{}", web.log()));
    ncp.start_again().await.expect("ncp again");
    eventually(DEADLINE, || async { (manual() == 1).then_some(()) })
        .await
        .unwrap_or_else(|| panic!("no failback_manual hold:\n{}", web.log()));

    web.restart("run-again.log");
    let log = || support::daemon::read_log(web.dir.path(), "run-again.log");
    eventually(DEADLINE, || async {
        log()
            .contains("hold already notified before the restart; not sent again")
            .then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("the hold was not recognised:\n{}", log()));
    let drill = reqwest::Client::new()
        .post(format!("http://{}/v1/drills", web.admin))
        .header("content-type", "application/json")
        .body(
            serde_json::json!({
                "service": "web", "action": "drain", "pool": "gcp",
                "reason": "marker", "duration": "10m", "actor": "test"
            })
            .to_string(),
        )
        .send()
        .await
        .expect("admin API");
    assert!(drill.status().is_success(), "{:?}", drill.text().await);
    eventually(DEADLINE, || async {
        receiver
            .bodies("hook")
            .iter()
            .any(|m| m["kind"] == "drill")
            .then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("no drill message:\n{}", log()));
    assert_eq!(manual(), 1, "the hold was sent again: {:?}", sent("hold"));
}
