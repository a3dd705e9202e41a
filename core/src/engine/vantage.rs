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
        #[serde(with = "humantime_serde")]
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
}

impl Suspicion {
    /// The metric label value.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::AllPoolsDown { .. } => "all_pools_down",
            Self::CanariesDown { .. } => "canaries_down",
            Self::ProberSideFailures { .. } => "prober_side_failures",
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

#[derive(Debug, Clone, Default)]
struct VantageState {
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
}

impl Vantages {
    /// Tracks vantage points with this suspect `window` (e.g. 1 min) and these canary targets.
    pub fn new(window: Duration, canaries: impl IntoIterator<Item = EndpointId>) -> Self {
        Self {
            window: window.max(Duration::from_millis(1)),
            canaries: canaries.into_iter().collect(),
            map: BTreeMap::new(),
        }
    }

    /// Records one probe result of a pool's endpoint: whether it failed on the prober's side.
    pub fn record_result(&mut self, vantage: &VantageId, prober_side: bool, now: Millis) {
        let s = self.map.entry(vantage.clone()).or_default();
        s.results.add(now, self.window, 1.0);
        if prober_side {
            s.prober_side.add(now, self.window, 1.0);
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
        let s = self.map.entry(vantage.clone()).or_default();
        let key = (service.clone(), pool.clone());
        let slot = s.views.entry(key.clone()).or_default();
        match (verdict, *slot) {
            (Verdict::Unhealthy, None) => {
                *slot = Some(now);
                s.down.insert((now, key.0, key.1));
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
        s.canaries.entry(obs.endpoint.clone()).or_default().record(
            &obs.outcome,
            obs.at,
            CANARY_THRESHOLDS,
            flapping,
        );
    }

    /// Whether `vantage` is suspect at `now`, and why.
    pub fn suspect(&self, vantage: &VantageId, now: Millis) -> Option<Suspicion> {
        let s = self.map.get(vantage)?;
        if s.views.len() >= 2 && s.down.len() == s.views.len() {
            let first = s.down.first().map(|(t, ..)| *t)?;
            let last = s.down.last().map(|(t, ..)| *t)?;
            let within = last.since(first);
            if within <= self.window {
                return Some(Suspicion::AllPoolsDown {
                    pools: s.views.len(),
                    within,
                });
            }
        }
        let fresh = self.window.saturating_mul(3);
        if !self.canaries.is_empty()
            && s.canaries.len() == self.canaries.len()
            && s.canaries
                .values()
                .all(|h| h.verdict_at(now, fresh) == Verdict::Unhealthy)
        {
            return Some(Suspicion::CanariesDown {
                canaries: s.canaries.len(),
            });
        }
        let total = s.results.at(now, self.window);
        let bad = s.prober_side.at(now, self.window);
        if total >= MIN_RESULTS && 2.0 * bad > total {
            return Some(Suspicion::ProberSideFailures {
                percent: (100.0 * bad / total).round() as u32,
            });
        }
        None
    }

    /// Every vantage point seen so far.
    pub fn known(&self) -> impl Iterator<Item = &VantageId> {
        self.map.keys()
    }
}
