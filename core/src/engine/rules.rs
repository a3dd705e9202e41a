//! The failover rules and their precedence. Pure.
//!
//! [`choose`] reads quorum verdicts and drills and returns a [`Candidate`]: the first rule of
//! [`RULES`] that matches decides. Each rule is one function that either does not apply
//! (`None`) or names the pool it wants serving, the pools whose evidence explains it and why.
//! Nothing here keeps state or applies the safety rails and velocity limits: the service engine
//! passes a switching candidate through those afterwards, which may turn it into a hold.

use crate::model::{PoolId, Verdict};
use crate::policy::{Failback, Policy};

use super::decide::{Candidate, PoolVerdict, Rule, RuleInput};

/// What every rule reads: the policy, the rule input, and the two pools derived from them once.
struct Ctx<'a> {
    policy: &'a Policy,
    input: &'a RuleInput<'a>,
    /// The most preferred healthy pool that no drill drains.
    best: Option<&'a PoolId>,
    /// The most preferred healthy pool that a drill drains: a real outage outranks a drill, so
    /// a failover may use it when no other pool is healthy.
    best_drained: Option<&'a PoolId>,
}

/// A matching rule's choice: the pool it wants serving (`None` only while awaiting evidence),
/// the pools whose evidence explains it (in the order the reasons list them) and why.
struct Choice<'a> {
    active: Option<&'a PoolId>,
    evidence: Vec<&'a PoolId>,
    why: String,
}

impl<'a> Choice<'a> {
    fn new(active: Option<&'a PoolId>, evidence: Vec<&'a PoolId>, why: String) -> Self {
        Self {
            active,
            evidence,
            why,
        }
    }
}

/// One rule: `None` when it does not apply. Rules read the context only; which rule wins is
/// decided by the order of [`RULES`] alone.
type RuleFn = for<'a> fn(&Ctx<'a>) -> Option<Choice<'a>>;

/// The failover rules in precedence order: the first that matches decides, and the decision
/// follows the rule it is listed with. A rule may assume that no rule above it matched.
///
/// | #  | Rule                | Matches when                                          | Why it outranks the rules below |
/// |----|---------------------|-------------------------------------------------------|---------------------------------|
/// | 1  | `force`             | a drill forces a pool and that pool is healthy        | an operator's explicit choice; a forced pool that is not healthy is only noted (a drill never outranks the evidence) |
/// | 2  | `serve_preferred`   | nothing serves yet; the most preferred healthy pool has no more preferred pool without a verdict | every rule below needs a serving pool to move from or keep |
/// | 3  | `awaiting_evidence` | nothing serves yet (and rule 2 did not match)         | as rule 2: nothing is pushed until the evidence is complete |
/// | 4  | `drain`             | a drill drains the serving pool; another pool is healthy | an operator's drill moves traffic before the serving pool's own evidence is read |
/// | 5  | `rail_hold`         | a drill drains the serving pool; no other pool is healthy, or the serving pool is not down | never zero serving pools: the drained pool keeps serving (when it is down and a drained pool is healthy, a real outage outranks the drills: 6, 7) |
/// | 6  | `confirm_target`    | the serving pool is down by quorum; the target has passed no probe since it went down | a failover the prober cannot confirm may be the prober's own outage |
/// | 7  | `failover`          | the serving pool is down by quorum; a pool is healthy (drained if no other is) | a real outage outranks drills and every failback rule |
/// | 8  | `fail_static`       | the serving pool is down (or unknown with discounted suspect down votes) and no pool is healthy | with nowhere to go, writing nothing is safest |
/// | 9  | `prober_suspect`    | the serving pool is unknown, only suspect vantage points say down, another pool is healthy | suspect evidence points at the prober: hold instead of acting on it |
/// | 10 | `hold_unknown`      | the serving pool's verdict is unknown                 | unknown never causes a switch |
/// | 11 | `restore`           | the serving pool is healthy; a drill restores a more preferred healthy pool | the operator's failback outranks `failback = "manual"` and the holds |
/// | 12 | `stay`              | the serving pool is healthy; no more preferred pool is | nothing better to return to |
/// | 13 | `failback_manual`   | a more preferred pool is healthy; `failback = "manual"` | only an operator returns traffic |
/// | 14 | `suppressed`        | as 13 with `auto`; flap damping suppresses that pool  | a flapping pool must settle before it gets traffic back |
/// | 15 | `failback_hold`     | as 13 with `auto`; healthy for less than the failback hold | a recovered pool must stay healthy for the hold first |
/// | 16 | `failback`          | as 13 with `auto`                                     | the last rule: return to the most preferred pool |
const RULES: &[(Rule, RuleFn)] = &[
    (Rule::Force, force),
    (Rule::ServePreferred, serve_preferred),
    (Rule::AwaitingEvidence, awaiting_evidence),
    (Rule::Drain, drain),
    (Rule::RailHold, keep_drained),
    (Rule::ConfirmTarget, confirm_target),
    (Rule::Failover, failover),
    (Rule::FailStatic, fail_static),
    (Rule::ProberSuspect, prober_suspect),
    (Rule::HoldUnknown, hold_unknown),
    (Rule::Restore, restore),
    (Rule::Stay, stay),
    (Rule::FailbackManual, failback_manual),
    (Rule::Suppressed, suppressed),
    (Rule::FailbackHold, failback_hold),
    (Rule::Failback, failback),
];

/// Applies the failover rules in their precedence order (`RULES`), first match wins.
/// `explain(pool)` describes a pool's evidence. The reasons are a note on a forced pool that is
/// not healthy (if any), the evidence of the pools the rule names, then `rule: <why>`.
pub fn choose(
    policy: &Policy,
    input: &RuleInput<'_>,
    explain: &dyn Fn(&PoolId) -> String,
) -> Candidate {
    let ctx = Ctx::new(policy, input);
    let mut reasons: Vec<String> = ctx.forced_note().into_iter().collect();
    let (rule, choice) = RULES
        .iter()
        .find_map(|(rule, applies)| applies(&ctx).map(|c| (*rule, c)))
        .expect("a rule applies to every serving pool's verdict (the last: a healthy one)");
    // `confirm_target` names the serving pool, then the target it waits for.
    let confirm = (rule == Rule::ConfirmTarget)
        .then(|| choice.evidence.get(1).copied().cloned())
        .flatten();
    reasons.extend(choice.evidence.into_iter().map(explain));
    reasons.push(format!("rule: {}", choice.why));
    Candidate {
        rule,
        active: choice.active.cloned(),
        reasons,
        confirm,
    }
}

impl<'a> Ctx<'a> {
    fn new(policy: &'a Policy, input: &'a RuleInput<'a>) -> Self {
        let mut ctx = Self {
            policy,
            input,
            best: None,
            best_drained: None,
        };
        ctx.best = ctx.most_preferred_healthy(false);
        ctx.best_drained = ctx.most_preferred_healthy(true);
        ctx
    }

    /// The most preferred healthy pool among those a drill drains (`drained`) or not.
    fn most_preferred_healthy(&self, drained: bool) -> Option<&'a PoolId> {
        self.ids()
            .find(|p| self.eligible(p) != drained && self.verdict(p) == Verdict::Healthy)
    }

    /// The policy's pools, most preferred first.
    fn ids(&self) -> impl Iterator<Item = &'a PoolId> + use<'a> {
        self.policy.pools.iter().map(|p| &p.id)
    }

    fn state(&self, p: &PoolId) -> Option<&'a PoolVerdict> {
        self.input.pools.get(p)
    }

    fn verdict(&self, p: &PoolId) -> Verdict {
        self.state(p).map_or(Verdict::Unknown, |v| v.verdict)
    }

    /// Whether no drill drains `p`.
    fn eligible(&self, p: &PoolId) -> bool {
        !self.input.drained.contains(p)
    }

    fn rank(&self, p: &PoolId) -> Option<usize> {
        self.policy.pools.iter().position(|x| &x.id == p)
    }

    /// The serving pool when no drill drains it (rules 6 and below).
    fn serving(&self) -> Option<&'a PoolId> {
        self.input.current.filter(|c| self.eligible(c))
    }

    /// The serving pool when its verdict is `verdict`.
    fn serving_if(&self, verdict: Verdict) -> Option<&'a PoolId> {
        self.serving().filter(|c| self.verdict(c) == verdict)
    }

    /// Whether the serving pool's unknown verdict hides down votes of suspect vantage points.
    fn discounted(&self, cur: &PoolId) -> bool {
        self.state(cur).is_some_and(|s| s.votes.discounted > 0)
    }

    /// Whether `p` is more preferred than `cur`, not drained and healthy.
    fn better(&self, p: &PoolId, cur: &PoolId) -> bool {
        self.rank(p) < self.rank(cur) && self.eligible(p) && self.verdict(p) == Verdict::Healthy
    }

    /// The serving pool when it is down by quorum, and the pool a failover would move to: the
    /// most preferred healthy pool, else the most preferred healthy drained one (a real outage
    /// outranks the drills, the serving pool's own drain included).
    fn failover_target(&self) -> Option<(&'a PoolId, &'a PoolId)> {
        let cur = self
            .input
            .current
            .filter(|c| self.verdict(c) == Verdict::Unhealthy)?;
        Some((cur, self.best.or(self.best_drained)?))
    }

    /// The healthy serving pool and the more preferred healthy pool a failback would return to.
    fn failback_target(&self) -> Option<(&'a PoolId, &'a PoolId)> {
        let cur = self.serving_if(Verdict::Healthy)?;
        Some((cur, self.best.filter(|b| self.better(b, cur))?))
    }

    /// The note on a drill that forces a pool that is not healthy.
    fn forced_note(&self) -> Option<String> {
        let f = self.input.forced?;
        let v = self.verdict(f);
        (v != Verdict::Healthy).then(|| {
            format!("a drill forces {f}, but it is {v}: a drill never outranks the evidence")
        })
    }
}

fn force<'a>(c: &Ctx<'a>) -> Option<Choice<'a>> {
    let f = c
        .input
        .forced
        .filter(|f| c.verdict(f) == Verdict::Healthy)?;
    let why = format!("a drill forces {f}, which is healthy");
    Some(Choice::new(Some(f), vec![f], why))
}

fn serve_preferred<'a>(c: &Ctx<'a>) -> Option<Choice<'a>> {
    if c.input.current.is_some() {
        return None;
    }
    let b = c.best?;
    let first_unknown = c
        .ids()
        .position(|p| c.eligible(p) && c.verdict(p) == Verdict::Unknown);
    first_unknown.is_none_or(|u| Some(u) > c.rank(b)).then(|| {
        let why = format!("serve the most preferred healthy pool ({b})");
        Choice::new(Some(b), vec![b], why)
    })
}

fn awaiting_evidence<'a>(c: &Ctx<'a>) -> Option<Choice<'a>> {
    c.input.current.is_none().then(|| {
        let why = "wait until every more preferred pool has a verdict".into();
        Choice::new(None, Vec::new(), why)
    })
}

fn drain<'a>(c: &Ctx<'a>) -> Option<Choice<'a>> {
    let cur = c.input.current.filter(|cur| !c.eligible(cur))?;
    let b = c.best?;
    let why = format!("a drill drains {cur}: move to the most preferred healthy pool {b}");
    Some(Choice::new(Some(b), vec![cur, b], why))
}

fn keep_drained<'a>(c: &Ctx<'a>) -> Option<Choice<'a>> {
    let cur = c.input.current.filter(|cur| !c.eligible(cur))?;
    if c.failover_target().is_some() {
        // The drained serving pool is down and a pool is healthy, drained or not: a real
        // outage outranks the drills (`confirm_target`, then `failover`).
        return None;
    }
    let why = format!(
        "a drill drains {cur} but no other pool is healthy: keeping {cur} (never zero serving pools)"
    );
    Some(Choice::new(Some(cur), vec![cur], why))
}

fn confirm_target<'a>(c: &Ctx<'a>) -> Option<Choice<'a>> {
    let (cur, t) = c.failover_target()?;
    let unconfirmed = c
        .state(t)
        .and_then(|s| s.last_ok)
        .is_none_or(|ok| c.state(cur).is_some_and(|s| ok < s.since));
    unconfirmed.then(|| {
        let why = format!(
            "failover from {cur} to {t} waits for a probe of {t} to pass after {cur} went down (confirms the prober still reaches the regions)"
        );
        Choice::new(Some(cur), vec![cur, t], why)
    })
}

fn failover<'a>(c: &Ctx<'a>) -> Option<Choice<'a>> {
    let (cur, t) = c.failover_target()?;
    let why = if c.best.is_none() {
        format!(
            "failover from {cur} to {t}, which a drill drains: a real outage outranks the drill"
        )
    } else {
        format!("failover from {cur} to the most preferred healthy pool {t}")
    };
    Some(Choice::new(Some(t), vec![cur, t], why))
}

fn fail_static<'a>(c: &Ctx<'a>) -> Option<Choice<'a>> {
    let cur = c.serving()?;
    let why = match c.verdict(cur) {
        Verdict::Unhealthy => {
            format!("fail static: no pool is healthy, keeping {cur} and writing nothing")
        }
        Verdict::Unknown if c.best.is_none() && c.discounted(cur) => format!(
            "fail static: no pool is healthy, keeping {cur} and writing nothing (down votes of suspect vantage points are discounted)"
        ),
        _ => return None,
    };
    Some(Choice::new(Some(cur), c.ids().collect(), why))
}

fn prober_suspect<'a>(c: &Ctx<'a>) -> Option<Choice<'a>> {
    let cur = c.serving_if(Verdict::Unknown)?;
    (c.best.is_some() && c.discounted(cur)).then(|| {
        let why = format!(
            "{cur} looks down only from suspect vantage points: the evidence points at the prober, not the region, so hold"
        );
        Choice::new(Some(cur), vec![cur], why)
    })
}

fn hold_unknown<'a>(c: &Ctx<'a>) -> Option<Choice<'a>> {
    let cur = c.serving_if(Verdict::Unknown)?;
    let why = format!("evidence for {cur} is unknown; unknown never causes a switch");
    Some(Choice::new(Some(cur), vec![cur], why))
}

fn restore<'a>(c: &Ctx<'a>) -> Option<Choice<'a>> {
    let cur = c.serving_if(Verdict::Healthy)?;
    let r = c
        .ids()
        .filter(|p| c.input.restored.contains(*p))
        .find(|p| c.better(p, cur))?;
    let why = format!("a drill restores {r}: return from {cur}");
    Some(Choice::new(Some(r), vec![r], why))
}

fn stay<'a>(c: &Ctx<'a>) -> Option<Choice<'a>> {
    let cur = c.serving_if(Verdict::Healthy)?;
    if c.failback_target().is_some() {
        return None;
    }
    let why = format!("{cur} is healthy and no more preferred pool is: stay");
    Some(Choice::new(Some(cur), vec![cur], why))
}

fn failback_manual<'a>(c: &Ctx<'a>) -> Option<Choice<'a>> {
    let (cur, b) = c.failback_target()?;
    (c.policy.failback == Failback::Manual).then(|| {
        let why = format!(
            "failback is manual: {b} is healthy again but {cur} keeps serving until an operator restores {b}"
        );
        Choice::new(Some(cur), vec![b], why)
    })
}

fn suppressed<'a>(c: &Ctx<'a>) -> Option<Choice<'a>> {
    let (cur, b) = c.failback_target()?;
    let s = c.state(b).filter(|s| s.suppressed)?;
    let why = format!(
        "failback to {b} is suppressed by flap damping (penalty {} above reuse {})",
        s.penalty, c.policy.damping.reuse
    );
    Some(Choice::new(Some(cur), vec![b], why))
}

fn failback_hold<'a>(c: &Ctx<'a>) -> Option<Choice<'a>> {
    let (cur, b) = c.failback_target()?;
    let now = c.input.now;
    let healthy_for = now.since(c.state(b).map_or(now, |s| s.since));
    let hold = c.input.failback_hold;
    (healthy_for < hold).then(|| {
        let why = format!(
            "failback to {b} waits until it has been healthy for {} (healthy for {})",
            humantime::format_duration(hold),
            humantime::format_duration(healthy_for)
        );
        Choice::new(Some(cur), vec![b], why)
    })
}

fn failback<'a>(c: &Ctx<'a>) -> Option<Choice<'a>> {
    let (cur, b) = c.failback_target()?;
    let why = format!("failback (auto) from {cur} to {b}");
    Some(Choice::new(Some(b), vec![b], why))
}
