//! The policy engine. PURE: no I/O, no clock reads, no await. Time is an argument.
//!
//! [`Engine`] holds every service's evidence and state plus what is controller-wide (suspect
//! vantage points, the optional controller-wide velocity limit, drill overrides). It is driven
//! by [`Engine::step`], one recordable [`Input`] at a time, and answers with the decisions it
//! evaluated and what happened to overrides. Replaying the same steps gives the same output.
//!
//! Files: `health` (rise/fall), `quorum` (vantage votes), `vantage` (suspect vantage points),
//! `damping` (flap penalty, flapping percentage), `velocity` (budgets), `overrides` (drills),
//! `cluster` (other vantage points' votes, heartbeats, `min_voters`, coordination),
//! `decide` (the vocabulary of decisions), `rules` (the failover rules and their precedence),
//! `rails` (safety rails), `assess` (a service's pools, as a plain value), `service` (one
//! service: assess, then commit a decision), `input`.

mod assess;
mod by_vantage;
mod cluster;
mod damping;
mod decide;
mod health;
mod input;
mod overrides;
mod quorum;
mod rails;
mod registry;
mod rules;
mod safety;
mod service;
mod steady;
mod vantage;
mod velocity;

use std::collections::BTreeSet;
use std::time::Duration;

pub use by_vantage::ByVantage;
pub use cluster::{ClusterView, VantageVote};
pub use damping::{FLAP_WINDOW, FlapHistory, FlapPenalty};
pub use decide::{Blocked, Candidate, Decision, PoolFlap, PoolVerdict, Rule, RuleInput};
pub use health::{EndpointHealth, pool_verdict};
pub use input::{Confirm, Input, Output, OverrideChange, Reply, Step};
pub use overrides::{
    DEFAULT_OVERRIDE_TTL, MAX_ACTOR, MAX_OVERRIDE_TTL, MAX_REASON, Override, OverrideAction,
    OverrideError, OverrideId, OverrideRequest, Overrides, REVERT_ACTOR, REVERT_SUFFIX,
};
pub use quorum::{Tally, Vote};
pub use rails::Violation;
pub use registry::ServiceHandle;
pub use rules::choose;
pub use safety::SafetyState;
pub use service::{EndpointTransition, ServiceEngine};
pub use vantage::{Suspicion, Vantages};
pub use velocity::{SwitchWindow, TokenBucket};

use crate::model::{EndpointId, Millis, Observation, PoolId, ServiceId, VantageId, Verdict};
use crate::policy::{Flapping, Policy, PolicyDiff};

use registry::Services;
use service::Context;

/// Controller-wide engine settings (from the daemon settings, not a policy).
#[derive(Debug, Clone, PartialEq)]
pub struct EngineSettings {
    /// The window of the suspect rules: pools all going down within it, and the half-life of
    /// the prober-side failure share. Default 1 min.
    pub suspect_window: Duration,
    /// Canary targets every vantage point probes besides the pools; all of them failing makes
    /// the vantage point suspect. Default none.
    pub canaries: Vec<EndpointId>,
    /// At most this many services switching automatically within the window, controller-wide.
    /// Default off: a real regional outage legitimately moves every service of the region.
    pub global_velocity: Option<(u32, Duration)>,
}

impl Default for EngineSettings {
    fn default() -> Self {
        Self {
            suspect_window: Duration::from_secs(60),
            canaries: Vec::new(),
            global_velocity: None,
        }
    }
}

/// Nagios' flapping thresholds, for canaries (which have no policy).
const CANARY_FLAPPING: Flapping = Flapping {
    high: 30.0,
    low: 20.0,
};

/// Every service's engine, and what is controller-wide.
#[derive(Debug, Clone)]
pub struct Engine {
    services: Services,
    vantages: Vantages,
    global: Option<SwitchWindow>,
    overrides: Overrides,
    cluster: Option<ClusterView>,
    /// Evaluate every service an input concerns, steady or not (the reference the
    /// incremental path is checked against).
    always: bool,
}

impl Engine {
    /// An engine for `policies` (service names unique, as [`crate::policy::load`] ensures).
    pub fn new(policies: impl IntoIterator<Item = Policy>, settings: &EngineSettings) -> Self {
        Self {
            services: policies
                .into_iter()
                .map(|p| (p.service.clone(), ServiceEngine::new(p)))
                .collect(),
            vantages: Vantages::new(settings.suspect_window, settings.canaries.iter().cloned()),
            global: settings
                .global_velocity
                .map(|(max, window)| SwitchWindow::new(max, window)),
            overrides: Overrides::default(),
            cluster: None,
            always: false,
        }
    }

    /// This engine, evaluating every service an input concerns (every service at a tick) even
    /// when its last decision is steady: the full re-decision that the incremental path must
    /// match decision for decision (`tests/engine_properties.rs`). Costs O(endpoints of the
    /// service) per observation instead of O(1).
    pub fn deciding_always(mut self) -> Self {
        self.always = true;
        self
    }

    /// The cluster as this engine sees it; `None` alone.
    pub fn cluster(&self) -> Option<&ClusterView> {
        self.cluster.as_ref()
    }

    /// One service's engine.
    pub fn service(&self, id: &ServiceId) -> Option<&ServiceEngine> {
        self.services.get(id)
    }

    /// [`Engine::service`] through its [handle](Engine::handle) when the handle still names
    /// `id` (no search among every service's name), else by name.
    pub fn service_handled(
        &self,
        id: &ServiceId,
        handle: Option<ServiceHandle>,
    ) -> Option<&ServiceEngine> {
        self.services.resolve(id, handle)
    }

    /// Every service's engine, by name.
    pub fn services(&self) -> impl Iterator<Item = &ServiceEngine> {
        self.services.values()
    }

    /// The active overrides.
    pub fn overrides(&self) -> &Overrides {
        &self.overrides
    }

    /// What [`Input::AddOverride`] of `req` at `at` would do, without doing it: the drill it
    /// would start and the active overrides after it (a copy: drills are few), so the caller
    /// can store them before the step. The step at the same `at` then starts the same drill.
    ///
    /// # Errors
    /// The refusal the step would answer ([`OverrideError`]).
    pub fn check_override(
        &self,
        req: &OverrideRequest,
        at: Millis,
    ) -> Result<(Override, Overrides), OverrideError> {
        let service = self
            .services
            .get(&req.service)
            .ok_or_else(|| OverrideError::UnknownService(req.service.clone()))?;
        let mut after = self.overrides.clone();
        let (added, _) = after.add(service.policy(), req, at)?;
        Ok((added, after))
    }

    /// Every vantage point seen, with why it is suspect at `now` (if it is).
    pub fn vantage_points(&self, now: Millis) -> Vec<(VantageId, Option<Suspicion>)> {
        self.vantages
            .known()
            .map(|v| (v.clone(), self.vantages.suspect(v, now)))
            .collect()
    }

    /// The handle of a service, for its probe loops' observations ([`Engine::step_handled`]):
    /// valid until a reload adds or removes a service, `None` for a service not in the engine.
    pub fn handle(&self, service: &ServiceId) -> Option<ServiceHandle> {
        self.services.handle(service)
    }

    /// Applies one input at `at` and evaluates the services it concerns. Overrides past their
    /// expiry end first, and vantage points that stopped being suspect start re-forming their
    /// evidence ([`Vantages::settle`]); each input kind has its own step below.
    pub fn step(&mut self, at: Millis, input: &Input) -> Output {
        self.step_handled(at, input, None)
    }

    /// [`Engine::step`] with the [handle](Engine::handle) of the service an
    /// [`Input::Observe`] names, which spares the search by name among every service. The
    /// input's service name decides: a stale handle (after a reload), or one of another
    /// service, is not used and the service is found by name. The same output as
    /// [`Engine::step`] whatever the handle.
    pub fn step_handled(
        &mut self,
        at: Millis,
        input: &Input,
        handle: Option<ServiceHandle>,
    ) -> Output {
        let mut out = Output::default();
        let mut touched: BTreeSet<ServiceId> = BTreeSet::new();
        for o in self.overrides.expire(at) {
            touched.insert(o.service.clone());
            out.overrides.push(OverrideChange::Expired(o.clone()));
            self.revert(&o, at, &mut out);
        }
        for v in self.vantages.settle(at) {
            for s in self.services.values_mut() {
                s.restart_streaks(&v, at, &mut self.vantages);
            }
        }
        touched.extend(match input {
            Input::Observe {
                service,
                observation,
            } => self.observe(service, handle, observation, at, &mut out),
            Input::Canary { observation } => {
                self.vantages.record_canary(observation, &CANARY_FLAPPING);
                Vec::new()
            }
            Input::ProviderHealth {
                service,
                pool,
                healthy,
                fresh_for,
            } => self.provider_health(service, pool, *healthy, *fresh_for, at),
            Input::Adopt { service, pool } => self.adopt(service, pool.as_ref()),
            Input::Start => Vec::new(),
            Input::Tick => self.due(at),
            Input::AddOverride(req) => self.add_override(req, at, &mut out),
            Input::EndOverride { id, actor, reason } => {
                self.end_override(id, actor, reason, at, &mut out)
            }
            Input::Rearm { service, .. } => self.rearm(service.as_ref(), at, &mut out),
            Input::Reload { reset, removed } => self.apply_reload(reset, removed, &mut out),
            Input::LoadOverrides { overrides } => self.load_overrides(overrides, &mut out),
            Input::Cluster {
                local,
                vantages,
                min_voters,
                fresh_for,
            } => {
                let vantages = vantages.iter().cloned().collect();
                let view = ClusterView::new(local.clone(), vantages, *min_voters, *fresh_for);
                self.cluster = Some(view);
                self.services.keys().cloned().collect()
            }
            Input::Coordination { coordinated } => self.coordination(*coordinated),
            Input::RemoteVerdict {
                vantage,
                service,
                endpoint,
                verdict,
            } => self.remote_verdict(vantage, service, endpoint, *verdict),
            Input::Heartbeat { vantage } => self.heartbeat(vantage, at),
            Input::RestoreSafety { service, safety } => match self.services.get_mut(service) {
                Some(s) => {
                    s.restore_safety(safety, at);
                    vec![service.clone()]
                }
                None => Vec::new(),
            },
        });
        for id in touched {
            self.evaluate(&id, at, &mut out);
        }
        out
    }

    /// A probe result: the service's evidence, and its endpoint transitions. The service is
    /// evaluated only when the result can change its decision (see [`ServiceEngine::observe`]
    /// and the `steady` module), unless every input is evaluated ([`Engine::deciding_always`]).
    fn observe(
        &mut self,
        service: &ServiceId,
        handle: Option<ServiceHandle>,
        observation: &Observation,
        at: Millis,
        out: &mut Output,
    ) -> Vec<ServiceId> {
        let Some(s) = self.services.resolve_mut(service, handle) else {
            return Vec::new();
        };
        let (transition, moved, flap) = s.observe(observation, at, &mut self.vantages);
        out.transitions.extend(transition);
        out.flaps.extend(flap);
        let due = self.always || moved || s.needs_decision(at, self.vantages.generation());
        if due {
            vec![service.clone()]
        } else {
            Vec::new()
        }
    }

    /// The services a tick at `at` evaluates: those whose decision may differ by now (every
    /// service when [`Engine::deciding_always`]).
    fn due(&mut self, at: Millis) -> Vec<ServiceId> {
        let generation = self.vantages.generation();
        let always = self.always;
        self.services
            .iter_mut()
            .filter_map(|(id, s)| (always || s.needs_decision(at, generation)).then(|| id.clone()))
            .collect()
    }

    /// The provider's health signal for a pool.
    fn provider_health(
        &mut self,
        service: &ServiceId,
        pool: &PoolId,
        healthy: bool,
        fresh_for: Duration,
        at: Millis,
    ) -> Vec<ServiceId> {
        let Some(s) = self.services.get_mut(service) else {
            return Vec::new();
        };
        s.provider_health(pool, healthy, at, fresh_for);
        vec![service.clone()]
    }

    /// Coordination held or lost: every service is evaluated again.
    fn coordination(&mut self, coordinated: bool) -> Vec<ServiceId> {
        let changed = self
            .cluster
            .as_mut()
            .is_some_and(|c| c.set_coordinated(coordinated));
        self.all_if(changed)
    }

    /// Another vantage point's verdict of an endpoint (ignored alone, or from a vantage point
    /// not configured).
    fn remote_verdict(
        &mut self,
        vantage: &VantageId,
        service: &ServiceId,
        endpoint: &EndpointId,
        verdict: Verdict,
    ) -> Vec<ServiceId> {
        if !self
            .cluster
            .as_ref()
            .is_some_and(|c| c.vantages.contains(vantage))
        {
            return Vec::new();
        }
        let known = self
            .services
            .get_mut(service)
            .is_some_and(|s| s.remote_verdict(vantage, endpoint, verdict));
        if known {
            vec![service.clone()]
        } else {
            Vec::new()
        }
    }

    /// A heartbeat of another vantage point: when its votes start counting again, every
    /// service is evaluated (a heartbeat that only keeps it fresh changes nothing).
    fn heartbeat(&mut self, vantage: &VantageId, at: Millis) -> Vec<ServiceId> {
        let started = self
            .cluster
            .as_mut()
            .is_some_and(|c| c.heartbeat(vantage, at));
        self.all_if(started)
    }

    /// Every service when `yes`, else none.
    fn all_if(&self, yes: bool) -> Vec<ServiceId> {
        if yes {
            self.services.keys().cloned().collect()
        } else {
            Vec::new()
        }
    }

    /// The provider's serving pool, read at start.
    fn adopt(&mut self, service: &ServiceId, pool: Option<&PoolId>) -> Vec<ServiceId> {
        let Some(s) = self.services.get_mut(service) else {
            return Vec::new();
        };
        s.adopt(pool.cloned());
        vec![service.clone()]
    }

    /// Starts a drill; a restore ends the drills it supersedes. Replies with the override.
    fn add_override(
        &mut self,
        req: &OverrideRequest,
        at: Millis,
        out: &mut Output,
    ) -> Vec<ServiceId> {
        let result = match self.services.get(&req.service) {
            None => Err(OverrideError::UnknownService(req.service.clone())),
            Some(s) => self.overrides.add(s.policy(), req, at),
        };
        let mut touched = Vec::new();
        let reply = result.map(|(o, ended)| {
            touched.push(o.service.clone());
            for e in ended {
                out.overrides.push(OverrideChange::Ended {
                    ended: e,
                    actor: o.actor.clone(),
                    reason: format!("restored by {}", o.id),
                });
            }
            out.overrides.push(OverrideChange::Added(o.clone()));
            o
        });
        out.reply = Some(Reply::Override(reply));
        touched
    }

    /// Ends a drill before its expiry (reverting where it moved traffic). Replies with it.
    fn end_override(
        &mut self,
        id: &OverrideId,
        actor: &str,
        reason: &str,
        at: Millis,
        out: &mut Output,
    ) -> Vec<ServiceId> {
        let reply = self.overrides.end(id).inspect(|o| {
            out.overrides.push(OverrideChange::Ended {
                ended: o.clone(),
                actor: actor.to_owned(),
                reason: reason.to_owned(),
            });
        });
        if let Ok(o) = &reply {
            self.revert(o, at, out);
        }
        let touched = reply.iter().map(|o| o.service.clone()).collect();
        out.reply = Some(Reply::Override(reply));
        touched
    }

    /// Refills one service's velocity budget, or every service's; the controller-wide window
    /// is re-armed either way. Replies with the services re-armed.
    fn rearm(
        &mut self,
        service: Option<&ServiceId>,
        at: Millis,
        out: &mut Output,
    ) -> Vec<ServiceId> {
        let reply = match service {
            Some(id) => match self.services.get_mut(id) {
                Some(s) => {
                    // The controller-wide window is re-armed too: otherwise the
                    // service could stay held by it after a re-arm that says it is not.
                    if let Some(g) = &mut self.global {
                        g.rearm();
                    }
                    s.rearm(at);
                    Ok(vec![id.clone()])
                }
                None => Err(OverrideError::UnknownService(id.clone())),
            },
            None => {
                if let Some(g) = &mut self.global {
                    g.rearm();
                }
                for s in self.services.values_mut() {
                    s.rearm(at);
                }
                Ok(self.services.keys().cloned().collect())
            }
        };
        let touched = reply.as_ref().ok().cloned().unwrap_or_default();
        out.reply = Some(Reply::Rearmed(reply));
        touched
    }

    /// A recorded reload: drops removed services, starts reset ones fresh, and drops (as
    /// skipped) the drills whose service or pool is gone.
    fn apply_reload(
        &mut self,
        reset: &[ServiceId],
        removed: &[ServiceId],
        out: &mut Output,
    ) -> Vec<ServiceId> {
        for id in removed.iter().chain(reset) {
            self.vantages.forget_service(id);
        }
        for id in removed {
            self.services.remove(id);
        }
        for id in reset {
            if let Some(s) = self.services.get_mut(id) {
                *s = ServiceEngine::new(s.policy().clone());
            }
        }
        // Drills of removed services or pools are dropped, as on load.
        let all: Vec<Override> = self.overrides.all().cloned().collect();
        self.overrides.clear();
        self.restore_overrides(all, out);
        reset.to_vec()
    }

    /// Overrides read back from the state file at start.
    fn load_overrides(&mut self, saved: &[Override], out: &mut Output) -> Vec<ServiceId> {
        self.restore_overrides(saved.to_vec(), out);
        self.services.keys().cloned().collect()
    }

    /// Restores saved overrides; those whose service or pool is unknown are reported as
    /// skipped.
    fn restore_overrides(&mut self, saved: Vec<Override>, out: &mut Output) {
        let services = &self.services;
        let skipped = self.overrides.restore_all(saved, |o| {
            services
                .get(&o.service)
                .is_some_and(|s| s.policy().pool(&o.pool).is_some())
        });
        out.overrides
            .extend(skipped.into_iter().map(OverrideChange::Skipped));
    }

    /// Swaps in a reloaded policy set at `at` and returns the recordable input with what the
    /// step produced. `diff` says which services start fresh: an unchanged one (but for
    /// `[observe]` and `rto_budget`: [`Policy::controls_like`]) keeps all of its state (rise
    /// and fall counts, damping, velocity budget, spacing, serving pool); a changed or added
    /// one starts fresh and makes no decision until the provider's serving pool is adopted
    /// again (so a reload never moves traffic by itself); a removed one is dropped.
    /// Controller-wide state (suspect vantage points, the controller-wide velocity window) is
    /// kept. Drills whose service or pool is gone are dropped and reported as skipped.
    pub fn reload(&mut self, at: Millis, diff: &PolicyDiff) -> (Input, Output) {
        for p in &diff.policies {
            match self.services.get_mut(&p.service) {
                // Only what the engine never reads changed: the new policy, the same state.
                Some(s) if !diff.resets(&p.service) => s.set_policy(p.clone()),
                _ => {
                    self.services
                        .insert(p.service.clone(), ServiceEngine::new(p.clone()));
                }
            }
        }
        // Recorded as the engine has always recorded a reload: reset services in load order,
        // removed ones by name.
        let mut removed = diff.removed.clone();
        removed.sort();
        let input = Input::Reload {
            reset: diff.changed.clone(),
            removed,
        };
        let out = self.step(at, &input);
        (input, out)
    }

    fn evaluate(&mut self, id: &ServiceId, at: Millis, out: &mut Output) {
        let Some(s) = self.services.get_mut(id) else {
            return;
        };
        let mut ctx = Context {
            vantages: &self.vantages,
            cluster: self.cluster.as_ref(),
            global: self.global.as_mut(),
            overrides: &self.overrides,
        };
        let Some((decision, changed)) = s.decide(at, &mut ctx) else {
            return;
        };
        if let Some(pool) = s.awaiting_confirmation().filter(|_| changed) {
            out.confirm.push(Confirm {
                service: id.clone(),
                pool: pool.clone(),
            });
        }
        let done: Vec<OverrideId> = self
            .overrides
            .for_service(id)
            .filter(|o| {
                o.action == OverrideAction::Restore && decision.active.as_ref() == Some(&o.pool)
            })
            .map(|o| o.id.clone())
            .collect();
        for oid in done {
            if let Ok(o) = self.overrides.end(&oid) {
                out.overrides.push(OverrideChange::Completed(o));
            }
        }
        out.decisions.push((decision, changed));
    }

    /// When a drill that moved traffic ends (a `force`, or a `drain` of the most preferred
    /// pool), traffic returns through the same rules and rails: a short-lived restore of the
    /// service's most preferred pool, so `failback = "manual"` does not strand traffic where
    /// the drill put it. It lasts `spacing + 2 × freshness`: long enough to pass the spacing
    /// rail and gather fresh evidence, short enough that a pool which is down for real does not
    /// get an automatic failback hours later. The spacing rail does not hold it
    /// ([`Override::is_revert`]): a drill's expiry reverts at its deadline. Drains of other
    /// pools need no revert.
    fn revert(&mut self, ended: &Override, at: Millis, out: &mut Output) {
        let Some(policy) = self.services.get(&ended.service).map(ServiceEngine::policy) else {
            return;
        };
        let Some(preferred) = policy.pools.first() else {
            return;
        };
        let moved_traffic = match ended.action {
            OverrideAction::Force => true,
            OverrideAction::Drain => ended.pool == preferred.id,
            OverrideAction::Restore => false,
        };
        if !moved_traffic {
            return;
        }
        let drained = self
            .overrides
            .for_service(&ended.service)
            .any(|o| o.action == OverrideAction::Drain && o.pool == preferred.id);
        if drained {
            return;
        }
        let lasts = policy
            .spacing()
            .saturating_add(policy.fresh_for().saturating_mul(2))
            .clamp(Duration::from_secs(1), MAX_OVERRIDE_TTL);
        let req = OverrideRequest {
            id: OverrideId(format!("{}{REVERT_SUFFIX}", ended.id)),
            service: ended.service.clone(),
            action: OverrideAction::Restore,
            pool: preferred.id.clone(),
            reason: format!("revert of {} {} ({})", ended.action, ended.pool, ended.id),
            actor: REVERT_ACTOR.into(),
            duration: Some(lasts),
        };
        if let Ok((o, _)) = self.overrides.add(policy, &req, at) {
            // Still the drill's: its age goes on until traffic is back.
            self.overrides.continues(&o.id, ended.created);
            out.overrides.push(OverrideChange::Added(o));
        }
    }
}
