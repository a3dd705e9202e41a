//! [`SharedRead`]: one read of a listing that many bindings need (a Cloudflare zone's load
//! balancers, an account's pools, a Route 53 zone's records), shared by every binding that
//! asks for it, so provider reads grow with the number of zones and accounts, not with the
//! number of services.
//!
//! A caller says how old a shared read may be (`max_age`): the reconciler's periodic resync
//! accepts a read made within its resync period; a read for a new decision, a read-back or an
//! adoption after a write accepts only a read that *started after it asked* (`max_age` zero),
//! so it never sees state older than its own request. Concurrent callers that need a newer
//! read than the kept one wait for one read instead of each sending their own; a caller the
//! kept read satisfies takes it at once, without waiting for a read in flight. A failed read
//! is not kept: the callers that waited for it then share the next read (the adapters' rate
//! limiter and `Retry-After` block pace it). A write through any binding drops the shared read
//! ([`SharedRead::invalidate`]).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::ProviderError;

/// One kept read: when it started and what it returned.
#[derive(Debug)]
struct Snapshot<T> {
    /// Sequence number of the read (1, 2, ...), in the order reads started.
    seq: u64,
    /// When the read started (tokio's clock, so paused test time applies).
    started: Instant,
    value: Arc<T>,
}

/// A read of type `T` shared by every binding of one zone or account; see the [module
/// documentation](self).
#[derive(Debug)]
pub struct SharedRead<T> {
    /// The last successful read. Looked at without waiting for a read in flight: a caller
    /// that accepts it (within its `max_age`) never queues behind another caller's fresh read
    /// (issue 14: at start, adoption reads waited behind the reconcilers' fresh reads, each
    /// paced by the token's rate limiter, for seconds).
    kept: std::sync::Mutex<Option<Snapshot<T>>>,
    /// Whether a read is in flight: concurrent callers that need a newer read than the kept
    /// one wait for it rather than send their own.
    busy: AtomicBool,
    /// Bumped whenever a read in flight ends (kept, failed or dropped), waking every caller
    /// that waits for it at once. (A lock handed from waiter to waiter woke them one at a
    /// time, each behind every other runnable task: with 5,000 adoption reads and 10,000
    /// probe loops, seconds at start.)
    ended: watch::Sender<u64>,
    /// Reads started so far.
    started: AtomicU64,
    /// Reads numbered up to this one are dropped ([`SharedRead::invalidate`]).
    floor: AtomicU64,
}

impl<T> Default for SharedRead<T> {
    fn default() -> Self {
        Self {
            kept: std::sync::Mutex::new(None),
            busy: AtomicBool::new(false),
            ended: watch::Sender::new(0),
            started: AtomicU64::new(0),
            floor: AtomicU64::new(0),
        }
    }
}

/// The one read in flight; when it ends (or is dropped), every waiting caller wakes.
struct Turn<'a> {
    busy: &'a AtomicBool,
    ended: &'a watch::Sender<u64>,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.busy.store(false, Ordering::SeqCst);
        self.ended.send_modify(|n| *n += 1);
    }
}

impl<T> SharedRead<T> {
    /// The kept read when it started at most `max_age` before this call or after this call
    /// began, otherwise a new read by `fetch`, kept for the next callers. A kept read that
    /// qualifies is returned at once, even while another caller's read is in flight.
    ///
    /// # Errors
    /// The error of `fetch` (nothing is kept then).
    pub async fn get<F, Fut>(&self, max_age: Duration, fetch: F) -> Result<Arc<T>, ProviderError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, ProviderError>>,
    {
        let asked = Instant::now();
        let seen = self.started.load(Ordering::SeqCst);
        let mut ended = self.ended.subscribe();
        loop {
            if let Some(value) = self.usable(asked, seen, max_age) {
                return Ok(value);
            }
            if let Some(_turn) = self.turn() {
                // A read may have ended between the look and the turn.
                if let Some(value) = self.usable(asked, seen, max_age) {
                    return Ok(value);
                }
                return self.read(fetch).await;
            }
            // The sender lives as long as `self`: this only waits for the read in flight.
            let _ = ended.changed().await;
        }
    }

    /// This caller's turn to read, unless a read is in flight.
    fn turn(&self) -> Option<Turn<'_>> {
        self.busy
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .ok()
            .map(|_| Turn {
                busy: &self.busy,
                ended: &self.ended,
            })
    }

    /// A new read by `fetch`, kept when it succeeds (the caller holds the turn).
    async fn read<F, Fut>(&self, fetch: F) -> Result<Arc<T>, ProviderError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, ProviderError>>,
    {
        let seq = self.started.fetch_add(1, Ordering::SeqCst) + 1;
        let started = Instant::now();
        let value = Arc::new(fetch().await?);
        *self.kept() = Some(Snapshot {
            seq,
            started,
            value: value.clone(),
        });
        Ok(value)
    }

    /// The kept read, when not dropped and either started at most `max_age` before `asked`
    /// (`max_age` not zero) or numbered after `seen` (started after the caller asked).
    fn usable(&self, asked: Instant, seen: u64, max_age: Duration) -> Option<Arc<T>> {
        let kept = self.kept();
        let s = kept.as_ref()?;
        let recent = !max_age.is_zero() && asked.saturating_duration_since(s.started) <= max_age;
        let dropped = s.seq <= self.floor.load(Ordering::SeqCst);
        (!dropped && (recent || s.seq > seen)).then(|| s.value.clone())
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Option<Snapshot<T>>> {
        self.kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Drops the kept read (after a write): the next caller reads afresh. A read in flight is
    /// dropped too (its callers still get it: they asked before the write ended). Never waits.
    pub fn invalidate(&self) {
        self.floor
            .store(self.started.load(Ordering::SeqCst), Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU32;

    use super::*;

    async fn read(shared: &SharedRead<u32>, calls: &AtomicU32, max_age: Duration) -> u32 {
        let v = shared
            .get(max_age, || async {
                Ok::<_, ProviderError>(calls.fetch_add(1, Ordering::SeqCst) + 1)
            })
            .await
            .expect("reads");
        *v
    }

    /// A fresh read of `shared` spawned now that takes `takes`, counted in `calls`.
    fn slow_read(
        shared: &Arc<SharedRead<u32>>,
        calls: &Arc<AtomicU32>,
        takes: Duration,
    ) -> tokio::task::JoinHandle<Result<u32, ProviderError>> {
        let (shared, calls) = (shared.clone(), calls.clone());
        tokio::spawn(async move {
            shared
                .get(Duration::ZERO, || async {
                    tokio::time::sleep(takes).await;
                    Ok::<_, ProviderError>(calls.fetch_add(1, Ordering::SeqCst) + 1)
                })
                .await
                .map(|v| *v)
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_within_max_age_is_shared_and_an_older_one_is_not() {
        let (shared, calls) = (SharedRead::default(), AtomicU32::new(0));
        let minute = Duration::from_secs(60);
        for _ in 0..100 {
            assert_eq!(read(&shared, &calls, minute).await, 1);
        }
        tokio::time::advance(Duration::from_secs(61)).await;
        assert_eq!(read(&shared, &calls, minute).await, 2, "older than max_age");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_fresh_read_never_returns_one_started_before_it_asked() {
        let (shared, calls) = (SharedRead::default(), AtomicU32::new(0));
        assert_eq!(read(&shared, &calls, Duration::ZERO).await, 1);
        // Same instant (paused clock): still a new read, by sequence.
        assert_eq!(read(&shared, &calls, Duration::ZERO).await, 2);
        shared.invalidate();
        assert_eq!(read(&shared, &calls, Duration::from_secs(60)).await, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_fresh_reads_wait_for_one_read() {
        let shared = Arc::new(SharedRead::<u32>::default());
        let calls = Arc::new(AtomicU32::new(0));
        // The first read is slow; twenty callers asking while it runs share the next one.
        let slow = slow_read(&shared, &calls, Duration::from_secs(1));
        tokio::task::yield_now().await;
        let waiters: Vec<_> = (0..20)
            .map(|_| {
                let (shared, calls) = (shared.clone(), calls.clone());
                tokio::spawn(async move { read(&shared, &calls, Duration::ZERO).await })
            })
            .collect();
        assert_eq!(slow.await.expect("joins").expect("reads"), 1);
        for w in waiters {
            assert_eq!(
                w.await.expect("joins"),
                2,
                "each waiter shares the second read"
            );
        }
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_caller_that_accepts_the_kept_read_does_not_wait_for_a_read_in_flight() {
        let shared = Arc::new(SharedRead::<u32>::default());
        let calls = Arc::new(AtomicU32::new(0));
        assert_eq!(read(&shared, &calls, Duration::ZERO).await, 1);
        // A fresh read that takes a minute (e.g. paced by the token's rate limiter).
        let slow = slow_read(&shared, &calls, Duration::from_secs(60));
        tokio::task::yield_now().await;
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "the slow read is in flight"
        );
        // An adoption read (half a resync) takes the kept read at once.
        let adoption = read(&shared, &calls, Duration::from_secs(30));
        let kept = tokio::time::timeout(Duration::from_millis(1), adoption).await;
        assert_eq!(kept, Ok(1));
        assert!(
            !slow.is_finished(),
            "answered while the fresh read was in flight"
        );
        assert_eq!(slow.await.expect("joins").expect("reads"), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_dropped_in_flight_lets_a_waiting_caller_read() {
        let shared = Arc::new(SharedRead::<u32>::default());
        let calls = Arc::new(AtomicU32::new(0));
        // A read that never answers, dropped at its caller's deadline.
        let hung = {
            let shared = shared.clone();
            tokio::spawn(async move {
                shared
                    .get(Duration::ZERO, std::future::pending::<Result<u32, _>>)
                    .await
            })
        };
        tokio::task::yield_now().await;
        let waiter = {
            let (shared, calls) = (shared.clone(), calls.clone());
            tokio::spawn(async move { read(&shared, &calls, Duration::ZERO).await })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "waits for the read in flight");
        hung.abort();
        assert_eq!(
            waiter.await.expect("joins"),
            1,
            "reads once the hung read is gone"
        );
    }

    #[tokio::test]
    async fn a_failed_read_is_not_kept() {
        let shared = SharedRead::<u32>::default();
        let failed = shared
            .get(Duration::from_secs(60), || async {
                Err(ProviderError::Transient("502".into()))
            })
            .await;
        assert!(failed.is_err());
        let calls = AtomicU32::new(0);
        assert_eq!(read(&shared, &calls, Duration::from_secs(60)).await, 1);
    }
}
