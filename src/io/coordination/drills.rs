//! Drills shared through etcd (`<prefix>/drills/<id>`, JSON of the [`Override`]), each on an
//! etcd lease of its own that lasts [`LEASE_MARGIN`] longer than the drill: a drill outlives
//! the instance that started it, until it ends or expires. Every instance mirrors them into
//! its engine, with the time left counted from the lease ([`remaining`]), so the drill ends at
//! the same moment on every instance whatever their wall clocks say; the one whose delete of
//! an expired drill succeeds records the expiry, so a drill expires once in the cluster, not
//! once per instance.
//!
//! Must not: decide anything about a drill (the engine does) or hold it anywhere else.

use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, EventType, GetOptions, PutOptions, Txn, TxnOp, WatchOptions,
    WatchStream,
};
use gslb_core::engine::{Override, OverrideId};
use gslb_core::model::Millis;

use super::keys::Keys;

/// How much longer a drill's etcd lease lasts than the drill: 60 s. The instances end the
/// drill when its time is up (and delete its key); the lease removes only a drill that no
/// instance was up to end.
pub const LEASE_MARGIN: Duration = Duration::from_secs(60);

/// A drill as stored in etcd, and the lease its key is on (0: none, a drill stored by an
/// earlier gslb, whose `expires` stands).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// The drill.
    pub drill: Override,
    /// Its key's lease id.
    pub lease: i64,
}

/// What the drills' watch reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A drill was stored (started on some instance).
    Stored(Stored),
    /// A drill's key was deleted (ended or expired on some instance).
    Deleted(OverrideId),
}

/// Every stored drill, and the revision to watch from.
///
/// # Errors
/// etcd did not answer. A value that is not an [`Override`] is skipped with a warning.
pub async fn list(client: &Client, keys: &Keys) -> Result<(Vec<Stored>, i64), etcd_client::Error> {
    let got = client
        .kv_client()
        .get(keys.drills(), Some(GetOptions::new().with_prefix()))
        .await?;
    let revision = got.header().map_or(0, |h| h.revision());
    let drills = got.kvs().iter().filter_map(stored).collect();
    Ok((drills, revision))
}

/// Watches the drills from `revision` (exclusive).
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

/// The changes in one watch answer; `None` when the stream ended.
///
/// # Errors
/// The stream failed (the caller lists again and re-watches).
pub async fn next(
    stream: &mut WatchStream,
    keys: &Keys,
) -> Result<Option<Vec<Change>>, etcd_client::Error> {
    let Some(answer) = stream.message().await? else {
        return Ok(None);
    };
    let prefix = keys.drills();
    let changes = answer
        .events()
        .iter()
        .filter_map(|e| {
            let kv = e.kv()?;
            match e.event_type() {
                EventType::Put => stored(kv).map(Change::Stored),
                EventType::Delete => {
                    let key = std::str::from_utf8(kv.key()).ok()?;
                    let id = key.strip_prefix(&prefix)?;
                    Some(Change::Deleted(OverrideId(id.to_owned())))
                }
            }
        })
        .collect();
    Ok(Some(changes))
}

/// Stores `drill` (at `now`, on this instance's clock) unless a drill with its id is stored
/// already, on a new lease of the drill's time left plus [`LEASE_MARGIN`], whole seconds
/// rounded up.
///
/// # Errors
/// etcd did not answer.
pub async fn store(
    client: &Client,
    keys: &Keys,
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
    let key = keys.drill(&drill.id.0);
    let value = serde_json::to_vec(drill).unwrap_or_default();
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

/// Deletes drill `id`; `true` when this call deleted it (it was still stored), `false` when
/// it was gone already (another instance got there first).
///
/// # Errors
/// etcd did not answer.
pub async fn remove(
    client: &Client,
    keys: &Keys,
    id: &OverrideId,
) -> Result<bool, etcd_client::Error> {
    let key = keys.drill(&id.0);
    let txn = Txn::new()
        .when([Compare::version(key.clone(), CompareOp::Greater, 0)])
        .and_then([TxnOp::delete(key, None)]);
    client.kv_client().txn(txn).await.map(|r| r.succeeded())
}

/// The drill in `kv`, with its lease.
fn stored(kv: &etcd_client::KeyValue) -> Option<Stored> {
    Some(Stored {
        drill: parse(kv.value())?,
        lease: kv.lease(),
    })
}

fn parse(value: &[u8]) -> Option<Override> {
    serde_json::from_slice(value)
        .inspect_err(|e| tracing::warn!(error = %e, "ignoring an unreadable shared drill"))
        .ok()
}
