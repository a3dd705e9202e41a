//! Detection latency: the whole controller in process, started by the daemon builder as
//! `gslb demo` starts it (real probe loops, engine loop, reconciler, `MemoryProvider`), over
//! two loopback origins. Stop the primary's origin, measure until the provider accepts the
//! failover write; start it again, let automatic failback bring traffic back; repeat after a
//! random pause (so kills fall at every phase of the probe schedule).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use gslb::daemon::builder::{Builder, Daemon};
use gslb::io::clock::Clock;
use gslb::io::origin::Origin;
use gslb::ops::telemetry::Telemetry;
use gslb_core::event::Event;
use gslb_core::model::{VantageId, Verdict};
use gslb_provider::{Change, FailoverStyle, MemoryProvider};
use rand::Rng;
use tokio::sync::broadcast;

use crate::report::spread;

/// What the detection runs measured.
pub struct Detection {
    /// Kill to provider write, one per kill, sorted.
    pub latencies: Vec<Duration>,
    /// Kills whose failover was not written within the deadline.
    pub missed: usize,
    /// Probe interval.
    pub interval: Duration,
    /// Consecutive failures that mark an endpoint down.
    pub fall: u32,
}

/// How long one kill or one failback may take before it counts as missed.
const DEADLINE: Duration = Duration::from_secs(10);

/// The policy: fast probes, automatic failback with a short hold; no spacing (TTL 0, 100 ms
/// minimum dwell), a velocity budget and a damping threshold far beyond the kills made, so the
/// rails never hold a failover or a failback back.
fn policy(seoul: SocketAddr, tokyo: SocketAddr, interval: Duration, fall: u32) -> String {
    let timeout = interval * 3 / 4;
    format!(
        r#"service = "bench"
hostname = "bench.example.test"
failback = "auto"
failback_hold = "100ms"
failback_hold_max = "100ms"
min_dwell = "100ms"
[probe]
interval = "{}ms"
timeout = "{}ms"
[health]
fall = {fall}
rise = 1
[damping]
penalty = 1
half_life = "1s"
suppress = 1000000
reuse = 500000
max_suppress = "10s"
[velocity]
burst = 100000
refill = "1s"
[[pools]]
name = "seoul"
priority = 1
endpoints = ["http://{seoul}/health"]
[[pools]]
name = "tokyo"
priority = 2
endpoints = ["http://{tokyo}/health"]
[target.route53]
hosted_zone_id = "ZBENCH"
ttl = "0s"
[target.route53.pools.seoul]
values = ["192.0.2.1"]
[target.route53.pools.tokyo]
values = ["192.0.2.2"]
"#,
        interval.as_millis(),
        timeout.as_millis()
    )
}

/// Kills the primary `kills` times.
pub async fn run(kills: usize, interval: Duration, fall: u32) -> anyhow::Result<Detection> {
    let mut rig = Rig::start(interval, fall).await?;
    rig.both_healthy().await?;
    let mut latencies = Vec::with_capacity(kills);
    let mut missed = 0;
    for _ in 0..kills {
        match rig.kill().await? {
            Some(latency) => latencies.push(latency),
            None => missed += 1,
        }
    }
    rig.daemon.stop().await;
    latencies.sort_unstable();
    Ok(Detection {
        latencies,
        missed,
        interval,
        fall,
    })
}

/// The two origins, the controller on [`policy`] and the provider it writes to.
struct Rig {
    seoul: Origin,
    /// Kept running for the whole run.
    _tokyo: Origin,
    provider: Arc<MemoryProvider>,
    daemon: Daemon,
    /// The controller's events, subscribed before it probes.
    rx: broadcast::Receiver<Event>,
    interval: Duration,
}

impl Rig {
    /// Starts the origins and the controller, as `gslb demo` does.
    async fn start(interval: Duration, fall: u32) -> anyhow::Result<Rig> {
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        let seoul = Origin::start(loopback, "seoul").await?;
        let tokyo = Origin::start(loopback, "tokyo").await?;
        let policy = gslb_core::policy::parse(
            Path::new("<bench detection policy>"),
            &policy(seoul.addr(), tokyo.addr(), interval, fall),
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        let provider = Arc::new(MemoryProvider::new(
            FailoverStyle::Enablement,
            &["seoul".into(), "tokyo".into()],
        ));
        let mut daemon = Builder::new(vec![policy.clone()])
            .vantage(VantageId("bench".into()))
            .resync(Duration::from_secs(5))
            .telemetry(Telemetry::new(Clock::system(), 4096))
            .start()?;
        let rx = daemon.telemetry.events.subscribe();
        daemon.attach(&policy, provider.clone())?;
        Ok(Rig {
            seoul,
            _tokyo: tokyo,
            provider,
            daemon,
            rx,
            interval,
        })
    }

    /// Waits until both pools are healthy, before the first kill.
    async fn both_healthy(&mut self) -> anyhow::Result<()> {
        let mut healthy = BTreeSet::new();
        wait(&mut self.rx, |e| {
            if let Event::EndpointVerdict {
                pool,
                verdict: Verdict::Healthy,
                ..
            } = e
            {
                healthy.insert(pool.0.clone());
            }
            healthy.len() == 2
        })
        .await
        .ok_or_else(|| anyhow::anyhow!("the origins never became healthy"))
    }

    /// After a random pause, stops Seoul's origin and measures until the provider accepts the
    /// failover write (`None`: not within [`DEADLINE`]); then starts it again and waits for the
    /// failback.
    ///
    /// # Errors
    /// Seoul's origin cannot start again, or traffic does not come back within [`DEADLINE`].
    async fn kill(&mut self) -> anyhow::Result<Option<Duration>> {
        // A random pause puts the kill at any phase of the probe schedule.
        let pause = rand::rng().random_range(Duration::ZERO..self.interval);
        tokio::time::sleep(self.interval + pause).await;
        let writes = self.provider.writes().len();
        let killed = SystemTime::now();
        self.seoul.stop().await;
        let failover = wait(
            &mut self.rx,
            |e| matches!(e, Event::Applied { plan, .. } if sets(plan, "seoul", false)),
        )
        .await;
        let latency = failover.and_then(|()| {
            let write = self.provider.writes().get(writes)?.at;
            Some(write.duration_since(killed).unwrap_or_default())
        });
        self.seoul.start_again().await?;
        let back = wait(
            &mut self.rx,
            |e| matches!(e, Event::Applied { plan, .. } if sets(plan, "seoul", true)),
        )
        .await;
        if back.is_none() {
            anyhow::bail!("traffic did not come back to seoul within {DEADLINE:?}; stopping");
        }
        Ok(latency)
    }
}

/// Whether `plan` enables (or disables) `pool`.
fn sets(plan: &[Change], pool: &str, enabled: bool) -> bool {
    plan.iter().any(|c| {
        matches!(c, Change::SetEnabled { pool: p, enabled: e, .. } if p.as_str() == pool && *e == enabled)
    })
}

/// Waits for an event `pick` accepts, within [`DEADLINE`].
async fn wait(
    rx: &mut broadcast::Receiver<Event>,
    mut pick: impl FnMut(&Event) -> bool,
) -> Option<()> {
    let found = async {
        loop {
            match rx.recv().await {
                Ok(e) if pick(&e) => return Some(()),
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    };
    tokio::time::timeout(DEADLINE, found).await.ok().flatten()
}

impl Detection {
    /// The printed lines.
    pub fn report(&self) -> String {
        let n = self.latencies.len();
        let (p50, p99, max) = spread(&self.latencies);
        let floor = self.interval * self.fall;
        let with_confirm = self.interval * (self.fall + 1);
        let target = floor + Duration::from_millis(300);
        let ms = |d: Duration| d.as_millis();
        let verdict = if self.missed == 0 && p99 <= target {
            "met".to_owned()
        } else if self.missed > 0 {
            format!("NOT met: {} kill(s) missed", self.missed)
        } else {
            format!("NOT met by {} ms", ms(p99 - target))
        };
        format!(
            "detection to provider write ({n} kills, interval {} ms, fall {}): p50 {} ms, p99 {} ms, max {} ms\n  fall x interval = {} ms; with the confirm_target probe of the standby (up to one more interval) = {} ms\n  target p99 <= fall x interval + 300 ms = {} ms: {verdict}\n",
            ms(self.interval),
            self.fall,
            ms(p50),
            ms(p99),
            ms(max),
            ms(floor),
            ms(with_confirm),
            ms(target),
        )
    }
}
