//! Holds already notified before a restart: at start the controller decides afresh, so a
//! service held (e.g. `failback_manual`) when gslb stopped enters the same hold again. Its
//! last audited decision ([`crate::io::audit::Past`]) says whether people were told already.

use std::collections::BTreeMap;

use super::message::is_notified_hold;
use crate::io::audit::AuditEntry;
use gslb_core::engine::Decision;
use gslb_core::model::{ServiceId, Verdict};

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
    /// audit `reason` and `result`), so it is not sent again. The comparison is made once per
    /// service, on its first decision of this run that people are told about (a switch or a
    /// hold that is sent), or that shows a settled state different from the earlier run's (a
    /// decision that is not a hold, with every pool's verdict known). The decisions every start
    /// passes through (`hold_unknown`, `confirm_target`, a `stay` while a pool is still unknown)
    /// leave the comparison for later.
    pub fn repeats(&mut self, d: &Decision) -> bool {
        let told = d.switched() || is_notified_hold(d.rule);
        let settled = !d.rule.is_hold() && d.pools.values().all(|p| p.verdict != Verdict::Unknown);
        if !told && !settled {
            return false;
        }
        let Some(last) = self.last.remove(&d.service) else {
            return false;
        };
        let now = AuditEntry::decision_made(d);
        told && !d.switched() && now.reason == last.reason && now.result == last.result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gslb_core::engine::{PoolVerdict, Rule};
    use gslb_core::model::{Millis, PoolId};

    /// A decision of `api` in `rule`, serving tokyo (healthy), with seoul's verdict `seoul`.
    fn decision(rule: Rule, seoul: Verdict) -> Decision {
        let verdict = |v: Verdict| {
            let mut p = PoolVerdict::unknown(Millis(0));
            p.verdict = v;
            p
        };
        Decision {
            service: "api".into(),
            at: Millis(1_000),
            active: Some(PoolId::from("tokyo")),
            previous: None,
            rule,
            blocked: None,
            drained: Default::default(),
            reasons: Vec::new(),
            pools: [
                (PoolId::from("seoul"), verdict(seoul)),
                (PoolId::from("tokyo"), verdict(Verdict::Healthy)),
            ]
            .into_iter()
            .collect(),
        }
    }

    fn after(last: &Decision) -> Notified {
        let entry = AuditEntry::decision_made(last);
        Notified::new([(last.service.clone(), entry)].into())
    }

    #[test]
    fn the_same_hold_after_the_start_holds_and_stays_is_not_sent_again() {
        let manual = decision(Rule::FailbackManual, Verdict::Healthy);
        let mut n = after(&manual);
        assert!(!n.repeats(&decision(Rule::HoldUnknown, Verdict::Unknown)));
        assert!(
            !n.repeats(&decision(Rule::Stay, Verdict::Unknown)),
            "still settling"
        );
        assert!(n.repeats(&manual), "the same hold");
        assert!(
            !n.repeats(&manual),
            "compared once: a later hold is a new one"
        );
    }

    #[test]
    fn a_settled_different_state_or_another_hold_ends_the_comparison() {
        let manual = decision(Rule::FailbackManual, Verdict::Healthy);
        let mut n = after(&manual);
        assert!(!n.repeats(&decision(Rule::Stay, Verdict::Unhealthy)));
        assert!(
            !n.repeats(&manual),
            "seoul went down and came back: a new hold"
        );
        let mut n = after(&manual);
        assert!(!n.repeats(&decision(Rule::FailStatic, Verdict::Unhealthy)));
        assert!(!n.repeats(&manual));
    }
}
