//! What the probe loops measure about themselves: how late each probe started against its plan,
//! how many were late, skipped or timed out, and how many are in flight. Shared by every loop
//! of a [`Prober`](super::Prober) through cheap atomics; read as a [`StatsSnapshot`] by the
//! metrics (`gslb_probe_lateness_seconds`, `gslb_probes_late_total`, ...) and the benchmark.
//!
//! Kept out of [`Observation`](gslb_core::model::Observation) on purpose: lateness is a property of
//! the prober, not evidence about an endpoint, and the observation is the engine's input and the
//! recorded replay format.
//!
//! Must not: lock, allocate per probe, or grow with the number of probes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Exact values below this many microseconds; above, buckets keep 6 significant bits.
const SUB_BUCKETS: u64 = 64;
/// Bucket count: covers values up to 2^36 µs (about 19 hours) with < 1.6 % relative error.
const BUCKETS: usize = 31 * SUB_BUCKETS as usize;

/// Counters and the lateness histogram of one [`Prober`](super::Prober). Cloning shares them.
#[derive(Debug, Clone, Default)]
pub struct ProbeStats(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    started: AtomicU64,
    late: AtomicU64,
    skipped: AtomicU64,
    timeouts: AtomicU64,
    in_flight: AtomicU64,
    lateness: Histogram,
}

impl Default for Inner {
    fn default() -> Self {
        Self {
            started: AtomicU64::new(0),
            late: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            lateness: Histogram::default(),
        }
    }
}

impl ProbeStats {
    /// A probe started `lateness` after its plan; `late` when that is past the late threshold.
    pub(crate) fn started(&self, lateness: Duration, late: bool) {
        let s = &self.0;
        s.started.fetch_add(1, Ordering::Relaxed);
        if late {
            s.late.fetch_add(1, Ordering::Relaxed);
        }
        s.lateness.record(lateness);
    }

    /// `n` planned probes were dropped because their whole slot passed before they could start.
    pub(crate) fn skipped(&self, n: u64) {
        self.0.skipped.fetch_add(n, Ordering::Relaxed);
    }

    /// A probe hit its hard timeout.
    pub(crate) fn timed_out(&self) {
        self.0.timeouts.fetch_add(1, Ordering::Relaxed);
    }

    /// Marks one probe in flight until the guard is dropped.
    pub(crate) fn in_flight(&self) -> InFlight {
        self.0.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(self.clone())
    }

    /// The counters and histogram now.
    pub fn snapshot(&self) -> StatsSnapshot {
        let s = &self.0;
        StatsSnapshot {
            started: s.started.load(Ordering::Relaxed),
            late: s.late.load(Ordering::Relaxed),
            skipped: s.skipped.load(Ordering::Relaxed),
            timeouts: s.timeouts.load(Ordering::Relaxed),
            in_flight: s.in_flight.load(Ordering::Relaxed),
            lateness: s.lateness.snapshot(),
        }
    }
}

/// Counts one probe in flight while alive (see [`ProbeStats::in_flight`]).
#[derive(Debug)]
pub(crate) struct InFlight(ProbeStats);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The stats at one moment. Counters only grow (except `in_flight`), so the difference of two
/// snapshots ([`StatsSnapshot::since`]) describes what happened between them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// Probes started.
    pub started: u64,
    /// Probes that started more than the late threshold after their plan.
    pub late: u64,
    /// Planned probes dropped because their whole interval passed before they could start
    /// (each such slot is counted; the loop then probes at once, recorded as late).
    pub skipped: u64,
    /// Probes that hit their hard timeout.
    pub timeouts: u64,
    /// Probes running now.
    pub in_flight: u64,
    /// How late probes started against their plan.
    pub lateness: LatenessSnapshot,
}

impl StatsSnapshot {
    /// What happened since `earlier` (`in_flight` stays the current value).
    pub fn since(&self, earlier: &StatsSnapshot) -> StatsSnapshot {
        StatsSnapshot {
            started: self.started.saturating_sub(earlier.started),
            late: self.late.saturating_sub(earlier.late),
            skipped: self.skipped.saturating_sub(earlier.skipped),
            timeouts: self.timeouts.saturating_sub(earlier.timeouts),
            in_flight: self.in_flight,
            lateness: self.lateness.since(&earlier.lateness),
        }
    }
}

/// A log-linear histogram of durations in microseconds (HDR-style: exact below 128 µs, then
/// 64 sub-buckets per power of two, so quantiles are within 1.6 %), plus sum and max.
#[derive(Debug)]
struct Histogram {
    buckets: Box<[AtomicU64]>,
    sum_us: AtomicU64,
    max_us: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            sum_us: AtomicU64::new(0),
            max_us: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    fn record(&self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.buckets[index(us)].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
        self.max_us.fetch_max(us, Ordering::Relaxed);
    }

    fn snapshot(&self) -> LatenessSnapshot {
        LatenessSnapshot {
            counts: self
                .buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
            sum_us: self.sum_us.load(Ordering::Relaxed),
            max_us: self.max_us.load(Ordering::Relaxed),
        }
    }
}

/// The bucket of a value in microseconds.
fn index(us: u64) -> usize {
    if us < 2 * SUB_BUCKETS {
        return usize::try_from(us).unwrap_or(0);
    }
    let magnitude = 63 - us.leading_zeros(); // >= 7
    let shift = magnitude - 6;
    let top = us >> shift; // 64..=127
    let i = u64::from(shift) * SUB_BUCKETS + top;
    usize::try_from(i).map_or(BUCKETS - 1, |i| i.min(BUCKETS - 1))
}

/// The largest value (µs) that falls in bucket `i`.
fn upper_bound_us(i: usize) -> u64 {
    let i = i as u64;
    if i < 2 * SUB_BUCKETS {
        return i;
    }
    let shift = i / SUB_BUCKETS - 1;
    let top = i - shift * SUB_BUCKETS;
    ((top + 1) << shift) - 1
}

/// The lateness histogram at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatenessSnapshot {
    counts: Vec<u64>,
    sum_us: u64,
    /// Largest value ever recorded (not windowed by [`LatenessSnapshot::since`] when nothing
    /// was recorded in the window: then 0).
    max_us: u64,
}

impl LatenessSnapshot {
    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Sum of the values.
    pub fn sum(&self) -> Duration {
        Duration::from_micros(self.sum_us)
    }

    /// Largest value: exact over the process's life; over a window from
    /// [`LatenessSnapshot::since`], the upper bound of the highest non-empty bucket (within
    /// 1.6 %) unless the lifetime maximum fell in that window.
    pub fn max(&self) -> Duration {
        Duration::from_micros(self.max_us)
    }

    /// The `q` quantile (`0.0..=1.0`), as the upper bound of its bucket (within 1.6 % above
    /// the true value, never above [`LatenessSnapshot::max`]); zero when empty.
    pub fn quantile(&self, q: f64) -> Duration {
        let total = self.count();
        if total == 0 {
            return Duration::ZERO;
        }
        // The rank of the q-th value, 1-based, at least 1.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Duration::from_micros(upper_bound_us(i).min(self.max_us));
            }
        }
        self.max()
    }

    /// How many values were at most `bound` (rounded to the bucket containing it: the
    /// cumulative counts of a Prometheus histogram).
    pub fn count_at_most(&self, bound: Duration) -> u64 {
        let us = u64::try_from(bound.as_micros()).unwrap_or(u64::MAX);
        let last = index(us);
        self.counts[..=last].iter().sum()
    }

    /// What was recorded since `earlier`.
    pub fn since(&self, earlier: &LatenessSnapshot) -> LatenessSnapshot {
        let counts: Vec<u64> = self
            .counts
            .iter()
            .zip(&earlier.counts)
            .map(|(a, b)| a.saturating_sub(*b))
            .collect();
        let max_us = if self.max_us > earlier.max_us {
            self.max_us
        } else {
            counts
                .iter()
                .rposition(|c| *c > 0)
                .map_or(0, |i| upper_bound_us(i).min(self.max_us))
        };
        LatenessSnapshot {
            counts,
            sum_us: self.sum_us.saturating_sub(earlier.sum_us),
            max_us,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_tight() {
        let mut last = 0;
        for us in [
            0u64, 1, 127, 128, 129, 255, 256, 1_000, 50_000, 1_000_000, 60_000_000,
        ] {
            let i = index(us);
            assert!(i >= last, "{us}");
            last = i;
            assert!(upper_bound_us(i) >= us, "{us} above its bucket {i}");
            let lower = if i == 0 { 0 } else { upper_bound_us(i - 1) + 1 };
            assert!(lower <= us, "{us} below its bucket {i}");
            assert!(
                (upper_bound_us(i) - lower) as f64 <= 0.016 * us as f64 + 1.0,
                "{us}: bucket too wide"
            );
        }
        for i in 1..BUCKETS {
            assert_eq!(index(upper_bound_us(i)), i);
            assert_eq!(index(upper_bound_us(i - 1) + 1), i);
        }
    }

    #[test]
    fn quantiles_max_and_windows() {
        let stats = ProbeStats::default();
        for ms in 1..=100 {
            stats.started(Duration::from_millis(ms), ms > 50);
        }
        let first = stats.snapshot();
        assert_eq!(first.started, 100);
        assert_eq!(first.late, 50);
        let l = &first.lateness;
        assert_eq!(l.count(), 100);
        let p50 = l.quantile(0.5);
        assert!((Duration::from_millis(50)..=Duration::from_micros(50_800)).contains(&p50));
        let p99 = l.quantile(0.99);
        assert!((Duration::from_millis(99)..=Duration::from_micros(100_000)).contains(&p99));
        assert_eq!(l.max(), Duration::from_millis(100));
        assert_eq!(l.quantile(1.0), Duration::from_millis(100));
        assert_eq!(l.count_at_most(Duration::from_millis(10)), 10);

        for _ in 0..10 {
            stats.started(Duration::from_millis(2), false);
        }
        stats.skipped(3);
        stats.timed_out();
        let window = stats.snapshot().since(&first);
        assert_eq!(window.started, 10);
        assert_eq!((window.late, window.skipped, window.timeouts), (0, 3, 1));
        assert_eq!(window.lateness.count(), 10);
        assert!(window.lateness.max() < Duration::from_micros(2_100));
        assert!(window.lateness.quantile(0.99) >= Duration::from_millis(2));
    }

    #[test]
    fn in_flight_counts_guards() {
        let stats = ProbeStats::default();
        let a = stats.in_flight();
        let b = stats.in_flight();
        assert_eq!(stats.snapshot().in_flight, 2);
        drop(a);
        drop(b);
        assert_eq!(stats.snapshot().in_flight, 0);
    }
}
