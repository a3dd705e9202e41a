//! This instance's part in a cluster (`[cluster]`): the etcd clients, its lease (kept by a
//! task) and the writers' time relations, started once and handed to the
//! [`Builder`](super::builder::Builder); each attached service then joins its binding's
//! election ([`Seat::join`]).
//!
//! Must not: decide, or write to a provider. Without `[cluster]` none of this exists and gslb
//! runs alone, exactly as before.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use gslb_core::engine::{Input, SafetyState};
use tokio::sync::watch;

use crate::daemon::inbox::MessageSender;
use crate::daemon::outputs::Outputs;
use crate::io::clock::Clock;
use crate::io::coordination::safety;

use crate::config::ClusterSettings;
use crate::daemon::reconcile::CALL_DEADLINE;
use crate::io::coordination::fence::Timing;
use crate::io::coordination::leaders::{self, LeaderPoll};
use crate::io::coordination::seat::Seat;
use crate::io::coordination::{Clients, CoordinationError, ErrorCounter, LeaseState, LeaseTask};
use gslb_core::model::{ServiceId, VantageId};

/// A running cluster membership. Dropping it stops keeping the lease (its keys then go when
/// the TTL runs out).
#[derive(Debug)]
pub struct Cluster {
    /// The etcd clients and key layout.
    pub clients: Clients,
    /// This instance's lease as last seen.
    pub lease: watch::Receiver<LeaseState>,
    /// This instance's vantage point (the campaign value).
    pub vantage: VantageId,
    /// Every configured vantage point (`[cluster] vantages`).
    pub vantages: Vec<VantageId>,
    /// The writers' time relations, derived from `lease_ttl` ([`Timing::derive`]).
    pub timing: Timing,
    keeper: tokio::task::JoinHandle<()>,
    /// Every election, read once per `lease_ttl / 4` for all bindings ([`leaders::spawn`]).
    leaders: watch::Receiver<LeaderPoll>,
    reader: tokio::task::JoinHandle<()>,
    /// Whether coordination holds (lease alive and the other vantage points watched), set by
    /// the votes' monitor ([`super::votes`]).
    coordinated: Arc<watch::Sender<bool>>,
    /// What the engine loop hands this member's tasks.
    pub outputs: Outputs,
}

impl Cluster {
    /// Connects to `settings.endpoints` and starts keeping a lease, as `vantage`, counting
    /// failed etcd calls in `errors`. Returns at once: etcd need not be up (gslb fails
    /// static until it is).
    ///
    /// # Errors
    /// [`ClusterError::Settings`] when `lease_ttl` leaves no room for a write
    /// ([`Timing::derive`]); [`ClusterError::Connect`] when the clients cannot be built (a TLS
    /// file).
    pub async fn start(
        settings: &ClusterSettings,
        vantage: VantageId,
        errors: ErrorCounter,
    ) -> Result<Self, ClusterError> {
        let timing =
            Timing::derive(settings.lease_ttl, CALL_DEADLINE).map_err(ClusterError::Settings)?;
        let clients = Clients::connect(settings.connect(), errors).await?;
        let (task, lease) = LeaseTask::new(clients.clone(), settings.lease_ttl);
        let keeper = tokio::spawn(task.run());
        let (leaders, reader) = leaders::spawn(clients.clone(), settings.lease_ttl / 4);
        Ok(Self {
            clients,
            lease,
            vantage,
            vantages: settings.vantages.clone(),
            timing,
            keeper,
            leaders,
            reader,
            coordinated: Arc::new(watch::Sender::new(false)),
            outputs: Outputs::default(),
        })
    }

    /// Whether coordination holds: this instance's lease is alive and the other vantage
    /// points' votes are watched. `false` (also before the first sync): fail static, no
    /// provider write.
    pub fn coordinated(&self) -> watch::Receiver<bool> {
        self.coordinated.subscribe()
    }

    /// The sending side of [`Cluster::coordinated`], for the votes' monitor.
    pub(super) fn coordination(&self) -> Arc<watch::Sender<bool>> {
        self.coordinated.clone()
    }

    /// Joins the election of `service`'s provider binding: its [`Seat`] and the election
    /// task (abort it when the service is removed).
    pub fn seat(&self, service: &ServiceId) -> (Seat, tokio::task::JoinHandle<()>) {
        let (seat, task) = Seat::join(
            &self.clients,
            self.lease.clone(),
            self.leaders.clone(),
            &self.vantage.0,
            &service.0,
            self.timing,
        );
        (seat.while_coordinated(self.coordinated()), task)
    }

    /// How long a writer waits after winning before it writes.
    pub fn takeover_delay(&self) -> Duration {
        self.timing.takeover_delay
    }
}

/// Keeps `services`' safety state shared through etcd, forever: first reads every vantage
/// point's saved states (retrying every `lease_ttl / 4` until etcd answers) and feeds them to
/// the engine as [`Input::RestoreSafety`] through `commands`; only then, every
/// `lease_ttl / 4`, merges what other vantage points put since (as `RestoreSafety` again) and
/// puts under this instance's own key each service's state from the engine loop
/// ([`Outputs::safety`]) that is not the same as the one saved there at `clock`'s now
/// ([`SafetyState::same_at`]: a put per service and round otherwise, as instances merge each
/// other's states). Restoring before the first put
/// means a restarted instance never overwrites a spent budget with a full one; merging before
/// each put means the engine never forgets a budget another instance spent. Every instance
/// puts, however many saved states it found when it started.
pub async fn keep_safety(
    cluster: Arc<Cluster>,
    services: Vec<ServiceId>,
    commands: MessageSender,
    clock: Clock,
) {
    let period = cluster.timing.lease_ttl / 4;
    let engine = cluster.outputs.safety();
    let (client, keys) = (&cluster.clients.kv, &cluster.clients.keys);
    let services: BTreeSet<ServiceId> = services.into_iter().collect();
    let saved = loop {
        match safety::load(client, keys, &services, 0).await {
            Ok(saved) => break saved,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the shared safety state yet; retrying");
                tokio::time::sleep(period).await;
            }
        }
    };
    let mut seen = Seen::new();
    let mut revision = saved.revision;
    for (vantage, service, state) in saved.states {
        if !cluster.vantages.contains(&vantage) {
            continue;
        }
        tracing::info!(service = %service, vantage = %vantage, "continuing the shared safety state from etcd");
        seen.insert((vantage, service.clone()), state.clone());
        if !restore(&commands, service, state).await {
            return;
        }
    }
    loop {
        tokio::time::sleep(period).await;
        let read = Read {
            client,
            keys,
            services: &services,
            me: &cluster.vantage,
            vantages: &cluster.vantages,
        };
        let merged = match merge_saved(read, &mut revision, &commands, &mut seen).await {
            Some(merged) => merged,
            None => return,
        };
        let now = clock.now();
        let states = engine.borrow().clone();
        for (service, state) in states {
            // A service merged this round is put at the next, once the engine's output shows
            // the merge; one whose state etcd already holds (the same at `now`, however last
            // updated) is not put again.
            let mine = (cluster.vantage.clone(), service);
            if merged.contains(&mine.1) || seen.get(&mine).is_some_and(|s| s.same_at(&state, now)) {
                continue;
            }
            match safety::save(client, keys, &cluster.vantage, &mine.1, &state).await {
                Ok(()) => {
                    seen.insert(mine, state);
                }
                Err(e) => {
                    tracing::warn!(service = %mine.1, error = %e, "cannot save the shared safety state; retrying")
                }
            }
        }
    }
}

/// The saved states as last read or put, by vantage point and service: what etcd holds, as
/// far as this instance knows.
type Seen = BTreeMap<(VantageId, ServiceId), SafetyState>;

/// Where [`merge_saved`] reads: the client, the key layout, the services kept and this
/// instance's vantage point.
#[derive(Clone, Copy)]
struct Read<'a> {
    client: &'a etcd_client::Client,
    keys: &'a crate::io::coordination::keys::Keys,
    services: &'a BTreeSet<ServiceId>,
    me: &'a VantageId,
    /// `[cluster] vantages`: states saved under other names are not merged.
    vantages: &'a [VantageId],
}

/// Merges into the engine every state another vantage point put after `revision` (one read for
/// all services) that differs from what `seen` holds of it, recording it there and moving
/// `revision` to the read's: the services merged, or `None` once the engine is gone. A failed
/// read merges nothing (the next round reads again from the same revision).
async fn merge_saved(
    read: Read<'_>,
    revision: &mut i64,
    commands: &MessageSender,
    seen: &mut Seen,
) -> Option<Vec<ServiceId>> {
    let saved = safety::load(read.client, read.keys, read.services, *revision)
        .await
        .unwrap_or_else(|_| safety::Saved {
            states: Vec::new(),
            revision: *revision,
        });
    *revision = saved.revision;
    let mut merged = Vec::new();
    for (vantage, service, state) in saved.states {
        if &vantage == read.me
            || !read.vantages.contains(&vantage)
            || seen
                .insert((vantage, service.clone()), state.clone())
                .as_ref()
                == Some(&state)
        {
            continue;
        }
        merged.push(service.clone());
        if !restore(commands, service, state).await {
            return None;
        }
    }
    Some(merged)
}

/// Hands `state` to the engine as `service`'s saved safety state (it merges it); `false` once
/// the engine is gone.
async fn restore(commands: &MessageSender, service: ServiceId, state: SafetyState) -> bool {
    let input = Input::RestoreSafety {
        service,
        safety: state,
    };
    commands.send(input.into()).await.is_ok()
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.keeper.abort();
        self.reader.abort();
    }
}

/// Why the cluster membership could not start.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// `[cluster]` settings that leave no room (e.g. `lease_ttl` too short for a write).
    #[error("{0}")]
    Settings(String),
    /// The etcd clients could not be built.
    #[error(transparent)]
    Connect(#[from] CoordinationError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_lease_ttl_without_room_for_a_write_is_refused_before_connecting() {
        let settings: ClusterSettings = toml::from_str(
            "endpoints = [\"http://127.0.29.250:1\"]\nvantages = [\"a\"]\nlease_ttl = \"3s\"\nheartbeat = \"1s\"\n",
        )
        .expect("settings");
        let refused = Cluster::start(&settings, VantageId("a".into()), ErrorCounter::detached())
            .await
            .expect_err("no room");
        assert!(
            matches!(&refused, ClusterError::Settings(m) if m.starts_with("cluster.lease_ttl: 3s")),
            "{refused}"
        );
    }
}
