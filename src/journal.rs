//! The engine loop's journal: the observation recording (every [`Step`], for replay), the
//! audit log (every override and every decision) and the drill state file (active overrides,
//! so they survive a restart). Each part is optional; none of them may block the loop.

use crate::engine::{
    Decision, OverrideChange, OverrideError, OverrideRequest, Overrides, Reply, Step,
};
use crate::model::{Millis, ServiceId};

/// Where the engine loop writes what it did. `Journal::default()` writes nothing.
#[derive(Debug, Default)]
pub struct Journal {}

impl Journal {
    /// Records one step.
    pub fn record(&mut self, _step: &Step) {}

    /// Audits a re-arm.
    pub fn rearmed(
        &mut self,
        _at: Millis,
        _service: Option<&ServiceId>,
        _actor: &str,
        _reason: &str,
        _reply: Option<&Reply>,
    ) {
    }

    /// Audits override changes and saves the active set.
    pub fn overrides(&mut self, _at: Millis, _changes: &[OverrideChange], _all: &Overrides) {}

    /// Audits a refused override request.
    pub fn refused(&mut self, _at: Millis, _req: &OverrideRequest, _e: &OverrideError) {}

    /// Audits a changed decision.
    pub fn decision(&mut self, _d: &Decision) {}
}
