//! A decision that does not change the desired state triggers no provider call (issue 14,
//! item 3). After a pass that found the provider matching its decision (in sync, or a
//! decision that pushes nothing), the reconciler remembers what the provider was found
//! matching ([`Wants`]), what it served and when it read. Until the next resync, a newer
//! decision that pushes nothing (a hold: the provider keeps what it has), or that asks what
//! the provider was found matching (a `stay` after a `hold_unknown`, new reasons, another
//! verdict of a pool that does not serve), is reported on the status as such a pass would
//! report it, without a provider call. Anything else (another pool, another drain, a resync
//! due) runs a pass. In a cluster (`[cluster]`) every decision change still reads, so an
//! instance follows the writer's switch at once (`follow`); the budget bounds those reads.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use gslb_core::engine::Decision;
use gslb_core::model::PoolId;
use gslb_provider::Provider;
use tokio::sync::watch;
use tokio::time::Instant;

use super::{Pass, Reconciler};
use crate::io::coordination::election::Role;

/// What a decision asks of the provider: the pool to serve and the pools to drain, or nothing
/// (a decision that pushes nothing, and no decision at all).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Wants(Option<(PoolId, BTreeSet<PoolId>)>);

impl Wants {
    pub(super) fn of(decision: Option<&Decision>) -> Self {
        Self(
            decision
                .filter(|d| d.rule.pushes())
                .and_then(|d| Some((d.active.clone()?, d.drained.clone()))),
        )
    }
}

/// The last pass that found the provider matching its decision.
#[derive(Debug)]
pub(super) struct Settled {
    /// What the provider was found matching: a pushed decision's wants when the pass was in
    /// sync, nothing known when the decision pushed nothing.
    pub(super) in_sync: Option<Wants>,
    /// When it read the provider.
    pub(super) read_at: Instant,
    /// The pool the provider served.
    pub(super) observed_active: Option<PoolId>,
    /// `[cluster]`: this instance's role then.
    pub(super) role: Option<Role>,
}

impl Settled {
    /// Whether a pass on a decision asking `wants` would find what this pass found.
    fn covers(&self, wants: &Wants) -> bool {
        wants.0.is_none() || self.in_sync.as_ref() == Some(wants)
    }
}

impl<P: Provider> Reconciler<'_, P> {
    /// This instance's role for the binding (`[cluster]`), `None` alone.
    pub(super) fn role(&self) -> Option<Role> {
        self.steering.seat.as_ref().map(|s| s.role())
    }

    /// How old a read may be for a pass on `decision`: half the resync period when the last
    /// settled pass covers the decision (a resync: every binding of the zone or account shares
    /// one read per half period, and each still sees a read newer than its previous one),
    /// otherwise none (a read that starts after the pass). While a late write of a former
    /// writer is looked for, at most [`Reconciler::late_write_check`]'s period.
    pub(super) fn read_max_age(&self, decision: Option<&Decision>) -> Duration {
        let age = self.late_write_check().unwrap_or(Duration::MAX);
        let settled = match &self.settled {
            Some(s) if s.covers(&Wants::of(decision)) && s.role == self.role() => {
                self.steering.resync / 2
            }
            _ => Duration::ZERO,
        };
        settled.min(age)
    }

    /// When the last settled pass covers the latest decision and no resync is due: takes it up
    /// without a provider call and returns how long until the resync.
    pub(super) fn unchanged(
        &mut self,
        decisions: &mut watch::Receiver<Option<Arc<Decision>>>,
    ) -> Option<Duration> {
        // `[cluster]`: every decision change still reads, so an instance follows the writer at
        // once (see `follow`); the budget bounds those reads.
        if self.steering.seat.is_some() {
            return None;
        }
        let settled = self.settled.as_ref()?;
        let due = settled.read_at + self.steering.resync;
        let left = due.checked_duration_since(Instant::now())?;
        let decision = decisions.borrow().clone();
        let wants = Wants::of(decision.as_deref());
        if left.is_zero() || !settled.covers(&wants) || settled.role != self.role() {
            return None;
        }
        decisions.mark_unchanged();
        let active = settled.observed_active.clone();
        let _ = match wants.0 {
            None => self.not_pushed(decision.as_deref(), active),
            Some(_) => self.in_sync(decision.as_deref(), active),
        };
        Some(left)
    }

    /// Remembers a pass on `decision` that read at `read_at` and ended as `pass`, when the
    /// planner found the provider serving `found` (`Some`: in sync or not pushed).
    pub(super) fn settle(
        &mut self,
        decision: Option<&Decision>,
        read_at: Instant,
        found: Option<Option<PoolId>>,
        pass: &Pass,
    ) {
        self.settled = match (found, pass) {
            (Some(observed_active), Pass::Settled) => {
                let wants = Wants::of(decision);
                Some(Settled {
                    in_sync: wants.0.is_some().then_some(wants),
                    read_at,
                    observed_active,
                    role: self.role(),
                })
            }
            _ => None,
        };
    }
}
