//! This instance's etcd lease: granted at start, kept alive every TTL/3, granted anew after it
//! expired. Votes, the heartbeat and (as a writer) the leader key are bound to it.
//!
//! The state is published in a [`tokio::sync::watch`]: the lease id and when the last
//! successful keepalive was *sent*, on the monotonic clock (sent, not answered: etcd restarts
//! the TTL when it receives it, which is later, so the lease lives at least until
//! `last_keepalive + ttl`). The writer refuses a write when `last_keepalive` is older than
//! TTL - write deadline - margin; everything bound to a lease is put again by its owner when
//! [`LeaseState::id`] changes.
//!
//! Must not: judge a peer by its lease (etcd extends every lease when its own leader changes);
//! peers are judged by their heartbeats, on the reader's clock.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::{Instant, timeout};

use super::client::{Clients, request_timeout};
use super::error::{CoordinationError, EtcdOp};

/// The lease as last seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseState {
    /// The lease id; `None` before the first grant and while granting anew.
    pub id: Option<i64>,
    /// When the last keepalive that etcd confirmed was sent (or the grant was asked).
    pub last_keepalive: Option<Instant>,
    /// The lease's TTL (`[cluster] lease_ttl`).
    pub ttl: Duration,
    /// Grants so far: a new value means a new lease, whose keys must be put again.
    pub generation: u64,
}

impl LeaseState {
    /// Whether the lease is certainly still alive at `now`: granted, and its last confirmed
    /// keepalive younger than the TTL.
    pub fn alive(&self, now: Instant) -> bool {
        self.id.is_some()
            && self
                .last_keepalive
                .is_some_and(|t| now.saturating_duration_since(t) < self.ttl)
    }
}

/// The task that keeps the lease.
#[derive(Debug)]
pub struct LeaseTask {
    clients: Clients,
    ttl: Duration,
    state: watch::Sender<LeaseState>,
}

impl LeaseTask {
    /// A task for a lease of `ttl` (at least 2 s; whole seconds, rounded up: etcd's unit),
    /// and the receiver of its state.
    pub fn new(clients: Clients, ttl: Duration) -> (Self, watch::Receiver<LeaseState>) {
        let (state, rx) = watch::channel(LeaseState {
            id: None,
            last_keepalive: None,
            ttl,
            generation: 0,
        });
        (
            Self {
                clients,
                ttl,
                state,
            },
            rx,
        )
    }

    /// Grants a lease and keeps it alive, forever: after it expired (or could not be kept
    /// within its TTL) a new one is granted, and the lost one is revoked once the new one is
    /// granted. Failed calls are counted and retried every TTL/3. Stops when every receiver of
    /// the state is gone.
    ///
    /// The revoke matters after a loss of etcd's quorum: keepalives cannot reach etcd, so this
    /// instance gives its lease up after the TTL, but etcd still holds it, and extends it when
    /// its own leader changes (quorum back). Until it expired there, its keys would stay: this
    /// instance's own old leader key would be the first in line of every election it held, and
    /// its new campaign would wait behind it (16 s measured, issue 27, defect 8).
    pub async fn run(self) {
        let retry = self.ttl / 3;
        let mut lost = None;
        while !self.state.is_closed() {
            let asked = Instant::now();
            match self.grant().await {
                Ok(id) => {
                    self.state.send_modify(|s| {
                        s.id = Some(id);
                        s.last_keepalive = Some(asked);
                        s.generation += 1;
                    });
                    if let Some(old) = lost.take() {
                        self.revoke(old).await;
                    }
                    let why = self.keep(id).await;
                    tracing::warn!(lease = %format!("{id:x}"), error = %why, "etcd lease lost; granting a new one");
                    self.state.send_modify(|s| s.id = None);
                    lost = Some(id);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot grant an etcd lease");
                    tokio::time::sleep(retry).await;
                }
            }
        }
    }

    async fn grant(&self) -> Result<i64, CoordinationError> {
        let secs = i64::try_from(self.ttl.as_secs_f64().ceil() as u64).unwrap_or(i64::MAX);
        let mut kv = self.clients.kv.clone();
        kv.lease_grant(secs, None)
            .await
            .map(|r| r.id())
            .map_err(|e| self.clients.errors.failed(EtcdOp::LeaseGrant, e))
    }

    /// Revokes lost lease `id` (its keys go at once); gone already is fine, a failure is counted
    /// and left to etcd's own expiry.
    async fn revoke(&self, id: i64) {
        let mut kv = self.clients.kv.clone();
        match kv.lease_revoke(id).await {
            Ok(_) => tracing::info!(lease = %format!("{id:x}"), "revoked the lost etcd lease"),
            Err(etcd_client::Error::GRpcStatus(s)) if s.code() == tonic::Code::NotFound => {}
            Err(e) => {
                self.clients.errors.failed(EtcdOp::LeaseRevoke, e);
            }
        }
    }

    /// Sends a keepalive every TTL/3 until the lease is lost: etcd says it expired, or no
    /// keepalive was confirmed within the TTL. Returns why.
    async fn keep(&self, id: i64) -> CoordinationError {
        let mut ticker = tokio::time::interval(self.ttl / 3);
        let wait = request_timeout(self.ttl);
        let mut stream = None;
        loop {
            ticker.tick().await;
            let last = self.state.borrow().last_keepalive;
            if last.is_none_or(|t| t.elapsed() >= self.ttl) {
                return CoordinationError::LeaseExpired(id);
            }
            let member = self.clients.member();
            if stream.is_none() {
                let mut untimed = self.clients.untimed.clone();
                match timeout(wait, untimed.lease_keep_alive(id)).await {
                    Ok(Ok(s)) => stream = Some(s),
                    Ok(Err(e)) => {
                        self.clients.errors.failed(EtcdOp::LeaseKeepalive, e);
                        continue;
                    }
                    Err(_) => {
                        self.clients.errors.timed_out(EtcdOp::LeaseKeepalive);
                        self.clients.suspect(member);
                        continue;
                    }
                }
            }
            let Some((keeper, answers)) = stream.as_mut() else {
                continue;
            };
            let sent = Instant::now();
            self.clients.errors.requested("LeaseKeepAlive");
            let answer = timeout(wait, async {
                keeper.keep_alive().await?;
                answers.message().await
            })
            .await;
            match answer {
                Ok(Ok(Some(r))) if r.ttl() > 0 => {
                    self.state.send_modify(|s| s.last_keepalive = Some(sent));
                }
                Ok(Ok(Some(_))) => return CoordinationError::LeaseExpired(id),
                Ok(Ok(None)) => stream = None,
                Ok(Err(e)) => {
                    self.clients.errors.failed(EtcdOp::LeaseKeepalive, e);
                    stream = None;
                }
                Err(_) => {
                    self.clients.errors.timed_out(EtcdOp::LeaseKeepalive);
                    self.clients.suspect(member);
                    stream = None;
                }
            }
        }
    }
}
