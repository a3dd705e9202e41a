//! Failover timelines: every switch of a service's serving pool, automatic or drill, with the
//! time of each phase, from the first failed probe to the first response served by the new
//! region.
//!
//! [`Recorder`] is PURE: it is fed [`Event`]s (times come from the events, never from a clock)
//! and answers with [`Update`]s, which the daemon's timeline task turns into metrics, audit
//! lines and observer starts; its observers watch DNS and the public URL from the outside and
//! report back as [`Event::Observed`]. [`report`] prints timelines as a drill report.
//!
//! How each phase is found:
//! - `first_failed_probe`: the earliest start of a run of failed probes (since that endpoint's
//!   last success, from any vantage point) among the old pool's endpoints, when the old pool
//!   was down at the decision. A run counts only if it started after the last success of any
//!   of the pool's endpoints from the same vantage point: an endpoint broken for days while
//!   the pool kept serving on the others did not start this failure. Prober-side failures
//!   count for neither start nor end.
//! - `marked_down`: when the old pool's quorum verdict became unhealthy (the decision's own
//!   pool verdict).
//! - `decision`: the switching decision.
//! - `provider_accepted`: the first provider write after the decision towards its new pool
//!   ([`Event::Applied`]); none when the provider needed no write.
//! - `provider_in_sync`: the first read-back matching the new pool ([`Event::InSync`]).
//! - `dns_observed`, `served_by_observed`: from the observers.
//!
//! A drill's (and an automatic failback's) timeline starts at its decision. A newer switch of
//! the same service closes the previous timeline (`superseded`; phases not seen stay empty);
//! a timeline whose expected phases are all seen is `complete`; one still open when its
//! observation window passes is `timed_out`. The last [`CAPACITY`] timelines are kept.
//!
//! A service in `mode = "shadow"` writes nothing, so its switch is one gslb would make: its
//! timeline is kept, marked `mode: "shadow"`, and none of its phases is observed in
//! `gslb_failover_phase_seconds` (no [`Update::Phase`]).

#[cfg(any(test, feature = "test-util"))]
pub mod fixtures;
mod history;
pub mod report;
mod types;

pub use types::{DEFAULT_WINDOW, Expect, Phase, Phases, Status, SwitchKind, Timeline, Update};

use std::collections::{BTreeMap, VecDeque};

use crate::engine::Decision;
use crate::event::{Event, ObservedPhase};
use crate::model::{Millis, ServiceId, VantageId, Verdict};
use crate::policy::{Mode, Policy};

use history::History;

/// Timelines kept in memory: the last 256 switches.
pub const CAPACITY: usize = 256;

/// The pure recorder. See the module documentation.
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    timelines: VecDeque<Timeline>,
    /// Each service's expectations, holds and probe history, sorted by name (one entry per
    /// service, its name stored once).
    services: Vec<(ServiceId, History)>,
    /// The vantage points seen, in order of first sight: a history names them by index.
    vantages: Vec<VantageId>,
}

impl Recorder {
    /// Sets what `service`'s timelines opened from now on wait for.
    pub fn expect(&mut self, service: ServiceId, expect: Expect) {
        self.history_mut(&service).expect = Some(expect);
    }

    fn history(&self, service: &ServiceId) -> Option<&History> {
        let i = self.position(service).ok()?;
        Some(&self.services[i].1)
    }

    /// `service`'s history, added empty when missing (its name copied only then).
    fn history_mut(&mut self, service: &ServiceId) -> &mut History {
        let i = match self.position(service) {
            Ok(i) => i,
            Err(i) => {
                self.services
                    .insert(i, (service.clone(), History::default()));
                i
            }
        };
        &mut self.services[i].1
    }

    fn position(&self, service: &ServiceId) -> Result<usize, usize> {
        self.services.binary_search_by(|(k, _)| k.cmp(service))
    }

    /// The index of `vantage`, added at the end the first time.
    fn vantage(&mut self, vantage: &VantageId) -> usize {
        match self.vantages.iter().position(|v| v == vantage) {
            Some(i) => i,
            None => {
                self.vantages.push(vantage.clone());
                self.vantages.len() - 1
            }
        }
    }

    /// The timelines, newest first, of `service` when given, at most `limit`.
    pub fn list(&self, service: Option<&ServiceId>, limit: usize) -> Vec<Timeline> {
        self.timelines
            .iter()
            .rev()
            .filter(|t| service.is_none_or(|s| &t.service == s))
            .take(limit)
            .cloned()
            .collect()
    }

    /// Puts back `past` timelines (closed ones, oldest first, e.g. read back from the audit
    /// log after a restart) before every timeline recorded since; a timeline whose id is
    /// already kept is skipped. The store still keeps at most [`CAPACITY`], dropping the oldest.
    pub fn restore(&mut self, past: impl IntoIterator<Item = Timeline>) {
        let mut older: VecDeque<Timeline> = past
            .into_iter()
            .filter(|t| !self.timelines.iter().any(|k| k.id == t.id))
            .collect();
        older.append(&mut self.timelines);
        self.timelines = older;
        while self.timelines.len() > CAPACITY {
            self.timelines.pop_front();
        }
    }

    /// Feeds one event.
    pub fn apply(&mut self, event: &Event) -> Vec<Update> {
        let mut out = Vec::new();
        match event {
            Event::Probe {
                service,
                pool,
                observation: o,
            } => {
                if !o.outcome.reason.counts_toward_health() {
                    return out;
                }
                let v = self.vantage(&o.vantage);
                self.history_mut(service)
                    .probe(pool, &o.endpoint, v, o.at, o.outcome.success);
            }
            Event::Decision(d) if d.switched() => self.open(d, &mut out),
            Event::Decision(d) => self.hold(d),
            Event::Applied {
                service,
                at,
                active,
                ..
            } => {
                // A write for an earlier switch that lands after this one is not its write.
                let serves = |t: &Timeline| &t.to == active;
                if let Some(id) =
                    self.record(service, serves, Phase::ProviderAccepted, *at, &mut out)
                {
                    self.close_if_complete(&id, &mut out);
                }
            }
            Event::InSync {
                service,
                at,
                active,
                ..
            } => {
                let serves = |t: &Timeline| t.to.as_ref() == Some(active);
                if let Some(id) = self.record(service, serves, Phase::ProviderInSync, *at, &mut out)
                {
                    self.close_if_complete(&id, &mut out);
                }
            }
            Event::Observed {
                service,
                timeline,
                phase,
                at,
                detail,
            } => {
                let phase = match phase {
                    ObservedPhase::Dns => Phase::DnsObserved,
                    ObservedPhase::ServedBy => Phase::ServedByObserved,
                };
                let this = |t: &Timeline| &t.id == timeline;
                if let Some(id) = self.record(service, this, phase, *at, &mut out) {
                    if let Some(t) = self.timelines.iter_mut().find(|t| t.id == id) {
                        t.observed.insert(phase.as_str().to_owned(), detail.clone());
                    }
                    self.close_if_complete(&id, &mut out);
                }
            }
            _ => {}
        }
        out
    }

    /// Closes the open timelines whose window passed by `now` as `timed_out`.
    pub fn expire(&mut self, now: Millis) -> Vec<Update> {
        let mut out = Vec::new();
        for t in self
            .timelines
            .iter_mut()
            .filter(|t| t.status == Status::Open)
        {
            let position = self.services.binary_search_by(|(k, _)| k.cmp(&t.service));
            let window = position
                .ok()
                .and_then(|i| self.services[i].1.expect.as_ref())
                .map_or(DEFAULT_WINDOW, |e| e.window);
            if t.phases.decision.is_some_and(|d| now >= d.plus(window)) {
                t.status = Status::TimedOut;
                out.push(Update::Closed(t.clone()));
            }
        }
        out
    }

    /// Follows a reloaded policy set: forgets the probe history (failure runs, last successes)
    /// of services, pools and endpoints no longer in `policies` and what removed services'
    /// timelines wait for, and closes their open timelines as `interrupted`. Kept timelines
    /// of removed services stay listed until [`CAPACITY`] pushes them out.
    pub fn retain(&mut self, policies: &[Policy]) -> Vec<Update> {
        let services: BTreeMap<&ServiceId, &Policy> =
            policies.iter().map(|p| (&p.service, p)).collect();
        for (id, h) in &mut self.services {
            h.retain(services.get(id).copied());
        }
        self.services.retain(|(_, h)| !h.is_empty());
        // Sized once per policy set: a doubled list would keep room for up to as many again.
        self.services.shrink_to_fit();
        self.close_open(|t| !services.contains_key(&t.service))
    }

    /// Closes every open timeline as `interrupted` (the controller is stopping).
    pub fn interrupt(&mut self) -> Vec<Update> {
        self.close_open(|_| true)
    }

    fn close_open(&mut self, which: impl Fn(&Timeline) -> bool) -> Vec<Update> {
        let mut out = Vec::new();
        for t in self
            .timelines
            .iter_mut()
            .filter(|t| t.status == Status::Open && which(t))
        {
            t.status = Status::Interrupted;
            out.push(Update::Closed(t.clone()));
        }
        out
    }

    /// Notes a decision that did not switch: a hold is added to what the next switch waited
    /// through (once per rule); any other rule starts over.
    fn hold(&mut self, d: &Decision) {
        let rule = d.rule.is_hold().then(|| d.rule.as_str());
        if rule.is_some() || self.position(&d.service).is_ok() {
            self.history_mut(&d.service).hold(rule);
        }
    }

    /// Opens the timeline of the switch `d` made, superseding the service's open one.
    fn open(&mut self, d: &Decision, out: &mut Vec<Update>) {
        for t in self
            .timelines
            .iter_mut()
            .filter(|t| t.service == d.service && t.status == Status::Open)
        {
            t.status = Status::Superseded;
            out.push(Update::Closed(t.clone()));
        }
        let kind = if d.rule.is_automatic() {
            SwitchKind::Automatic
        } else {
            SwitchKind::Drill
        };
        let expect = self
            .history(&d.service)
            .and_then(|h| h.expect.clone())
            .unwrap_or_default();
        let t = Timeline {
            id: format!("{}-{}", d.service, d.at.0),
            service: d.service.clone(),
            kind,
            mode: if expect.provider {
                Mode::Enforce
            } else {
                Mode::Shadow
            },
            rule: d.rule.as_str().to_owned(),
            from: d.previous.clone(),
            to: d.active.clone(),
            status: Status::Open,
            expected: expect.phases(),
            phases: self.first_phases(d, kind),
            observed: BTreeMap::new(),
            waited: self
                .position(&d.service)
                .ok()
                .map(|i| std::mem::take(&mut self.services[i].1.holds))
                .unwrap_or_default()
                .into_iter()
                .map(str::to_owned)
                .collect(),
        };
        for phase in [Phase::MarkedDown, Phase::Decision] {
            if let Some(s) = t.since_start(phase).filter(|_| t.mode == Mode::Enforce) {
                out.push(Update::Phase {
                    service: t.service.clone(),
                    phase,
                    seconds: s.as_secs_f64(),
                });
            }
        }
        out.push(Update::Opened(t.clone()));
        let id = t.id.clone();
        self.timelines.push_back(t);
        while self.timelines.len() > CAPACITY {
            self.timelines.pop_front();
        }
        self.close_if_complete(&id, out);
    }

    /// The phases known when `d` is made: the decision and, for an automatic switch away from
    /// a pool down by quorum, when it was marked down and its first failed probe (the earliest
    /// failure of the pool still failing, from a vantage point that has not passed since).
    fn first_phases(&self, d: &Decision, kind: SwitchKind) -> Phases {
        let mut phases = Phases {
            decision: Some(d.at),
            ..Phases::default()
        };
        let down = d
            .previous
            .as_ref()
            .and_then(|p| d.pools.get(p).map(|v| (p, v)))
            .filter(|(_, v)| v.verdict == Verdict::Unhealthy && kind == SwitchKind::Automatic);
        if let Some((pool, verdict)) = down {
            phases.marked_down = Some(verdict.since.min(d.at));
            phases.first_failed_probe = self
                .history(&d.service)
                .and_then(|h| h.first_failure(pool, d.at));
        }
        phases
    }

    /// Records `phase` at `at` on the service's newest open timeline when `which` accepts it,
    /// unless the phase is already recorded or `at` is before the decision. Returns the
    /// timeline's id when recorded.
    fn record(
        &mut self,
        service: &ServiceId,
        which: impl Fn(&Timeline) -> bool,
        phase: Phase,
        at: Millis,
        out: &mut Vec<Update>,
    ) -> Option<String> {
        let t = self
            .timelines
            .iter_mut()
            .rev()
            .find(|t| &t.service == service && t.status == Status::Open)
            .filter(|t| which(t))?;
        if t.phases.get(phase).is_some() || t.phases.decision.is_none_or(|d| at < d) {
            return None;
        }
        *t.phases.slot_mut(phase) = Some(at);
        if t.mode == Mode::Enforce {
            out.push(Update::Phase {
                service: service.clone(),
                phase,
                seconds: at.since(t.start()).as_secs_f64(),
            });
        }
        Some(t.id.clone())
    }

    fn close_if_complete(&mut self, id: &str, out: &mut Vec<Update>) {
        if let Some(t) = self
            .timelines
            .iter_mut()
            .find(|t| t.id == id && t.status == Status::Open)
            && t.is_complete()
        {
            t.status = Status::Complete;
            out.push(Update::Closed(t.clone()));
        }
    }
}

#[cfg(test)]
mod tests;
