//! Votes in a cluster (`[cluster]`): records the cluster in the engine ([`Input::Cluster`]),
//! and runs this instance's vote publisher, the watcher of the other vantage points (whose
//! events become recorded engine inputs) and the coordination monitor, on the membership's
//! clients and lease ([`Cluster`]).
//!
//! Coordinated means: our lease is alive (a keepalive confirmed within its TTL, on the
//! monotonic clock) and the watch of the other vantage points is synced. When either fails,
//! the engine is told ([`Input::Coordination`]) and fails static, and
//! [`Cluster::coordinated`] turns `false` (the fenced writer refuses writes on it).
//!
//! Must not decide whether a vote counts: the engine does, on its recorded inputs.

use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

use gslb_core::engine::Input;

use super::cluster::Cluster;
use super::inbox::MessageSender;
use crate::config::ClusterSettings;
use crate::io::coordination::{LeaseState, PeerEvent, Publisher, Watcher};
use crate::ops::cluster::ClusterStatus;
use crate::ops::telemetry::Telemetry;

/// Room for the watcher's events before it waits for the engine loop.
const PEER_EVENTS: usize = 1024;

/// Starts voting as `member`: records [`Input::Cluster`] in the engine (through `inbox`; call
/// before any service is attached), and spawns the publisher, watcher and monitor on `tasks`.
/// etcd being down is not an error: the instance is not coordinated, and fails static, until
/// it is reachable.
pub async fn join(
    member: &Cluster,
    settings: &ClusterSettings,
    telemetry: &Telemetry,
    inbox: &MessageSender,
    tasks: &mut JoinSet<()>,
) {
    let min_voters = settings.min_voters();
    let vantage = &member.vantage;
    telemetry
        .board
        .set_cluster(ClusterStatus::joining(vantage.clone(), min_voters));
    telemetry.metrics.cluster_coordinated.set(0.0);
    let input = Input::Cluster {
        local: vantage.clone(),
        vantages: settings.vantages.clone(),
        min_voters,
        fresh_for: settings.fresh_for(),
    };
    // The engine loop outlives this call; if it is gone, nothing is decided anyway.
    let _ = inbox.send(input.into()).await;
    let clients = &member.clients;
    let publisher = Publisher::new(
        clients.clone(),
        vantage.clone(),
        settings.heartbeat,
        member.lease.clone(),
        member.outputs.verdicts(),
    );
    tasks.spawn(publisher.run());
    let (peer_tx, peer_rx) = mpsc::channel(PEER_EVENTS);
    tasks.spawn(Watcher::new(clients.clone(), vantage.clone(), settings.heartbeat).run(peer_tx));
    let monitor = Monitor {
        peers: peer_rx,
        lease: member.lease.clone(),
        inbox: inbox.clone(),
        coordinated: member.coordination(),
        every: settings.heartbeat / 4,
    };
    tasks.spawn(monitor.run());
}

/// Turns the watcher's events into engine inputs and follows whether coordination holds.
struct Monitor {
    peers: mpsc::Receiver<PeerEvent>,
    lease: watch::Receiver<LeaseState>,
    inbox: MessageSender,
    coordinated: std::sync::Arc<watch::Sender<bool>>,
    /// How often the lease's age is checked without any event.
    every: Duration,
}

impl Monitor {
    async fn run(mut self) {
        let mut synced = false;
        let mut ticker = tokio::time::interval(self.every.max(Duration::from_millis(10)));
        loop {
            let input = tokio::select! {
                ev = self.peers.recv() => match ev {
                    None => return,
                    Some(PeerEvent::Synced(s)) => { synced = s; None }
                    Some(PeerEvent::Heartbeat(vantage)) => Some(Input::Heartbeat { vantage }),
                    Some(PeerEvent::Verdict(key, verdict)) => Some(Input::RemoteVerdict {
                        vantage: key.vantage,
                        service: key.service,
                        endpoint: key.endpoint,
                        verdict,
                    }),
                },
                _ = ticker.tick() => None,
            };
            if let Some(input) = input
                && self.inbox.send(input.into()).await.is_err()
            {
                return;
            }
            let now = synced && self.lease.borrow().alive(Instant::now());
            if self
                .coordinated
                .send_if_modified(|c| std::mem::replace(c, now) != now)
            {
                if now {
                    tracing::info!("coordinated through etcd: votes count");
                } else {
                    tracing::error!("coordination lost: failing static, no provider write");
                }
                let input = Input::Coordination { coordinated: now };
                if self.inbox.send(input.into()).await.is_err() {
                    return;
                }
            }
        }
    }
}
