//! One service's engine state: evidence per endpoint and vantage point, pool verdicts by
//! quorum, flap damping, the velocity budget and the serving pool. PURE: time is an argument.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::{EndpointId, Millis, Observation, PoolId, VantageId, Verdict};
use crate::policy::Policy;

use super::damping::FlapPenalty;
use super::decide::{Blocked, Candidate, Decision, PoolVerdict, Rule, RuleInput};
use super::health::{EndpointHealth, pool_verdict};
use super::overrides::{OverrideAction, Overrides};
use super::quorum::{Tally, Vote};
use super::rails::{self, Violation};
use super::rules::choose;
use super::vantage::{Suspicion, Vantages};
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
    pub global: Option<&'a mut SwitchWindow>,
    pub overrides: &'a Overrides,
}

/// One service's engine.
#[derive(Debug, Clone)]
pub struct ServiceEngine {
    policy: Policy,
    endpoint_pool: BTreeMap<EndpointId, PoolId>,
    evidence: BTreeMap<EndpointId, BTreeMap<VantageId, EndpointHealth>>,
    provider_votes: BTreeMap<PoolId, (Verdict, Millis, std::time::Duration)>,
    pools: BTreeMap<PoolId, PoolVerdict>,
    penalties: BTreeMap<PoolId, FlapPenalty>,
    ready: bool,
    active: Option<PoolId>,
    last_change: Option<Millis>,
    last_failover: Option<Millis>,
    consecutive_failovers: u32,
    bucket: TokenBucket,
    last: Option<Decision>,
}

impl ServiceEngine {
    /// Every pool unknown, nothing serving, not ready until [`ServiceEngine::adopt`].
    pub fn new(policy: Policy) -> Self {
        let endpoint_pool = policy
            .pools
            .iter()
            .flat_map(|p| p.endpoints.iter().map(|e| (e.id.clone(), p.id.clone())))
            .collect();
        let pools = policy
            .pools
            .iter()
            .map(|p| (p.id.clone(), PoolVerdict::unknown(Millis(0))))
            .collect();
        let bucket = TokenBucket::full(policy.velocity, Millis(0));
        Self {
            policy,
            endpoint_pool,
            evidence: BTreeMap::new(),
            provider_votes: BTreeMap::new(),
            pools,
            penalties: BTreeMap::new(),
            ready: false,
            active: None,
            last_change: None,
            last_failover: None,
            consecutive_failovers: 0,
            bucket,
            last: None,
        }
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Swaps in `policy`, which must [control like](Policy::controls_like) the current one
    /// (a reload that only changed `[observe]` or `rto_budget`); the state is kept.
    pub(crate) fn set_policy(&mut self, policy: Policy) {
        debug_assert!(self.policy.controls_like(&policy));
        self.policy = policy;
    }

    /// The pool serving now, as far as the engine knows.
    pub fn active(&self) -> Option<&PoolId> {
        self.active.as_ref()
    }

    /// The last decision.
    pub fn last_decision(&self) -> Option<&Decision> {
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
        self.endpoint_pool.get(endpoint)
    }

    /// Every endpoint's evidence, by endpoint then vantage point.
    pub fn evidence(
        &self,
    ) -> impl Iterator<Item = (&EndpointId, &PoolId, &BTreeMap<VantageId, EndpointHealth>)> {
        self.endpoint_pool
            .iter()
            .filter_map(|(e, p)| self.evidence.get(e).map(|m| (e, p, m)))
    }

    /// Adopts the pool the provider serves now (`None`: none of the policy's pools), so a
    /// restarted controller continues from the provider's state; decisions start now.
    pub fn adopt(&mut self, active: Option<PoolId>) {
        if active.is_some() {
            self.active = active;
        }
        self.ready = true;
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

    /// Records one probe result; prober-side failures only feed `vantages`.
    pub(super) fn observe(
        &mut self,
        obs: &Observation,
        vantages: &mut Vantages,
    ) -> Option<EndpointTransition> {
        let pool = self.endpoint_pool.get(&obs.endpoint)?.clone();
        vantages.record_result(&obs.vantage, obs.outcome.reason.is_prober_side(), obs.at);
        let health = self
            .evidence
            .entry(obs.endpoint.clone())
            .or_default()
            .entry(obs.vantage.clone())
            .or_default();
        let verdict = health.record(
            &obs.outcome,
            obs.at,
            self.policy.thresholds,
            &self.policy.flapping,
        )?;
        let view = pool_verdict(self.members(&pool).map(|e| {
            self.evidence
                .get(e)
                .and_then(|m| m.get(&obs.vantage))
                .map_or(Verdict::Unknown, |h| h.verdict)
        }));
        vantages.record_view(&obs.vantage, &self.policy.service, &pool, view, obs.at);
        Some(EndpointTransition {
            pool,
            endpoint: obs.endpoint.clone(),
            vantage: obs.vantage.clone(),
            verdict,
        })
    }

    fn members<'a>(&'a self, pool: &'a PoolId) -> impl Iterator<Item = &'a EndpointId> + 'a {
        self.policy
            .pool(pool)
            .into_iter()
            .flat_map(|p| p.endpoints.iter().map(|e| &e.id))
    }

    /// Each vantage point's view of `pool` at `now`, for those that reported freshly.
    fn views(&self, pool: &PoolId, now: Millis) -> BTreeMap<&VantageId, Verdict> {
        let fresh = self.policy.fresh_for();
        let mut by_vantage: BTreeMap<&VantageId, Vec<Verdict>> = BTreeMap::new();
        let mut reported: BTreeSet<&VantageId> = BTreeSet::new();
        for e in self.members(pool) {
            for (v, h) in self.evidence.get(e).into_iter().flatten() {
                let verdict = h.verdict_at(now, fresh);
                if h.last_at.is_some_and(|t| now.since(t) <= fresh) {
                    reported.insert(v);
                }
                by_vantage.entry(v).or_default().push(verdict);
            }
        }
        by_vantage
            .into_iter()
            .filter(|(v, _)| reported.contains(v))
            .map(|(v, vs)| (v, pool_verdict(vs)))
            .collect()
    }

    /// Evaluates the policy at `now` and commits the result (serving pool, budget, spacing).
    /// Returns the decision and whether it differs from the previous one (rule, pool, blocked
    /// switch or drained pools); `None` before adoption.
    pub(super) fn decide(
        &mut self,
        now: Millis,
        ctx: &mut Context<'_>,
    ) -> Option<(Decision, bool)> {
        if !self.ready {
            return None;
        }
        let mut suspects: BTreeMap<VantageId, Option<Suspicion>> = BTreeMap::new();
        let mut suspect_notes = BTreeSet::new();
        for pool in self.policy.pools.iter().map(|p| p.id.clone()) {
            let views = self.views(&pool, now);
            let mut votes: Vec<Vote> = views
                .iter()
                .map(|(v, verdict)| {
                    let s = suspects
                        .entry((*v).clone())
                        .or_insert_with(|| ctx.vantages.suspect(v, now));
                    if let (Some(s), Verdict::Unhealthy) = (&*s, verdict) {
                        suspect_notes.insert(format!("vantage point {v} is suspect: {s}"));
                    }
                    Vote {
                        verdict: *verdict,
                        suspect: s.is_some(),
                    }
                })
                .collect();
            if self.policy.quorum.provider_vote {
                if let Some((v, at, fresh_for)) = self.provider_votes.get(&pool) {
                    if now.since(*at) <= *fresh_for {
                        votes.push(Vote {
                            verdict: *v,
                            suspect: false,
                        });
                    }
                }
            }
            let votes = Tally::of(votes);
            let prev = self
                .pools
                .get(&pool)
                .map_or(Verdict::Unknown, |p| p.verdict);
            let verdict = votes.verdict(prev);
            let penalty = self.penalties.entry(pool.clone()).or_default();
            if prev == Verdict::Healthy && verdict == Verdict::Unhealthy {
                penalty.flap(now, &self.policy.damping);
            }
            let suppressed = penalty.update(now, &self.policy.damping);
            let penalty_value = penalty.value(now, &self.policy.damping).round() as u32;
            let histories = || {
                self.members(&pool)
                    .filter_map(|e| self.evidence.get(e))
                    .flat_map(|m| m.values())
                    .map(|h| &h.flap)
            };
            let flap = histories().map(|h| h.percent()).fold(0.0, f64::max);
            let last_ok = self
                .members(&pool)
                .filter_map(|e| self.evidence.get(e))
                .flat_map(|m| m.iter())
                .filter(|(v, _)| suspects.get(*v).is_none_or(Option::is_none))
                .filter(|(_, h)| h.last.as_ref().is_some_and(|o| o.success))
                .filter_map(|(_, h)| h.last_at)
                .max();
            let flapping = histories().any(|h| h.flapping());
            let slot = self
                .pools
                .entry(pool.clone())
                .or_insert_with(|| PoolVerdict::unknown(now));
            if slot.verdict != verdict {
                slot.since = now;
            }
            slot.verdict = verdict;
            slot.votes = votes;
            slot.penalty = penalty_value;
            slot.suppressed = suppressed;
            slot.flap_percent = flap.round() as u32;
            slot.flapping = flapping;
            slot.last_ok = last_ok;
        }

        let service = self.policy.service.clone();
        let mut drained = BTreeSet::new();
        let mut restored = BTreeSet::new();
        let mut forced = None;
        for o in ctx.overrides.for_service(&service) {
            match o.action {
                OverrideAction::Drain => {
                    drained.insert(o.pool.clone());
                }
                OverrideAction::Restore => {
                    restored.insert(o.pool.clone());
                }
                OverrideAction::Force => forced = Some(o.pool.clone()),
            }
        }
        let input = RuleInput {
            current: self.active.as_ref(),
            pools: &self.pools,
            drained: &drained,
            forced: forced.as_ref(),
            restored: &restored,
            failback_hold: self.policy.failback_hold.after(self.consecutive_failovers),
            now,
        };
        let explain = |p: &PoolId| self.explain(p, now);
        let Candidate {
            rule,
            active,
            mut reasons,
        } = choose(&self.policy, &input, &explain);
        let rule_at = reasons.len().saturating_sub(1);
        for note in suspect_notes {
            reasons.insert(rule_at, note);
        }
        let (rule, active, blocked) = self.gate(rule, active, &drained, now, ctx, &mut reasons);

        let previous = self
            .active
            .as_ref()
            .filter(|c| Some(*c) != active.as_ref())
            .cloned();
        if active.is_some() && active != self.active {
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
            self.active = active.clone();
        }
        drained.retain(|p| Some(p) != active.as_ref());
        let decision = Decision {
            service,
            at: now,
            active,
            previous,
            rule,
            blocked,
            drained,
            reasons,
            pools: self.pools.clone(),
        };
        let changed = self.last.as_ref().is_none_or(|l| {
            l.rule != decision.rule
                || l.active != decision.active
                || l.blocked != decision.blocked
                || l.drained != decision.drained
        });
        self.last = Some(decision.clone());
        Some((decision, changed))
    }

    /// Passes a switching candidate through the rails and the velocity limits; a refused
    /// switch becomes a hold that records what it blocked. Takes budget only for switches that
    /// go through.
    fn gate(
        &mut self,
        rule: Rule,
        active: Option<PoolId>,
        drained: &BTreeSet<PoolId>,
        now: Millis,
        ctx: &mut Context<'_>,
        reasons: &mut Vec<String>,
    ) -> (Rule, Option<PoolId>, Option<Blocked>) {
        let switching = self.active.is_some() && active.is_some() && active != self.active;
        if !switching {
            return (rule, active, None);
        }
        let current = self.active.clone();
        let hold = |held: Rule, to: &PoolId, why: String, reasons: &mut Vec<String>| {
            reasons.push(why);
            (
                held,
                current.clone(),
                Some(Blocked {
                    rule,
                    to: to.clone(),
                }),
            )
        };
        let to = active.clone().unwrap_or_else(|| PoolId(String::new()));
        let plan = rails::Plan {
            current: self.active.as_ref(),
            candidate: active.as_ref(),
            pools: &self.pools,
            drained,
            last_change: self.last_change,
            spacing: self.policy.spacing(),
            now,
        };
        if let Err(v) = rails::check(&plan) {
            let held = if matches!(v, Violation::Spacing { .. }) {
                Rule::Dwell
            } else {
                Rule::RailHold
            };
            return hold(
                held,
                &to,
                format!(
                    "hold: {} to {to} refused by a safety rail: {v}",
                    rule.as_str()
                ),
                reasons,
            );
        }
        if !rule.is_automatic() {
            return (rule, active, None);
        }
        if self.bucket.available(now) == 0 {
            return hold(
                Rule::VelocityLimited,
                &to,
                format!(
                    "hold: velocity limit: {} automatic switches per {} are spent; the next is available at {} or after an operator re-arm (blocked: {} to {to})",
                    self.policy.velocity.burst,
                    humantime::format_duration(self.policy.velocity.refill),
                    self.bucket.next_at(now).rfc3339(),
                    rule.as_str()
                ),
                reasons,
            );
        }
        if let Some(global) = ctx.global.as_deref_mut() {
            if !global.allows(now) {
                let (max, window) = (global.max, global.window);
                return hold(
                    Rule::VelocityLimited,
                    &to,
                    format!(
                        "hold: controller-wide velocity limit: {max} services already switched automatically within {} (blocked: {} to {to})",
                        humantime::format_duration(window),
                        rule.as_str()
                    ),
                    reasons,
                );
            }
            global.record(now);
        }
        self.bucket.try_take(now);
        (rule, active, None)
    }

    /// A one-line description of a pool's evidence, e.g.
    /// `pool seoul unhealthy by quorum (0 up, 1 down of 1 fresh): endpoint ... failed 3 ...`.
    pub fn explain(&self, pool: &PoolId, now: Millis) -> String {
        let fresh = self.policy.fresh_for();
        let th = self.policy.thresholds;
        let state = self.pools.get(pool);
        let v = state.map_or(Verdict::Unknown, |s| s.verdict);
        let t = state.map(|s| s.votes).unwrap_or_default();
        let vantages: BTreeSet<&VantageId> = self
            .members(pool)
            .filter_map(|e| self.evidence.get(e))
            .flat_map(|m| m.keys())
            .collect();
        let mut parts = Vec::new();
        for e in self.members(pool) {
            let per = self.evidence.get(e);
            if per.is_none_or(BTreeMap::is_empty) {
                parts.push(format!("endpoint {e} no probe result yet"));
            }
            for (vantage, h) in per.into_iter().flatten() {
                let from = if vantages.len() > 1 {
                    format!(" from {vantage}")
                } else {
                    String::new()
                };
                let text = match h.verdict_at(now, fresh) {
                    Verdict::Unknown if h.last_at.is_some() && h.verdict != Verdict::Unknown => {
                        format!(
                            "stale (no result for over {})",
                            humantime::format_duration(fresh)
                        )
                    }
                    _ => h.explain(th),
                };
                parts.push(format!("endpoint {e}{from} {text}"));
            }
        }
        let mut votes = format!("{} up, {} down of {} fresh", t.up, t.down, t.voters());
        if t.discounted > 0 {
            votes.push_str(&format!(", {} suspect discounted", t.discounted));
        }
        format!("pool {pool} {v} by quorum ({votes}): {}", parts.join("; "))
    }
}
