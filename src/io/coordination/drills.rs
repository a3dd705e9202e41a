//! Drills shared through etcd. Each vantage point writes only under its own name
//! (`<prefix>/drills/<vantage>/<id>`, a [`Record`] in JSON), so with etcd's auth on no
//! instance can start or end a drill under another's name ([`super::access`]):
//! - the instance a drill was started on stores it there ([`Record::Started`]), on an etcd
//!   lease of its own that lasts [`LEASE_MARGIN`] longer than the drill: a drill outlives the
//!   instance that started it, until it ends or expires;
//! - an instance ending a drill started elsewhere records the end under its own name
//!   ([`Record::Ended`]) on the drill's lease, so both records go together.
//!
//! A drill is shared while its start is stored and no end ([`Board::shared`]). Every instance
//! mirrors the shared drills into its engine, with the time left counted from the lease
//! ([`remaining`]), so the drill ends at the same moment on every instance whatever their wall
//! clocks say; the one whose end succeeds ([`end`], one transaction over every vantage point's
//! key) records the expiry, so a drill expires once in the cluster, not once per instance.
//!
//! Must not: decide anything about a drill (the engine does) or hold it anywhere else.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, EventType, GetOptions, KeyValue, PutOptions, Txn, TxnOp,
    WatchOptions, WatchStream,
};
use gslb_core::engine::{Override, OverrideId};
use gslb_core::model::{Millis, VantageId};
use serde::{Deserialize, Serialize};

use super::keys::Keys;

/// How much longer a drill's etcd lease lasts than the drill: 60 s. The instances end the
/// drill when its time is up; the lease removes only a drill that no instance was up to end.
pub const LEASE_MARGIN: Duration = Duration::from_secs(60);

/// One vantage point's record of one drill: the value of `<prefix>/drills/<vantage>/<id>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Record {
    /// The drill, started on this vantage point.
    Started(Override),
    /// This vantage point ended the drill (started on another) before or at its expiry.
    Ended,
}

/// A record as stored: the record, its key's lease (0: none) and the revision it was put at.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    record: Record,
    lease: i64,
    revision: i64,
}

/// A shared drill: started and not ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// The drill.
    pub drill: Override,
    /// The lease its records are on (0: none; its `expires` stands).
    pub lease: i64,
    /// The vantage point that started it (its key's name: etcd's auth vouches for it).
    pub owner: VantageId,
    /// The revision its start was put at (an end checks it is still that start).
    pub revision: i64,
}

/// Every drill record under `<prefix>/drills/`, as a list and a watch keep it.
#[derive(Debug, Default, Clone)]
pub struct Board {
    records: BTreeMap<(VantageId, String), Entry>,
}

impl Board {
    /// The shared drills: each start of which no vantage point recorded an end, counting only
    /// the records of `vantages` (`[cluster] vantages`: a vantage point no longer listed may
    /// keep its etcd user, its records do not count).
    pub fn shared(&self, vantages: &[VantageId]) -> BTreeMap<OverrideId, Stored> {
        let listed = self
            .records
            .iter()
            .filter(|((vantage, _), _)| vantages.contains(vantage));
        let ended: BTreeSet<&str> = listed
            .clone()
            .filter(|(_, e)| e.record == Record::Ended)
            .map(|((_, id), _)| id.as_str())
            .collect();
        listed
            .filter_map(|((owner, id), e)| match &e.record {
                Record::Started(drill) if !ended.contains(id.as_str()) => {
                    let stored = Stored {
                        drill: drill.clone(),
                        lease: e.lease,
                        owner: owner.clone(),
                        revision: e.revision,
                    };
                    Some((drill.id.clone(), stored))
                }
                _ => None,
            })
            .collect()
    }

    /// Records `kv` (put); a key outside the layout or a value that is not a [`Record`] (or a
    /// start whose id is not its key's) is skipped with a warning.
    fn put(&mut self, keys: &Keys, kv: &KeyValue) {
        let Some((vantage, id)) = keys.parse_drill(kv.key()) else {
            return;
        };
        let record = match serde_json::from_slice::<Record>(kv.value()) {
            Ok(Record::Started(o)) if o.id.0 != id => {
                tracing::warn!(vantage = %vantage, drill = id, "ignoring a shared drill stored under another id");
                return;
            }
            Ok(record) => record,
            Err(e) => {
                tracing::warn!(vantage = %vantage, drill = id, error = %e, "ignoring an unreadable shared drill");
                return;
            }
        };
        let entry = Entry {
            record,
            lease: kv.lease(),
            revision: kv.mod_revision(),
        };
        self.records.insert((vantage, id.to_owned()), entry);
    }

    /// Forgets the record of deleted key `key`.
    fn delete(&mut self, keys: &Keys, key: &[u8]) {
        if let Some((vantage, id)) = keys.parse_drill(key) {
            self.records.remove(&(vantage, id.to_owned()));
        }
    }
}

/// Every drill record, and the revision to watch from.
///
/// # Errors
/// etcd did not answer.
pub async fn list(client: &Client, keys: &Keys) -> Result<(Board, i64), etcd_client::Error> {
    let got = client
        .kv_client()
        .get(keys.drills(), Some(GetOptions::new().with_prefix()))
        .await?;
    let revision = got.header().map_or(0, |h| h.revision());
    let mut board = Board::default();
    for kv in got.kvs() {
        board.put(keys, kv);
    }
    Ok((board, revision))
}

/// Watches the drill records from `revision` (exclusive).
///
/// # Errors
/// etcd did not answer.
pub async fn watch(
    client: &Client,
    keys: &Keys,
    revision: i64,
) -> Result<WatchStream, etcd_client::Error> {
    let options = WatchOptions::new()
        .with_prefix()
        .with_start_revision(revision + 1);
    client
        .watch_client()
        .watch(keys.drills(), Some(options))
        .await
}

/// Applies the next watch answer to `board`; `false` when the stream ended.
///
/// # Errors
/// The stream failed (the caller lists again and re-watches).
pub async fn next(
    stream: &mut WatchStream,
    keys: &Keys,
    board: &mut Board,
) -> Result<bool, etcd_client::Error> {
    let Some(answer) = stream.message().await? else {
        return Ok(false);
    };
    for e in answer.events() {
        let Some(kv) = e.kv() else { continue };
        match e.event_type() {
            EventType::Put => board.put(keys, kv),
            EventType::Delete => board.delete(keys, kv.key()),
        }
    }
    Ok(true)
}

/// Stores `drill`, started on vantage point `me` (at `now`, on this instance's clock), unless
/// `me` stored a record of its id already, on a new lease of the drill's time left plus
/// [`LEASE_MARGIN`], whole seconds rounded up.
///
/// # Errors
/// etcd did not answer, or refused.
pub async fn store(
    client: &Client,
    keys: &Keys,
    me: &VantageId,
    drill: &Override,
    now: Millis,
) -> Result<(), etcd_client::Error> {
    let left = drill.expires.since(now).saturating_add(LEASE_MARGIN);
    let secs = left.as_secs() + u64::from(left.subsec_nanos() > 0);
    let lease = client
        .lease_client()
        .grant(i64::try_from(secs).unwrap_or(i64::MAX), None)
        .await?
        .id();
    let key = keys.drill(me, &drill.id.0);
    let value = serde_json::to_vec(&Record::Started(drill.clone())).unwrap_or_default();
    let put = PutOptions::new().with_lease(lease);
    let txn = Txn::new()
        .when([Compare::version(key.clone(), CompareOp::Equal, 0)])
        .and_then([TxnOp::put(key, value, Some(put))]);
    let stored = client.kv_client().txn(txn).await?.succeeded();
    if !stored {
        // Stored already (with a lease of its own): this lease is not needed.
        let _ = client.lease_client().revoke(lease).await;
    }
    Ok(())
}

/// How long the drill on `lease` has left, counted now on etcd's clock: the lease's time to
/// live less [`LEASE_MARGIN`] (whole seconds). `None` for a drill without a lease (0).
///
/// # Errors
/// etcd did not answer.
pub async fn remaining(
    client: &Client,
    lease: i64,
) -> Result<Option<Duration>, etcd_client::Error> {
    if lease == 0 {
        return Ok(None);
    }
    let ttl = client.lease_client().time_to_live(lease, None).await?.ttl();
    let ttl = Duration::from_secs(u64::try_from(ttl).unwrap_or(0));
    Ok(Some(ttl.saturating_sub(LEASE_MARGIN)))
}

/// Ends shared drill `drill` as vantage point `me`, in one transaction that holds only while
/// its start is the one read and none of `vantages` recorded an end: deletes the start when
/// `me` started it, else records the end under `me` on the drill's lease. `true` when this
/// call ended it, `false` when another instance got there first.
///
/// # Errors
/// etcd did not answer, or refused.
pub async fn end(
    client: &Client,
    keys: &Keys,
    me: &VantageId,
    drill: &Stored,
    vantages: &[VantageId],
) -> Result<bool, etcd_client::Error> {
    let id = &drill.drill.id.0;
    let start = keys.drill(&drill.owner, id);
    let mut when = vec![Compare::mod_revision(
        start.clone(),
        CompareOp::Equal,
        drill.revision,
    )];
    when.extend(
        vantages
            .iter()
            .filter(|v| **v != drill.owner)
            .map(|v| Compare::version(keys.drill(v, id), CompareOp::Equal, 0)),
    );
    let then = if *me == drill.owner {
        TxnOp::delete(start, None)
    } else {
        let value = serde_json::to_vec(&Record::Ended).unwrap_or_default();
        let options = (drill.lease != 0).then(|| PutOptions::new().with_lease(drill.lease));
        TxnOp::put(keys.drill(me, id), value, options)
    };
    let txn = Txn::new().when(when).and_then([then]);
    client.kv_client().txn(txn).await.map(|r| r.succeeded())
}
