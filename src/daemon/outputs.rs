//! What the engine loop hands a cluster member's tasks, on typed channels (only with
//! `[cluster]`): this instance's rise/fall verdicts (the vote publisher puts them in etcd; the
//! data-plane view follows them while coordination is lost), each service's safety state (shared
//! through etcd, [`super::cluster::keep_safety`]) and the active drills (a change wakes the
//! drills' sharing, [`super::shared_drills`]). Each is a `watch`: a reader always sees the latest
//! value and nothing queues, so no reader can fall behind and miss a change.
//!
//! Must not: be read for reporting. [`Telemetry`](crate::ops::telemetry::Telemetry) reports;
//! these feed the other instances' decisions.

use std::collections::BTreeMap;
use std::sync::Arc;

use gslb_core::engine::{Engine, Input, Output, SafetyState, Step};
use gslb_core::model::ServiceId;
use tokio::sync::watch;

use crate::io::coordination::LocalVerdicts;

/// The senders; cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct Outputs {
    verdicts: Arc<watch::Sender<LocalVerdicts>>,
    safety: Arc<watch::Sender<BTreeMap<ServiceId, SafetyState>>>,
    drills: Arc<watch::Sender<u64>>,
}

impl Default for Outputs {
    fn default() -> Self {
        Self {
            verdicts: Arc::new(watch::Sender::new(LocalVerdicts::new())),
            safety: Arc::new(watch::Sender::new(BTreeMap::new())),
            drills: Arc::new(watch::Sender::new(0)),
        }
    }
}

impl Outputs {
    /// This instance's current rise/fall verdicts, by service and endpoint.
    pub fn verdicts(&self) -> watch::Receiver<LocalVerdicts> {
        self.verdicts.subscribe()
    }

    /// Each service's safety state, at most one tick behind the engine.
    pub fn safety(&self) -> watch::Receiver<BTreeMap<ServiceId, SafetyState>> {
        self.safety.subscribe()
    }

    /// Changes each time a step changed the active drills (a counter: the drills themselves
    /// are asked of the engine loop, which answers after any step in progress).
    pub fn drills(&self) -> watch::Receiver<u64> {
        self.drills.subscribe()
    }

    /// Hands over what `step` changed: its verdict transitions and whether it changed the
    /// drills.
    pub(super) fn stepped(&self, step: &Step, out: &Output) {
        if let Input::Observe { service, .. } = &step.input
            && !out.transitions.is_empty()
        {
            self.verdicts.send_modify(|m| {
                for t in &out.transitions {
                    m.insert((service.clone(), t.endpoint.clone()), t.verdict);
                }
            });
        }
        if !out.overrides.is_empty() {
            self.drills.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Hands over every service's safety state, notifying readers only when one changed (at
    /// each tick, at start and after a reload).
    pub(super) fn safety_of(&self, engine: &Engine) {
        self.safety.send_if_modified(|saved| {
            let before = saved.len();
            saved.retain(|id, _| engine.service(id).is_some());
            let mut changed = saved.len() != before;
            for s in engine.services() {
                let state = s.safety();
                let id = &s.policy().service;
                if saved.get(id) != Some(&state) {
                    saved.insert(id.clone(), state);
                    changed = true;
                }
            }
            changed
        });
    }
}
