//! The failover observer alone against real local servers: the test's authoritative DNS
//! server (hickory-server) answers the public name with the new pool's address, an origin
//! answers with its region in the body, and the observer reports both phases (the body-marker variant of the served-by probe).

mod support;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use gslb::io::clock::Clock;
use gslb::io::origin::Origin;
use gslb::io::probe::DnsSettings;
use gslb::ops::events;
use gslb::ops::timeline::observer::{Job, run};
use gslb_core::event::{Event, ObservedPhase};
use gslb_core::policy::{ServedBy, ServedByMarker};
use support::authoritative::Authoritative;

const NEW_POOL: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 4);

#[tokio::test]
async fn the_observer_reports_the_dns_answer_and_the_region_named_in_the_body() {
    let origin = Origin::start(SocketAddr::from((NEW_POOL, 0)), "ap-northeast-1")
        .await
        .expect("origin");
    let dns = Authoritative::start("example.test.", "api.example.test.", 1, NEW_POOL).await;
    let events = events::channel(16);
    let mut rx = events.subscribe();
    let job = Job {
        service: "api".into(),
        timeline: "api-1".into(),
        dns_name: "api.example.test".into(),
        want: vec![NEW_POOL.into()],
        served_by: Some(ServedBy {
            url: format!("http://api.example.test:{}/", origin.addr().port())
                .parse()
                .expect("url"),
            marker: ServedByMarker::Body("region=".into()),
        }),
        names: vec!["ap-northeast-1".into(), "tokyo".into()],
        interval: Duration::from_millis(100),
        window: Duration::from_secs(10),
        dns: DnsSettings {
            nameservers: vec![dns.addr],
            ..DnsSettings::default()
        },
    };
    let observer = tokio::spawn(run(job, events.clone(), Clock::system()));
    let mut seen = Vec::new();
    while seen.len() < 2 {
        match tokio::time::timeout(Duration::from_secs(10), rx.recv()).await {
            Ok(Ok(Event::Observed {
                timeline,
                phase,
                detail,
                ..
            })) => {
                assert_eq!(timeline, "api-1");
                seen.push((phase, detail));
            }
            Ok(Ok(_)) => {}
            other => panic!("no observation: {other:?} (seen {seen:?})"),
        }
    }
    assert_eq!(
        seen,
        [
            (ObservedPhase::Dns, "api.example.test 127.0.0.4".to_owned()),
            (
                ObservedPhase::ServedBy,
                "200 body region=ap-northeast-1".to_owned()
            ),
        ]
    );
    tokio::time::timeout(Duration::from_secs(5), observer)
        .await
        .expect("the observer ends once both phases are seen")
        .expect("no panic");
}

/// A DNS look that hangs (a nameserver that never answers) must not delay the served-by
/// phase when the URL does not go through the observed name: the read RTO is when users were
/// served, not when the observer's DNS look gave up.
#[tokio::test]
async fn a_hanging_dns_look_does_not_delay_the_served_by_phase() {
    let origin = Origin::start(SocketAddr::from((NEW_POOL, 0)), "ap-northeast-1")
        .await
        .expect("origin");
    // Bound and never read: every query to it goes unanswered.
    let silent = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("silent nameserver");
    let dns_timeout = Duration::from_secs(4);
    let events = events::channel(16);
    let mut rx = events.subscribe();
    let job = Job {
        service: "api".into(),
        timeline: "api-2".into(),
        dns_name: "api.example.test".into(),
        want: vec![NEW_POOL.into()],
        served_by: Some(ServedBy {
            url: format!("http://{}/", origin.addr()).parse().expect("url"),
            marker: ServedByMarker::Body("region=".into()),
        }),
        names: vec!["ap-northeast-1".into()],
        interval: Duration::from_millis(100),
        window: Duration::from_secs(10),
        dns: DnsSettings {
            nameservers: vec![silent.local_addr().expect("addr")],
            timeout: dns_timeout,
            ..DnsSettings::default()
        },
    };
    let started = tokio::time::Instant::now();
    let observer = tokio::spawn(run(job, events.clone(), Clock::system()));
    let seen = loop {
        match tokio::time::timeout(Duration::from_secs(10), rx.recv()).await {
            Ok(Ok(Event::Observed { phase, .. })) => break (phase, started.elapsed()),
            Ok(Ok(_)) => {}
            other => panic!("no observation: {other:?}"),
        }
    };
    assert_eq!(seen.0, ObservedPhase::ServedBy);
    assert!(
        seen.1 < dns_timeout / 2,
        "served-by seen after {:?}, behind the hanging DNS look ({dns_timeout:?})",
        seen.1
    );
    observer.abort();
}
