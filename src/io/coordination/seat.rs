//! [`Seat`]: one provider binding's place in the cluster, as its reconciler sees it: this
//! instance's [`Role`] and the fenced admission of each write ([`Seat::admit`]).
//!
//! Must not: write to a provider or campaign (that is [`super::election`]).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use etcd_client::Client;
use gslb_provider::{DesiredState, Stamp};
use tokio::sync::watch;

use super::Clients;
use super::election::{self, Campaign, Role};
use super::fence::{self, Intent, IntentSeen, Refusal, Timing};
use super::leaders::LeaderPoll;
use super::lease::LeaseState;

/// One binding's seat: its role watch, the fencing client and keys, the lease's last
/// successful keepalive and the time relations. Cloning shares the intent revision seen.
#[derive(Clone)]
pub struct Seat {
    /// The binding's name in metrics and logs (the service).
    pub binding: String,
    /// The time relations ([`Timing`]).
    pub timing: Timing,
    role: watch::Receiver<Role>,
    lease: watch::Receiver<LeaseState>,
    coordinated: Option<watch::Receiver<bool>>,
    client: Client,
    intent_key: String,
    seen: Arc<Mutex<Option<IntentSeen>>>,
}

impl Seat {
    /// Joins the election of `binding` as `vantage` on `clients` with this instance's `lease`,
    /// following the reads of every election in `leaders` ([`super::leaders::spawn`], every
    /// `lease_ttl / 4`): spawns the election task ([`election::run`]) and returns the
    /// binding's seat and that task's handle (abort it to leave the election).
    pub fn join(
        clients: &Clients,
        lease: watch::Receiver<LeaseState>,
        leaders: watch::Receiver<LeaderPoll>,
        vantage: &str,
        binding: &str,
        timing: Timing,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (tx, rx) = watch::channel(Role::Unknown);
        let campaign = Campaign {
            name: clients.keys.election(binding),
            vantage: vantage.to_owned(),
            poll: timing.lease_ttl / 4,
        };
        let task = tokio::spawn(election::run(
            campaign,
            clients.untimed.clone(),
            leaders,
            lease.clone(),
            tx,
        ));
        let seat = Self::new(
            binding.to_owned(),
            timing,
            rx,
            lease,
            clients.kv.clone(),
            clients.keys.intent(binding),
        );
        (seat, task)
    }

    /// A seat for `binding`: `role` from its election, `lease` this instance's lease (its last
    /// confirmed keepalive), `client` with a request timeout, `intent_key` the binding's
    /// intent key.
    pub fn new(
        binding: String,
        timing: Timing,
        role: watch::Receiver<Role>,
        lease: watch::Receiver<LeaseState>,
        client: Client,
        intent_key: String,
    ) -> Self {
        Self {
            binding,
            timing,
            role,
            lease,
            coordinated: None,
            client,
            intent_key,
            seen: Arc::new(Mutex::new(None)),
        }
    }

    /// The same seat, refusing every write while `coordinated` reads `false` (the votes'
    /// coordination watch: lease alive and the other vantage points watched), so an instance
    /// that lost coordination fails static even as writer.
    #[must_use]
    pub fn while_coordinated(mut self, coordinated: watch::Receiver<bool>) -> Self {
        self.coordinated = Some(coordinated);
        self
    }

    /// This instance's role now.
    pub fn role(&self) -> Role {
        self.role.borrow().clone()
    }

    /// A receiver of role changes, to wake the reconciler when it becomes writer or loses it.
    pub fn roles(&self) -> watch::Receiver<Role> {
        self.role.clone()
    }

    /// Admits one write towards `desired`, or refuses it. In order: this instance must be
    /// the writer, coordinated (see [`Seat::while_coordinated`]), past its takeover delay, with a keepalive no older than
    /// [`Timing::freshness`]; then the fencing transaction ([`fence::record`]) must pass. On
    /// success the write carries the returned [`Stamp`]: the epoch and the end of the apply's
    /// one deadline ([`Timing::write_deadline`] from now).
    ///
    /// # Errors
    /// The [`Refusal`]; [`Refusal::TakeoverDelay`] carries how long is left.
    pub async fn admit(&self, desired: &DesiredState) -> Result<Stamp, Refusal> {
        let Role::Writer { me, key, won_at } = self.role() else {
            return Err(Refusal::Follower);
        };
        if self.coordinated.as_ref().is_some_and(|c| !*c.borrow()) {
            return Err(Refusal::Uncoordinated);
        }
        let now = Instant::now();
        let ready = won_at + self.timing.takeover_delay;
        if now < ready {
            return Err(Refusal::TakeoverDelay(ready - now));
        }
        let last = self
            .lease
            .borrow()
            .last_keepalive
            .map(tokio::time::Instant::into_std);
        let fresh = last.is_some_and(|k| self.timing.lease_fresh(k, now));
        if !fresh {
            return Err(Refusal::LeaseStale);
        }
        let known = *lock(&self.seen);
        let seen = match known {
            Some(s) if s.epoch == me.epoch => s,
            _ => fence::read_intent(&self.client, &self.intent_key, me.epoch).await?,
        };
        let intent = Intent {
            vantage: me.vantage.clone(),
            epoch: me.epoch,
            order: desired.order.clone(),
            disabled: desired
                .enabled
                .iter()
                .filter(|(_, on)| !**on)
                .map(|(p, _)| p.clone())
                .collect(),
            at: wall_millis(),
        };
        let recorded = fence::record(&self.client, &key, &self.intent_key, seen, &intent).await;
        *lock(&self.seen) = recorded.as_ref().ok().copied();
        recorded?;
        Ok(Stamp {
            epoch: me.epoch,
            deadline: now + self.timing.write_deadline,
        })
    }
}

impl std::fmt::Debug for Seat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Seat")
            .field("binding", &self.binding)
            .field("role", &*self.role.borrow())
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Wall-clock milliseconds since the Unix epoch, for the intent's informational `at`.
fn wall_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
