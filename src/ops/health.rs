//! Liveness and readiness: what `/healthz` and `/readyz` answer.
//!
//! Liveness: every long-running loop (the engine loop, each service's probe loops, the
//! canaries' probe loops, each reconciler) holds a [`Heartbeat`] and, whenever it makes progress, says by when it will make
//! progress again (its bound). A loop past its bound is *stuck*; [`Health::stuck`] lists them.
//! The bounds (see [`engine_bound`], [`probe_bound`], [`reconciler_bound`]) come from the
//! loops' own periods, so a loop that merely waits by design (a reconciler between resyncs) is
//! never reported. Beats are two atomic stores: cheap enough for every probe.
//!
//! Readiness: the policies are loaded (the engine loop runs them) and every service's binding
//! has adopted its provider's state (the adoption read answered), see [`Health::readiness`].
//! The engine loop sets the awaiting services at start and after a reload, and takes each
//! one off as it adopts ([`Health::adopted`]).
//!
//! Time is tokio's clock (paused-time tests drive it); the wall time of a stuck loop's last
//! progress is derived from the telemetry clock when reported.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use gslb_core::model::{Millis, ServiceId};

/// Ticks the engine loop may miss before it counts as stuck: 30 (30 s at the longest tick,
/// 1 s). A step's longest legitimate wait is the drill state file's write (two fsyncs, well
/// under a second on a healthy disk).
pub const ENGINE_STALL_TICKS: u32 = 30;

/// The shortest bound of any loop: 10 s, so a loaded machine's scheduling delays (a few
/// hundred milliseconds) never read as stuck, whatever the probe interval or tick.
pub const MIN_BOUND: Duration = Duration::from_secs(10);

/// Provider calls one reconcile pass may make: 3 (a read, a write, and a spare for the
/// adapter's own confirmation read), each bounded by
/// [`CALL_DEADLINE`](crate::daemon::reconcile::CALL_DEADLINE) (12 s).
pub const PASS_CALLS: u32 = 3;

/// The engine loop's bound: [`ENGINE_STALL_TICKS`] ticks, at least [`MIN_BOUND`].
pub fn engine_bound(tick: Duration) -> Duration {
    (tick * ENGINE_STALL_TICKS).max(MIN_BOUND)
}

/// A service's probe loops' bound: three probe intervals plus the probe timeout, at least
/// [`MIN_BOUND`]. A probe loop sends one result per interval (±5 % jitter), each probe ends
/// within its timeout, and waiting for room among `[probing] max_in_flight` or a full engine
/// inbox delays it by less than an interval before slots are skipped (and counted).
pub fn probe_bound(interval: Duration, timeout: Duration) -> Duration {
    (interval * 3 + timeout).max(MIN_BOUND)
}

/// A reconciler's bound while a pass runs: [`PASS_CALLS`] calls of `call_deadline` each.
/// Between passes a reconciler waits by design (for a new decision, the resync, a backoff or a
/// write-fight pause) and says so with [`Heartbeat::idle`]: its bound is then that wait plus
/// this.
pub fn reconciler_bound(call_deadline: Duration) -> Duration {
    (call_deadline * PASS_CALLS).max(MIN_BOUND)
}

/// One loop's progress: when it last made progress and by when it must make progress again,
/// in milliseconds after [`Health`]'s start. Cloning shares it.
#[derive(Debug, Clone)]
pub struct Heartbeat {
    state: Arc<Beat>,
    origin: Instant,
}

#[derive(Debug)]
struct Beat {
    last: AtomicU64,
    due: AtomicU64,
}

impl Heartbeat {
    fn millis(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.origin).as_millis()).unwrap_or(u64::MAX)
    }

    /// Progress now; the next is due within `bound`.
    pub fn beat(&self, bound: Duration) {
        let now = self.millis(Instant::now());
        self.state.last.store(now, Ordering::Relaxed);
        let due = now.saturating_add(u64::try_from(bound.as_millis()).unwrap_or(u64::MAX));
        self.state.due.store(due, Ordering::Relaxed);
    }

    /// Progress now, then a wait by design of `wait`: the next progress is due within
    /// `wait + bound`.
    pub fn idle(&self, wait: Duration, bound: Duration) {
        self.beat(wait.saturating_add(bound));
    }
}

/// One stuck loop, as `/healthz` names it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stuck {
    /// The loop: `engine_loop`, `probes:<service>`, `canaries` or `reconciler:<service>`.
    #[serde(rename = "loop")]
    pub name: String,
    /// Its last progress, RFC 3339 (UTC).
    pub since: String,
    /// Seconds since its last progress.
    pub stalled_seconds: f64,
    /// Seconds it was allowed without progress (its bound, plus its announced wait).
    pub bound_seconds: f64,
}

/// Services `/readyz` names while not ready: at most 20, the first in name order (the count
/// says how many there are). At start-up every service awaits its provider: naming 5,000 on
/// every poll of a readiness probe costs more than it tells (issue 14).
pub const READYZ_LISTED: usize = 20;

/// Why the controller is not ready, as `/readyz` names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotReady {
    /// Whether the engine loop runs a policy set.
    pub policies_loaded: bool,
    /// How many services have not adopted their provider's state yet.
    pub awaiting_count: usize,
    /// Services whose binding has not adopted its provider's state yet: the first
    /// [`READYZ_LISTED`] in name order.
    pub awaiting_provider: Vec<ServiceId>,
}

/// How many services run, and those awaiting their provider's state.
type Awaiting = (usize, BTreeSet<ServiceId>);

/// Every loop's heartbeat and the services awaiting their provider. Cloning shares it.
#[derive(Debug, Clone)]
pub struct Health {
    origin: Instant,
    loops: Arc<Mutex<BTreeMap<String, Heartbeat>>>,
    /// The number of services and those awaiting their provider; `None` until the engine
    /// loop has started with its policy set.
    awaiting: Arc<Mutex<Option<Awaiting>>>,
}

impl Default for Health {
    fn default() -> Self {
        Self {
            origin: Instant::now(),
            loops: Arc::default(),
            awaiting: Arc::default(),
        }
    }
}

impl Health {
    /// The heartbeat of loop `name`, new (progress now, due within `bound`); it replaces one
    /// of the same name (a reloaded service's new loops).
    pub fn register(&self, name: &str, bound: Duration) -> Heartbeat {
        let heartbeat = Heartbeat {
            state: Arc::new(Beat {
                last: AtomicU64::new(0),
                due: AtomicU64::new(0),
            }),
            origin: self.origin,
        };
        heartbeat.beat(bound);
        lock(&self.loops).insert(name.to_owned(), heartbeat.clone());
        heartbeat
    }

    /// Forgets a service's loops (`probes:<service>`, `reconciler:<service>`): a reload
    /// stopped them.
    pub fn forget_service(&self, service: &ServiceId) {
        let mut loops = lock(&self.loops);
        for kind in ["probes", "reconciler"] {
            loops.remove(&format!("{kind}:{service}"));
        }
    }

    /// Records how many services run and which have not adopted their provider's state yet
    /// (the engine loop, at start and after adoptions and reloads); from the first call the
    /// policies count as loaded.
    pub fn set_awaiting(&self, services: usize, awaiting: BTreeSet<ServiceId>) {
        *lock(&self.awaiting) = Some((services, awaiting));
    }

    /// `service` adopted its provider's state (the engine loop, after each adoption): one
    /// removal, so start-up's adoptions cost O(services log services) in all, not a rebuild of
    /// the whole set per adoption (issue 14: O(services²) at start-up).
    pub fn adopted(&self, service: &ServiceId) {
        if let Some((_, awaiting)) = lock(&self.awaiting).as_mut() {
            awaiting.remove(service);
        }
    }

    /// The loops past their bound at tokio time `now` (wall time `wall`), by name.
    pub fn stuck(&self, now: Instant, wall: Millis) -> Vec<Stuck> {
        let now_ms = u64::try_from(now.saturating_duration_since(self.origin).as_millis())
            .unwrap_or(u64::MAX);
        lock(&self.loops)
            .iter()
            .filter_map(|(name, h)| {
                let last = h.state.last.load(Ordering::Relaxed);
                let due = h.state.due.load(Ordering::Relaxed);
                (now_ms > due).then(|| {
                    let stalled = now_ms.saturating_sub(last);
                    Stuck {
                        name: name.clone(),
                        since: Millis(wall.0.saturating_sub(stalled)).rfc3339(),
                        stalled_seconds: stalled as f64 / 1000.0,
                        bound_seconds: due.saturating_sub(last) as f64 / 1000.0,
                    }
                })
            })
            .collect()
    }

    /// How many loops report progress.
    pub fn loops(&self) -> usize {
        lock(&self.loops).len()
    }

    /// `Ok` with the number of services when ready, else why not.
    ///
    /// # Errors
    /// [`NotReady`]: no policy set yet, or services awaiting their provider.
    pub fn readiness(&self) -> Result<usize, NotReady> {
        let awaiting = lock(&self.awaiting);
        match &*awaiting {
            None => Err(NotReady {
                policies_loaded: false,
                awaiting_count: 0,
                awaiting_provider: Vec::new(),
            }),
            Some((_, a)) if !a.is_empty() => Err(NotReady {
                policies_loaded: true,
                awaiting_count: a.len(),
                awaiting_provider: a.iter().take(READYZ_LISTED).cloned().collect(),
            }),
            Some((services, _)) => Ok(*services),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_loop_past_its_bound_is_stuck_until_it_beats_again() {
        let health = Health::default();
        let h = health.register("engine_loop", Duration::from_secs(30));
        let wall = Millis(1_000_000);
        tokio::time::advance(Duration::from_secs(30)).await;
        assert!(
            health.stuck(Instant::now(), wall).is_empty(),
            "at the bound"
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        let stuck = health.stuck(Instant::now(), wall);
        assert_eq!(stuck.len(), 1);
        assert_eq!(stuck[0].name, "engine_loop");
        assert_eq!(stuck[0].stalled_seconds, 31.0);
        assert_eq!(stuck[0].bound_seconds, 30.0);
        assert_eq!(stuck[0].since, Millis(1_000_000 - 31_000).rfc3339());
        h.beat(Duration::from_secs(30));
        assert!(health.stuck(Instant::now(), wall).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_loop_is_allowed_its_wait_and_a_forgotten_one_is_not_reported() {
        let health = Health::default();
        let r = health.register("reconciler:api", Duration::from_secs(36));
        r.idle(Duration::from_secs(300), Duration::from_secs(36));
        tokio::time::advance(Duration::from_secs(330)).await;
        assert!(health.stuck(Instant::now(), Millis(0)).is_empty());
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(health.stuck(Instant::now(), Millis(400_000)).len(), 1);
        health.forget_service(&ServiceId("api".into()));
        assert!(health.stuck(Instant::now(), Millis(400_000)).is_empty());
    }

    #[test]
    fn readiness_needs_the_policies_and_every_adoption() {
        let health = Health::default();
        assert_eq!(
            health.readiness(),
            Err(NotReady {
                policies_loaded: false,
                awaiting_count: 0,
                awaiting_provider: vec![]
            })
        );
        let api = ServiceId("api".into());
        health.set_awaiting(1, [api.clone()].into());
        assert_eq!(
            health.readiness().expect_err("awaiting").awaiting_provider,
            vec![api]
        );
        health.set_awaiting(1, BTreeSet::new());
        assert_eq!(health.readiness(), Ok(1));
    }

    #[test]
    fn each_adoption_removes_its_service_and_readyz_names_a_bounded_few() {
        let health = Health::default();
        let ids: Vec<ServiceId> = (0..5_000)
            .map(|i| ServiceId(format!("svc-{i:05}")))
            .collect();
        health.set_awaiting(ids.len(), ids.iter().cloned().collect());
        let why = health.readiness().expect_err("every service awaits");
        assert_eq!(why.awaiting_count, 5_000);
        assert_eq!(why.awaiting_provider, ids[..READYZ_LISTED].to_vec());
        for id in &ids[..4_999] {
            health.adopted(id);
        }
        let why = health.readiness().expect_err("one awaits");
        assert_eq!(
            (why.awaiting_count, why.awaiting_provider),
            (1, vec![ids[4_999].clone()])
        );
        health.adopted(&ids[4_999]);
        assert_eq!(health.readiness(), Ok(5_000));
    }

    #[test]
    fn bounds_follow_the_loops_periods_with_a_floor() {
        assert_eq!(
            engine_bound(Duration::from_secs(1)),
            Duration::from_secs(30)
        );
        assert_eq!(engine_bound(Duration::from_millis(50)), MIN_BOUND);
        assert_eq!(
            probe_bound(Duration::from_secs(10), Duration::from_secs(3)),
            Duration::from_secs(33)
        );
        assert_eq!(
            reconciler_bound(Duration::from_secs(12)),
            Duration::from_secs(36)
        );
    }
}
