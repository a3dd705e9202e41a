//! Velocity limits on automatic switches. PURE: time is an argument.
//!
//! - [`TokenBucket`]: per service, `burst` switches at once and one more per `refill` (default
//!   2 and 30 min), so a service's first failover is never blocked but it cannot ping-pong.
//! - [`SwitchWindow`]: controller-wide and optional, at most `max` services switching
//!   automatically within a sliding window.
//!
//! Operator re-arms refill both.

use std::collections::VecDeque;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::model::Millis;
use crate::policy::Velocity;

/// A token bucket counted in milliseconds of refill, so it is exact and replays identically.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenBucket {
    /// Tokens available as of `at`, in units of 1/`refill_ms`.
    credit_ms: u64,
    at: Millis,
    burst: u32,
    refill_ms: u64,
}

impl TokenBucket {
    /// A full bucket as of `now`.
    pub fn full(v: Velocity, now: Millis) -> Self {
        let refill_ms = u64::try_from(v.refill.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        Self {
            credit_ms: refill_ms.saturating_mul(u64::from(v.burst)),
            at: now,
            burst: v.burst,
            refill_ms,
        }
    }

    fn credit(&self, now: Millis) -> u64 {
        let cap = self.refill_ms.saturating_mul(u64::from(self.burst));
        self.credit_ms
            .saturating_add(now.0.saturating_sub(self.at.0))
            .min(cap)
    }

    /// Whether `other` holds the same budget as this bucket at `now` (the same credit, burst and
    /// refill), whenever each was last updated.
    pub fn same_at(&self, other: &Self, now: Millis) -> bool {
        self.credit(now) == other.credit(now)
            && (self.burst, self.refill_ms) == (other.burst, other.refill_ms)
    }

    /// Whole switches available at `now`.
    pub fn available(&self, now: Millis) -> u32 {
        u32::try_from(self.credit(now) / self.refill_ms).unwrap_or(u32::MAX)
    }

    /// Takes one switch when available. Returns whether it did.
    pub fn try_take(&mut self, now: Millis) -> bool {
        let credit = self.credit(now);
        if credit < self.refill_ms {
            return false;
        }
        self.credit_ms = credit - self.refill_ms;
        self.at = now;
        true
    }

    /// When the next switch becomes available (`now` when one is).
    pub fn next_at(&self, now: Millis) -> Millis {
        let credit = self.credit(now);
        Millis(now.0 + self.refill_ms.saturating_sub(credit.min(self.refill_ms)))
    }

    /// When one more whole switch becomes available after `now`; `None` when the bucket is full.
    pub fn next_refill(&self, now: Millis) -> Option<Millis> {
        let credit = self.credit(now);
        let whole = credit / self.refill_ms;
        (whole < u64::from(self.burst))
            .then(|| Millis(now.0.saturating_add((whole + 1) * self.refill_ms - credit)))
    }

    /// Lowers the credit to `other`'s at `now` when `other` has less (a budget spent elsewhere
    /// or before a restart stays spent); keeps this bucket's `burst` and `refill`.
    pub fn spend_like(&mut self, other: &Self, now: Millis) {
        let credit = self.credit(now).min(other.credit(now));
        self.credit_ms = credit;
        self.at = now;
    }

    /// Refills to `burst` (operator re-arm).
    pub fn rearm(&mut self, now: Millis) {
        self.credit_ms = self.refill_ms.saturating_mul(u64::from(self.burst));
        self.at = now;
    }
}

/// Controller-wide limit: at most `max` automatic switches (of any services) within `window`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SwitchWindow {
    /// The limit.
    pub max: u32,
    /// The sliding window.
    pub window: Duration,
    recent: VecDeque<Millis>,
}

impl SwitchWindow {
    /// An empty window.
    pub fn new(max: u32, window: Duration) -> Self {
        Self {
            max,
            window,
            recent: VecDeque::new(),
        }
    }

    fn prune(&mut self, now: Millis) {
        while self
            .recent
            .front()
            .is_some_and(|t| now.since(*t) >= self.window)
        {
            self.recent.pop_front();
        }
    }

    /// Whether one more switch fits at `now`.
    pub fn allows(&mut self, now: Millis) -> bool {
        self.prune(now);
        self.recent.len() < self.max as usize
    }

    /// Counts a switch at `now`.
    pub fn record(&mut self, now: Millis) {
        self.prune(now);
        self.recent.push_back(now);
    }

    /// Forgets every counted switch (operator re-arm).
    pub fn rearm(&mut self) {
        self.recent.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V: Velocity = Velocity {
        burst: 2,
        refill: Duration::from_secs(1800),
    };

    #[test]
    fn burst_then_one_per_refill() {
        let mut b = TokenBucket::full(V, Millis(0));
        assert!(b.try_take(Millis(0)));
        assert!(b.try_take(Millis(60_000)));
        assert!(!b.try_take(Millis(120_000)), "burst of 2 used");
        // Credit accrues continuously: the third switch is available 30 min after the first.
        assert_eq!(b.next_at(Millis(120_000)), Millis(1_800_000));
        assert!(!b.try_take(Millis(1_799_999)));
        assert!(b.try_take(Millis(1_800_000)));
        assert_eq!(b.available(Millis(100_000_000)), 2, "never above burst");
    }

    #[test]
    fn rearm_refills() {
        let mut b = TokenBucket::full(V, Millis(0));
        b.try_take(Millis(0));
        b.try_take(Millis(0));
        b.rearm(Millis(1));
        assert_eq!(b.available(Millis(1)), 2);
    }

    #[test]
    fn window_counts_within_the_window_only() {
        let mut w = SwitchWindow::new(2, Duration::from_secs(600));
        assert!(w.allows(Millis(0)));
        w.record(Millis(0));
        w.record(Millis(1_000));
        assert!(!w.allows(Millis(599_999)));
        assert!(w.allows(Millis(600_000)));
        w.record(Millis(600_000));
        assert!(!w.allows(Millis(600_500)));
        w.rearm();
        assert!(w.allows(Millis(600_500)));
    }
}
