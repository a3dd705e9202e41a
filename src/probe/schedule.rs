//! The probe loop: one task per endpoint × vantage point, probing at a jittered interval and
//! sending one [`Observation`] per probe.
//!
//! Uses tokio's clock only (so `tokio::time::pause` tests drive it). Must not: run two probes of
//! one endpoint at once, catch up on missed probes in a burst, or judge health (the engine does).

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};

use crate::clock::Clock;
use crate::model::{Observation, VantageId};

use super::{ProbeTarget, Prober};

/// Longest delay before an endpoint's first probe: 1 s. The start phase is random in
/// `[0, min(interval, 1 s))`, so loops started together do not probe in lockstep, yet a 10 s
/// interval does not delay the first verdict by up to 10 s.
pub const MAX_START_PHASE: Duration = Duration::from_secs(1);

/// Largest jitter added to or taken from one interval: 5 % of the interval, at most 500 ms.
pub const MAX_JITTER: Duration = Duration::from_millis(500);

/// The delay before the first probe: uniform in `[0, min(interval, MAX_START_PHASE))`.
pub fn start_phase(interval: Duration, rng: &mut impl Rng) -> Duration {
    let cap = interval.min(MAX_START_PHASE);
    if cap.is_zero() {
        return Duration::ZERO;
    }
    rng.random_range(Duration::ZERO..cap)
}

/// One interval with jitter: uniform in `interval ± min(interval / 20, MAX_JITTER)`.
///
/// Successive jitters accumulate (each probe is planned from the previous plan), so loops that
/// happen to line up drift apart again instead of staying synchronised.
pub fn jittered(interval: Duration, rng: &mut impl Rng) -> Duration {
    let j = (interval / 20).min(MAX_JITTER);
    if j.is_zero() {
        return interval;
    }
    rng.random_range(interval - j..=interval + j)
}

/// Probes `target` forever, sending one [`Observation`] per probe (stamped with `clock.now()`
/// when the probe finished), wrapped by `wrap` into the receiver's message type, to `tx`.
/// Returns when the receiver is dropped.
///
/// Schedule: the first probe after [`start_phase`], then one every [`jittered`] interval,
/// planned from the previous plan. A probe ends within its timeout, which is below the interval,
/// so probes never overlap; if sending blocks (a full channel) past the next plan, the next
/// probe is planned one interval from then (like `MissedTickBehavior::Delay`): no burst.
pub async fn run_endpoint<M: Send + 'static>(
    prober: Arc<Prober>,
    target: ProbeTarget,
    vantage: VantageId,
    clock: Clock,
    tx: mpsc::Sender<M>,
    wrap: impl Fn(Observation) -> M + Send + 'static,
) {
    let interval = target.interval();
    let mut plan = Instant::now() + start_phase(interval, &mut rand::rng());
    loop {
        tokio::select! {
            biased;
            () = tx.closed() => return,
            () = sleep_until(plan) => {}
        }
        let outcome = prober.probe(&target).await;
        let observation = Observation {
            endpoint: target.endpoint().clone(),
            vantage: vantage.clone(),
            at: clock.now(),
            outcome,
        };
        if tx.send(wrap(observation)).await.is_err() {
            return;
        }
        plan += jittered(interval, &mut rand::rng());
        let now = Instant::now();
        if plan <= now {
            plan = now + jittered(interval, &mut rand::rng());
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    #[test]
    fn phase_is_capped() {
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..1000 {
            assert!(start_phase(Duration::from_secs(10), &mut rng) < MAX_START_PHASE);
            assert!(start_phase(Duration::from_millis(200), &mut rng) < Duration::from_millis(200));
        }
        assert_eq!(start_phase(Duration::ZERO, &mut rng), Duration::ZERO);
    }

    #[test]
    fn jitter_is_five_percent_capped_at_500ms() {
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..1000 {
            let d = jittered(Duration::from_secs(10), &mut rng);
            assert!((Duration::from_millis(9500)..=Duration::from_millis(10500)).contains(&d));
            let d = jittered(Duration::from_secs(60), &mut rng);
            assert!((Duration::from_millis(59500)..=Duration::from_millis(60500)).contains(&d));
        }
        let spread: Vec<_> = (0..100)
            .map(|_| jittered(Duration::from_secs(1), &mut rng))
            .collect();
        assert!(spread.iter().any(|d| *d < Duration::from_millis(990)));
        assert!(spread.iter().any(|d| *d > Duration::from_millis(1010)));
    }
}
