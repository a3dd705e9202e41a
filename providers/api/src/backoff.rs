//! Jittered exponential backoff, shared by adapters and the reconciler.

use std::time::Duration;

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
    /// exceeds the jittered delay.
    pub fn next_delay(&mut self, jitter: f64, floor: Option<Duration>) -> Duration {
        let exp = self.base.saturating_mul(1u32 << self.attempt.min(20));
        let cap = exp.min(self.max);
        self.attempt = self.attempt.saturating_add(1);
        let delay = cap.mul_f64(jitter.clamp(0.0, 1.0));
        floor.map_or(delay, |f| delay.max(f))
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
        b.reset();
        assert_eq!(b.attempts(), 0);
        assert_eq!(b.next_delay(0.5, None), Duration::from_millis(50));
    }
}
