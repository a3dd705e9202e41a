//! The probe loops under load (issue 6), under paused tokio time against real loopback servers:
//! bounded concurrency with back-pressure (late probes recorded, missed slots counted, never a
//! burst), the hard timeout closing the probe's connection, lateness of on-time loops; and the
//! per-prober DNS cache honouring TTLs against a local nameserver.

mod support;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use gslb::io::clock::Clock;
use gslb::io::origin::Origin;
use gslb::io::probe::{
    DnsSettings, ProbeNow, Prober, ProbingSettings, run_endpoint, run_endpoint_woken,
};
use gslb_core::model::{EndpointId, Millis, Observation, ProbeReason, VantageId};
use gslb_core::policy::{Endpoint, EndpointKind, ProbeSpec};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::time::Instant;
use url::Url;

use support::dns::FakeDns;

fn spec(interval_ms: u64, timeout_ms: u64) -> ProbeSpec {
    ProbeSpec {
        interval: Duration::from_millis(interval_ms),
        timeout: Duration::from_millis(timeout_ms),
        expected_status: vec![200],
        body_contains: None,
        host_header: None,
        tls_server_name: None,
        tls_verify: true,
        follow_redirects: false,
    }
}

fn http(url: &str) -> Endpoint {
    Endpoint {
        id: EndpointId::from(url),
        kind: EndpointKind::Http(Url::parse(url).unwrap()),
    }
}

/// A prober whose nameserver never answers (no test reaches the machine's resolver).
fn prober(max_in_flight: usize) -> Prober {
    let silent = std::net::UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap();
    Prober::with_limits(
        &DnsSettings {
            nameservers: vec![silent],
            timeout: Duration::from_millis(300),
            ..DnsSettings::default()
        },
        &ProbingSettings {
            max_in_flight,
            late_after: Duration::from_millis(50),
            source_address: None,
        },
    )
    .unwrap()
}

/// A TCP server that accepts, never answers, and reads until the client closes: tracks the
/// connections open at once and reports when each one is closed by the client.
struct Sink {
    addr: SocketAddr,
    max_open: Arc<AtomicUsize>,
    closed: mpsc::UnboundedReceiver<Instant>,
}

async fn sink() -> Sink {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let open = Arc::new(AtomicUsize::new(0));
    let max_open = Arc::new(AtomicUsize::new(0));
    let (tx, closed) = mpsc::unbounded_channel();
    let max = max_open.clone();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            let now_open = open.fetch_add(1, Ordering::SeqCst) + 1;
            max.fetch_max(now_open, Ordering::SeqCst);
            let (open, tx) = (open.clone(), tx.clone());
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
                open.fetch_sub(1, Ordering::SeqCst);
                let _ = tx.send(Instant::now());
            });
        }
    });
    Sink {
        addr,
        max_open,
        closed,
    }
}

#[tokio::test(start_paused = true)]
async fn the_hard_timeout_closes_the_probe_connection_at_once() {
    let mut s = sink().await;
    let p = prober(8);
    let target = p
        .target(&spec(1000, 200), &http(&format!("http://{}/", s.addr)))
        .unwrap();
    let start = Instant::now();
    let out = p.probe(&target).await;
    assert_eq!(out.reason, ProbeReason::Timeout, "{out:?}");
    assert_eq!(out.duration, Duration::from_millis(200));
    let stats = p.stats().snapshot();
    assert_eq!((stats.timeouts, stats.in_flight), (1, 0));
    // The server sees the connection closed at the timeout: nothing of the probe lingers
    // (no time passes while we wait for it; a lingering connection would never close).
    let closed = tokio::time::timeout(Duration::from_millis(1), s.closed.recv())
        .await
        .expect("the probe's connection is closed when the timeout fires")
        .unwrap();
    assert!(
        closed - start <= Duration::from_millis(200),
        "{:?}",
        closed - start
    );
}

/// Issue 14: a probe whose timeout fired while the process was starved of CPU (its task run
/// only long after the deadline) is `late`, not a failure of the origin; the same probe run in
/// time is a `timeout`. Starvation is the runtime's clock moving on while the probe's task
/// waits to run.
#[tokio::test(start_paused = true)]
async fn a_timeout_seen_while_starved_is_late_and_a_timely_one_is_a_timeout() {
    let s = sink().await;
    let p = Arc::new(prober(8));
    let target = p
        .target(&spec(1000, 200), &http(&format!("http://{}/", s.addr)))
        .unwrap();
    let timely = p.probe(&target).await;
    assert_eq!(timely.reason, ProbeReason::Timeout, "{timely:?}");
    assert!(!timely.success);
    let (prober, t) = (p.clone(), target.clone());
    let starved = tokio::spawn(async move { prober.probe(&t).await });
    let deadline = Instant::now() + Duration::from_secs(5);
    while p.stats().snapshot().in_flight == 0 {
        assert!(Instant::now() < deadline, "the probe never started");
        tokio::task::yield_now().await;
    }
    // The process gets no CPU for 500 ms: the probe's 200 ms timeout is seen 300 ms late.
    tokio::time::advance(Duration::from_millis(500)).await;
    let late = starved.await.unwrap();
    assert_eq!(late.reason, ProbeReason::Late, "{late:?}");
    assert!(!late.success, "never a success either");
    assert_eq!(late.duration, Duration::from_millis(500));
    // Both hit the hard timeout; the late one is told apart by its reason only.
    assert_eq!(p.stats().snapshot().timeouts, 2);
}

/// Runs one probe of `target` on its own task; once it is in flight, starves the process for
/// `starved` (the clock moves on while no task runs), then lets it finish.
async fn probe_starved_for(
    p: &Arc<Prober>,
    target: &gslb::io::probe::ProbeTarget,
    starved: Duration,
) -> gslb_core::model::ProbeOutcome {
    let (prober, t) = (p.clone(), target.clone());
    let running = tokio::spawn(async move { prober.probe(&t).await });
    let deadline = Instant::now() + Duration::from_secs(5);
    while p.stats().snapshot().in_flight == 0 {
        assert!(Instant::now() < deadline, "the probe never started");
        tokio::task::yield_now().await;
    }
    if !starved.is_zero() {
        tokio::time::advance(starved).await;
    }
    running.await.unwrap()
}

/// Issue 14: starvation during a probe, not only at its deadline. A probe whose process was
/// starved for 150 ms of its 400 ms (the starvation watch counts it) and that then saw its
/// timeout in time is `late`, not a `timeout` of the origin; so is a name lookup that got no
/// answer while starved (not `resolver_unavailable`, which would make the vantage point
/// suspect). The same probes with their CPU are `timeout` and `resolver_unavailable`.
#[tokio::test(start_paused = true)]
async fn a_wait_that_lost_its_time_to_starvation_is_late_not_evidence() {
    let s = sink().await;
    // A nameserver that receives queries and never answers (kept open: a closed port refuses).
    let silent = std::net::UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let p = Arc::new(
        Prober::with_limits(
            &DnsSettings {
                nameservers: vec![silent.local_addr().unwrap()],
                timeout: Duration::from_millis(300),
                ..DnsSettings::default()
            },
            &ProbingSettings::default(),
        )
        .unwrap(),
    );
    p.watch_starvation();
    let hangs = p
        .target(&spec(1000, 400), &http(&format!("http://{}/", s.addr)))
        .unwrap();
    let unresolved = p
        .target(&spec(2000, 1000), &http("http://origin.starved.test/"))
        .unwrap();
    let ms = Duration::from_millis;
    for (target, in_time) in [
        (&hangs, ProbeReason::Timeout),
        (&unresolved, ProbeReason::ResolverUnavailable),
    ] {
        let timely = probe_starved_for(&p, target, Duration::ZERO).await;
        assert_eq!(timely.reason, in_time, "{timely:?}");
        let starved = probe_starved_for(&p, target, ms(150)).await;
        assert_eq!(starved.reason, ProbeReason::Late, "{starved:?}");
        assert!(!starved.success);
        // A hiccup shorter than the late threshold leaves the result evidence.
        let hiccup = probe_starved_for(&p, target, ms(40)).await;
        assert_eq!(hiccup.reason, in_time, "{hiccup:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn back_pressure_bounds_probes_in_flight_records_late_ones_and_counts_missed_slots() {
    // Six endpoints at 1 s that all hang until their 400 ms timeout, with room for 2 probes
    // in flight: at most 5 probes a second fit, 6 are planned.
    let s = sink().await;
    let p = Arc::new(prober(2));
    assert_eq!(p.max_in_flight(), 2);
    let (tx, mut rx) = mpsc::channel::<Observation>(64);
    for i in 0..6 {
        let target = p
            .target(&spec(1000, 400), &http(&format!("http://{}/{i}", s.addr)))
            .unwrap();
        tokio::spawn(run_endpoint(
            p.clone(),
            target,
            VantageId::from("test"),
            Clock::anchored_at(Millis(0)),
            tx.clone(),
            |o| o,
        ));
    }
    drop(tx);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut per_endpoint = std::collections::BTreeMap::<EndpointId, u64>::new();
    while let Ok(Some(o)) = tokio::time::timeout_at(deadline, rx.recv()).await {
        assert_eq!(o.outcome.reason, ProbeReason::Timeout);
        *per_endpoint.entry(o.endpoint).or_default() += 1;
    }
    let done: u64 = per_endpoint.values().sum();
    let stats = p.stats().snapshot();
    assert!(s.max_open.load(Ordering::SeqCst) <= 2, "bounded in flight");
    // Work-conserving: the two slots stay busy (20 s x 5 probes/s, less the start phase).
    assert!(done >= 90, "{done} probes in 20 s");
    // Nobody bursts to catch up: no endpoint probed more often than its interval allows.
    for (e, n) in &per_endpoint {
        assert!(*n <= 21, "{e}: {n} probes in 20 s");
    }
    // Waiting for room is recorded: late probes, and whole missed slots counted, never dropped
    // silently: every planned slot of every endpoint is either started or counted as skipped.
    assert!(stats.late > 0, "{stats:?}");
    assert!(stats.skipped > 0, "{stats:?}");
    assert!(
        stats.started + stats.skipped >= 6 * 19 - 6,
        "started {} + skipped {} cover the planned slots (but those waiting for room now)",
        stats.started,
        stats.skipped
    );
    assert!(stats.started >= done && stats.timeouts >= done);
    // Lateness stays bounded, it does not grow: below one interval plus the wait for room
    // behind the five other endpoints (3 rounds of 400 ms on 2 slots).
    assert!(
        stats.lateness.max() < Duration::from_millis(1000 + 3 * 400),
        "{:?}",
        stats.lateness.max()
    );
}

#[tokio::test(start_paused = true)]
async fn a_blocked_receiver_makes_probes_late_and_skips_slots_but_never_bursts() {
    let origin = Origin::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), "seoul")
        .await
        .unwrap();
    let p = Arc::new(prober(8));
    let target = p
        .target(&spec(1000, 500), &http(&origin.base_url()))
        .unwrap();
    let (tx, mut rx) = mpsc::channel::<Observation>(1);
    tokio::spawn(run_endpoint(
        p.clone(),
        target,
        VantageId::from("test"),
        Clock::anchored_at(Millis(0)),
        tx,
        |o| o,
    ));
    let first = rx.recv().await.unwrap();
    assert_eq!(first.outcome.reason, ProbeReason::Ok);
    let on_time = p.stats().snapshot();
    assert_eq!((on_time.started, on_time.late), (1, 0));
    assert!(
        on_time.lateness.max() < Duration::from_millis(2),
        "{on_time:?}"
    );

    // The receiver (the engine loop) stops reading for 5.5 s: the second result fills the
    // channel, the third probe's send waits.
    tokio::time::sleep(Duration::from_millis(5500)).await;
    let mut at = Vec::new();
    for _ in 0..6 {
        at.push(rx.recv().await.unwrap().at);
    }
    let stats = p.stats().snapshot();
    assert!(
        (2..=3).contains(&stats.skipped),
        "whole slots missed while blocked are counted: {stats:?}"
    );
    assert!(
        stats.late >= 1,
        "the probe after the stall is late: {stats:?}"
    );
    // After the stall: one probe at once, then back on the old phase. Never a burst: at most
    // two probes within any interval (less twice the 5 % jitter).
    for three in at.windows(3) {
        let span = three[2].since(three[0]);
        assert!(span >= Duration::from_millis(900), "burst: {at:?}");
    }
    assert_eq!(origin.requests(), stats.started, "{stats:?}");
}

/// Issue 14: a loop woken to probe now ([`ProbeNow`], the engine's `confirm_target` request)
/// probes at once instead of at its next slot, once per interval: a second wake-up within the
/// interval waits for the slot (no probe storm), and the slots do not move.
#[tokio::test(start_paused = true)]
async fn a_woken_loop_probes_at_once_but_once_per_interval() {
    let origin = Origin::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), "tokyo")
        .await
        .unwrap();
    let p = Arc::new(prober(8));
    let target = p
        .target(&spec(1000, 500), &http(&origin.base_url()))
        .unwrap();
    let (tx, mut rx) = mpsc::channel::<Observation>(8);
    let now = ProbeNow::default();
    tokio::spawn(run_endpoint_woken(
        p.clone(),
        target,
        VantageId::from("test"),
        Clock::anchored_at(Millis(0)),
        tx,
        now.clone(),
        |o| o,
    ));
    let first = rx.recv().await.unwrap();
    now.wake();
    let woken = rx.recv().await.unwrap();
    assert_eq!(woken.outcome.reason, ProbeReason::Ok);
    assert!(
        woken.at.since(first.at) < Duration::from_millis(100),
        "probed at once, not at the next slot (~1 s): {:?}",
        woken.at.since(first.at)
    );
    // Within the interval of the last out-of-schedule probe: ignored, the slot comes next.
    now.wake();
    now.wake();
    let slot = rx.recv().await.unwrap();
    assert!(
        slot.at.since(first.at) >= Duration::from_millis(900),
        "the next probe is the planned one: {:?}",
        slot.at.since(first.at)
    );
    let stats = p.stats().snapshot();
    assert_eq!((stats.started, stats.late), (3, 0), "{stats:?}");
    assert_eq!(origin.requests(), 3);
}

#[tokio::test]
async fn dns_answers_are_cached_per_prober_for_their_ttl() {
    let dns = FakeDns::start("seoul.gslb-test.test", 1).await;
    let origin = Origin::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), "seoul")
        .await
        .unwrap();
    let settings = DnsSettings {
        nameservers: vec![dns.addr],
        timeout: Duration::from_secs(1),
        ..DnsSettings::default()
    };
    let url = format!("http://seoul.gslb-test.test:{}/", origin.addr().port());
    let seoul = Prober::new(&settings).unwrap();
    let target = seoul.target(&spec(1000, 900), &http(&url)).unwrap();
    assert_eq!(seoul.probe(&target).await.reason, ProbeReason::Ok);
    assert_eq!(dns.a_queries(), 1);
    assert_eq!(seoul.probe(&target).await.reason, ProbeReason::Ok);
    assert_eq!(dns.a_queries(), 1, "answered from the cache within the TTL");

    // Another vantage point (another prober) has its own cache.
    let tokyo = Prober::new(&settings).unwrap();
    let other = tokyo.target(&spec(1000, 900), &http(&url)).unwrap();
    assert_eq!(tokyo.probe(&other).await.reason, ProbeReason::Ok);
    assert_eq!(dns.a_queries(), 2);

    // The 1 s TTL runs out (hickory's cache reads the system clock, so this waits in real
    // time): the next probe asks again.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(seoul.probe(&target).await.reason, ProbeReason::Ok);
    assert_eq!(dns.a_queries(), 3, "re-resolved once the TTL ran out");
    assert_eq!(origin.requests(), 4);
}
