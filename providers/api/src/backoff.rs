//! Jittered exponential backoff, shared by adapters and the reconciler.

use std::time::Duration;

/// The longest `Retry-After` gslb obeys: 1 hour. Cloudflare's documented block after
/// exceeding its API rate limit is 5 minutes and Route 53's throttling clears within seconds,
/// so a longer value comes from a broken proxy or a bug, not a real limit; obeying it would
/// silence the controller (a year, or an `Instant` overflow and a panic for `u64::MAX`
/// seconds). An hourly retry costs nothing against any rate limit.
pub const RETRY_AFTER_MAX: Duration = Duration::from_secs(3600);

/// A `Retry-After` of `secs` whole seconds, capped at [`RETRY_AFTER_MAX`].
pub fn retry_after_secs(secs: u64) -> Duration {
    Duration::from_secs(secs).min(RETRY_AFTER_MAX)
}

/// Exponential backoff with full jitter (AWS Architecture Blog, "Exponential Backoff and
/// Jitter", 2015): the n-th delay is uniform in `[0, min(max, base × 2^n)]`, raised to the
/// provider's `Retry-After` when one was given.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    attempt: u32,
}

impl Backoff {
    /// A backoff starting at `base` and capped at `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            attempt: 0,
        }
    }

    /// The delay before the next try. `jitter` is a number in `[0, 1)` (from the caller's RNG,
    /// so tests can pin it); `floor` is the provider's `Retry-After`, honoured exactly when it
    /// exceeds the jittered delay, up to [`RETRY_AFTER_MAX`].
    pub fn next_delay(&mut self, jitter: f64, floor: Option<Duration>) -> Duration {
        let exp = self.base.saturating_mul(1u32 << self.attempt.min(20));
        let cap = exp.min(self.max);
        self.attempt = self.attempt.saturating_add(1);
        let delay = cap.mul_f64(jitter.clamp(0.0, 1.0));
        floor.map_or(delay, |f| delay.max(f.min(RETRY_AFTER_MAX)))
    }

    /// How many delays have been handed out since the last [`Backoff::reset`].
    pub fn attempts(&self) -> u32 {
        self.attempt
    }

    /// Starts over after a success.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_capped_at_an_hour() {
        assert_eq!(retry_after_secs(42), Duration::from_secs(42));
        assert_eq!(retry_after_secs(31_536_000), RETRY_AFTER_MAX);
        assert_eq!(retry_after_secs(u64::MAX), RETRY_AFTER_MAX);
    }

    #[test]
    fn grows_to_the_cap_and_honours_retry_after() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        assert_eq!(b.next_delay(1.0, None), Duration::from_millis(100));
        assert_eq!(b.next_delay(1.0, None), Duration::from_millis(200));
        for _ in 0..10 {
            b.next_delay(1.0, None);
        }
        assert_eq!(b.next_delay(1.0, None), Duration::from_secs(1));
        assert_eq!(
            b.next_delay(0.0, Some(Duration::from_secs(7))),
            Duration::from_secs(7)
        );
        assert_eq!(
            b.next_delay(0.0, Some(Duration::from_secs(u64::MAX))),
            RETRY_AFTER_MAX
        );
        b.reset();
        assert_eq!(b.attempts(), 0);
        assert_eq!(b.next_delay(0.5, None), Duration::from_millis(50));
    }
}
