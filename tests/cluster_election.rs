//! One writer per binding against a real three-member etcd (library level: three in-process
//! "instances", each with its own clients, lease and election): exactly one writer, followers
//! are refused by the fence, a writer whose lease stops being kept loses to another with a
//! larger epoch and its fenced writes are refused from then on; an intent moved under a
//! writer's feet is refused too.

mod support;

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Duration;

use gslb::config::ClusterSettings;
use gslb::daemon::reconcile::CALL_DEADLINE;
use gslb::io::coordination::election::Role;
use gslb::io::coordination::fence::{Refusal, Timing};
use gslb::io::coordination::leaders;
use gslb::io::coordination::seat::Seat;
use gslb::io::coordination::{Clients, ErrorCounter, LeaseTask};
use gslb_provider::DesiredState;
use support::etcd::EtcdCluster;

const TTL: Duration = Duration::from_secs(4);

struct Instance {
    seat: Seat,
    election: tokio::task::JoinHandle<()>,
    lease: tokio::task::JoinHandle<()>,
    reader: tokio::task::JoinHandle<()>,
}

impl Instance {
    async fn start(endpoints: &[String], vantage: &str) -> Self {
        let text = format!(
            "endpoints = {endpoints:?}\nvantages = [\"a\", \"b\", \"c\"]\nlease_ttl = \"4s\"\nheartbeat = \"1s\"\nprefix = \"/t\"\n"
        );
        let settings: ClusterSettings = toml::from_str(&text).expect("settings");
        let clients = Clients::connect(settings.connect(), ErrorCounter::detached())
            .await
            .expect("connect");
        let (task, state) = LeaseTask::new(clients.clone(), TTL);
        let lease = tokio::spawn(task.run());
        let timing = Timing::derive(TTL, CALL_DEADLINE).expect("timing");
        let (leaders, reader) = leaders::spawn(clients.clone(), TTL / 4);
        let (seat, election) = Seat::join(&clients, state, leaders, vantage, "api", timing);
        Self {
            seat,
            election,
            lease,
            reader,
        }
    }

    /// As `kill -9` does to the keepalives: the lease is no longer kept, the election task is
    /// gone; the seat (a paused process's memory) remains.
    fn stop_keepalives(&self) {
        self.lease.abort();
        self.election.abort();
        self.reader.abort();
    }
}

fn desired() -> DesiredState {
    DesiredState {
        order: vec!["tokyo".into(), "seoul".into()],
        enabled: BTreeMap::new(),
    }
}

async fn writer_of(instances: &[Instance], within: Duration, not: Option<usize>) -> Option<usize> {
    support::eventually(within, || async {
        let writers: Vec<usize> = instances
            .iter()
            .enumerate()
            .filter(|(i, x)| Some(*i) != not && matches!(x.seat.role(), Role::Writer { .. }))
            .map(|(i, _)| i)
            .collect();
        (writers.len() == 1).then(|| writers[0])
    })
    .await
}

fn epoch(i: &Instance) -> u64 {
    i.seat.role().writer().map_or(0, |w| w.epoch)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_writer_is_fenced_and_a_lost_lease_hands_over_to_a_larger_epoch() {
    let ips = [1, 2, 3].map(|i| Ipv4Addr::new(127, 0, 20, i));
    let Some(etcd) = EtcdCluster::start(ips) else {
        return;
    };
    let endpoints = etcd.endpoints();
    let mut instances = Vec::new();
    for v in ["a", "b", "c"] {
        instances.push(Instance::start(&endpoints, v).await);
    }
    let first = writer_of(&instances, TTL * 3, None)
        .await
        .expect("exactly one writer");
    let old_epoch = epoch(&instances[first]);
    for (i, x) in instances.iter().enumerate().filter(|(i, _)| *i != first) {
        let seen = support::eventually(TTL, || async { x.seat.role().writer().cloned() }).await;
        assert_eq!(
            seen.map(|w| w.epoch),
            Some(old_epoch),
            "follower {i} names the writer"
        );
        assert_eq!(x.seat.admit(&desired()).await, Err(Refusal::Follower));
    }
    // The new writer waits out the takeover delay, then the fence admits it.
    let stamp = support::eventually(TTL * 2, || async {
        instances[first].seat.admit(&desired()).await.ok()
    })
    .await
    .expect("the writer is admitted after its takeover delay");
    assert_eq!(stamp.epoch, old_epoch);

    instances[first].stop_keepalives();
    let next = writer_of(&instances, TTL * 4, Some(first))
        .await
        .expect("another instance takes over");
    let new_epoch = epoch(&instances[next]);
    assert!(new_epoch > old_epoch, "a newer writer's epoch is larger");
    // Refused by its stale keepalive or the fence's token check, or (when its election watch
    // has already seen the new leader, as happens on a loaded machine) as a follower: in every
    // case it does not write.
    let refused = instances[first].seat.admit(&desired()).await;
    assert!(
        matches!(
            refused,
            Err(Refusal::LeaseStale | Refusal::TokenLost | Refusal::Follower)
        ),
        "the old writer is fenced out: {refused:?}"
    );
    let admitted = support::eventually(TTL * 2, || async {
        instances[next].seat.admit(&desired()).await.ok()
    })
    .await
    .expect("the new writer writes after its takeover delay");
    assert_eq!(admitted.epoch, new_epoch);
}

/// `Range` requests sent so far (`gslb_cluster_etcd_requests_total{method="Range"}`).
fn ranges(requests: &prometheus::IntCounterVec) -> u64 {
    requests.with_label_values(&["Range"]).get()
}

/// A hundred bindings' elections cost one read per poll, not one per binding (issue 27,
/// defect 8): every seat follows the one read of every election ([`leaders::spawn`]).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_elections_are_read_in_one_request_per_poll() {
    let ips = [1, 2, 3].map(|i| Ipv4Addr::new(127, 0, 26, i));
    let Some(etcd) = EtcdCluster::start(ips) else {
        return;
    };
    let text = format!(
        "endpoints = {:?}\nvantages = [\"a\"]\nlease_ttl = \"4s\"\nheartbeat = \"1s\"\nprefix = \"/t\"\n",
        etcd.endpoints()
    );
    let settings: ClusterSettings = toml::from_str(&text).expect("settings");
    let opts = prometheus::Opts::new("requests", "requests");
    let requests = prometheus::IntCounterVec::new(opts, &["method"]).expect("vector");
    let counter = ErrorCounter::detached().counting_requests(requests.clone());
    let clients = Clients::connect(settings.connect(), counter)
        .await
        .expect("connect");
    let (task, state) = LeaseTask::new(clients.clone(), TTL);
    let _lease = tokio::spawn(task.run());
    let poll = TTL / 4;
    let (leaders, _reader) = leaders::spawn(clients.clone(), poll);
    let timing = Timing::derive(TTL, CALL_DEADLINE).expect("timing");
    let seats: Vec<_> = (0..100)
        .map(|i| {
            let binding = format!("svc-{i}");
            Seat::join(
                &clients,
                state.clone(),
                leaders.clone(),
                "a",
                &binding,
                timing,
            )
        })
        .collect();
    let all_lead = support::eventually(TTL * 4, || async {
        let writers = seats
            .iter()
            .filter(|(s, _)| matches!(s.role(), Role::Writer { .. }))
            .count();
        (writers == seats.len()).then_some(())
    })
    .await;
    assert!(
        all_lead.is_some(),
        "alone, this instance leads every election"
    );
    let before = ranges(&requests);
    let window = poll * 5;
    tokio::time::sleep(window).await; // a measurement window, not a wait for a condition
    let read = ranges(&requests) - before;
    // One read per poll (at most 5 in the window, 6 at an edge; fewer when reads are slow);
    // one per binding and poll would be 500.
    assert!(
        (1..=6).contains(&read),
        "{read} Range requests in {window:?}"
    );
    // Every seat still leads: the shared read shows each its own key.
    let leading = seats
        .iter()
        .filter(|(s, _)| matches!(s.role(), Role::Writer { .. }))
        .count();
    assert_eq!(leading, seats.len());
}
