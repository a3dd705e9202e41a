//! Suspect vantage points: when what a vantage point sees points at itself rather than at the
//! regions. PURE: time is an argument. Tracked across every service, because "everything is
//! down" is a statement about all the pools a vantage point probes.
//!
//! A vantage point is suspect when any of these holds:
//! - every pool it probes (at least two, across all services) is down by its own rise/fall
//!   view, and they all went down within the suspect window of each other;
//! - every canary target configured for it is down;
//! - most of its recent results are prober-side failures (its own resolver, no route, no local
//!   sockets): more than half, by a count that decays with a half-life of the window.
//!
//! One region going dark while the others answer is not suspect.
//!
//! Leaving a suspect state never switches by itself: once none of the above holds any more, the
//! vantage point stays suspect ([`Suspicion::Recovering`]) until every pool it probes has
//! re-formed its verdict from results after that moment, by its service's rise/fall (the service
//! engine restarts the consecutive counts and reports each re-formed view). Until then, what it
//! saw while suspect (a primary still down, short of `rise`) moves no traffic.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use serde::Serialize;

use crate::model::{EndpointId, Millis, Observation, PoolId, ServiceId, VantageId, Verdict};
use crate::policy::{Flapping, Thresholds};

use super::health::EndpointHealth;

/// Canary rise/fall: HAProxy's defaults.
const CANARY_THRESHOLDS: Thresholds = Thresholds { fall: 3, rise: 2 };
/// Below this decayed count of recent results, the prober-side share is not judged.
const MIN_RESULTS: f64 = 3.0;

/// Why a vantage point is suspect.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Suspicion {
    /// Every pool it probes went down within the window.
    AllPoolsDown {
        /// How many pools.
        pools: usize,
        /// How far apart the first and the last went down.
        #[serde(with = "crate::model::wire::seconds")]
        within: Duration,
    },
    /// Every canary target fails.
    CanariesDown {
        /// How many canaries.
        canaries: usize,
    },
    /// Most recent results are prober-side failures.
    ProberSideFailures {
        /// Their share, in percent.
        percent: u32,
    },
    /// It was suspect, and some pools it probes have not re-formed their verdict (rise/fall)
    /// from results after it stopped being so.
    Recovering {
        /// How many pools have not.
        pending: usize,
    },
}

impl Suspicion {
    /// Every [`Suspicion::as_str`] value, for metrics that declare each label set up front.
    pub const REASONS: [&'static str; 4] = [
        "all_pools_down",
        "canaries_down",
        "prober_side_failures",
        "recovering",
    ];

    /// The metric label value.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::AllPoolsDown { .. } => "all_pools_down",
            Self::CanariesDown { .. } => "canaries_down",
            Self::ProberSideFailures { .. } => "prober_side_failures",
            Self::Recovering { .. } => "recovering",
        }
    }
}

impl fmt::Display for Suspicion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::AllPoolsDown { pools, within } => write!(
                f,
                "every one of the {pools} pools it probes went down within {}",
                humantime::format_duration(*within)
            ),
            Self::CanariesDown { canaries } => {
                write!(f, "all {canaries} of its canary targets fail")
            }
            Self::ProberSideFailures { percent } => write!(
                f,
                "{percent}% of its recent probes failed on the prober's side (resolver, route, sockets)"
            ),
            Self::Recovering { pending } => write!(
                f,
                "it was suspect, and {pending} of the pools it probes have not re-formed their verdict (rise/fall) since"
            ),
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Decaying {
    value: f64,
    at: Millis,
}

impl Decaying {
    fn at(&self, now: Millis, half_life: Duration) -> f64 {
        self.value * (-now.since(self.at).as_secs_f64() / half_life.as_secs_f64()).exp2()
    }

    fn add(&mut self, now: Millis, half_life: Duration, x: f64) {
        self.value = self.at(now, half_life) + x;
        self.at = now;
    }
}

/// Where a vantage point is between suspect and trusted, as of the last [`Vantages::settle`].
#[derive(Debug, Clone, Default, PartialEq)]
enum Standing {
    /// Not suspect.
    #[default]
    Trusted,
    /// One of the suspect rules holds.
    Suspect,
    /// No rule holds any more; these pools have not re-formed their verdict since.
    Recovering(BTreeSet<(ServiceId, PoolId)>),
}

#[derive(Debug, Clone, Default)]
struct VantageState {
    standing: Standing,
    /// Its rise/fall view of every pool it probes, with the time the view went down.
    views: BTreeMap<(ServiceId, PoolId), Option<Millis>>,
    /// Down-since of every view that is down, ordered by time.
    down: BTreeSet<(Millis, ServiceId, PoolId)>,
    prober_side: Decaying,
    results: Decaying,
    canaries: BTreeMap<EndpointId, EndpointHealth>,
}

/// Every vantage point's evidence about itself.
#[derive(Debug, Clone)]
pub struct Vantages {
    window: Duration,
    canaries: BTreeSet<EndpointId>,
    map: BTreeMap<VantageId, VantageState>,
    /// Moves on whenever a record could make a vantage point suspect, or a standing changes
    /// (suspicion ends with time alone, never starts): a decision taken while no vantage point
    /// it read was suspect stands, as far as suspicion goes, while this stays the same.
    generation: u64,
}

impl Vantages {
    /// Tracks vantage points with this suspect `window` (e.g. 1 min) and these canary targets.
    pub fn new(window: Duration, canaries: impl IntoIterator<Item = EndpointId>) -> Self {
        Self {
            window: window.max(Duration::from_millis(1)),
            canaries: canaries.into_iter().collect(),
            map: BTreeMap::new(),
            generation: 0,
        }
    }

    /// The generation of the suspect state: it moves on whenever a record could make a vantage
    /// point suspect or a standing changes. Time alone only ends suspicion.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The state of `vantage`, created on its first record (no allocation once it exists).
    fn state_mut(&mut self, vantage: &VantageId) -> &mut VantageState {
        if !self.map.contains_key(vantage) {
            self.map.insert(vantage.clone(), VantageState::default());
        }
        self.map.get_mut(vantage).expect("inserted above")
    }

    /// Records one probe result of a pool's endpoint: whether it failed on the prober's side.
    pub fn record_result(&mut self, vantage: &VantageId, prober_side: bool, now: Millis) {
        let window = self.window;
        let s = self.state_mut(vantage);
        s.results.add(now, window, 1.0);
        if prober_side {
            s.prober_side.add(now, window, 1.0);
            self.generation += 1;
        }
    }

    /// Records `vantage`'s own rise/fall view of a pool after a result changed it.
    pub fn record_view(
        &mut self,
        vantage: &VantageId,
        service: &ServiceId,
        pool: &PoolId,
        verdict: Verdict,
        now: Millis,
    ) {
        let s = self.state_mut(vantage);
        let key = (service.clone(), pool.clone());
        let slot = s.views.entry(key.clone()).or_default();
        match (verdict, *slot) {
            (Verdict::Unhealthy, None) => {
                *slot = Some(now);
                s.down.insert((now, key.0, key.1));
                // Only a view going down can start a suspicion (every pool down).
                self.generation += 1;
            }
            (Verdict::Unhealthy, Some(_)) => {}
            (_, Some(since)) => {
                *slot = None;
                s.down.remove(&(since, key.0, key.1));
            }
            (_, None) => {}
        }
    }

    /// Records a canary probe. Results for targets not configured as canaries are ignored.
    pub fn record_canary(&mut self, obs: &Observation, flapping: &Flapping) {
        if !self.canaries.contains(&obs.endpoint) {
            return;
        }
        let s = self.map.entry(obs.vantage.clone()).or_default();
        let changed = s.canaries.entry(obs.endpoint.clone()).or_default().record(
            &obs.outcome,
            obs.at,
            CANARY_THRESHOLDS,
            flapping,
        );
        if changed.is_some() {
            self.generation += 1;
        }
    }

    /// Whether `vantage` is suspect at `now`, and why: one of the suspect rules holds, or it
    /// is still [recovering](Suspicion::Recovering) as of the last [`Vantages::settle`].
    pub fn suspect(&self, vantage: &VantageId, now: Millis) -> Option<Suspicion> {
        let s = self.map.get(vantage)?;
        rules(self.window, &self.canaries, s, now).or_else(|| {
            let pending = match &s.standing {
                // Not settled yet: every pool it probes is still to re-form.
                Standing::Suspect => s.views.len(),
                Standing::Recovering(pending) => pending.len(),
                Standing::Trusted => 0,
            };
            (pending > 0).then_some(Suspicion::Recovering { pending })
        })
    }

    /// Moves every vantage point's standing on to `now`, before the input of a step at `now`
    /// is applied, and returns those that stopped being suspect by the rules: their evidence
    /// must re-form from the results that follow (the caller restarts their rise/fall counts),
    /// and until each pool they probe has ([`Vantages::record_reformed`]) they stay suspect as
    /// recovering. One that stopped within the previous step is still suspect until then.
    pub fn settle(&mut self, now: Millis) -> Vec<VantageId> {
        let mut left = Vec::new();
        let (window, canaries) = (self.window, &self.canaries);
        for (v, s) in &mut self.map {
            let suspect = rules(window, canaries, s, now).is_some();
            match (&s.standing, suspect) {
                (Standing::Suspect, true) => {}
                (_, true) => {
                    s.standing = Standing::Suspect;
                    self.generation += 1;
                }
                (Standing::Suspect, false) => {
                    s.standing = Standing::Recovering(s.views.keys().cloned().collect());
                    left.push(v.clone());
                    self.generation += 1;
                }
                (Standing::Recovering(pending), false) if pending.is_empty() => {
                    s.standing = Standing::Trusted;
                    self.generation += 1;
                }
                _ => {}
            }
        }
        left
    }

    /// Whether `vantage` is recovering: its views must re-form before it is trusted again.
    pub fn recovering(&self, vantage: &VantageId) -> bool {
        self.map
            .get(vantage)
            .is_some_and(|s| matches!(s.standing, Standing::Recovering(_)))
    }

    /// Records that `vantage`'s view of a pool re-formed its verdict (rise/fall) at `now`,
    /// after it stopped being suspect. A view that re-formed down went down now, as far as the
    /// suspect rules go: "every pool went down within the window" compares re-formed views,
    /// not one from before the suspect state with one from after.
    pub fn record_reformed(
        &mut self,
        vantage: &VantageId,
        service: &ServiceId,
        pool: &PoolId,
        verdict: Verdict,
        now: Millis,
    ) {
        let Some(s) = self.map.get_mut(vantage) else {
            return;
        };
        let Standing::Recovering(pending) = &mut s.standing else {
            return;
        };
        let key = (service.clone(), pool.clone());
        if !pending.remove(&key) {
            return;
        }
        self.generation += 1;
        if let Some(Some(since)) = s
            .views
            .get_mut(&key)
            .filter(|_| verdict == Verdict::Unhealthy)
        {
            s.down.remove(&(*since, key.0.clone(), key.1.clone()));
            *since = now;
            s.down.insert((now, key.0, key.1));
        }
    }

    /// Forgets every view of `service` (removed or reset by a reload): a recovering vantage
    /// point no longer waits for them.
    pub fn forget_service(&mut self, service: &ServiceId) {
        for s in self.map.values_mut() {
            s.views.retain(|(sv, _), _| sv != service);
            s.down.retain(|(_, sv, _)| sv != service);
            if let Standing::Recovering(pending) = &mut s.standing {
                pending.retain(|(sv, _)| sv != service);
            }
        }
    }

    /// Every vantage point seen so far.
    pub fn known(&self) -> impl Iterator<Item = &VantageId> {
        self.map.keys()
    }
}

/// The suspect rule that holds for `s` at `now`, if any, with this suspect `window` and these
/// canary targets.
fn rules(
    window: Duration,
    canaries: &BTreeSet<EndpointId>,
    s: &VantageState,
    now: Millis,
) -> Option<Suspicion> {
    if s.views.len() >= 2 && s.down.len() == s.views.len() {
        let first = s.down.first().map(|(t, ..)| *t)?;
        let last = s.down.last().map(|(t, ..)| *t)?;
        let within = last.since(first);
        if within <= window {
            return Some(Suspicion::AllPoolsDown {
                pools: s.views.len(),
                within,
            });
        }
    }
    let fresh = window.saturating_mul(3);
    if !canaries.is_empty()
        && s.canaries.len() == canaries.len()
        && s.canaries
            .values()
            .all(|h| h.verdict_at(now, fresh) == Verdict::Unhealthy)
    {
        return Some(Suspicion::CanariesDown {
            canaries: s.canaries.len(),
        });
    }
    let total = s.results.at(now, window);
    let bad = s.prober_side.at(now, window);
    if total >= MIN_RESULTS && 2.0 * bad > total {
        return Some(Suspicion::ProberSideFailures {
            percent: (100.0 * bad / total).round() as u32,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::Suspicion;

    #[test]
    fn every_suspicion_reason_is_declared() {
        let all = [
            Suspicion::AllPoolsDown {
                pools: 2,
                within: std::time::Duration::ZERO,
            },
            Suspicion::CanariesDown { canaries: 2 },
            Suspicion::ProberSideFailures { percent: 90 },
            Suspicion::Recovering { pending: 1 },
        ];
        let named: Vec<&str> = all.iter().map(Suspicion::as_str).collect();
        assert_eq!(named, Suspicion::REASONS);
    }
}
