//! Drills shared by every instance of a cluster (`[cluster]`), through etcd
//! ([`crate::io::coordination::drills`]): a drill started on any instance (admin API) is
//! stored in etcd and loaded into every instance's engine, so every drill list shows it and
//! every engine decides with it; one ended on any instance ends everywhere; one that expires
//! is audited once in the cluster: by the instance whose delete of its key succeeds (each
//! engine expires it at the same moment: an instance loading a drill from etcd counts its time
//! left from the key's lease, not from its own wall clock; the local journal does not audit
//! expiries in a cluster, see [`Journal::expiries_audited_elsewhere`](crate::io::journal::Journal)).
//!
//! Must not: decide anything about a drill; the engine does.

use std::sync::Arc;
use std::time::Duration;

use gslb_core::engine::{Input, Override, OverrideChange};
use gslb_core::event::Event;
use tokio::sync::{broadcast, oneshot};

use super::cluster::Cluster;
use super::inbox::{Message, MessageSender};
use crate::io::audit::{AuditEntry, AuditLog};
use crate::io::clock::Clock;
use crate::io::coordination::drills::{self, Change, Stored};

/// A drill deleted elsewhere whose expiry is this close is left to the local engine to expire
/// (clock skew between instances), rather than ended.
const EXPIRY_SLACK: Duration = Duration::from_secs(5);

/// Keeps the drills shared, forever (see the module docs): mirrors etcd's drills into the
/// engine behind `commands`, and this engine's drill changes (from `events`) into etcd,
/// recording a drill's expiry in `audit` when this instance removed it.
pub async fn keep_drills(
    cluster: Arc<Cluster>,
    commands: MessageSender,
    mut events: broadcast::Receiver<Event>,
    audit: Option<AuditLog>,
    clock: Clock,
) {
    let (client, keys) = (&cluster.clients.kv, &cluster.clients.keys);
    let retry = cluster.timing.lease_ttl / 4;
    loop {
        let watched = async {
            let (stored, revision) = drills::list(client, keys).await?;
            mirror(&commands, client, stored, &clock).await;
            drills::watch(&cluster.clients.untimed, keys, revision).await
        };
        let mut stream = match watched.await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the shared drills yet; retrying");
                tokio::time::sleep(retry).await;
                continue;
            }
        };
        loop {
            tokio::select! {
                next = drills::next(&mut stream, keys) => match next {
                    Ok(Some(changes)) => apply(&commands, client, changes, &clock).await,
                    Ok(None) | Err(_) => break,
                },
                event = events.recv() => match event {
                    Ok(Event::Override(change)) => {
                        publish(&cluster, &change, audit.as_ref(), &clock).await;
                    }
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return,
                },
            }
        }
        tokio::time::sleep(retry).await;
    }
}

/// This engine's drill change into etcd: a started drill is stored, an ended one removed, an
/// expired one removed and, when this instance removed it, audited.
async fn publish(
    cluster: &Cluster,
    change: &OverrideChange,
    audit: Option<&AuditLog>,
    clock: &Clock,
) {
    let (client, keys) = (&cluster.clients.kv, &cluster.clients.keys);
    let done = match change {
        OverrideChange::Added(o) => drills::store(client, keys, o, clock.now())
            .await
            .map(|()| false),
        OverrideChange::Ended { ended, .. } => drills::remove(client, keys, &ended.id).await,
        OverrideChange::Expired(o) => {
            let removed = drills::remove(client, keys, &o.id).await;
            if let (Ok(true), Some(a)) = (&removed, audit) {
                a.record(&AuditEntry::drill_expired(clock.now(), o));
            }
            removed
        }
        _ => Ok(false),
    };
    if let Err(e) = done {
        tracing::warn!(error = %e, "cannot share a drill change through etcd");
    }
}

/// Loads `stored` drills the engine does not have yet (and that have not expired), each
/// ending when its lease says ([`drills::remaining`], counted on this instance's clock from
/// now), or at its `expires` when etcd cannot tell.
async fn mirror(
    commands: &MessageSender,
    client: &etcd_client::Client,
    stored: Vec<Stored>,
    clock: &Clock,
) {
    let local = local(commands).await;
    let mut missing: Vec<Override> = Vec::new();
    for Stored { mut drill, lease } in stored {
        if local.iter().any(|l| l.id == drill.id) {
            continue;
        }
        if let Ok(Some(left)) = drills::remaining(client, lease).await {
            drill.expires = clock.now().plus(left);
        }
        if drill.expires > clock.now() {
            missing.push(drill);
        }
    }
    if !missing.is_empty() {
        let _ = commands
            .send(Input::LoadOverrides { overrides: missing }.into())
            .await;
    }
}

/// Applies watched changes: stored drills are mirrored; a drill deleted elsewhere that this
/// engine still has, and that is not about to expire here too, is ended.
async fn apply(
    commands: &MessageSender,
    client: &etcd_client::Client,
    changes: Vec<Change>,
    clock: &Clock,
) {
    let mut stored = Vec::new();
    for change in changes {
        match change {
            Change::Stored(o) => stored.push(o),
            Change::Deleted(id) => {
                let now = clock.now();
                let ends = local(commands)
                    .await
                    .into_iter()
                    .any(|o| o.id == id && o.expires > now.plus(EXPIRY_SLACK));
                if ends {
                    let end = Input::EndOverride {
                        id,
                        actor: "cluster".into(),
                        reason: "ended on another instance".into(),
                    };
                    let _ = commands.send(end.into()).await;
                }
            }
        }
    }
    mirror(commands, client, stored, clock).await;
}

/// The engine's active drills (empty when the engine loop has stopped).
async fn local(commands: &MessageSender) -> Vec<Override> {
    let (tx, rx) = oneshot::channel();
    if commands.send(Message::ListOverrides(tx)).await.is_err() {
        return Vec::new();
    }
    rx.await.unwrap_or_default()
}
