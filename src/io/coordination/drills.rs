//! Drills shared through etcd (`<prefix>/drills/<id>`, JSON of the [`Override`], no lease:
//! a drill outlives the instance that started it, until it ends or expires). Every instance
//! mirrors them into its engine; the one whose delete of an expired drill succeeds records
//! the expiry, so a drill expires once in the cluster, not once per instance.
//!
//! Must not: decide anything about a drill (the engine does) or hold it anywhere else.

use etcd_client::{
    Client, Compare, CompareOp, EventType, GetOptions, Txn, TxnOp, WatchOptions, WatchStream,
};
use gslb_core::engine::{Override, OverrideId};

use super::keys::Keys;

/// What the drills' watch reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A drill was stored (started on some instance).
    Stored(Override),
    /// A drill's key was deleted (ended or expired on some instance).
    Deleted(OverrideId),
}

/// Every stored drill, and the revision to watch from.
///
/// # Errors
/// etcd did not answer. A value that is not an [`Override`] is skipped with a warning.
pub async fn list(
    client: &Client,
    keys: &Keys,
) -> Result<(Vec<Override>, i64), etcd_client::Error> {
    let got = client
        .kv_client()
        .get(keys.drills(), Some(GetOptions::new().with_prefix()))
        .await?;
    let revision = got.header().map_or(0, |h| h.revision());
    let drills = got
        .kvs()
        .iter()
        .filter_map(|kv| parse(kv.value()))
        .collect();
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
                EventType::Put => parse(kv.value()).map(Change::Stored),
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

/// Stores `drill` unless a drill with its id is stored already.
///
/// # Errors
/// etcd did not answer.
pub async fn store(
    client: &Client,
    keys: &Keys,
    drill: &Override,
) -> Result<(), etcd_client::Error> {
    let key = keys.drill(&drill.id.0);
    let value = serde_json::to_vec(drill).unwrap_or_default();
    let txn = Txn::new()
        .when([Compare::version(key.clone(), CompareOp::Equal, 0)])
        .and_then([TxnOp::put(key, value, None)]);
    client.kv_client().txn(txn).await.map(|_| ())
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

fn parse(value: &[u8]) -> Option<Override> {
    serde_json::from_slice(value)
        .inspect_err(|e| tracing::warn!(error = %e, "ignoring an unreadable shared drill"))
        .ok()
}
