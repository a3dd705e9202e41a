//! The engine loop's journal: the observation recording (every [`Step`], for `gslb replay`),
//! the audit log (every override change, command and decision) and the drill state file (the
//! active overrides, so they survive a restart). Each part is optional.
//!
//! Recording and audit lines are handed to background writers and never block the loop; the
//! state file is written (atomically, once per step that changes the drills) on tokio's
//! blocking pool, and the loop awaits it before the step takes effect, so an acknowledged
//! drill is on disk and no runtime thread waits on an fsync.

use crate::io::audit::{AuditEntry, AuditLog, CONTROLLER_ACTOR};
use crate::io::jsonl::JsonlWriter;
use crate::io::state_file::StateFile;
use gslb_core::engine::{
    Decision, OverrideChange, OverrideError, OverrideId, OverrideRequest, Overrides, Reply, Step,
};
use gslb_core::model::{Millis, ServiceId};

/// Where the engine loop writes what it did. `Journal::default()` writes nothing.
#[derive(Debug, Default)]
pub struct Journal {
    recording: Option<JsonlWriter>,
    audit: Option<AuditLog>,
    state: Option<StateFile>,
    /// In a cluster: drill expiries are audited by the instance that removes the shared drill
    /// ([`crate::daemon::shared_drills`]), not by every instance's journal.
    expiries_elsewhere: bool,
}

impl Journal {
    /// A journal writing to the given parts.
    pub fn new(
        recording: Option<JsonlWriter>,
        audit: Option<AuditLog>,
        state: Option<StateFile>,
    ) -> Self {
        Self {
            recording,
            audit,
            state,
            expiries_elsewhere: false,
        }
    }

    /// The same journal, leaving the audit of drill expiries to the shared drills of a
    /// cluster, so a drill expires once in the cluster's audit logs, not once per instance.
    #[must_use]
    pub fn expiries_audited_elsewhere(mut self) -> Self {
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

    /// Writes `all` to the state file (atomically, on tokio's blocking pool:
    /// [`StateFile::save_async`]); a no-op without one.
    ///
    /// # Errors
    /// The file could not be written (also logged).
    pub async fn save(&self, all: &Overrides) -> Result<(), String> {
        if let Some(state) = &self.state {
            let active: Vec<_> = all.all().cloned().collect();
            if let Err(e) = state.save_async(active).await {
                tracing::error!(error = %e, "cannot save the drill state file");
                return Err(e.to_string());
            }
        }
        Ok(())
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
