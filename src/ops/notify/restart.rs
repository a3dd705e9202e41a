//! Holds already notified before a restart: at start the controller decides afresh, so a
//! service held (e.g. `failback_manual`) when gslb stopped enters the same hold again. Its
//! last audited decision ([`crate::io::audit::Past`]) says whether people were told already.

use std::collections::BTreeMap;

use super::message::is_notified_hold;
use crate::io::audit::AuditEntry;
use gslb_core::engine::Decision;
use gslb_core::model::ServiceId;

/// Each service's last decision of the earlier run, until its first notified decision of this
/// run. Cheap to clone (one per sink).
#[derive(Debug, Clone, Default)]
pub struct Notified {
    last: BTreeMap<ServiceId, AuditEntry>,
}

impl Notified {
    /// From each service's last audited decision ([`crate::io::audit::Past::decisions`]).
    pub fn new(last: BTreeMap<ServiceId, AuditEntry>) -> Self {
        Self { last }
    }

    /// Whether `d` repeats the hold the earlier run ended in (same rule, same pools: the same
    /// audit `reason` and `result`), so it is not sent again. Only the first decision of a
    /// service people are told about (or that ends a hold) is compared; the routine holds every
    /// start passes through (`hold_unknown`, `confirm_target`, ...) are not, and leave the
    /// comparison for later.
    pub fn repeats(&mut self, d: &Decision) -> bool {
        if d.rule.is_hold() && !is_notified_hold(d.rule) {
            return false;
        }
        let Some(last) = self.last.remove(&d.service) else {
            return false;
        };
        let now = AuditEntry::decision_made(d);
        !d.switched() && now.reason == last.reason && now.result == last.result
    }
}
