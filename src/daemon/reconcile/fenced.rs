//! The reconciler's cluster side (`[cluster]` only): the binding's [`Seat`] in the status and
//! `gslb_cluster_writer`, the fence before each write (followers plan and report but never
//! write; a refused fence is counted and shown as decided but not applied), and the detection
//! of a late write from an older writer on read-back.

use std::time::Duration;

use gslb_core::engine::Decision;
use gslb_provider::{DesiredState, ObservedState, Plan, Provider, Stamp};

use super::{Pass, Reconciler};
use crate::io::coordination::election::Role;
use crate::io::coordination::fence::Refusal;
use crate::io::coordination::seat::Seat;
use crate::ops::status::SeatView;

impl<P: Provider> Reconciler<'_, P> {
    /// Shows this instance's role, the writer and its epoch in the status and
    /// `gslb_cluster_writer{binding}`.
    pub(super) fn show_seat(&self, seat: &Seat) {
        let role = seat.role();
        let writer = role.writer();
        let view = SeatView {
            role: role.as_str(),
            writer: writer.map(|w| w.vantage.clone()),
            epoch: writer.map(|w| w.epoch),
        };
        self.telemetry
            .board
            .update_apply(self.service(), |a| a.cluster = Some(view));
        let on = matches!(role, Role::Writer { .. });
        self.telemetry
            .metrics
            .cluster_writer
            .with_label_values(&[seat.binding.as_str()])
            .set(if on { 1.0 } else { 0.0 });
    }

    /// A writer that has written under its epoch and now reads an older epoch at the provider
    /// sees a late write of a former writer: counted and logged once per late epoch; the plan
    /// that follows corrects it.
    pub(super) fn check_late_write(&mut self, seat: &Seat, observed: &ObservedState) {
        let Role::Writer { me, .. } = seat.role() else {
            return;
        };
        let (Some(seen), Some(mine)) = (observed.writer_epoch, self.stamped) else {
            return;
        };
        if mine == me.epoch && seen < mine && self.late != Some(seen) {
            self.late = Some(seen);
            self.telemetry
                .metrics
                .cluster_late_writes_total
                .with_label_values(&[seat.binding.as_str()])
                .inc();
            tracing::warn!(
                service = %self.service(), epoch = mine, late_epoch = seen,
                "a late write of an older writer landed after this writer's; correcting it"
            );
        }
    }

    /// The fence before a write: the [`Stamp`] to write with, or how to go on when refused
    /// (status `pending` with the reason; counted unless this instance is a follower).
    pub(super) async fn admit(
        &mut self,
        seat: &Seat,
        decision: Option<&Decision>,
        plan: &Plan,
        desired: &DesiredState,
    ) -> Result<Stamp, Pass> {
        match seat.admit(desired).await {
            Ok(stamp) => Ok(stamp),
            Err(refusal) => {
                let reason = match (&refusal, seat.role().writer()) {
                    (Refusal::Follower, Some(w)) => {
                        format!("{refusal} (writer {}, epoch {})", w.vantage, w.epoch)
                    }
                    _ => refusal.to_string(),
                };
                if refusal != Refusal::Follower {
                    self.telemetry
                        .metrics
                        .cluster_fenced_write_refusals_total
                        .with_label_values(&[seat.binding.as_str(), refusal.reason()])
                        .inc();
                    tracing::warn!(service = %self.service(), %reason, "fenced write refused");
                }
                let would = plan.clone();
                self.mark_pending(decision, |a| {
                    a.fenced = Some(reason);
                    a.would_write = Some(would);
                });
                Err(match refusal {
                    Refusal::TakeoverDelay(left) => Pass::Wait(left),
                    Refusal::Follower | Refusal::TokenLost => Pass::Wait(self.steering.resync),
                    Refusal::Uncoordinated
                    | Refusal::LeaseStale
                    | Refusal::IntentMoved
                    | Refusal::Unreachable(_) => Pass::Wait(seat.timing.lease_ttl / 10),
                })
            }
        }
    }
}

/// How long until `stamp`'s deadline (monotonic clock).
pub(super) fn left(stamp: &Stamp) -> Duration {
    stamp
        .deadline
        .saturating_duration_since(std::time::Instant::now())
}
