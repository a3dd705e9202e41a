//! The reconciler's cluster side (`[cluster]` only): the binding's [`Seat`] in the status and
//! `gslb_cluster_writer`, the fence before each write (followers plan and report but never
//! write; a refused fence is counted and shown as decided but not applied), and late writes of
//! an older writer: a new writer on a provider without compare-and-set reads back every
//! [`LATE_WRITE_CHECK`] for [`LATE_WRITE_WINDOW`] after taking over, and a late write it finds
//! is written over at once, stamped with its own epoch, also when it wrote the same order. A
//! follower whose recent decision the provider does not show yet reads again every
//! [`FOLLOW_CHECK`] for [`FOLLOW_WINDOW`], so its status follows the writer's write.

use std::time::Duration;

use gslb_core::engine::Decision;
use gslb_provider::{DesiredState, ObservedState, Plan, Provider, Stamp};
use tokio::time::Instant;

use super::{Pass, Reconciler};
use crate::io::coordination::election::Role;
use crate::io::coordination::fence::Refusal;
use crate::io::coordination::seat::Seat;
use crate::ops::status::SeatView;

/// How often a new writer reads a provider without compare-and-set back while a write of its
/// predecessor may still land: every 5 s, each read at most 5 s old (one shared read of the
/// zone serves all its bindings: Cloudflare allows 1,200 requests per 5 minutes per token and
/// gslb paces 300 by default, so at most one load balancer and one pool list per 5 s, 48
/// requests per takeover). A late write is replaced within about 10 s, where the resync took up
/// to its period (60 s by default). Not paced by the call budget.
pub const LATE_WRITE_CHECK: Duration = Duration::from_secs(5);

/// How long after becoming the writer a late write of a predecessor is looked for: 120 s. Every
/// write of a predecessor was sent before this instance took over (its lease had expired, and
/// the takeover delay outlasts its write deadline); Cloudflare's edge ends a request it has not
/// answered after 100 s (its documented proxy read timeout, HTTP 524), plus 20 s of margin.
pub const LATE_WRITE_WINDOW: Duration = Duration::from_secs(120);

/// How often a follower whose decision the provider does not show yet reads again while the
/// decision is recent ([`FOLLOW_WINDOW`]): every 5 s, each read spending the binding's call
/// budget, so its status shows the writer's write within seconds rather than at the resync
/// (60 s by default).
pub const FOLLOW_CHECK: Duration = Duration::from_secs(5);

/// How long after a decision a follower reads every [`FOLLOW_CHECK`]: 60 s, a writer's write
/// and a handover to another writer (lease TTL, takeover delay) with room; later it waits for
/// the resync. At most 12 reads per follower and decision.
pub const FOLLOW_WINDOW: Duration = Duration::from_secs(60);

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

    /// Notes when this instance became the writer (for [`Reconciler::late_write_check`]), and
    /// whether `observed` carries a late write: a writer that has written under its epoch and
    /// now reads an older epoch at the provider sees a write of a former writer that landed
    /// after its own. Counted and logged once per late epoch; the planner writes over it
    /// ([`Request::restamp`](gslb_core::planner::Request::restamp)), and the write that does
    /// is logged.
    pub(super) fn check_late_write(&mut self, seat: &Seat, observed: &ObservedState) {
        self.late_now = None;
        let Role::Writer { me, .. } = seat.role() else {
            return;
        };
        if self.took_over.is_none_or(|(epoch, _)| epoch != me.epoch) {
            self.took_over = Some((me.epoch, Instant::now()));
        }
        let (Some(seen), Some(mine)) = (observed.writer_epoch, self.stamped) else {
            return;
        };
        if mine != me.epoch || seen >= mine {
            return;
        }
        self.late_now = Some(seen);
        if self.late != Some(seen) {
            self.late = Some(seen);
            self.telemetry
                .metrics
                .cluster_late_writes_total
                .with_label_values(&[seat.binding.as_str()])
                .inc();
            tracing::warn!(
                service = %self.service(), epoch = mine, late_epoch = seen,
                "a late write of an older writer landed after this writer's"
            );
        }
    }

    /// The epoch to stamp again over a late write ([`Request::restamp`]): this writer's, once
    /// it has written under it; `None` otherwise.
    ///
    /// [`Request::restamp`]: gslb_core::planner::Request::restamp
    pub(super) fn restamp(&self) -> Option<u64> {
        let me = self.role()?.writer().cloned()?;
        (self.stamped == Some(me.epoch)).then_some(me.epoch)
    }

    /// Logs a write that replaced a late write seen by this pass.
    pub(super) fn corrected_late_write(&mut self) {
        if let Some(late) = self.late_now.take() {
            tracing::warn!(
                service = %self.service(), late_epoch = late,
                "wrote over the late write of an older writer"
            );
        }
    }

    /// How long to wait before the next read while a former writer's write may still land
    /// (the provider has no compare-and-set, [`Provider::fences_writes`]): [`LATE_WRITE_CHECK`]
    /// during [`LATE_WRITE_WINDOW`] after this instance became the writer; `None` otherwise
    /// (alone, a follower, a fencing provider, or later).
    pub(super) fn late_write_check(&self) -> Option<Duration> {
        let (epoch, at) = self.took_over?;
        let me = self.role()?.writer().cloned()?;
        let watching =
            !self.provider.fences_writes() && me.epoch == epoch && at.elapsed() < LATE_WRITE_WINDOW;
        watching.then_some(LATE_WRITE_CHECK)
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
                    Refusal::Follower => self.follow_check(decision),
                    Refusal::TokenLost => Pass::Wait(self.steering.resync),
                    Refusal::Uncoordinated
                    | Refusal::LeaseStale
                    | Refusal::IntentMoved
                    | Refusal::Unreachable(_) => Pass::Wait(seat.timing.lease_ttl / 10),
                })
            }
        }
    }

    /// When a follower refused a write of `decision` reads again: [`Pass::Follow`] after
    /// [`FOLLOW_CHECK`] while the decision is younger than [`FOLLOW_WINDOW`] (on the engine's
    /// clock), else at the resync.
    fn follow_check(&self, decision: Option<&Decision>) -> Pass {
        let now = self.telemetry.clock.now();
        let recent = decision.is_some_and(|d| now.since(d.at) < FOLLOW_WINDOW);
        if recent && FOLLOW_CHECK < self.steering.resync {
            Pass::Follow(FOLLOW_CHECK)
        } else {
            Pass::Wait(self.steering.resync)
        }
    }
}

/// How long until `stamp`'s deadline (monotonic clock).
pub(super) fn left(stamp: &Stamp) -> Duration {
    stamp
        .deadline
        .saturating_duration_since(std::time::Instant::now())
}
