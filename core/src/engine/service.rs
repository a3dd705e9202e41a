//! One service's engine state: evidence per endpoint and vantage point, pool verdicts by
//! quorum, flap damping, the velocity budget and the serving pool. PURE: time is an argument.
//!
//! A decision is two steps: `assess` reads the evidence into a plain [`Assessment`] of every
//! pool; [`ServiceEngine`] then commits it (damping and pool states, the rules, the safety
//! rails and velocity limits, the serving pool) and builds the [`Decision`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::model::{
    ByPool, EndpointId, Millis, Observation, PoolId, ServiceId, VantageId, Verdict,
};
use crate::policy::Policy;

use super::assess::{Assessment, Assessor, ByEndpoint, PoolAssessment, ProviderVotes};
use super::by_vantage::ByVantage;
use super::cluster::{ClusterView, RemoteVerdicts};
use super::damping::FlapPenalty;
use super::decide::{Blocked, Candidate, Decision, PoolFlap, PoolVerdict, Rule, RuleInput};
use super::health::{EndpointHealth, pool_verdict};
use super::overrides::{OverrideAction, Overrides};
use super::rails::{self, Violation};
use super::rules::choose;
use super::safety::SafetyState;
use super::steady::{Steady, evidence_clock, stale_hold, steady_rule};
use super::vantage::Vantages;
use super::velocity::{SwitchWindow, TokenBucket};

/// What changed when an observation was recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointTransition {
    /// The pool of the endpoint.
    pub pool: PoolId,
    /// The endpoint.
    pub endpoint: EndpointId,
    /// The vantage point whose view changed.
    pub vantage: VantageId,
    /// Its new rise/fall verdict from that vantage point.
    pub verdict: Verdict,
}

/// Controller-wide context of one evaluation.
pub(super) struct Context<'a> {
    pub vantages: &'a Vantages,
    pub cluster: Option<&'a ClusterView>,
    pub global: Option<&'a mut SwitchWindow>,
    pub overrides: &'a Overrides,
}

/// The service's drills in force, as the rules read them.
struct Drills {
    drained: BTreeSet<PoolId>,
    restored: BTreeSet<PoolId>,
    /// Pools restored by the revert of a drill that ended ([`Override::is_revert`]): going
    /// back is the end of that drill's switch, not a new one, so the spacing rail lets it
    /// through.
    reverts: BTreeSet<PoolId>,
    forced: Option<PoolId>,
}

impl Drills {
    /// The drills of `service` (the last `force` wins).
    fn of(overrides: &Overrides, service: &ServiceId) -> Self {
        let mut drills = Self {
            drained: BTreeSet::new(),
            restored: BTreeSet::new(),
            reverts: BTreeSet::new(),
            forced: None,
        };
        for o in overrides.for_service(service) {
            match o.action {
                OverrideAction::Drain => {
                    drills.drained.insert(o.pool.clone());
                }
                OverrideAction::Restore => {
                    drills.restored.insert(o.pool.clone());
                    if o.is_revert() {
                        drills.reverts.insert(o.pool.clone());
                    }
                }
                OverrideAction::Force => drills.forced = Some(o.pool.clone()),
            }
        }
        drills
    }
}

/// One service's engine.
#[derive(Debug, Clone)]
pub struct ServiceEngine {
    policy: Arc<Policy>,
    /// Each endpoint's pool, by its place among the policy's pools.
    endpoint_pool: BTreeMap<EndpointId, usize>,
    evidence: ByEndpoint,
    provider_votes: ProviderVotes,
    remote: RemoteVerdicts,
    pools: ByPool<PoolVerdict>,
    penalties: ByPool<FlapPenalty>,
    ready: bool,
    active: Option<PoolId>,
    last_change: Option<Millis>,
    last_failover: Option<Millis>,
    consecutive_failovers: u32,
    bucket: TokenBucket,
    last: Option<Arc<Decision>>,
    /// Until when the last decision stands without being evaluated again (`None`: it does
    /// not; evaluated at every input).
    steady: Option<Steady>,
    /// Stale results at the last decision ([`ServiceEngine::stale_evidence`]).
    stale: u32,
    /// The target pool a `confirm_target` decision waits for, at the last decision.
    confirm: Option<PoolId>,
}

impl ServiceEngine {
    /// Every pool unknown, nothing serving, not ready until [`ServiceEngine::adopt`].
    pub fn new(policy: Policy) -> Self {
        // Maps by endpoint stay trees: a service can have hundreds of endpoints, and each
        // probe result looks its endpoint up in both (a sorted vector's binary search over
        // 500 URLs doubled the engine's cost per observation at 20 x 500).
        let endpoint_pool = policy
            .pools
            .iter()
            .enumerate()
            .flat_map(|(i, p)| p.endpoints.iter().map(move |e| (e.id.clone(), i)))
            .collect();
        let mut pools = ByPool::with_capacity(policy.pools.len());
        for p in policy.pools.iter() {
            pools.insert(p.id.clone(), PoolVerdict::unknown(Millis(0)));
        }
        let bucket = TokenBucket::full(policy.velocity, Millis(0));
        Self {
            policy: Arc::new(policy),
            endpoint_pool,
            evidence: ByEndpoint::new(),
            provider_votes: ByPool::default(),
            remote: BTreeMap::new(),
            pools,
            penalties: ByPool::default(),
            ready: false,
            active: None,
            last_change: None,
            last_failover: None,
            consecutive_failovers: 0,
            bucket,
            last: None,
            steady: None,
            stale: 0,
            confirm: None,
        }
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The policy, shared with whoever shows it (the status board reads its names).
    pub fn shared_policy(&self) -> &Arc<Policy> {
        &self.policy
    }

    /// Swaps in `policy`, which must [control like](Policy::controls_like) the current one
    /// (a reload that only changed `[observe]` or `rto_budget`); the state is kept.
    pub(crate) fn set_policy(&mut self, policy: Policy) {
        debug_assert!(self.policy.controls_like(&policy));
        self.policy = Arc::new(policy);
    }

    /// The pool serving now, as far as the engine knows.
    pub fn active(&self) -> Option<&PoolId> {
        self.active.as_ref()
    }

    /// The last decision, shared with whoever keeps it (status, reconciler, events).
    pub fn last_decision(&self) -> Option<&Arc<Decision>> {
        self.last.as_ref()
    }

    /// Whether the provider's serving pool has been adopted (decisions start then).
    pub fn ready(&self) -> bool {
        self.ready
    }

    /// Automatic switches available now in the velocity budget.
    pub fn velocity_available(&self, now: Millis) -> u32 {
        self.bucket.available(now)
    }

    /// The pool of an endpoint.
    pub fn pool_of(&self, endpoint: &EndpointId) -> Option<&PoolId> {
        let i = *self.endpoint_pool.get(endpoint)?;
        self.policy.pools.get(i).map(|p| &p.id)
    }

    /// Every endpoint's evidence, by endpoint then vantage point.
    pub fn evidence(&self) -> impl Iterator<Item = (&EndpointId, &PoolId, &ByVantage)> {
        self.endpoint_pool.iter().filter_map(|(e, i)| {
            let pool = &self.policy.pools.get(*i)?.id;
            self.evidence.get(e).map(|m| (e, pool, m))
        })
    }

    /// Adopts the pool the provider serves now (`None`: none of the policy's pools), so a
    /// restarted controller continues from the provider's state; decisions start now.
    pub fn adopt(&mut self, active: Option<PoolId>) {
        if active.is_some() {
            self.active = active;
        }
        self.ready = true;
    }

    /// The state that must outlive a restart or a change of writer ([`SafetyState`]).
    pub fn safety(&self) -> SafetyState {
        SafetyState {
            bucket: self.bucket,
            penalties: self.penalties.clone(),
            last_change: self.last_change,
            last_failover: self.last_failover,
            consecutive_failovers: self.consecutive_failovers,
        }
    }

    /// Merges a saved safety state at `now` ([`SafetyState::merge`]).
    pub fn restore_safety(&mut self, saved: &SafetyState, now: Millis) {
        let mut state = self.safety();
        state.merge(saved, now, &self.policy.damping);
        self.bucket = state.bucket;
        self.penalties = state.penalties;
        self.last_change = state.last_change;
        self.last_failover = state.last_failover;
        self.consecutive_failovers = state.consecutive_failovers;
        let damping = self.policy.damping;
        for (_, p) in self.penalties.iter_mut() {
            p.update(now, &damping);
        }
    }

    /// Refills the velocity budget (operator re-arm).
    pub fn rearm(&mut self, now: Millis) {
        self.bucket.rearm(now);
    }

    /// Records the provider's own health signal for a pool, counting for `fresh_for` (a vote
    /// when `quorum.provider_vote`).
    pub fn provider_health(
        &mut self,
        pool: &PoolId,
        healthy: bool,
        now: Millis,
        fresh_for: std::time::Duration,
    ) {
        if self.policy.pool(pool).is_some() {
            let v = if healthy {
                Verdict::Healthy
            } else {
                Verdict::Unhealthy
            };
            self.provider_votes
                .insert(pool.clone(), (v, now, fresh_for));
        }
    }

    /// Records another vantage point's published rise/fall verdict of `endpoint` (unknown
    /// when it withdrew it). Returns whether the endpoint is one of this service's.
    pub(super) fn remote_verdict(
        &mut self,
        vantage: &VantageId,
        endpoint: &EndpointId,
        verdict: Verdict,
    ) -> bool {
        if !self.endpoint_pool.contains_key(endpoint) {
            return false;
        }
        let by_vantage = self.remote.entry(endpoint.clone()).or_default();
        match verdict {
            Verdict::Unknown => by_vantage.remove(vantage),
            v => by_vantage.insert(vantage.clone(), v),
        };
        true
    }

    /// Records one probe result, stepped at `at` (its own time or later: the engine loop
    /// takes results as they come); prober-side failures only feed `vantages`. A recovering
    /// vantage point's view of the pool is reported once it has re-formed. Returns the
    /// endpoint's transition, if any, and whether its vote as seen at `at` may have changed: a
    /// transition, a first result from the vantage point, the endpoint turning unprobeable or
    /// prober-side or back, or its evidence turning fresh at `at` outside a
    /// [held view](super::steady::HeldView). Only then can the result change a
    /// [steady](Steady) decision: a result already stale when it is stepped (a controller
    /// running behind) changes no vote. Allocates nothing once the endpoint has evidence from
    /// the vantage point and its verdict stays.
    pub(super) fn observe(
        &mut self,
        obs: &Observation,
        at: Millis,
        vantages: &mut Vantages,
    ) -> (Option<EndpointTransition>, bool, Option<PoolFlap>) {
        let Some(&index) = self.endpoint_pool.get(&obs.endpoint) else {
            return (None, false, None);
        };
        let policy = &*self.policy;
        let pool = &policy.pools[index].id;
        if obs.outcome.reason.counts_toward_suspicion() {
            // Unprobeable or late says nothing about the prober either: never makes it suspect.
            vantages.record_result(&obs.vantage, obs.outcome.reason.is_prober_side(), obs.at);
        }
        let th = policy.thresholds;
        let fresh = policy.fresh_for();
        if !self.evidence.contains_key(&obs.endpoint) {
            self.evidence
                .insert(obs.endpoint.clone(), ByVantage::default());
        }
        let by_vantage = self
            .evidence
            .get_mut(&obs.endpoint)
            .expect("inserted above");
        // A first result from the vantage point, even one that does not count (late,
        // unprobeable, prober-side), puts the endpoint in its view of the pool.
        let first = by_vantage.get(&obs.vantage).is_none();
        let health = by_vantage.or_default(&obs.vantage);
        let is_fresh = |h: &EndpointHealth| h.last_at.is_some_and(|t| at.since(t) <= fresh);
        // Whether a stale result counts among those that hold the last decision ([`stale_hold`]).
        let holding = |h: &EndpointHealth| (h.unprobeable_since.is_none(), h.prober_side.is_none());
        let (was_fresh, was_holding) = (is_fresh(health), holding(health));
        let changed = health.record(&obs.outcome, obs.at, th, &policy.flapping);
        // A fresh result of an endpoint not yet decided is a vote too (undecided), unless its
        // view of the pool is held healthy by another fresh result.
        let turned_fresh = is_fresh(health) != was_fresh
            && !self
                .steady
                .as_ref()
                .is_some_and(|s| s.holds(index, &obs.vantage, at));
        let moved = first || changed.is_some() || turned_fresh || holding(health) != was_holding;
        let service = &policy.service;
        if changed.is_some() {
            let view = self.view(pool, &obs.vantage, |h| h.verdict);
            vantages.record_view(&obs.vantage, service, pool, view, obs.at);
        }
        if vantages.recovering(&obs.vantage) {
            let reformed = self.view(pool, &obs.vantage, |h| h.reformed(th));
            if reformed != Verdict::Unknown {
                vantages.record_reformed(&obs.vantage, service, pool, reformed, obs.at);
            }
        }
        let transition = changed.map(|verdict| EndpointTransition {
            pool: pool.clone(),
            endpoint: obs.endpoint.clone(),
            vantage: obs.vantage.clone(),
            verdict,
        });
        (transition, moved, self.refresh_flap(index))
    }

    /// Pool `index`'s flap figures from its endpoints' histories now (the highest endpoint's
    /// percentage; flapping while any endpoint is), written to its verdict when they differ
    /// from what it shows, and then returned. A pool with no verdict yet has none to show.
    fn refresh_flap(&mut self, index: usize) -> Option<PoolFlap> {
        let pool = &self.policy.pools[index];
        let histories = || {
            pool.endpoints
                .iter()
                .filter_map(|e| self.evidence.get(&e.id))
                .flat_map(|m| m.iter())
                .map(|(_, h)| &h.flap)
        };
        let percent = histories().map(|h| h.percent()).fold(0.0, f64::max).round() as u32;
        let flapping = histories().any(|h| h.flapping());
        let slot = self.pools.get_mut(&pool.id)?;
        if (slot.flap_percent, slot.flapping) == (percent, flapping) {
            return None;
        }
        slot.flap_percent = percent;
        slot.flapping = flapping;
        Some(PoolFlap {
            service: self.policy.service.clone(),
            pool: pool.id.clone(),
            flap_percent: percent,
            flapping,
        })
    }

    /// Whether a decision at `at` may differ from the last one, with the suspect state at
    /// `generation` ([`Vantages::generation`]): always, unless the last one is
    /// [steady](Steady) until after `at`.
    /// When only the evidence's clock ran out, the results are read again (O(results)), the
    /// stale ones counted again, and the decision stands while every view it holds on still is
    /// held and every other result fresh at it still is fresh ([`Steady::extend`]).
    pub(super) fn needs_decision(&mut self, at: Millis, generation: u64) -> bool {
        let Some(steady) = self.steady.as_mut() else {
            return true;
        };
        if !steady.expired(at, generation) {
            return false;
        }
        if generation != steady.generation {
            return true;
        }
        let pools = &self.pools;
        let healthy = |p: &PoolId| healthy(pools, p);
        let clock = evidence_clock(&self.policy, &self.evidence, healthy, &mut steady.held, at);
        self.stale = clock.stale;
        !steady.extend(at, &clock)
    }

    /// The target pool the last decision waits for a passing probe of (`confirm_target`).
    pub(super) fn awaiting_confirmation(&self) -> Option<&PoolId> {
        self.confirm.as_ref()
    }

    /// How many results with a rise/fall verdict were stale (older than the freshness window:
    /// late or missing; not unprobeable or prober-side ones) at the last decision, or at the
    /// last re-check of a steady one (at least once per freshness window while results run
    /// late).
    pub fn stale_evidence(&self) -> u32 {
        self.stale
    }

    /// `vantage`'s view of `pool`: the pool verdict of each endpoint's `verdict` from it.
    fn view(
        &self,
        pool: &PoolId,
        vantage: &VantageId,
        verdict: impl Fn(&EndpointHealth) -> Verdict,
    ) -> Verdict {
        pool_verdict(self.assessor(None).members(pool).map(|e| {
            self.evidence
                .get(e)
                .and_then(|m| m.get(vantage))
                .map_or(Verdict::Unknown, &verdict)
        }))
    }

    /// Restarts the rise/fall counts of every endpoint as seen from `vantage`, which stopped
    /// being suspect at `since`: its verdicts must re-form from what it sees from then on.
    ///
    /// A result at `since` itself stays in its streak; a pool whose view re-formed from such
    /// results is reported to `vantages` at once ([`Vantages::record_reformed`]), so its view
    /// counts from `since`: a view left down since an earlier outage, with that outage's time,
    /// must not keep the "every pool went down within the window" rule from seeing a
    /// vantage-wide outage that is still going on.
    pub(super) fn restart_streaks(
        &mut self,
        vantage: &VantageId,
        since: Millis,
        vantages: &mut Vantages,
    ) {
        for h in self
            .evidence
            .values_mut()
            .filter_map(|m| m.get_mut(vantage))
        {
            h.restart_streak(since);
        }
        let th = self.policy.thresholds;
        let service = &self.policy.service;
        for pool in self.policy.pools.iter() {
            let reformed = self.view(&pool.id, vantage, |h| h.reformed(th));
            if reformed != Verdict::Unknown {
                vantages.record_reformed(vantage, service, &pool.id, reformed, since);
            }
        }
    }

    /// Evaluates the policy at `now` and commits the result (serving pool, budget, spacing).
    /// Returns the decision and whether it differs from the previous one (rule, pool, blocked
    /// switch or drained pools); `None` before adoption.
    pub(super) fn decide(
        &mut self,
        now: Millis,
        ctx: &mut Context<'_>,
    ) -> Option<(Arc<Decision>, bool)> {
        if !self.ready {
            return None;
        }
        let assessment = self.assessor(ctx.cluster).assess(now, ctx.vantages);
        let suspect = assessment.any_suspect;
        let (decision, changed) = self.commit(assessment, now, ctx);
        self.settle(&decision, suspect, now, ctx);
        Some((decision, changed))
    }

    /// Records whether `decision` (taken at `now`, `suspect` when a vantage point it read was
    /// suspect) is [steady](Steady) and until when, and how much evidence was stale.
    fn settle(&mut self, decision: &Decision, suspect: bool, now: Millis, ctx: &Context<'_>) {
        let mut held = self.steady.take().map(|s| s.held).unwrap_or_default();
        let pools = &self.pools;
        let healthy = |p: &PoolId| healthy(pools, p);
        let clock = evidence_clock(&self.policy, &self.evidence, healthy, &mut held, now);
        self.stale = clock.stale;
        let drilled = ctx
            .overrides
            .for_service(&self.policy.service)
            .next()
            .is_some();
        let suppressed = self.pools.values().any(|p| p.suppressed);
        let steady = steady_rule(decision.rule)
            && decision.blocked.is_none()
            && !suspect
            && !drilled
            && !suppressed;
        let stale_at = |at: Millis, fresh: std::time::Duration| {
            let expires = at.plus(fresh);
            (expires >= now).then(|| expires.plus(std::time::Duration::from_millis(1)))
        };
        let votes = self
            .provider_votes
            .values()
            .filter(|_| self.policy.quorum.provider_vote)
            .filter_map(|(_, at, fresh)| stale_at(*at, *fresh));
        let heartbeats = ctx.cluster.and_then(|c| c.next_stale(now));
        // The budget's refill shows in the next decision (`gslb_velocity_available`).
        let refill = self.bucket.next_refill(now);
        let others = votes
            .chain(heartbeats)
            .chain(refill)
            .min()
            .unwrap_or(Millis(u64::MAX));
        self.steady = steady.then(|| Steady {
            until: clock.next.map_or(others, |n| n.min(others)),
            others,
            fresh: clock.fresh,
            held,
            generation: ctx.vantages.generation(),
        });
    }

    /// How many results of `pool` with a rise/fall verdict are stale at `now` (older than the
    /// freshness window, not for a prober-side or unprobeable reason).
    fn stale_in(&self, pool: &PoolId, now: Millis) -> usize {
        let fresh = self.policy.fresh_for();
        self.assessor(None)
            .members(pool)
            .filter_map(|e| self.evidence.get(e))
            .flat_map(|m| m.values())
            .filter(|h| {
                h.verdict != Verdict::Unknown && h.verdict_at(now, fresh) == Verdict::Unknown
            })
            .filter(|h| h.prober_side.is_none() && h.unprobeable_since.is_none())
            .count()
    }

    /// Commits an assessment: damping bookkeeping and the pools' states, the rules, the safety
    /// rails and velocity limits, the serving pool and failover count, and the decision.
    fn commit(
        &mut self,
        assessment: Assessment,
        now: Millis,
        ctx: &mut Context<'_>,
    ) -> (Arc<Decision>, bool) {
        for (pool, assessed) in assessment.pools {
            self.record_pool(pool, assessed, now);
        }
        let mut drills = Drills::of(ctx.overrides, &self.policy.service);
        let input = RuleInput {
            current: self.active.as_ref(),
            pools: &self.pools,
            drained: &drills.drained,
            forced: drills.forced.as_ref(),
            restored: &drills.restored,
            failback_hold: self.policy.failback_hold.after(self.consecutive_failovers),
            now,
        };
        let cluster = ctx.cluster;
        let explain = |p: &PoolId| self.assessor(cluster).explain(p, now);
        let Candidate {
            rule,
            active,
            mut reasons,
            confirm,
        } = choose(&self.policy, &input, &explain);
        self.confirm = confirm;
        let rule_at = reasons.len().saturating_sub(1);
        for note in assessment.suspect_notes {
            reasons.insert(rule_at, note);
        }
        let (mut rule, active, blocked) = self.gate(rule, active, &drills, now, ctx, &mut reasons);
        if let Some(held) = active
            .as_ref()
            .and_then(|p| self.hold_on_stale(rule, p, now, &mut reasons))
        {
            rule = held;
        }
        let previous = self.switch_to(rule, active.as_ref(), now);
        drills.drained.retain(|p| Some(p) != active.as_ref());
        let decision = Decision {
            service: self.policy.service.clone(),
            at: now,
            active,
            previous,
            rule,
            blocked,
            drained: drills.drained,
            reasons,
            pools: self.pools.clone(),
        };
        let changed = self.last.as_ref().is_none_or(|l| {
            l.rule != decision.rule
                || l.active != decision.active
                || l.blocked != decision.blocked
                || l.drained != decision.drained
        });
        let decision = Arc::new(decision);
        self.last = Some(Arc::clone(&decision));
        (decision, changed)
    }

    /// Stale evidence holds: the rule to follow instead of `hold_unknown` when the serving
    /// pool's verdict is unknown because some of its results are late, with a reason saying
    /// so ([`stale_hold`]).
    fn hold_on_stale(
        &self,
        rule: Rule,
        serving: &PoolId,
        now: Millis,
        reasons: &mut Vec<String>,
    ) -> Option<Rule> {
        let held = stale_hold(self.last.as_deref(), rule, Some(serving))?;
        let stale = self.stale_in(serving, now);
        (stale > 0).then(|| {
            reasons.push(format!(
                "stale evidence holds: {stale} result(s) for {serving} are older than {} (probes running late); the last decision ({}) stands",
                humantime::format_duration(self.policy.fresh_for()),
                held.as_str()
            ));
            held
        })
    }

    /// Records one pool's assessment: its flap penalty (a healthy -> unhealthy transition is a
    /// flap) and its state as the rules will read it.
    fn record_pool(&mut self, pool: PoolId, assessed: PoolAssessment, now: Millis) {
        let damping = &self.policy.damping;
        let penalty = self.penalties.entry(pool.clone()).or_default();
        if assessed.previous == Verdict::Healthy && assessed.verdict == Verdict::Unhealthy {
            penalty.flap(now, damping);
        }
        let suppressed = penalty.update(now, damping);
        let penalty_value = penalty.value(now, damping).round() as u32;
        let slot = self
            .pools
            .entry(pool)
            .or_insert_with(|| PoolVerdict::unknown(now));
        if slot.verdict != assessed.verdict {
            slot.since = now;
        }
        slot.verdict = assessed.verdict;
        slot.votes = assessed.votes;
        slot.penalty = penalty_value;
        slot.suppressed = suppressed;
        slot.flap_percent = assessed.flap_percent.round() as u32;
        slot.flapping = assessed.flapping;
        slot.last_ok = assessed.last_ok;
        slot.by_vantage = assessed.by_vantage;
    }

    /// Moves the serving pool to `active` when it is a change: the time of the change (for
    /// the spacing rail) and, for a failover, the consecutive failover count (for the failback
    /// hold). Returns the pool that served before, when it is not `active`.
    fn switch_to(&mut self, rule: Rule, active: Option<&PoolId>, now: Millis) -> Option<PoolId> {
        let previous = self.active.as_ref().filter(|c| Some(*c) != active).cloned();
        if active.is_some() && active != self.active.as_ref() {
            self.last_change = Some(now);
            if rule == Rule::Failover {
                let consecutive = self
                    .last_failover
                    .is_some_and(|t| now.since(t) <= self.policy.failback_hold.max);
                self.consecutive_failovers = if consecutive {
                    self.consecutive_failovers + 1
                } else {
                    1
                };
                self.last_failover = Some(now);
            }
            self.active = active.cloned();
        }
        previous
    }

    /// Passes a switching candidate through the rails and the velocity limits; a refused
    /// switch becomes a hold that records what it blocked. Takes budget only for switches that
    /// go through. The revert of an ended drill is not spaced: it ends that drill's switch.
    fn gate(
        &mut self,
        rule: Rule,
        active: Option<PoolId>,
        drills: &Drills,
        now: Millis,
        ctx: &mut Context<'_>,
        reasons: &mut Vec<String>,
    ) -> (Rule, Option<PoolId>, Option<Blocked>) {
        let switching = self.active.is_some() && active.is_some() && active != self.active;
        if !switching {
            return (rule, active, None);
        }
        let to = active.clone().unwrap_or_else(|| PoolId(String::new()));
        let spacing = if rule == Rule::Restore && drills.reverts.contains(&to) {
            std::time::Duration::ZERO
        } else {
            self.policy.spacing()
        };
        let refused =
            match self.rails_refusal(rule, active.as_ref(), &to, &drills.drained, spacing, now) {
                Some(hold) => Some(hold),
                None if rule.is_automatic() => self.take_velocity(rule, &to, now, ctx),
                None => None,
            };
        match refused {
            Some((held, why)) => {
                reasons.push(why);
                (held, self.active.clone(), Some(Blocked { rule, to }))
            }
            None => (rule, active, None),
        }
    }

    /// The hold (dwell or rail hold) and its reason when a safety rail refuses the switch by
    /// `rule` to `candidate`, with changes spaced by `spacing`.
    fn rails_refusal(
        &self,
        rule: Rule,
        candidate: Option<&PoolId>,
        to: &PoolId,
        drained: &BTreeSet<PoolId>,
        spacing: std::time::Duration,
        now: Millis,
    ) -> Option<(Rule, String)> {
        let plan = rails::Plan {
            current: self.active.as_ref(),
            candidate,
            pools: &self.pools,
            drained,
            last_change: self.last_change,
            spacing,
            now,
        };
        let v = rails::check(&plan).err()?;
        let held = if matches!(v, Violation::Spacing { .. }) {
            Rule::Dwell
        } else {
            Rule::RailHold
        };
        let why = format!(
            "hold: {} to {to} refused by a safety rail: {v}",
            rule.as_str()
        );
        Some((held, why))
    }

    /// Takes one automatic switch from the service's velocity budget and the controller-wide
    /// window, or returns the velocity hold and its reason when either is spent.
    fn take_velocity(
        &mut self,
        rule: Rule,
        to: &PoolId,
        now: Millis,
        ctx: &mut Context<'_>,
    ) -> Option<(Rule, String)> {
        if self.bucket.available(now) == 0 {
            let why = format!(
                "hold: velocity limit: {} automatic switches per {} are spent; the next is available at {} or after an operator re-arm (blocked: {} to {to})",
                self.policy.velocity.burst,
                humantime::format_duration(self.policy.velocity.refill),
                self.bucket.next_at(now).rfc3339(),
                rule.as_str()
            );
            return Some((Rule::VelocityLimited, why));
        }
        if let Some(global) = ctx.global.as_deref_mut() {
            if !global.allows(now) {
                let why = format!(
                    "hold: controller-wide velocity limit: {} services already switched automatically within {} (blocked: {} to {to})",
                    global.max,
                    humantime::format_duration(global.window),
                    rule.as_str()
                );
                return Some((Rule::VelocityLimited, why));
            }
            global.record(now);
        }
        self.bucket.try_take(now);
        None
    }

    /// The engine's evidence, as an assessment reads it, with the cluster's votes.
    fn assessor<'a>(&'a self, cluster: Option<&'a ClusterView>) -> Assessor<'a> {
        Assessor {
            policy: &self.policy,
            evidence: &self.evidence,
            provider_votes: &self.provider_votes,
            pools: &self.pools,
            remote: &self.remote,
            cluster,
        }
    }
}

/// Whether `pool` is healthy by quorum in `pools` (as the last decision committed them).
fn healthy(pools: &ByPool<PoolVerdict>, pool: &PoolId) -> bool {
    pools
        .get(pool)
        .is_some_and(|p| p.verdict == Verdict::Healthy)
}
