//! Drills shared by every instance of a cluster (`[cluster]`), through etcd
//! ([`crate::io::coordination::drills`]), the cluster's one drill store: a drill started on any
//! instance (admin API) is stored in etcd and loaded into every instance's engine, so every
//! drill list shows it and every engine decides with it; one ended on any instance ends
//! everywhere; one that expires is audited once in the cluster: by the instance whose delete of
//! its key succeeds (each engine expires it at the same moment: an instance loading a drill
//! from etcd counts its time left from the key's lease, not from its own wall clock; the local
//! journal does not audit expiries in a cluster, see
//! [`Journal::expiries_audited_elsewhere`](crate::io::journal::Journal)).
//!
//! Level-based, like the reconciler: every pass compares the engine's drills with etcd's (kept
//! by a watch) and with what this instance saw of each before ([`Known`]), and acts on the
//! difference ([`plan`]). Watch answers, the engine's drill changes
//! ([`Outputs::drills`](super::outputs::Outputs::drills)) and a timer only wake it, so nothing
//! is lost to a missed wake-up. A drill this instance had that etcd no longer shares was ended
//! elsewhere: it is ended here. In a cluster the engine starts with no drill (the state file is
//! not read: etcd is the only drill store), so a drill ended while this instance was down does
//! not come back.
//!
//! Must not: decide anything about a drill; the engine does.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use gslb_core::engine::{Input, Override, OverrideId};
use gslb_core::model::Millis;
use tokio::sync::oneshot;

use super::cluster::Cluster;
use super::inbox::{Message, MessageSender};
use crate::io::audit::{AuditEntry, AuditLog};
use crate::io::clock::Clock;
use crate::io::coordination::drills::{self, Stored};

/// A drill deleted elsewhere whose expiry is this close is left to the local engine to expire
/// (the instances' ends differ by up to a second), rather than ended.
const EXPIRY_SLACK: Duration = Duration::from_secs(5);

/// What this instance saw of each drill id: in its engine (with the end it had there) and in
/// etcd.
#[derive(Debug, Default)]
pub struct Known {
    local: BTreeMap<OverrideId, Millis>,
    shared: BTreeSet<OverrideId>,
}

/// What one pass does.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Actions {
    /// Drills in etcd the engine never had: load them.
    pub load: Vec<Stored>,
    /// Drills the engine has that etcd had and no longer has (ended elsewhere): end them.
    pub end: Vec<OverrideId>,
    /// Drills the engine has that etcd never had (started here): store them.
    pub store: Vec<Override>,
    /// Drills etcd has that the engine had and no longer has (ended or expired here): end
    /// them in etcd. Each with the end it had in this engine.
    pub remove: Vec<Stored>,
}

/// The pass for etcd's drills `shared` and the engine's `local` at `now`, updating `known` as
/// if every action succeeds (see [`Known`]). A local drill etcd never had is one started here
/// (the engine starts with none: etcd is the only drill store), also one whose store is still
/// in flight when `shared` was read: storing it again changes nothing. A drill about to
/// expire is left to expire.
pub fn plan(
    shared: &BTreeMap<OverrideId, Stored>,
    local: &[Override],
    known: &mut Known,
    now: Millis,
) -> Actions {
    let mut actions = Actions::default();
    // Ended elsewhere but about to expire here: left to expire, still known as shared.
    let mut expiring = Vec::new();
    for o in local.iter().filter(|o| !shared.contains_key(&o.id)) {
        if !known.shared.contains(&o.id) {
            actions.store.push(o.clone());
        } else if o.expires > now.plus(EXPIRY_SLACK) {
            actions.end.push(o.id.clone());
        } else {
            expiring.push(o.id.clone());
        }
    }
    for (id, s) in shared {
        if local.iter().any(|o| &o.id == id) {
            continue;
        }
        match known.local.get(id) {
            Some(end) => {
                let mut ended = s.clone();
                ended.drill.expires = *end;
                actions.remove.push(ended);
            }
            None => actions.load.push(s.clone()),
        }
    }
    known.local = local
        .iter()
        .chain(actions.load.iter().map(|s| &s.drill))
        .chain(actions.remove.iter().map(|s| &s.drill))
        .map(|o| (o.id.clone(), o.expires))
        .collect();
    known.shared = shared
        .keys()
        .cloned()
        .chain(actions.store.iter().map(|o| o.id.clone()))
        .chain(actions.end.iter().cloned())
        .chain(expiring)
        .collect();
    actions
}

/// Keeps the drills shared, forever (see the module docs): watches etcd's drills, and on each
/// watch answer, drill change of the engine behind `commands`
/// ([`Outputs::drills`](super::outputs::Outputs::drills)) or `lease_ttl / 4`, reconciles the
/// two, recording in `audit` a drill's expiry when this instance's end of it succeeded.
pub async fn keep_drills(
    cluster: Arc<Cluster>,
    commands: MessageSender,
    audit: Option<AuditLog>,
    clock: Clock,
) {
    let (client, keys) = (&cluster.clients.kv, &cluster.clients.keys);
    let period = cluster.timing.lease_ttl / 4;
    let mut changes = cluster.outputs.drills();
    let mut known = Known::default();
    loop {
        let watched = async {
            let (board, revision) = drills::list(client, keys).await?;
            let stream = drills::watch(&cluster.clients.untimed, keys, revision).await?;
            Ok::<_, etcd_client::Error>((board, stream))
        };
        let (mut board, mut stream) = match watched.await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the shared drills yet; retrying");
                tokio::time::sleep(period).await;
                continue;
            }
        };
        let mut due = true;
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if due {
                let pass = Pass {
                    cluster: &cluster,
                    commands: &commands,
                    audit: audit.as_ref(),
                    clock: &clock,
                };
                if !pass.run(&board.shared(&cluster.vantages), &mut known).await {
                    return;
                }
            }
            due = tokio::select! {
                next = drills::next(&mut stream, keys, &mut board) => match next {
                    Ok(true) => true,
                    Ok(false) | Err(_) => break,
                },
                changed = changes.changed() => if changed.is_err() { return } else { true },
                _ = tick.tick() => true,
            };
        }
        tokio::time::sleep(period).await;
    }
}

/// What one pass needs.
struct Pass<'a> {
    cluster: &'a Cluster,
    commands: &'a MessageSender,
    audit: Option<&'a AuditLog>,
    clock: &'a Clock,
}

impl Pass<'_> {
    /// Plans and acts; an action that fails is planned again by a later pass. `false` once
    /// the engine is gone.
    async fn run(&self, shared: &BTreeMap<OverrideId, Stored>, known: &mut Known) -> bool {
        let Some(local) = local(self.commands).await else {
            return false;
        };
        let actions = plan(shared, &local, known, self.clock.now());
        let (client, keys) = (&self.cluster.clients.kv, &self.cluster.clients.keys);
        let me = &self.cluster.vantage;
        for o in &actions.store {
            if let Err(e) = drills::store(client, keys, me, o, self.clock.now()).await {
                tracing::warn!(error = %e, drill = %o.id, "cannot share a drill through etcd; retrying");
                known.shared.remove(&o.id);
            }
        }
        for s in &actions.remove {
            let o = &s.drill;
            match drills::end(client, keys, me, s, &self.cluster.vantages).await {
                Ok(true) if o.expires <= self.clock.now() => {
                    if let Some(a) = self.audit {
                        a.record(&AuditEntry::drill_expired(self.clock.now(), o));
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, drill = %o.id, "cannot remove a shared drill from etcd; retrying");
                }
            }
        }
        for id in actions.end {
            let end = Input::EndOverride {
                id,
                actor: "cluster".into(),
                reason: "ended on another instance".into(),
            };
            if self.commands.send(end.into()).await.is_err() {
                return false;
            }
        }
        self.load(actions.load).await
    }

    /// Loads `stored` drills into the engine, each ending when its lease says
    /// ([`drills::remaining`], counted on this instance's clock from now), or at its
    /// `expires` when etcd cannot tell; one already over is skipped. Each loaded drill is
    /// audited here (`drill.load`, with its actor): a drill that reached etcd without passing
    /// through an instance's API leaves a record on every instance.
    async fn load(&self, stored: Vec<Stored>) -> bool {
        let client = &self.cluster.clients.kv;
        let mut overrides = Vec::new();
        for Stored {
            mut drill,
            lease,
            owner,
            ..
        } in stored
        {
            if let Ok(Some(left)) = drills::remaining(client, lease).await {
                drill.expires = self.clock.now().plus(left);
            }
            if drill.expires > self.clock.now() {
                if let Some(a) = self.audit {
                    a.record(&AuditEntry::drill_loaded(self.clock.now(), &drill, &owner));
                }
                overrides.push(drill);
            }
        }
        overrides.is_empty()
            || self
                .commands
                .send(Input::LoadOverrides { overrides }.into())
                .await
                .is_ok()
    }
}

/// The engine's active drills; `None` when the engine loop has stopped.
async fn local(commands: &MessageSender) -> Option<Vec<Override>> {
    let (tx, rx) = oneshot::channel();
    commands.send(Message::ListOverrides(tx)).await.ok()?;
    rx.await.ok()
}

#[cfg(test)]
mod tests {
    use gslb_core::engine::OverrideAction;
    use gslb_core::model::{PoolId, ServiceId};

    use super::*;

    fn drill(id: &str, expires: u64) -> Override {
        Override {
            id: OverrideId(id.into()),
            service: ServiceId("web".into()),
            action: OverrideAction::Drain,
            pool: PoolId("ncp".into()),
            reason: "test".into(),
            actor: "alice".into(),
            created: Millis(0),
            expires: Millis(expires),
        }
    }

    fn shared(drills: &[&Override]) -> BTreeMap<OverrideId, Stored> {
        drills
            .iter()
            .map(|o| {
                let s = Stored {
                    drill: (*o).clone(),
                    lease: 7,
                    owner: gslb_core::model::VantageId("b".into()),
                    revision: 9,
                };
                (o.id.clone(), s)
            })
            .collect()
    }

    const NOW: Millis = Millis(1_000);

    #[test]
    fn a_drill_started_here_is_stored_and_one_from_etcd_loaded() {
        let (mine, theirs) = (drill("mine", 600_000), drill("theirs", 600_000));
        let mut known = Known::default();
        plan(&shared(&[]), &[], &mut known, NOW);
        let a = plan(
            &shared(&[&theirs]),
            std::slice::from_ref(&mine),
            &mut known,
            NOW,
        );
        assert_eq!(a.store, vec![mine.clone()]);
        assert_eq!(
            a.load.iter().map(|s| &s.drill).collect::<Vec<_>>(),
            [&theirs]
        );
        assert!(a.end.is_empty() && a.remove.is_empty());
        // Both done: nothing more to do.
        let a = plan(&shared(&[&theirs, &mine]), &[mine, theirs], &mut known, NOW);
        assert_eq!(a, Actions::default());
    }

    #[test]
    fn a_drill_ended_elsewhere_is_ended_here_and_one_ended_here_is_removed() {
        let (a1, b1) = (drill("a1", 600_000), drill("b1", 600_000));
        let mut known = Known::default();
        plan(
            &shared(&[&a1, &b1]),
            &[a1.clone(), b1.clone()],
            &mut known,
            NOW,
        );
        // a1 left etcd (ended on another instance); b1 left this engine (ended here).
        let a = plan(&shared(&[&b1]), std::slice::from_ref(&a1), &mut known, NOW);
        assert_eq!(a.end, vec![a1.id.clone()]);
        assert_eq!(a.remove.iter().map(|s| &s.drill).collect::<Vec<_>>(), [&b1]);
        assert!(a.load.is_empty() && a.store.is_empty(), "{a:?}");
        // A failed remove is planned again, never loaded back.
        let a = plan(&shared(&[&b1]), &[], &mut known, NOW);
        assert_eq!(a.remove.iter().map(|s| &s.drill).collect::<Vec<_>>(), [&b1]);
        assert!(a.load.is_empty());
    }

    #[test]
    fn a_drill_in_the_engine_that_etcd_does_not_have_yet_is_stored_never_ended() {
        // The engine stepped a new drill after etcd's drills were read: its store was in
        // flight. Also on the first pass since the start.
        let new = drill("new", 600_000);
        let mut known = Known::default();
        let a = plan(&shared(&[]), std::slice::from_ref(&new), &mut known, NOW);
        assert_eq!((a.store, a.end), (vec![new.clone()], vec![]));
        let a = plan(
            &shared(&[&new]),
            std::slice::from_ref(&new),
            &mut known,
            NOW,
        );
        assert_eq!(a, Actions::default());
    }

    #[test]
    fn a_drill_about_to_expire_is_left_to_expire() {
        let ending = drill("ending", NOW.0 + 2_000);
        let mut known = Known::default();
        plan(
            &shared(&[&ending]),
            std::slice::from_ref(&ending),
            &mut known,
            NOW,
        );
        let a = plan(&shared(&[]), std::slice::from_ref(&ending), &mut known, NOW);
        assert_eq!(a, Actions::default());
        let a = plan(&shared(&[]), &[ending], &mut known, NOW);
        assert_eq!(a, Actions::default(), "nor shared again by the next pass");
    }
}
