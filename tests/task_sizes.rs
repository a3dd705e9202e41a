//! The memory each attached service holds in its tasks stays bounded (issue 14: peak RSS at
//! most 200 MB at 5,000 services x 2 endpoints). A spawned task keeps its whole future in its
//! cell for as long as it runs, so the futures of the reconciler and of a probe loop are what a
//! service costs; what they await only now and then (a provider pass, one probe) is boxed
//! while it runs instead. Sizes are those of debug builds, where tests run (docs/benchmarks.md,
//! "Daemon cost at 5,000 services", has the figures).

use std::sync::Arc;
use std::time::Duration;

use gslb::daemon::controller::steering;
use gslb::daemon::inbox::Message;
use gslb::daemon::reconcile;
use gslb::io::clock::Clock;
use gslb::io::probe::{DnsSettings, ProbeNow, Prober, run_endpoint_woken};
use gslb::ops::telemetry::Telemetry;
use gslb_core::engine::Input;
use gslb_core::model::{Millis, VantageId};
use gslb_core::policy::Policy;
use gslb_provider::{AnyProvider, FailoverStyle, MemoryProvider};
use tokio::sync::{mpsc, watch};

/// Bound for the reconciler's future (the task a service keeps for as long as it is attached):
/// 4 kB, about twice its debug size (1,936 bytes; 9,952 with its steering held inline, whose
/// cluster seat alone is 3.9 kB, and more with its pass awaited inline).
const RECONCILER_BOUND: usize = 4096;

/// Bound for one probe loop's future: 2 kB, about 1.5 times its debug size (1,320 bytes with
/// the probe boxed).
const PROBE_LOOP_BOUND: usize = 2048;

fn policy() -> Policy {
    gslb_core::policy::parse(
        std::path::Path::new("policy.toml"),
        include_str!("../policies/api-seoul-tokyo.toml"),
    )
    .expect("policy")
}

#[tokio::test]
async fn the_reconcilers_future_stays_small() {
    let policy = policy();
    let inner = MemoryProvider::new(FailoverStyle::Enablement, &["seoul".into(), "tokyo".into()]);
    let provider = Arc::new(AnyProvider::new(Arc::new(inner)));
    let (_decisions, rx) = watch::channel(None);
    let telemetry = Telemetry::new(Clock::anchored_at(Millis(0)), 64);
    let steering = steering(&policy, Duration::from_secs(60));
    let task = reconcile::run(provider, steering, rx, telemetry);
    let size = std::mem::size_of_val(&task);
    println!("reconciler future: {size} bytes");
    assert!(size <= RECONCILER_BOUND, "{size} bytes");
}

#[tokio::test]
async fn a_probe_loops_future_stays_small() {
    let policy = policy();
    let prober = Arc::new(
        Prober::new(&DnsSettings {
            nameservers: vec!["127.0.0.1:9".parse().expect("addr")],
            ..DnsSettings::default()
        })
        .expect("prober"),
    );
    let endpoint = &policy.pools[0].endpoints[0];
    let target = prober.target(&policy.probe, endpoint).expect("target");
    let (tx, _rx) = mpsc::channel::<Message>(1);
    let telemetry = Telemetry::new(Clock::system(), 64);
    let heartbeat = telemetry
        .health
        .register("probes:api", Duration::from_secs(30));
    let service = policy.service.clone();
    // What the controller spawns per endpoint: the closure holds the service and its heartbeat.
    let task = run_endpoint_woken(
        prober,
        target,
        VantageId("here".into()),
        telemetry.clock,
        tx,
        ProbeNow::default(),
        move |observation| {
            heartbeat.beat(Duration::from_secs(30));
            Input::Observe {
                service: service.clone(),
                observation,
            }
            .into()
        },
    );
    let size = std::mem::size_of_val(&task);
    println!("probe loop future: {size} bytes");
    assert!(size <= PROBE_LOOP_BOUND, "{size} bytes");
}
