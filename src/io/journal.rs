//! The engine loop's journal: the observation recording (every [`Step`], for `gslb replay`),
//! the audit log (every override change, command and decision) and the drill store (the state
//! file, or etcd in a cluster: [`DrillStore`], so drills survive a restart). Each part is
//! optional.
//!
//! Recording and audit lines are handed to background writers and never block the loop; the
//! drill store is written before a new drill takes effect, and the loop awaits it, so an
//! acknowledged drill is stored and no runtime thread waits on an fsync.

use crate::io::audit::{AuditEntry, AuditLog, CONTROLLER_ACTOR};
use crate::io::drill_store::DrillStore;
use crate::io::jsonl::JsonlWriter;
use gslb_core::engine::{
    Decision, Override, OverrideChange, OverrideError, OverrideId, OverrideRequest, Overrides,
    Reply, Step,
};
use gslb_core::model::{Millis, ServiceId};

/// Where the engine loop writes what it did. `Journal::default()` writes nothing.
#[derive(Debug, Default)]
pub struct Journal {
    recording: Option<JsonlWriter>,
    audit: Option<AuditLog>,
    store: DrillStore,
    /// In a cluster: drill expiries are audited by the instance that removes the shared drill
    /// ([`crate::daemon::shared_drills`]), not by every instance's journal.
    expiries_elsewhere: bool,
}

impl Journal {
    /// A journal writing to the given parts.
    pub fn new(recording: Option<JsonlWriter>, audit: Option<AuditLog>, store: DrillStore) -> Self {
        Self {
            recording,
            audit,
            store,
            expiries_elsewhere: false,
        }
    }

    /// The same journal in a cluster: drills kept in etcd (`store`, [`DrillStore::Etcd`]) and
    /// the audit of their expiries left to the shared drills, so a drill expires once in the
    /// cluster's audit logs, not once per instance.
    #[must_use]
    pub fn in_cluster(mut self, store: DrillStore) -> Self {
        self.store = store;
        self.expiries_elsewhere = true;
        self
    }

    /// Records one step (when recording).
    pub fn record(&mut self, step: &Step) {
        if let Some(r) = &self.recording {
            r.append(step);
        }
    }

    fn audit(&self, entry: AuditEntry) {
        if let Some(a) = &self.audit {
            a.record(&entry);
        }
    }

    /// Audits a re-arm and its answer.
    pub fn rearmed(
        &mut self,
        at: Millis,
        service: Option<&ServiceId>,
        actor: &str,
        reason: &str,
        reply: Option<&Reply>,
    ) {
        if let Some(Reply::Rearmed(result)) = reply {
            self.audit(AuditEntry::rearm(at, actor, service, reason, result));
        }
    }

    /// Audits override changes (the state file is saved apart: [`Journal::save`]).
    pub fn overrides(&mut self, at: Millis, changes: &[OverrideChange]) {
        for c in changes {
            let entry = match c {
                OverrideChange::Added(o) => AuditEntry::drill_started(o),
                OverrideChange::Ended {
                    ended,
                    actor,
                    reason,
                } => AuditEntry::drill_ended(at, ended, actor, reason),
                OverrideChange::Expired(_) if self.expiries_elsewhere => continue,
                OverrideChange::Expired(o) => AuditEntry::drill_expired(at, o),
                OverrideChange::Completed(o) => AuditEntry::new(
                    at,
                    CONTROLLER_ACTOR,
                    "drill.complete",
                    format!("{} serves again", o.pool),
                    "ok",
                )
                .with_service(o.service.clone())
                .with_detail(serde_json::json!({ "id": o.id, "pool": o.pool })),
                OverrideChange::Skipped(o) => AuditEntry::new(
                    at,
                    CONTROLLER_ACTOR,
                    "drill.skip",
                    gslb_core::engine::Overrides::skip_reason(o),
                    "skipped",
                )
                .with_service(o.service.clone())
                .with_detail(serde_json::json!({ "id": o.id, "pool": o.pool })),
            };
            self.audit(entry);
        }
    }

    /// Stores new drill `added` before it takes effect ([`DrillStore::add`]).
    ///
    /// # Errors
    /// Why it is not stored.
    pub async fn store(
        &self,
        added: &Override,
        all: &Overrides,
        now: Millis,
    ) -> Result<(), String> {
        self.store.add(added, all, now).await
    }

    /// Keeps the active drills `all` after a step changed them otherwise
    /// ([`DrillStore::changed`]).
    ///
    /// # Errors
    /// The state file cannot be written.
    pub async fn save(&self, all: &Overrides) -> Result<(), String> {
        self.store.changed(all).await
    }

    /// Audits a refused override request.
    pub fn refused(&mut self, at: Millis, req: &OverrideRequest, e: &OverrideError) {
        self.audit(AuditEntry::drill_refused(at, req, e));
    }

    /// Audits a refused end request.
    pub fn end_refused(
        &mut self,
        at: Millis,
        id: &OverrideId,
        actor: &str,
        reason: &str,
        e: &OverrideError,
    ) {
        self.audit(
            AuditEntry::end_refused(at, actor, reason, e)
                .with_detail(serde_json::json!({ "id": id })),
        );
    }

    /// Audits a changed decision ([`AuditEntry::decision_made`]).
    pub fn decision(&mut self, d: &Decision) {
        self.audit(AuditEntry::decision_made(d));
    }

    /// Flushes the recording and the audit log (at shutdown, and in tests).
    pub async fn flush(&self) {
        if let Some(r) = &self.recording {
            let _ = r.flush().await;
        }
        if let Some(a) = &self.audit {
            let _ = a.flush().await;
        }
    }
}
