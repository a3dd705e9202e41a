//! One writer per provider binding, elected with etcd's election API (`v3election`).
//!
//! Each instance campaigns for each binding with its vantage point's name as the value, bound
//! to its lease, on the etcd client without a request timeout (a per-request timeout would
//! cancel the blocking campaign). The winner's leader key's creation revision is its epoch:
//! the fencing token every write carries ([`super::fence`]); a newer writer's epoch is always
//! larger. While it leads, the winner checks in each read of every election
//! ([`super::leaders`], one read per `poll` for all bindings) that its key still exists with
//! that revision, and that its lease is the one it campaigned with; when either fails it steps
//! down to follower and campaigns again. Losing leadership never ends the process. Followers
//! take the current leader (identity and epoch) from the same reads, for status; `gslb plan`
//! reads it once ([`leader`]).
//!
//! Must not: write to a provider, or hold the role anywhere but in the one [`Role`] watch.

use std::time::{Duration, Instant};

use etcd_client::{Client, GetOptions, SortOrder, SortTarget};
use tokio::sync::watch;

pub use super::leaders::Leader;
use super::leaders::LeaderPoll;
use super::lease::LeaseState;

/// This instance's role for one binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Not known yet, or etcd cannot be read: no writes.
    Unknown,
    /// Another instance writes (or nobody, while an election is open): no writes.
    Follower {
        /// The writer, when one leads.
        writer: Option<Leader>,
    },
    /// This instance writes.
    Writer {
        /// Its identity and epoch.
        me: Leader,
        /// Its leader key, which the fencing transaction compares.
        key: Vec<u8>,
        /// When it won (monotonic): no write before the takeover delay has passed.
        won_at: Instant,
    },
}

impl Role {
    /// The binding's writer, as far as this instance knows.
    pub fn writer(&self) -> Option<&Leader> {
        match self {
            Self::Unknown => None,
            Self::Follower { writer } => writer.as_ref(),
            Self::Writer { me, .. } => Some(me),
        }
    }

    /// `writer` or `follower` (`unknown` while not known), as status and `gslb plan` show it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            Self::Follower { .. } => "follower",
            Self::Writer { .. } => "writer",
        }
    }
}

/// One binding's election, as this instance takes part in it.
#[derive(Debug, Clone)]
pub struct Campaign {
    /// The election's name (key prefix) in etcd.
    pub name: String,
    /// This instance's vantage point, the campaign value.
    pub vantage: String,
    /// How often the leader checks its key and followers read the leader.
    pub poll: Duration,
}

/// Takes part in `campaign` until `role` has no receiver left: campaigns with the current
/// lease from `lease` (`None` while there is none) on `campaigner` (no request timeout),
/// follows and checks with the reads of every election in `leaders` ([`super::leaders`]),
/// and publishes this instance's role to `role`.
pub async fn run(
    campaign: Campaign,
    campaigner: Client,
    leaders: watch::Receiver<LeaderPoll>,
    mut lease: watch::Receiver<LeaseState>,
    role: watch::Sender<Role>,
) {
    while !role.is_closed() {
        let Some(lease_id) = lease.borrow_and_update().id else {
            role.send_replace(Role::Unknown);
            if lease.changed().await.is_err() {
                return;
            }
            continue;
        };
        let mut elections = campaigner.election_client();
        let won = tokio::select! {
            won = elections.campaign(campaign.name.as_bytes(), campaign.vantage.as_bytes(), lease_id) => won,
            () = follow(&campaign, leaders.clone(), &role) => return,
            () = role.closed() => return,
            changed = lease.wait_for(|l| l.id != Some(lease_id)) => {
                if changed.is_err() { return; }
                continue;
            }
        };
        let key = match won.map(|mut r| r.take_leader()) {
            Ok(Some(key)) => key,
            failed => {
                let reason = match &failed {
                    Err(e) => super::error::describe(e),
                    Ok(_) => "etcd answered without a leader key".to_owned(),
                };
                // The role stays what the follower last read (reads have their own rule).
                tracing::info!(election = %campaign.name, %reason, "campaign failed; campaigning again");
                tokio::time::sleep(campaign.poll).await;
                continue;
            }
        };
        let me = Leader {
            vantage: campaign.vantage.clone(),
            epoch: u64::try_from(key.rev()).unwrap_or(0),
        };
        tracing::info!(election = %campaign.name, epoch = me.epoch, "elected writer");
        role.send_replace(Role::Writer {
            me: me.clone(),
            key: key.key().to_vec(),
            won_at: Instant::now(),
        });
        tokio::select! {
            () = hold(leaders.clone(), key.key(), key.rev(), lease_id, &mut lease) => {}
            () = role.closed() => return,
        }
        tracing::warn!(election = %campaign.name, epoch = me.epoch, "leadership lost; now a follower");
        role.send_replace(Role::Follower { writer: None });
    }
}

/// Returns once this instance no longer leads: a read of the elections newer than its key
/// finds the key gone or with another creation revision, or its lease changed. An unanswered
/// read keeps the role (the fence refuses writes on a stale lease meanwhile).
async fn hold(
    mut leaders: watch::Receiver<LeaderPoll>,
    key: &[u8],
    epoch: i64,
    lease_id: i64,
    lease: &mut watch::Receiver<LeaseState>,
) {
    loop {
        tokio::select! {
            changed = lease.changed() => {
                if changed.is_err() || lease.borrow_and_update().id != Some(lease_id) {
                    return;
                }
            }
            changed = leaders.changed() => {
                if changed.is_err() {
                    return;
                }
                let poll = leaders.borrow_and_update().clone();
                if let Some(false) = poll.read.as_deref().and_then(|r| r.holds(key, epoch)) {
                    return;
                }
            }
        }
    }
}

/// How many reads of the elections in a row may fail before a follower's role is `unknown`: 4
/// (one lease TTL of polls). A read that fails on a member that is down is followed by one on
/// the next member (`failover`), so one failure says nothing about the cluster.
const UNANSWERED_READS: u32 = 4;

/// As a follower: publishes the current leader after each read of the elections
/// ([`Role::Unknown`] once [`UNANSWERED_READS`] reads in a row failed). Never returns while
/// `role` has receivers and reads go on.
async fn follow(
    campaign: &Campaign,
    mut leaders: watch::Receiver<LeaderPoll>,
    role: &watch::Sender<Role>,
) {
    loop {
        let poll = leaders.borrow_and_update().clone();
        let next = match (&poll.read, poll.unanswered) {
            (_, n) if n >= UNANSWERED_READS => Some(Role::Unknown),
            (Some(read), _) => Some(Role::Follower {
                writer: read.leader(&campaign.name).cloned(),
            }),
            (None, _) => None,
        };
        if let Some(next) = next {
            role.send_if_modified(|r| {
                let changed = *r != next;
                *r = next;
                changed
            });
        }
        if role.is_closed() || leaders.changed().await.is_err() {
            return;
        }
    }
}

/// The current leader of election `name`: the key under `name/` with the lowest creation
/// revision (how etcd's election API defines it), or `None` when nobody leads.
///
/// # Errors
/// `Err(())` when etcd does not answer.
pub async fn leader(client: &Client, name: &str) -> Result<Option<Leader>, ()> {
    let options = GetOptions::new()
        .with_prefix()
        .with_sort(SortTarget::Create, SortOrder::Ascend)
        .with_limit(1);
    let got = client
        .kv_client()
        .get(format!("{name}/"), Some(options))
        .await
        .map_err(|_| ())?;
    Ok(got.kvs().first().map(|kv| Leader {
        vantage: String::from_utf8_lossy(kv.value()).into_owned(),
        epoch: u64::try_from(kv.create_revision()).unwrap_or(0),
    }))
}
