//! The reconciler's report step: what each planner [`Outcome`](gslb_core::planner::Outcome)
//! short of a write does to the status board, the metrics, the logs and the events. Writes
//! nothing to the provider.

use std::time::Duration;

use gslb_core::engine::Decision;
use gslb_core::event::Event;
use gslb_core::model::{Millis, PoolId};
use gslb_core::planner::{Refusal, WRITE_FIGHT_LIMIT, WRITE_FIGHT_WINDOW};
use gslb_provider::{Plan, Provider};

use super::{Pass, Reconciler};
use crate::ops::logging::List;
use crate::ops::status::ApplyState;

/// How soon a pass looks again while the provider stores the decision but does not serve it
/// yet ([`Reconciler::awaiting`]): 5 s, between the intervals at which the data-plane tally is
/// read (`request_interval / 3`: 3.3 s or 10 s).
pub const SERVED_RECHECK: Duration = Duration::from_secs(5);

impl<P: Provider> Reconciler<'_, P> {
    /// The decision pushes nothing (a hold, or no serving pool): the status says so.
    pub(super) fn not_pushed(
        &self,
        decision: Option<&Decision>,
        observed_active: Option<PoolId>,
    ) -> Pass {
        self.status(decision, |a| {
            a.observed_active = observed_active;
            a.state = ApplyState::NotPushed;
            a.last_error = None;
            a.awaiting = None;
        });
        Pass::Settled
    }

    /// The provider matches the decision: applied. Announced ([`Event::InSync`]) when the
    /// provider comes to match, and once for each new decision it already matches (a switch
    /// that needs no write is in sync all the same).
    pub(super) fn in_sync(
        &mut self,
        decision: Option<&Decision>,
        observed_active: Option<PoolId>,
    ) -> Pass {
        let service = self.service().clone();
        self.provider.decided();
        let mut reached = false;
        self.status(decision, |a| {
            reached = a.state != ApplyState::Applied;
            a.observed_active = observed_active;
            a.state = ApplyState::Applied;
            a.pending_since = None;
            a.last_error = None;
            a.would_write = None;
            a.write_fight = None;
            a.refused = None;
            a.fenced = None;
            a.awaiting = None;
        });
        // The planner is in sync only for a pushed decision with an active pool.
        let fresh = decision.map(|d| d.at) != self.announced;
        let target = decision.and_then(|d| Some((d.at, d.active.clone()?)));
        if let (true, Some((decided, active))) = (reached || fresh, target) {
            self.announced = Some(decided);
            let _ = self.telemetry.events.send(Event::InSync {
                service,
                provider: self.name().to_owned(),
                at: self.telemetry.clock.now(),
                active,
            });
        }
        Pass::Settled
    }

    /// The provider stores the decision but does not serve it yet (Route 53 data-plane mode:
    /// this instance's vote is given, the tally of every instance's votes serves another
    /// pool, or Route 53's checkers have not had time to follow): `pending`, with `why`. Looks
    /// again after [`SERVED_RECHECK`], when the tally may have changed.
    pub(super) fn awaiting(
        &self,
        decision: Option<&Decision>,
        observed_active: Option<PoolId>,
        why: String,
    ) -> Pass {
        let now = self.telemetry.clock.now();
        self.provider.decided();
        self.status(decision, |a| {
            a.observed_active = observed_active;
            a.state = ApplyState::Pending;
            a.pending_since.get_or_insert(now);
            a.last_error = None;
            a.awaiting = Some(why);
        });
        Pass::Wait(SERVED_RECHECK)
    }

    /// A rule refused the plan: counted per pass by reason, logged, and the status stays
    /// `pending` with the reason.
    pub(super) fn refused(&self, decision: Option<&Decision>, r: Refusal) -> Pass {
        let (service, provider) = (self.service(), self.name());
        let now = self.telemetry.clock.now();
        self.telemetry
            .metrics
            .plans_refused_total
            .with_label_values(&[service.0.as_str(), r.code])
            .inc();
        tracing::warn!(service = %service, provider, reason = %r.reason, "plan refused");
        self.status(decision, |a| {
            a.state = ApplyState::Pending;
            a.pending_since.get_or_insert(now);
            a.refused = Some(r.reason);
            a.awaiting = None;
        });
        Pass::Fatal
    }

    /// The write re-applies a state gslb already wrote: drift, counted and logged.
    pub(super) fn drifted(&self, decision: Option<&Decision>) {
        let (service, provider) = (self.service(), self.name());
        self.telemetry
            .metrics
            .provider_drift_total
            .with_label_values(&[provider, service.0.as_str()])
            .inc();
        tracing::info!(service = %service, provider, "another writer changed what gslb wrote; re-applying");
        self.status(decision, |a| a.drift += 1);
    }

    /// A write fight: nothing is written before `until`. Counted and logged once when
    /// `declared`; the status stays `pending` and says until when.
    pub(super) fn stopped(
        &self,
        decision: Option<&Decision>,
        until: Millis,
        declared: bool,
    ) -> Pass {
        let (service, provider) = (self.service(), self.name());
        let now = self.telemetry.clock.now();
        let left = until.since(now);
        if declared {
            self.telemetry
                .metrics
                .provider_write_fights_total
                .with_label_values(&[provider, service.0.as_str()])
                .inc();
            tracing::warn!(
                service = %service, provider, pause = %humantime::format_duration(Duration::from_secs(left.as_secs())),
                "write fight: another writer keeps reverting gslb's change; not writing until the window passes"
            );
        }
        let message = format!(
            "another writer reverted gslb's change more than {} times within {}; not writing for {}",
            WRITE_FIGHT_LIMIT,
            humantime::format_duration(WRITE_FIGHT_WINDOW),
            humantime::format_duration(Duration::from_secs(left.as_secs())),
        );
        self.status(decision, |a| {
            a.state = ApplyState::Pending;
            a.pending_since.get_or_insert(now);
            a.write_fight = Some(message);
            a.awaiting = None;
        });
        Pass::Stopped(left)
    }

    /// The provider's fallback pool is never disabled: a drain of it is dropped by the
    /// planner (`note`), so the rest of the plan (e.g. a failover order) still applies, and
    /// reported here: the status `ignored_drain`, a warning and
    /// `gslb_plans_refused_total{reason="fallback_drain_ignored"}`, each once when it starts
    /// (the status stays set while the drain lasts).
    pub(super) fn report_ignored_drain(&self, decision: Option<&Decision>, note: Option<String>) {
        let (service, provider) = (self.service(), self.name());
        let mut fresh = false;
        self.status(decision, |a| {
            fresh = note.is_some() && a.ignored_drain != note;
            a.ignored_drain.clone_from(&note);
        });
        if let (true, Some(note)) = (fresh, note) {
            self.telemetry
                .metrics
                .plans_refused_total
                .with_label_values(&[service.0.as_str(), "fallback_drain_ignored"])
                .inc();
            tracing::warn!(service = %service, provider, reason = %note, "drain ignored");
        }
    }

    /// Shadow mode: records the plan that would have been written, once per distinct plan.
    pub(super) fn shadow(
        &self,
        decision: Option<&Decision>,
        observed_active: Option<PoolId>,
        plan: Plan,
    ) -> Pass {
        let (service, provider) = (self.service(), self.name());
        let mut fresh = false;
        self.status(decision, |a| {
            a.observed_active = observed_active;
            a.state = ApplyState::Shadow;
            a.last_error = None;
            a.awaiting = None;
            if a.would_write.as_ref() != Some(&plan) {
                a.would_write = Some(plan.clone());
                fresh = true;
            }
        });
        if fresh {
            self.telemetry
                .metrics
                .shadow_plans_total
                .with_label_values(&[service.0.as_str()])
                .inc();
            tracing::info!(service = %service, provider, plan = %List(&plan), "shadow mode: would apply plan (not written)");
            let _ = self.telemetry.events.send(Event::ShadowPlan {
                service: service.clone(),
                provider: provider.to_owned(),
                at: self.telemetry.clock.now(),
                plan,
            });
        }
        Pass::Settled
    }
}
