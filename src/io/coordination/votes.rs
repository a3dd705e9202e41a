//! Publishing this instance's votes: its rise/fall verdict of each endpoint, put when it
//! changes (never periodically), and one heartbeat key whose value (a counter) is put every
//! `[cluster] heartbeat`. Both are bound to this instance's lease, so they go when it does;
//! after a new lease is granted every verdict is put again under it.
//!
//! etcd traffic in steady state: one heartbeat put per heartbeat period, whatever the number
//! of endpoints; a verdict put only when a verdict changes. Puts are batched, at most
//! [`MAX_TXN_OPS`] per transaction (etcd's default `--max-txn-ops`).
//!
//! Must not: decide whether a vote counts (the readers' engines do).

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_client::{PutOptions, Txn, TxnOp};
use tokio::sync::watch;

use gslb_core::model::{EndpointId, ServiceId, VantageId, Verdict};

use super::client::Clients;
use super::error::EtcdOp;
use super::keys::VoteKey;
use super::lease::LeaseState;

/// This instance's current rise/fall verdicts, by service and endpoint: what the engine loop
/// publishes in a `watch` (the latest map wins) and the publisher puts.
pub type LocalVerdicts = BTreeMap<(ServiceId, EndpointId), Verdict>;

/// Operations per etcd transaction: 128, etcd's default `--max-txn-ops`.
pub const MAX_TXN_OPS: usize = 128;

/// The task that puts this instance's verdicts and heartbeat.
#[derive(Debug)]
pub struct Publisher {
    clients: Clients,
    vantage: VantageId,
    heartbeat: Duration,
    lease: watch::Receiver<LeaseState>,
    verdicts: watch::Receiver<LocalVerdicts>,
}

impl Publisher {
    /// Publishes `verdicts` as `vantage`'s votes, with a heartbeat every `heartbeat`, bound
    /// to the lease of `lease`.
    pub fn new(
        clients: Clients,
        vantage: VantageId,
        heartbeat: Duration,
        lease: watch::Receiver<LeaseState>,
        verdicts: watch::Receiver<LocalVerdicts>,
    ) -> Self {
        Self {
            clients,
            vantage,
            heartbeat,
            lease,
            verdicts,
        }
    }

    /// Runs until the verdicts' or the lease's sender is gone. A failed put is counted and
    /// tried again at the next change or heartbeat.
    pub async fn run(mut self) {
        let mut published = LocalVerdicts::new();
        let mut generation = 0;
        let mut beats: u64 = 0;
        let mut ticker = tokio::time::interval(self.heartbeat);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let beat = tokio::select! {
                _ = ticker.tick() => true,
                r = self.verdicts.changed() => { if r.is_err() { return; } false }
                r = self.lease.changed() => { if r.is_err() { return; } false }
            };
            let lease = *self.lease.borrow_and_update();
            let Some(id) = lease.id else { continue };
            if lease.generation != generation {
                published.clear();
                generation = lease.generation;
            }
            let want = self.verdicts.borrow_and_update().clone();
            self.put_changed(&want, &mut published, id).await;
            if beat {
                beats += 1;
                let key = self.clients.keys.heartbeat(&self.vantage);
                let put = PutOptions::new().with_lease(id);
                let mut kv = self.clients.kv.clone();
                if let Err(e) = kv.put(key, beats.to_string(), Some(put)).await {
                    let e = self.clients.errors.failed(EtcdOp::Put, e);
                    tracing::warn!(error = %e, "cannot put this instance's heartbeat");
                }
            }
        }
    }

    /// Puts every verdict of `want` that differs from `published`, bound to lease `id`, in
    /// transactions of at most [`MAX_TXN_OPS`]; records what went through in `published`.
    async fn put_changed(&self, want: &LocalVerdicts, published: &mut LocalVerdicts, id: i64) {
        let changed: Vec<_> = want
            .iter()
            .filter(|(k, v)| published.get(*k) != Some(*v))
            .collect();
        for chunk in changed.chunks(MAX_TXN_OPS) {
            let ops: Vec<TxnOp> = chunk
                .iter()
                .map(|((service, endpoint), verdict)| {
                    let key = self.clients.keys.vote(&VoteKey {
                        vantage: self.vantage.clone(),
                        service: service.clone(),
                        endpoint: endpoint.clone(),
                    });
                    let put = PutOptions::new().with_lease(id);
                    TxnOp::put(key, verdict.as_str(), Some(put))
                })
                .collect();
            let mut kv = self.clients.kv.clone();
            match kv.txn(Txn::new().and_then(ops)).await {
                Ok(_) => published.extend(chunk.iter().map(|(k, v)| ((*k).clone(), **v))),
                Err(e) => {
                    let e = self.clients.errors.failed(EtcdOp::Txn, e);
                    tracing::warn!(error = %e, "cannot put this instance's votes");
                    return;
                }
            }
        }
    }
}

/// A vote's value as put: `healthy`, `unhealthy` or `unknown`; `None` for anything else.
pub fn parse_verdict(value: &[u8]) -> Option<Verdict> {
    match value {
        b"healthy" => Some(Verdict::Healthy),
        b"unhealthy" => Some(Verdict::Unhealthy),
        b"unknown" => Some(Verdict::Unknown),
        _ => None,
    }
}
