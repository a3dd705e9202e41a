//! The probe loop: one task per endpoint × vantage point, probing at a jittered interval and
//! sending one [`Observation`] per probe; [`Schedule`] is its pure plan. A loop can be woken to
//! probe at once, out of schedule ([`ProbeNow`], [`Wakers`]): the engine asks for it when a
//! switch waits for a probe of its target to pass. At most one such probe per interval per loop;
//! the schedule's slots stay where they were.
//!
//! Uses tokio's clock only (so `tokio::time::pause` tests drive it). Must not: run two probes of
//! one endpoint at once, catch up on missed probes in a burst, skip a probe without counting it,
//! or judge health (the engine does).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::Rng;
use tokio::sync::{Notify, mpsc};
use tokio::time::{Instant, sleep_until};

use crate::io::clock::Clock;
use gslb_core::model::{Observation, PoolId, ServiceId, VantageId};

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
/// happen to line up drift apart again instead of staying synchronised into bursts.
pub fn jittered(interval: Duration, rng: &mut impl Rng) -> Duration {
    let j = (interval / 20).min(MAX_JITTER);
    if j.is_zero() {
        return interval;
    }
    rng.random_range(interval - j..=interval + j)
}

/// When the probes of one loop are due. Pure: the caller passes the time in.
///
/// The first probe is due after [`start_phase`]; the second a uniformly random time in
/// `(0, interval]` after the first ends when the interval is longer than [`MAX_START_PHASE`] (so
/// loops started together spread over the whole interval, not just its first second); every
/// later one a [`jittered`] interval after the previous *plan*, not after the previous probe, so
/// slow probes do not shift an endpoint's phase and loops that happen to line up drift apart.
#[derive(Debug, Clone)]
pub struct Schedule {
    interval: Duration,
    plan: Instant,
    spread: bool,
}

impl Schedule {
    /// A schedule whose first probe is due [`start_phase`] after `now`.
    pub fn new(now: Instant, interval: Duration, rng: &mut impl Rng) -> Self {
        Self {
            interval,
            plan: now + start_phase(interval, rng),
            spread: interval > MAX_START_PHASE,
        }
    }

    /// When the next probe is due.
    pub fn plan(&self) -> Instant {
        self.plan
    }

    /// Plans the probe after the one due at [`Schedule::plan`], now that it is done at `now`.
    /// Returns how many planned probes were skipped: when `now` is already a whole interval or
    /// more past the new plan, those slots are dropped (counted, never silently) and the plan
    /// moves to the latest slot not after `now`, keeping the phase. The loop then probes at
    /// once, late by less than one interval; it never bursts to catch up.
    pub fn advance(&mut self, now: Instant, rng: &mut impl Rng) -> u64 {
        if std::mem::take(&mut self.spread) {
            // From the end of the first probe, so a slow first probe is not counted late.
            self.plan =
                self.plan.max(now) + rng.random_range(Duration::from_nanos(1)..=self.interval);
        } else {
            self.plan += jittered(self.interval, rng);
        }
        if self.interval.is_zero() || now < self.plan + self.interval {
            return 0;
        }
        let behind = now - self.plan;
        let slots = behind.as_nanos() / self.interval.as_nanos();
        let skipped = u64::try_from(slots).unwrap_or(u64::MAX);
        let slots = u32::try_from(slots).unwrap_or(u32::MAX);
        self.plan += self.interval * slots;
        skipped
    }
}

/// Wakes one probe loop to probe at once, out of schedule. Wake-ups coalesce: several before
/// the loop sees them make one probe, and the loop ignores one within an interval of its last
/// out-of-schedule probe (no probe storm).
#[derive(Debug, Clone, Default)]
pub struct ProbeNow(Arc<Notify>);

impl ProbeNow {
    /// Asks the loop for one probe now (or as soon as its current probe is done).
    pub fn wake(&self) {
        self.0.notify_one();
    }
}

/// The [`ProbeNow`] handles of every service's probe loops, by service, each with its pool: the
/// engine loop wakes a pool's loops when a switch waits for a probe of that pool to pass.
#[derive(Debug, Clone, Default)]
pub struct Wakers(Arc<Mutex<BTreeMap<ServiceId, ByPool>>>);

/// One service's [`ProbeNow`] handles, each with its pool: a boxed slice (one allocation of
/// 32 bytes per loop, against a map node of about 0.5 kB per service), scanned on the rare
/// wake-up.
type ByPool = Box<[(PoolId, ProbeNow)]>;

impl Wakers {
    /// Replaces `service`'s handles (its loops were started again: attach, reload) with
    /// `loops`, each with its pool.
    pub fn set(&self, service: &ServiceId, loops: impl IntoIterator<Item = (PoolId, ProbeNow)>) {
        let by_pool: ByPool = loops.into_iter().collect();
        self.lock().insert(service.clone(), by_pool);
    }

    /// Wakes every loop probing `pool` of `service`; returns how many.
    pub fn wake(&self, service: &ServiceId, pool: &PoolId) -> usize {
        let map = self.lock();
        let mut woken = 0;
        for (_, wake) in map
            .get(service)
            .into_iter()
            .flatten()
            .filter(|(p, _)| p == pool)
        {
            wake.wake();
            woken += 1;
        }
        woken
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<ServiceId, ByPool>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Probes `target` until the receiver is dropped, sending one [`Observation`] per probe
/// (stamped with `clock.now()` when the probe finished), wrapped by `wrap` into the receiver's
/// message type, to `tx`.
///
/// Each probe is due at its [`Schedule`] plan; it then waits for room among the prober's
/// in-flight probes (`[probing] max_in_flight`, back-pressure), and its lateness (start minus
/// plan: timer delay, waiting for room, a full channel) is recorded in the prober's
/// [`ProbeStats`](super::ProbeStats), counted late past `[probing] late_after`. A probe ends
/// within its timeout, which is below the interval, so probes of one endpoint never overlap;
/// slots that pass entirely while the loop is held up are skipped and counted, never run in a
/// burst.
pub async fn run_endpoint<M: Send + 'static>(
    prober: Arc<Prober>,
    target: ProbeTarget,
    vantage: VantageId,
    clock: Clock,
    tx: mpsc::Sender<M>,
    wrap: impl Fn(Observation) -> M + Send + 'static,
) {
    run_endpoint_woken(
        prober,
        target,
        vantage,
        clock,
        tx,
        ProbeNow::default(),
        wrap,
    )
    .await;
}

/// [`run_endpoint`], also probing at once when `now` is woken ([`ProbeNow::wake`]): at most
/// once per interval, counted as started and never late; the planned slots do not move.
/// Starts the prober's starvation watch ([`Prober::watch_starvation`]) if it does not run yet.
pub async fn run_endpoint_woken<M: Send + 'static>(
    prober: Arc<Prober>,
    target: ProbeTarget,
    vantage: VantageId,
    clock: Clock,
    tx: mpsc::Sender<M>,
    now: ProbeNow,
    wrap: impl Fn(Observation) -> M + Send + 'static,
) {
    prober.watch_starvation();
    let interval = target.interval();
    let mut schedule = Schedule::new(Instant::now(), interval, &mut rand::rng());
    let mut last_woken: Option<Instant> = None;
    loop {
        let woken = tokio::select! {
            biased;
            () = tx.closed() => return,
            () = sleep_until(schedule.plan()) => false,
            () = now.0.notified() => true,
        };
        if woken {
            let at = Instant::now();
            if last_woken.is_some_and(|t| at < t + interval) {
                continue;
            }
            last_woken = Some(at);
        }
        let room = tokio::select! {
            biased;
            () = tx.closed() => return,
            room = prober.room() => room,
        };
        let planned = if woken {
            Instant::now()
        } else {
            schedule.plan()
        };
        prober.started(planned, Instant::now());
        // Boxed: one allocation per probe, so the loop's future (which its task keeps for as
        // long as the endpoint is probed) does not hold room for a probe between probes.
        let outcome = Box::pin(prober.probe(&target)).await;
        drop(room);
        let observation = Observation {
            endpoint: target.endpoint().clone(),
            vantage: vantage.clone(),
            at: clock.now(),
            outcome,
        };
        if tx.send(wrap(observation)).await.is_err() {
            return;
        }
        if woken {
            continue;
        }
        let skipped = schedule.advance(Instant::now(), &mut rand::rng());
        if skipped > 0 {
            tracing::debug!(endpoint = %target.endpoint(), skipped, "probe loop fell a whole interval behind: slots skipped");
            prober.stats().skipped(skipped);
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
    fn loops_started_together_spread_over_the_whole_interval() {
        let mut rng = StdRng::seed_from_u64(7);
        let t0 = Instant::now();
        let interval = Duration::from_secs(10);
        let mut per_second = [0u32; 10];
        for _ in 0..2000 {
            let mut s = Schedule::new(t0, interval, &mut rng);
            assert!(
                s.plan() < t0 + MAX_START_PHASE,
                "first verdict comes quickly"
            );
            // The first probe took 100 ms.
            let done = s.plan() + Duration::from_millis(100);
            assert_eq!(s.advance(done, &mut rng), 0);
            assert!(s.plan() > done && s.plan() <= done + interval);
            let phase = (s.plan() - t0).as_millis() % 10_000;
            per_second[usize::try_from(phase / 1000).unwrap()] += 1;
        }
        // Uniform: 200 per second of the interval; no second holds a burst.
        for n in per_second {
            assert!((140..=260).contains(&n), "{per_second:?}");
        }
    }

    #[test]
    fn later_probes_keep_the_phase_and_skip_whole_missed_slots() {
        let mut rng = StdRng::seed_from_u64(7);
        let t0 = Instant::now();
        let interval = Duration::from_secs(1);
        let mut s = Schedule::new(t0, interval, &mut rng);
        // On time: planned from the previous plan, not from when the probe ended.
        let first = s.plan();
        assert_eq!(s.advance(first + Duration::from_millis(300), &mut rng), 0);
        let second = s.plan();
        assert!(
            (Duration::from_millis(950)..=Duration::from_millis(1050)).contains(&(second - first))
        );
        // A little late (held up 1.2 s): the next probe is due at once, nothing skipped.
        let now = second + Duration::from_millis(1200);
        assert_eq!(s.advance(now, &mut rng), 0);
        assert!(s.plan() < now, "due at once, and recorded late");
        // Held up 3.5 s: two whole slots passed; they are skipped and counted, the plan moves to
        // the latest slot not after now (same phase), so one probe runs now, not three.
        let third = s.plan();
        let now = third + Duration::from_millis(3500);
        assert_eq!(s.advance(now, &mut rng), 2);
        assert!(s.plan() <= now && now < s.plan() + interval);
        let next = s.plan();
        assert_eq!(s.advance(next, &mut rng), 0);
        assert!(
            (Duration::from_millis(950)..=Duration::from_millis(1050)).contains(&(s.plan() - next))
        );
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
