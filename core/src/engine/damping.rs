//! Flap damping and flapping detection. PURE: time is an argument.
//!
//! - [`FlapPenalty`]: BGP route flap damping (RFC 2439) applied to a pool. It decides whether an
//!   automatic failback may choose the pool.
//! - [`FlapHistory`]: Nagios' weighted state-change percentage over the last 21 results. It only
//!   feeds the `gslb_pool_flap_percent` metric and the PoolFlapping alert; it never changes a
//!   decision.

use std::collections::VecDeque;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::model::Millis;
use crate::policy::{Damping, Flapping};

/// One pool's flap penalty.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct FlapPenalty {
    /// The penalty as of `at`.
    value: f64,
    /// When `value` was computed.
    at: Millis,
    /// Since when the pool is suppressed, if it is.
    suppressed_since: Option<Millis>,
}

impl FlapPenalty {
    /// The penalty at `now`, decayed by `2^(-elapsed / half_life)`.
    pub fn value(&self, now: Millis, d: &Damping) -> f64 {
        let elapsed = now.since(self.at).as_secs_f64();
        self.value * (-elapsed / d.half_life.as_secs_f64()).exp2()
    }

    /// This penalty as another instance's saved state may claim it, bounded at `now`: at most
    /// the ceiling, computed and suppressed no later than `now` (a time in the future would
    /// stop its decay until then).
    pub fn bounded(&self, now: Millis, d: &Damping) -> Self {
        Self {
            value: self.value.clamp(0.0, d.ceiling()),
            at: self.at.min(now),
            suppressed_since: self.suppressed_since.map(|s| s.min(now)),
        }
    }

    /// Whether `other` is the same penalty: both none (no penalty, not suppressed, whenever
    /// last computed), or equal in every part.
    pub fn same_as(&self, other: &Self) -> bool {
        let none = |p: &Self| p.value == 0.0 && p.suppressed_since.is_none();
        (none(self) && none(other)) || self == other
    }

    /// Records one flap (healthy → unhealthy) at `now`: adds `penalty`, capped at the ceiling
    /// that bounds suppression to `max_suppress`.
    pub fn flap(&mut self, now: Millis, d: &Damping) {
        self.value = (self.value(now, d) + f64::from(d.penalty)).min(d.ceiling());
        self.at = now;
        self.update(now, d);
    }

    /// Updates and returns the suppression state at `now`: suppressed once the penalty exceeds
    /// `suppress`, released once it decays below `reuse`.
    pub fn update(&mut self, now: Millis, d: &Damping) -> bool {
        let v = self.value(now, d);
        match self.suppressed_since {
            None if v > f64::from(d.suppress) => self.suppressed_since = Some(now),
            Some(_) if v < f64::from(d.reuse) => self.suppressed_since = None,
            _ => {}
        }
        self.suppressed_since.is_some()
    }

    /// Whether the pool is suppressed (as of the last [`FlapPenalty::update`]).
    pub fn suppressed(&self) -> bool {
        self.suppressed_since.is_some()
    }

    /// When the penalty at `now` will have decayed below `reuse` (`now` when it already has).
    pub fn reuse_at(&self, now: Millis, d: &Damping) -> Millis {
        let v = self.value(now, d);
        if v <= f64::from(d.reuse) {
            return now;
        }
        let halvings = (v / f64::from(d.reuse)).log2();
        now.plus(
            Duration::try_from_secs_f64(d.half_life.as_secs_f64() * halvings)
                .unwrap_or(Duration::MAX),
        )
    }
}

/// How many results the flapping percentage looks at (Nagios: 21 states, 20 transitions).
pub const FLAP_WINDOW: usize = 21;

/// The last [`FLAP_WINDOW`] results of one endpoint as seen from one vantage point.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FlapHistory {
    results: VecDeque<bool>,
    flapping: bool,
    /// [`FlapHistory::percent`] as of the last result, so reading it costs nothing (a pool's
    /// flap figures are read at every result, [`super::PoolFlap`]).
    #[serde(skip)]
    percent: f64,
}

impl FlapHistory {
    /// Records one result (`true` = passed) and updates the flapping state with hysteresis.
    pub fn record(&mut self, ok: bool, f: &Flapping) {
        if self.results.len() == FLAP_WINDOW {
            self.results.pop_front();
        }
        self.results.push_back(ok);
        let p = self.weighted_changes();
        self.percent = p;
        if p > f.high {
            self.flapping = true;
        } else if p < f.low {
            self.flapping = false;
        }
    }

    /// The weighted state-change percentage: each change between consecutive results weighs
    /// from 0.8 (oldest) to 1.2 (newest), linearly, as Nagios does; the sum is divided by the
    /// 20 transitions of a full window. Kept from the last [`FlapHistory::record`].
    pub fn percent(&self) -> f64 {
        self.percent
    }

    /// [`FlapHistory::percent`] computed from the results.
    fn weighted_changes(&self) -> f64 {
        let transitions = FLAP_WINDOW - 1;
        let changes = self
            .results
            .iter()
            .zip(self.results.iter().skip(1))
            .enumerate()
            .filter(|(_, (a, b))| a != b);
        // Align the newest transition with the newest weight, so a short history is judged by
        // the weights of the most recent slots.
        let offset = transitions + 1 - self.results.len().max(1);
        let sum: f64 = changes
            .map(|(i, _)| {
                let slot = (i + offset) as f64;
                0.8 + 0.4 * slot / (transitions - 1) as f64
            })
            .sum();
        100.0 * sum / transitions as f64
    }

    /// Whether it is flapping (above `high`, until below `low`).
    pub fn flapping(&self) -> bool {
        self.flapping
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: Damping = Damping {
        penalty: 1000,
        half_life: Duration::from_secs(900),
        suppress: 3000,
        reuse: 750,
        max_suppress: Duration::from_secs(3600),
    };
    const F: Flapping = Flapping {
        high: 30.0,
        low: 20.0,
    };

    #[test]
    fn a_fourth_quick_flap_suppresses_and_decay_releases() {
        let mut p = FlapPenalty::default();
        for t in 0..3 {
            p.flap(Millis(t * 1_000), &D);
        }
        assert!(!p.suppressed(), "three flaps decay to just under 3000");
        p.flap(Millis(3_000), &D);
        assert!(p.update(Millis(3_000), &D), "a fourth flap crosses 3000");
        let reuse = p.reuse_at(Millis(3_000), &D);
        // ~3997 -> 750 is about 2.4 half-lives: 36 minutes.
        assert!(reuse.since(Millis(3_000)) > Duration::from_secs(35 * 60));
        assert!(p.update(Millis(reuse.0 - 1_000), &D), "still above reuse");
        assert!(!p.update(reuse.plus(Duration::from_secs(1)), &D));
    }

    #[test]
    fn suppression_never_outlasts_max_suppress() {
        let mut p = FlapPenalty::default();
        for t in 0..100 {
            p.flap(Millis(t * 1_000), &D);
        }
        let now = Millis(100_000);
        assert!(p.update(now, &D));
        assert!(p.reuse_at(now, &D).since(now) <= D.max_suppress);
    }

    #[test]
    fn alternating_results_flap_steady_ones_do_not() {
        let mut h = FlapHistory::default();
        for i in 0..FLAP_WINDOW {
            h.record(i % 2 == 0, &F);
        }
        assert!((h.percent() - 100.0).abs() < 1e-9);
        assert!(h.flapping());
        for _ in 0..FLAP_WINDOW {
            h.record(true, &F);
        }
        assert_eq!(h.percent(), 0.0);
        assert!(!h.flapping());
    }

    /// The engine side of the PoolFlapping alert's non-firing case: one clean failure (up,
    /// then down for good) and its later recovery are one transition each, at most
    /// 1.2 / 20 = 6 % apiece, far below `high`.
    #[test]
    fn a_single_clean_failure_and_recovery_do_not_flap() {
        let mut h = FlapHistory::default();
        for (up, n) in [(true, FLAP_WINDOW), (false, FLAP_WINDOW), (true, 3)] {
            for _ in 0..n {
                h.record(up, &F);
                assert!(!h.flapping(), "{}", h.percent());
            }
        }
        assert!(h.percent() > 0.0 && h.percent() <= 12.0, "{}", h.percent());
    }

    #[test]
    fn recent_changes_weigh_more_and_hysteresis_holds() {
        let mut old = FlapHistory::default();
        let mut new = FlapHistory::default();
        for i in 0..FLAP_WINDOW {
            old.record(i != 1, &F); // changes at the start
            new.record(i != FLAP_WINDOW - 2, &F); // changes at the end
        }
        assert!(new.percent() > old.percent());
        // Between low and high: the state does not change.
        let mut h = FlapHistory::default();
        for i in 0..FLAP_WINDOW {
            h.record(i % 2 == 0, &F);
        }
        for _ in 0..14 {
            h.record(true, &F);
        }
        let p = h.percent();
        assert!(p > F.low && p < F.high, "{p}");
        assert!(h.flapping(), "stays flapping until below low");
    }
}
