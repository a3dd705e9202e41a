//! How much time this process loses to CPU starvation: a watch task wakes every [`TICK`] and
//! adds to a running total every wake-up it sees more than [`FLOOR`] late (its task waited in
//! the run queue: a CPU quota, a competing busy process, a runtime with more work than CPU). A
//! probe reads the total at its start and end: what it lost in between is time the origin was
//! never given ([`classify::judged`](super::classify::judged)).
//!
//! Waiting for room among the probes in flight is not starvation and is not counted: the watch
//! measures the runtime's own lateness, which back-pressure does not cause.
//!
//! Uses tokio's clock only (paused-time tests drive it). Must not: allocate per probe, or keep
//! running once its [`Prober`](super::Prober) is dropped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::time::Instant;

/// Period of the watch task: 10 ms (100 wake-ups a second, a few microseconds of CPU each).
pub const TICK: Duration = Duration::from_millis(10);

/// A wake-up later than this is starvation, counted whole: 10 ms. tokio's timer resolution is
/// 1 ms, and a runtime that gets its CPU wakes a task within a few ms even when busy.
pub const FLOOR: Duration = Duration::from_millis(10);

/// The running total of time lost to starvation, shared by the watch task and the probes.
#[derive(Debug, Default)]
pub(crate) struct Starvation {
    state: Arc<Mutex<Lost>>,
    watching: AtomicBool,
}

#[derive(Debug, Clone, Copy, Default)]
struct Lost {
    /// Lost until the watch's last wake-up.
    total: Duration,
    /// When the watch is due to wake next (`None` before it started).
    due: Option<Instant>,
}

impl Lost {
    /// The total at `now`, with the lateness of a wake-up not yet seen (the watch itself still
    /// waits to run) counted as it will be.
    fn at(&self, now: Instant) -> Duration {
        let pending = self
            .due
            .map_or(Duration::ZERO, |due| now.saturating_duration_since(due));
        if pending > FLOOR {
            self.total + pending
        } else {
            self.total
        }
    }
}

impl Starvation {
    /// Time lost to starvation since the watch started, as of now ([`Duration::ZERO`] while
    /// it does not run). Probes take the difference of two readings.
    pub(crate) fn lost(&self) -> Duration {
        let lost = *self.state.lock().unwrap_or_else(|p| p.into_inner());
        lost.at(Instant::now())
    }

    /// Starts the watch task on the current tokio runtime, once; it ends when this
    /// `Starvation` is dropped. Must be called from within a runtime.
    pub(crate) fn watch(&self) {
        if self.watching.swap(true, Ordering::Relaxed) {
            return;
        }
        let state = Arc::downgrade(&self.state);
        {
            let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
            s.due = Some(Instant::now() + TICK);
        }
        tokio::spawn(run(state));
    }
}

/// The watch task: sleeps [`TICK`] at a time and counts each wake-up's lateness past [`FLOOR`].
async fn run(state: Weak<Mutex<Lost>>) {
    loop {
        let Some(due) = state
            .upgrade()
            .and_then(|s| s.lock().unwrap_or_else(|p| p.into_inner()).due)
        else {
            return;
        };
        tokio::time::sleep_until(due).await;
        let Some(state) = state.upgrade() else {
            return;
        };
        let now = Instant::now();
        let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
        s.total = s.at(now);
        s.due = Some(now + TICK);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn counts_only_wake_ups_the_process_was_too_starved_to_make() {
        let ms = Duration::from_millis;
        let s = Starvation::default();
        assert_eq!(s.lost(), Duration::ZERO, "not watching: nothing lost");
        s.watch();
        s.watch();
        // A process that gets its CPU: every wake-up on time, for a second.
        tokio::time::sleep(ms(1000)).await;
        assert_eq!(s.lost(), Duration::ZERO);
        // Starved for 300 ms: the watch's wake-up is 290 ms late, counted before it even runs.
        tokio::time::advance(ms(300)).await;
        let lost = s.lost();
        assert!(lost >= ms(285) && lost <= ms(300), "{lost:?}");
        // Once the watch runs, the same loss is counted once, not again.
        tokio::time::sleep(ms(100)).await;
        assert_eq!(s.lost(), lost);
        // A short hiccup (at most 9 ms late) is not starvation.
        tokio::time::advance(ms(9)).await;
        tokio::time::sleep(ms(100)).await;
        assert_eq!(s.lost(), lost);
    }

    #[tokio::test(start_paused = true)]
    async fn the_watch_ends_with_its_prober() {
        let s = Starvation::default();
        s.watch();
        tokio::time::sleep(TICK * 3).await;
        let state = Arc::downgrade(&s.state);
        drop(s);
        tokio::time::sleep(TICK * 3).await;
        assert!(state.upgrade().is_none(), "the watch keeps no reference");
    }
}
