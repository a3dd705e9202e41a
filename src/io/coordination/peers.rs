//! Watching the other vantage points: their votes and heartbeats, read once, then watched
//! from the revision read. Every put of a heartbeat is one [`PeerEvent::Heartbeat`] (the
//! reader's engine times it on its own clock); a vote put or deleted (its lease gone) is one
//! [`PeerEvent::Verdict`] (`unknown` when deleted). A watch that breaks after running a while is
//! resumed at once from the revision after its last event (the reader stays synced); otherwise
//! the reader is told it is not synced, then everything is read again (votes that vanished
//! meanwhile become `unknown`) and watched anew.
//!
//! A heartbeat key present at the first read proves nothing about now (etcd extends every
//! lease when its own leader changes), so only heartbeats put while watching count.

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_client::{EventType, GetOptions, WatchOptions};
use tokio::sync::mpsc;
use tokio::time::timeout;

use gslb_core::model::{VantageId, Verdict};

use super::client::{Clients, request_timeout};
use super::error::{CoordinationError, EtcdOp};
use super::keys::VoteKey;
use super::votes::parse_verdict;

/// What the watcher reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerEvent {
    /// A peer's verdict of an endpoint (`unknown`: withdrawn).
    Verdict(VoteKey, Verdict),
    /// A peer's heartbeat was just put.
    Heartbeat(VantageId),
    /// Whether the watcher is synced: everything read and the watch running.
    Synced(bool),
}

/// The task that watches the other vantage points.
#[derive(Debug)]
pub struct Watcher {
    clients: Clients,
    own: VantageId,
    retry: Duration,
}

impl Watcher {
    /// Watches every vantage point but `own`; after a failure, starts again every `retry`.
    pub fn new(clients: Clients, own: VantageId, retry: Duration) -> Self {
        Self {
            clients,
            own,
            retry,
        }
    }

    /// Runs until `tx`'s receiver is gone.
    pub async fn run(self, tx: mpsc::Sender<PeerEvent>) {
        let mut known: BTreeMap<Vec<u8>, VoteKey> = BTreeMap::new();
        while !tx.is_closed() {
            let broke = match self.sync(&tx, &mut known).await {
                Ok(next) => self.watch(&tx, &mut known, next).await,
                Err(e) => e,
            };
            tracing::warn!(error = %broke, "watch of the other vantage points broke");
            if tx.send(PeerEvent::Synced(false)).await.is_err() {
                return;
            }
            tokio::time::sleep(self.retry).await;
        }
    }

    /// Reads every vote and reports the differences with `known`: the revision to watch from.
    async fn sync(
        &self,
        tx: &mpsc::Sender<PeerEvent>,
        known: &mut BTreeMap<Vec<u8>, VoteKey>,
    ) -> Result<i64, CoordinationError> {
        let keys = &self.clients.keys;
        let mut kv = self.clients.kv.clone();
        let read = kv
            .get(keys.votes(), Some(GetOptions::new().with_prefix()))
            .await
            .map_err(|e| self.clients.errors.failed(EtcdOp::Get, e))?;
        let revision = read.header().map_or(0, |h| h.revision());
        let mut seen = BTreeMap::new();
        for kvp in read.kvs() {
            if let Some((vote, verdict)) = self.vote(kvp.key(), Some(kvp.value())) {
                seen.insert(kvp.key().to_vec(), vote.clone());
                let _ = tx.send(PeerEvent::Verdict(vote, verdict)).await;
            }
        }
        for (key, vote) in std::mem::take(known) {
            if !seen.contains_key(&key) {
                let _ = tx.send(PeerEvent::Verdict(vote, Verdict::Unknown)).await;
            }
        }
        *known = seen;
        Ok(revision + 1)
    }

    /// Watches from revision `next` and reports each event; synced once the first stream
    /// opens. A stream that breaks after running at least `retry` is opened again at once from
    /// the revision after the last one it delivered (nothing is lost: etcd replays from there;
    /// the member that broke it is left, see `failover`), staying synced. Returns why it
    /// stopped: a stream that could not open or broke sooner, or a cancelled watch (its
    /// revision compacted), after which everything is read again.
    async fn watch(
        &self,
        tx: &mpsc::Sender<PeerEvent>,
        known: &mut BTreeMap<Vec<u8>, VoteKey>,
        mut next: i64,
    ) -> CoordinationError {
        let mut synced = false;
        loop {
            let opened = tokio::time::Instant::now();
            let stream = match self.open(next).await {
                Ok(s) => s,
                Err(e) => return e,
            };
            if !synced {
                synced = true;
                let _ = tx.send(PeerEvent::Synced(true)).await;
            }
            let broke = self.follow(stream, tx, known, &mut next).await;
            if opened.elapsed() < self.retry || tx.is_closed() {
                return broke;
            }
            tracing::debug!(error = %broke, revision = next, "watch of the other vantage points broke; resuming");
        }
    }

    /// Opens a watch of the whole prefix (votes and heartbeats) from revision `next`.
    async fn open(&self, next: i64) -> Result<etcd_client::WatchStream, CoordinationError> {
        let errors = &self.clients.errors;
        let mut untimed = self.clients.untimed.clone();
        let options = WatchOptions::new().with_prefix().with_start_revision(next);
        let prefix = self
            .clients
            .keys
            .votes()
            .trim_end_matches("votes/")
            .to_owned();
        let member = self.clients.member();
        let stream = timeout(
            request_timeout(self.retry * 3),
            untimed.watch(prefix, Some(options)),
        )
        .await
        .map_err(|_| {
            self.clients.suspect(member);
            errors.timed_out_error(EtcdOp::Watch)
        })?
        .map_err(|e| errors.failed(EtcdOp::Watch, e))?;
        Ok(stream)
    }

    /// Reports the events of `stream` until it ends; `next` follows the revision after the
    /// last response. Returns why it ended.
    async fn follow(
        &self,
        mut stream: etcd_client::WatchStream,
        tx: &mpsc::Sender<PeerEvent>,
        known: &mut BTreeMap<Vec<u8>, VoteKey>,
        next: &mut i64,
    ) -> CoordinationError {
        let (keys, errors) = (&self.clients.keys, &self.clients.errors);
        loop {
            let resp = match stream.message().await {
                Ok(Some(resp)) => resp,
                Ok(None) => return errors.timed_out_error(EtcdOp::Watch),
                Err(e) => return errors.failed(EtcdOp::Watch, e),
            };
            if resp.canceled() {
                return errors.timed_out_error(EtcdOp::Watch);
            }
            for ev in resp.events() {
                let Some(kvp) = ev.kv() else { continue };
                *next = (*next).max(kvp.mod_revision() + 1);
                let put = ev.event_type() == EventType::Put;
                if let Some(v) = keys.parse_heartbeat(kvp.key()).filter(|v| *v != self.own) {
                    if put {
                        let _ = tx.send(PeerEvent::Heartbeat(v)).await;
                    }
                    continue;
                }
                let value = put.then(|| kvp.value());
                if let Some((vote, verdict)) = self.vote(kvp.key(), value) {
                    if put {
                        known.insert(kvp.key().to_vec(), vote.clone());
                    } else {
                        known.remove(kvp.key());
                    }
                    let _ = tx.send(PeerEvent::Verdict(vote, verdict)).await;
                }
            }
        }
    }

    /// A peer's vote key and its verdict (`unknown` without a value: deleted); `None` for
    /// this instance's own votes and keys outside the layout.
    fn vote(&self, key: &[u8], value: Option<&[u8]>) -> Option<(VoteKey, Verdict)> {
        let vote = self.clients.keys.parse_vote(key)?;
        if vote.vantage == self.own {
            return None;
        }
        let verdict = match value {
            None => Verdict::Unknown,
            Some(v) => parse_verdict(v)?,
        };
        Some((vote, verdict))
    }
}
