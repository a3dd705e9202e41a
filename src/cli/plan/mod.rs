//! `gslb plan`: what `gslb run` would change right now, and why, without writing anything.
//!
//! For every policy: read the provider's current state (one `observe`, never an `apply`),
//! probe every endpoint once from this vantage point, and evaluate with the real engine in
//! simulated time. The engine is fed as if each probe result had held for `rounds` probe
//! rounds spaced by the policy's interval, ending now (default: the larger of `rise` and
//! `fall`, enough for any verdict to form), with the provider's serving pool adopted before the
//! first round and the drills of the state file that are still active now. So the plan is what
//! a controller (re)started now would decide once the current results persisted: it has no
//! earlier switch (no minimum dwell or spacing hold) and a full velocity budget. Canary targets
//! are not probed. What would be written comes from the reconciler's own pure write planner
//! ([`gslb_core::planner::plan`]), with a fresh write-fight state.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;

use gslb_provider::{Change, FailoverStyle, ObservedState, Plan, Provider, ProviderError};

use crate::cli::run::{Bind, RunError, VotingBinder};
use crate::config::{ClusterSettings, Settings};
use crate::daemon::controller;
use crate::daemon::dataplane::{self, VoteRegistry};
use crate::io::clock::Clock;
use crate::io::probe::{ProbeTarget, Prober};
use crate::io::state_file::StateFile;
use gslb_core::engine::{Decision, Engine, EngineSettings, Input, Override};
use gslb_core::model::{
    EndpointId, Millis, Observation, PoolId, ProbeOutcome, ServiceId, VantageId,
};
use gslb_core::planner::{self, FightGuard, ProviderPools, Request};
use gslb_core::policy::{Mode, Policy};

/// One service's provider read and probe results.
#[derive(Debug, Clone)]
pub struct Gathered {
    /// The policy.
    pub policy: Policy,
    /// The provider's name (`route53`, `cloudflare`).
    pub provider: &'static str,
    /// How the provider expresses the serving pool.
    pub style: FailoverStyle,
    /// The provider's state, read now.
    pub observed: ObservedState,
    /// One probe result per endpoint, in policy order.
    pub probes: Vec<(EndpointId, ProbeOutcome)>,
}

/// Reads `provider` once and probes every target once (concurrently). Writes nothing.
///
/// # Errors
/// The provider read failed.
pub async fn gather<P: Provider>(
    policy: &Policy,
    provider: &P,
    targets: Vec<ProbeTarget>,
    prober: &Arc<Prober>,
) -> Result<Gathered, ProviderError> {
    let observed = provider.observe().await?;
    let mut running = tokio::task::JoinSet::new();
    for (i, target) in targets.into_iter().enumerate() {
        let prober = prober.clone();
        running.spawn(async move {
            let outcome = prober.probe(&target).await;
            (i, target.endpoint().clone(), outcome)
        });
    }
    let mut probes: Vec<_> = running.join_all().await;
    probes.sort_by_key(|(i, _, _)| *i);
    Ok(Gathered {
        policy: policy.clone(),
        provider: provider.name(),
        style: provider.style(),
        observed,
        probes: probes.into_iter().map(|(_, e, o)| (e, o)).collect(),
    })
}

/// What `gslb run` would do to a service's provider.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Nothing to write.
    NoChange,
    /// These writes, in order.
    Changes(Plan),
    /// The reconciler's guard would refuse the plan (e.g. traffic to an unhealthy fallback
    /// pool), with why.
    Refused(String),
    /// No plan can be made (e.g. the decision's pool is missing at the provider).
    Error(String),
}

/// One service's plan.
#[derive(Debug, Clone)]
pub struct ServicePlan {
    /// The gathered inputs.
    pub gathered: Gathered,
    /// The pool the provider serves now (`None`: none of the policy's pools).
    pub serving: Option<PoolId>,
    /// The engine's decision: the switch if one happened over the rounds, else the last one.
    pub decision: Option<Decision>,
    /// What would be written.
    pub outcome: Outcome,
    /// `[cluster]` only: this instance's role for the binding, the writer and its epoch
    /// ([`writer::describe`]).
    pub cluster: Option<String>,
    /// `[cluster]` only: each pool's votes per vantage point ([`votes::lines`]).
    pub votes: Vec<String>,
    /// Route 53 data-plane mode only ([`Bind::data_plane`]): per pool its tally check,
    /// threshold and record state, and whether `gslb provision` has something to do.
    pub data_plane: Option<(Vec<String>, bool)>,
}

/// Evaluates every gathered service with one engine at `now` from `vantage` (see the module
/// docs for the rounds). `drills` are the state file's overrides; those expired by `now` are
/// left out. `rounds` of `None` (or 0) means `max(rise, fall)` per policy.
pub fn evaluate(
    gathered: Vec<Gathered>,
    settings: &EngineSettings,
    drills: Vec<Override>,
    vantage: &VantageId,
    now: Millis,
    rounds: Option<u32>,
) -> Vec<ServicePlan> {
    evaluate_in(gathered, settings, drills, (vantage, None), now, rounds)
}

/// [`evaluate`] as one vantage point of a cluster: with the other vantage points' votes of
/// `peers` (read from etcd) counted as `gslb run` here would count them.
pub fn evaluate_in(
    gathered: Vec<Gathered>,
    settings: &EngineSettings,
    drills: Vec<Override>,
    (vantage, peers): (&VantageId, Option<(&ClusterSettings, &votes::Peers)>),
    now: Millis,
    rounds: Option<u32>,
) -> Vec<ServicePlan> {
    let rounds_of = |p: &Policy| {
        rounds
            .filter(|r| *r > 0)
            .unwrap_or(p.thresholds.rise.max(p.thresholds.fall))
    };
    let longest = gathered
        .iter()
        .map(|g| g.policy.probe.interval.saturating_mul(rounds_of(&g.policy)))
        .max()
        .unwrap_or_default();
    let start = Millis(
        now.0
            .saturating_sub(u64::try_from(longest.as_millis()).unwrap_or(0)),
    );
    let pools: BTreeMap<_, ProviderPools> = gathered
        .iter()
        .map(|g| (g.policy.service.clone(), ProviderPools::of(&g.policy)))
        .collect();
    let mut run = Run {
        engine: Engine::new(gathered.iter().map(|g| g.policy.clone()), settings),
        decisions: BTreeMap::new(),
    };
    let active: Vec<Override> = drills.into_iter().filter(|o| o.expires > now).collect();
    run.feed(start, Input::LoadOverrides { overrides: active });
    let mut steps = rounds_of_probes(&gathered, vantage, now, rounds_of);
    if let Some((cluster, peers)) = peers {
        let mut times: Vec<Millis> = steps.iter().map(|(at, _)| *at).collect();
        times.dedup();
        let (at_start, beats): (Vec<_>, Vec<_>) = peers
            .inputs(cluster, vantage, start, &times)
            .into_iter()
            .partition(|(_, i)| !matches!(i, Input::Heartbeat { .. }));
        for (at, input) in at_start {
            run.feed(at, input);
        }
        // Each round's heartbeats before its probes (a stable sort keeps them first).
        steps = beats.into_iter().chain(steps).collect();
        steps.sort_by_key(|(at, _)| *at);
    }
    for g in &gathered {
        let pool = pools[&g.policy.service].serving(&g.observed);
        let service = g.policy.service.clone();
        run.feed(start, Input::Adopt { service, pool });
    }
    for (at, input) in steps {
        run.feed(at, input);
    }
    run.feed(now, Input::Tick);
    gathered
        .into_iter()
        .map(|g| {
            let pools = &pools[&g.policy.service];
            let decision = run.decisions.remove(&g.policy.service);
            let outcome = outcome(&g, decision.as_ref(), now);
            ServicePlan {
                serving: pools.serving(&g.observed),
                gathered: g,
                decision,
                outcome,
                cluster: None,
                votes: Vec::new(),
                data_plane: None,
            }
        })
        .collect()
}

/// The engine fed in simulated time, and the decision kept per service: the switch if one
/// happened, else the last one.
struct Run {
    engine: Engine,
    decisions: BTreeMap<gslb_core::model::ServiceId, Decision>,
}

impl Run {
    fn feed(&mut self, at: Millis, input: Input) {
        for (d, _) in self.engine.step(at, &input).decisions {
            let keep = self
                .decisions
                .get(&d.service)
                .is_none_or(|kept| d.switched() || !kept.switched());
            if keep {
                self.decisions
                    .insert(d.service.clone(), Decision::clone(&d));
            }
        }
    }
}

/// Every service's probe results as if each had held for its rounds, spaced by the policy's
/// interval and ending at `now`, in time order.
fn rounds_of_probes(
    gathered: &[Gathered],
    vantage: &VantageId,
    now: Millis,
    rounds_of: impl Fn(&Policy) -> u32,
) -> Vec<(Millis, Input)> {
    let mut steps: Vec<(Millis, Input)> = Vec::new();
    for g in gathered {
        let n = rounds_of(&g.policy);
        let interval = u64::try_from(g.policy.probe.interval.as_millis()).unwrap_or(u64::MAX);
        for k in 0..n {
            let at = Millis(
                now.0
                    .saturating_sub(u64::from(n - 1 - k).saturating_mul(interval)),
            );
            for (endpoint, outcome) in &g.probes {
                let observation = Observation {
                    endpoint: endpoint.clone(),
                    vantage: vantage.clone(),
                    at,
                    outcome: outcome.clone(),
                };
                let service = g.policy.service.clone();
                steps.push((
                    at,
                    Input::Observe {
                        service,
                        observation,
                    },
                ));
            }
        }
    }
    steps.sort_by_key(|(at, _)| *at);
    steps
}

/// What `gslb run`'s reconciler would do with `decision` against the gathered provider state
/// at `now`: its own planner ([`planner::plan`]) with a fresh write-fight state (no earlier
/// write). Shadow mode plans as usual (and [`render`] says nothing would be written).
pub fn outcome(g: &Gathered, decision: Option<&Decision>, now: Millis) -> Outcome {
    let request = Request {
        pools: &ProviderPools::of(&g.policy),
        style: g.style,
        shadow: g.policy.mode == Mode::Shadow,
        decision,
        observed: &g.observed,
        restamp: None,
    };
    match planner::plan(&request, &mut FightGuard::default(), now).map(|p| p.outcome) {
        Ok(planner::Outcome::NotPushed | planner::Outcome::InSync) => Outcome::NoChange,
        Ok(planner::Outcome::Write { plan, .. } | planner::Outcome::Shadow(plan)) => {
            Outcome::Changes(plan)
        }
        Ok(planner::Outcome::Refused(r)) => Outcome::Refused(r.reason),
        Ok(planner::Outcome::Stopped { .. }) => {
            Outcome::Refused("another writer keeps reverting gslb's change".into())
        }
        Err(e) => Outcome::Error(e.to_string()),
    }
}

/// Writes the plans for people: per service the provider's serving pool, the probe results,
/// the decision with its rule and reasons, and the exact writes (or "no change").
///
/// # Errors
/// Writing to `out` failed.
pub fn render(plans: &[ServicePlan], out: &mut impl Write) -> std::io::Result<()> {
    for p in plans {
        let g = &p.gathered;
        let policy = &g.policy;
        writeln!(
            out,
            "service {} ({}, {}):",
            policy.service, policy.hostname, g.provider
        )?;
        writeln!(
            out,
            "  provider serves: {}",
            name_or(p.serving.as_ref(), "none of the policy's pools")
        )?;
        render_probes(g, out)?;
        match &p.decision {
            Some(d) => {
                writeln!(
                    out,
                    "  decision: {} -> {}",
                    d.rule.as_str(),
                    name_or(d.active.as_ref(), "-")
                )?;
                for r in &d.reasons {
                    writeln!(out, "    - {r}")?;
                }
            }
            None => writeln!(out, "  decision: none")?,
        }
        if !p.votes.is_empty() {
            writeln!(out, "  votes:")?;
            for line in &p.votes {
                writeln!(out, "    {line}")?;
            }
        }
        if let Some(role) = &p.cluster {
            writeln!(out, "  cluster: {role}")?;
        }
        if let Some((lines, _)) = &p.data_plane {
            render_data_plane(p, lines, out)?;
            continue;
        }
        match &p.outcome {
            Outcome::NoChange => writeln!(out, "  would change: no change")?,
            Outcome::Refused(why) => writeln!(
                out,
                "  would change: nothing; the plan would be refused: {why}"
            )?,
            Outcome::Error(why) => writeln!(out, "  would change: cannot plan: {why}")?,
            Outcome::Changes(plan) => {
                let shadow = if policy.mode == Mode::Shadow {
                    " (shadow mode: gslb run would only record these)"
                } else {
                    ""
                };
                writeln!(out, "  would change{shadow}:")?;
                for c in plan {
                    writeln!(out, "    - {}", describe(policy, c))?;
                }
            }
        }
    }
    Ok(())
}

/// The probe results, each failure the origin answered with what the check expected
/// ([`ProbeSpec::explain`](gslb_core::policy::ProbeSpec::explain)); then, when every endpoint
/// answered and failed the check, a line that says so first: the vantage point reaches every
/// origin, so the check (or the origins' health answer) is what to fix, whatever the engine's
/// rules make of every pool being down at once.
fn render_probes(g: &Gathered, out: &mut impl Write) -> std::io::Result<()> {
    let policy = &g.policy;
    writeln!(out, "  probes now:")?;
    let mut explained = Vec::new();
    for (endpoint, o) in &g.probes {
        let pool = policy
            .pools
            .iter()
            .find(|pool| pool.endpoints.iter().any(|e| &e.id == endpoint))
            .map_or("?", |pool| pool.id.0.as_str());
        let status = o.http_status.map_or_else(String::new, |s| format!(" {s}"));
        let why = policy.probe.explain(o);
        writeln!(
            out,
            "    {pool} {endpoint}: {}{status} in {} ms{}",
            o.reason,
            o.duration.as_millis(),
            why.as_ref().map_or_else(String::new, |w| format!(": {w}"))
        )?;
        explained.extend(why);
    }
    if !g.probes.is_empty() && explained.len() == g.probes.len() {
        explained.dedup();
        writeln!(
            out,
            "  check failing: every endpoint answered and none passed the check ({}): this \
             vantage point reaches the origins; fix the check or the origins' health answer",
            explained.join("; ")
        )?;
    }
    Ok(())
}

/// A data-plane service's votes (what this instance's vote URLs would answer: the plan's
/// writes are to its in-memory vote board, which starts serving every pool) and its Route 53
/// state per pool.
fn render_data_plane(
    p: &ServicePlan,
    lines: &[String],
    out: &mut impl Write,
) -> std::io::Result<()> {
    let drained = |pool: &str| match &p.outcome {
        Outcome::Changes(plan) => plan
            .iter()
            .any(|c| matches!(c, Change::SetEnabled { pool: x, enabled: false, .. } if x == pool)),
        _ => false,
    };
    writeln!(
        out,
        "  this instance's votes (Route 53 data-plane mode, no API call):"
    )?;
    for (pool, set_id) in p.gathered.policy.target.pool_refs() {
        let vote = if drained(&set_id) { "drain" } else { "serve" };
        writeln!(out, "    {pool}: {vote}")?;
    }
    match &p.outcome {
        Outcome::Refused(why) => writeln!(out, "    (the vote would be refused: {why})")?,
        Outcome::Error(why) => writeln!(out, "    (cannot plan the vote: {why})")?,
        Outcome::NoChange | Outcome::Changes(_) => {}
    }
    writeln!(out, "  route53:")?;
    for line in lines {
        writeln!(out, "    {line}")?;
    }
    Ok(())
}

/// The records that differ from the policy (see [`Bind::record_drift`]), if any: `gslb run`
/// steers through the verdict checks and never rewrites them.
fn render_drift(drift: &[String], out: &mut impl Write) -> std::io::Result<()> {
    if drift.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "  record drift (gslb run does not rewrite records; run `gslb provision`):"
    )?;
    for d in drift {
        writeln!(out, "    - {d}")?;
    }
    Ok(())
}

fn name_or<'a>(pool: Option<&'a PoolId>, none: &'a str) -> &'a str {
    pool.map_or(none, |p| p.0.as_str())
}

/// One write in the provider's own words.
fn describe(policy: &Policy, change: &Change) -> String {
    let (pool, enabled) = match change {
        Change::SetOrder { from, to } => {
            return format!(
                "set default_pools from [{}] to [{}]",
                from.join(", "),
                to.join(", ")
            );
        }
        Change::SetEnabled { pool, enabled, .. } => (pool, *enabled),
    };
    let refs = policy.target.pool_refs();
    let gslb_pool = refs
        .iter()
        .find(|(_, r)| *r == pool)
        .map_or(pool.as_str(), |(p, _)| p.0.as_str());
    match (policy.target.switches_verdict_checks(), enabled) {
        (true, true) => format!(
            "un-invert the verdict check of failover record {pool} (pool {gslb_pool} may serve)"
        ),
        (true, false) => format!(
            "invert the verdict check of failover record {pool} (pool {gslb_pool} stops serving)"
        ),
        (false, _) => {
            format!("set enabled = {enabled} on Cloudflare pool {pool} (pool {gslb_pool})")
        }
    }
}

/// How `gslb plan` ended, as `terraform plan -detailed-exitcode` says it: every service
/// planned and none would change (exit code 0), some would (2), or a service could not be
/// planned (1; the others are printed all the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Summary {
    /// Every service planned; nothing would be written (exit code 0).
    NoChange,
    /// Every service planned; `gslb run` would write to at least one provider, or its guard
    /// would refuse the write the decision calls for (exit code 2).
    Pending,
    /// At least one service could not be planned: its provider could not be set up or read,
    /// its endpoints not be probed, or no plan could be made (exit code 1).
    Failed,
}

impl Summary {
    /// Of the plans and the services that could not be planned (`failed`).
    pub fn of(plans: &[ServicePlan], failed: usize) -> Self {
        if failed > 0 || plans.iter().any(|p| matches!(p.outcome, Outcome::Error(_))) {
            Self::Failed
        } else if plans.iter().any(|p| {
            p.outcome != Outcome::NoChange
                || p.data_plane.as_ref().is_some_and(|(_, pending)| *pending)
        }) {
            Self::Pending
        } else {
            Self::NoChange
        }
    }

    /// 0, 2 or 1 (see the variants).
    pub fn exit_code(self) -> u8 {
        match self {
            Self::NoChange => 0,
            Self::Pending => 2,
            Self::Failed => 1,
        }
    }
}

/// The exit code of a command-line usage error that clap gives `clap_code` (2 for bad
/// usage), with `args` the command line (program name first): 1 for `gslb plan` and
/// `gslb provision --dry-run`, whose 2 says "changes pending"; clap's code for every other
/// command. The subcommand is the first argument that is neither an option nor the value of
/// `--log-format`.
pub fn usage_exit_code(clap_code: i32, args: impl IntoIterator<Item = String>) -> u8 {
    let args: Vec<String> = args.into_iter().skip(1).collect();
    let mut rest = args.iter();
    let mut command = None;
    while let Some(a) = rest.next() {
        if a == "--log-format" {
            rest.next();
        } else if !a.starts_with('-') {
            command = Some(a.as_str());
            break;
        }
    }
    let dry_run = args.iter().any(|a| a == "--dry-run");
    match (clap_code, command) {
        (2, Some("plan")) => 1,
        (2, Some("provision")) if dry_run => 1,
        (c, _) => u8::try_from(c).unwrap_or(1),
    }
}

/// `gslb plan`: [`plan_all`], then its [`Summary`] as the exit code: `Ok` when nothing would
/// change, else an error with exit code 2 (changes pending) or 1.
///
/// # Errors
/// Changes pending (exit code 2), a service that could not be planned or any error of
/// [`plan_all`] (exit code 1).
pub async fn run<B: Bind>(
    settings: &Settings,
    policies: &[Policy],
    binder: &B,
    rounds: Option<u32>,
    out: &mut impl Write,
) -> Result<(), RunError> {
    let summary = plan_all(settings, policies, binder, rounds, out)
        .await
        .map_err(|e| e.with_exit_code(1))?;
    match summary {
        Summary::NoChange => Ok(()),
        Summary::Pending => Err(RunError::runtime("changes pending").with_exit_code(2)),
        Summary::Failed => Err(RunError::runtime(
            "a service could not be planned (see above)",
        )),
    }
}

/// Plans every policy: reads its provider (bound by `binder`), probes every endpoint once,
/// evaluates with [`evaluate`] and prints the plans to `out`, in policy order. A service that
/// cannot be planned is printed with why, and the others are planned all the same. Writes
/// nothing to a provider or the state file.
///
/// # Errors
/// A state file that is invalid or a prober that cannot be built (nothing is planned), or
/// writing the plan. Everything else is per service, in the output and the [`Summary`].
pub async fn plan_all<B: Bind>(
    settings: &Settings,
    policies: &[Policy],
    binder: &B,
    rounds: Option<u32>,
    out: &mut impl Write,
) -> Result<Summary, RunError> {
    let drills = StateFile::new(settings.state.overrides_file())
        .load()
        .map_err(RunError::config)?;
    let prober = Prober::with_limits(&settings.dns, &settings.probing)
        .map_err(|e| RunError::runtime(e).context("building the prober"))?;
    let prober = Arc::new(prober);
    let (gathered, failed, mut data_plane) = read_all(settings, policies, binder, &prober).await;
    // Data-plane records carry tally checks: their drift is the data-plane lines' business.
    let mut drift = BTreeMap::new();
    for p in policies {
        if !matches!(data_plane.get(&p.service), Some(Some(_))) {
            drift.insert(p.service.clone(), binder.record_drift(p).await);
        }
    }
    let now = Clock::system().now();
    let engine = settings.engine.engine_settings();
    let me = &settings.vantage;
    let peers = match &settings.cluster {
        Some(cluster) => Some((cluster, votes::read(cluster, me).await)),
        None => None,
    };
    let cluster_peers = peers.as_ref().map(|(c, p)| (*c, p));
    let mut plans = evaluate_in(gathered, &engine, drills, (me, cluster_peers), now, rounds);
    for plan in &mut plans {
        plan.data_plane = data_plane.remove(&plan.gathered.policy.service).flatten();
    }
    if let Some((_, peers)) = &peers {
        for plan in &mut plans {
            if let Some(d) = &plan.decision {
                plan.votes = votes::lines(d, peers, me);
            }
        }
    }
    if let Some(cluster) = &settings.cluster {
        let services: Vec<_> = plans
            .iter()
            .map(|p| p.gathered.policy.service.clone())
            .collect();
        let lines = writer::lines(cluster, &settings.vantage, &services).await;
        for (plan, line) in plans.iter_mut().zip(lines) {
            plan.cluster = Some(line);
        }
    }
    let summary = Summary::of(&plans, failed.len());
    let written = (|| {
        for p in policies {
            if let Some(why) = failed.get(&p.service) {
                writeln!(out, "service {} ({}):", p.service, p.hostname)?;
                writeln!(out, "  cannot plan: {why}")?;
            } else if let Some(i) = plans
                .iter()
                .position(|sp| sp.gathered.policy.service == p.service)
            {
                render(&[plans.remove(i)], out)?;
            }
            render_drift(drift.get(&p.service).map_or(&[], Vec::as_slice), out)?;
        }
        Ok::<_, std::io::Error>(())
    })();
    written.map_err(|e| RunError::runtime(e).context("writing the plan"))?;
    Ok(summary)
}

/// Every policy's provider read and probes (a data-plane service read as `gslb run` binds it:
/// a vote board, all serving) and its data-plane state ([`Bind::data_plane`]); or, by
/// service, why it cannot be had.
async fn read_all<B: Bind>(
    settings: &Settings,
    policies: &[Policy],
    binder: &B,
    prober: &Arc<Prober>,
) -> (
    Vec<Gathered>,
    BTreeMap<ServiceId, String>,
    BTreeMap<ServiceId, Option<(Vec<String>, bool)>>,
) {
    let voting = VotingBinder {
        inner: binder,
        registry: VoteRegistry::new(dataplane::stale_after(settings.reconcile.resync), None),
        settings: &settings.route53,
    };
    let (mut gathered, mut failed, mut data_plane) = (Vec::new(), BTreeMap::new(), BTreeMap::new());
    for p in policies {
        let read = match read(p, &voting, prober).await {
            Ok(g) => binder.data_plane(p).await.map(|dp| (g, dp)).map_err(|e| {
                format!(
                    "reading the Route 53 data-plane checks of service {}: {e:#}",
                    p.service
                )
            }),
            Err(why) => Err(why),
        };
        match read {
            Ok((g, dp)) => {
                data_plane.insert(p.service.clone(), dp);
                gathered.push(g);
            }
            Err(why) => {
                failed.insert(p.service.clone(), why);
            }
        }
    }
    (gathered, failed, data_plane)
}

/// One service's provider read and probes, or why it cannot be had.
async fn read<B: Bind>(p: &Policy, binder: &B, prober: &Arc<Prober>) -> Result<Gathered, String> {
    let targets = controller::probe_targets(p, prober)
        .map_err(|e| format!("its endpoints cannot be probed: {e}"))?;
    let provider = binder
        .bind(p)
        .await
        .map_err(|e| format!("its provider cannot be set up: {e}"))?;
    gather(p, &provider, targets, prober)
        .await
        .map_err(|e| format!("reading the provider of service {}: {e}", p.service))
}

#[cfg(test)]
mod tests;
mod votes;
mod writer;
