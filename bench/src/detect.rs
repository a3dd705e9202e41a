//! Detection through the product: one generated service (pool `a`'s origin and pool `b`'s, each
//! in its own process) under `gslb run`, bound to its load balancer at the Cloudflare fake.
//! Each round kills pool `a`'s origin process (its listener closes at once) at a random phase
//! of the probe schedule and times until the fake receives the failover write; then starts the
//! origin again on the same address and waits for automatic failback's write.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, SystemTime};

use rand::Rng;

use crate::daemon::Daemon;
use crate::fake::Provider;
use crate::generate::{self, Shape};
use crate::origins::Origins;

/// What the detection rounds measured.
pub struct Detection {
    /// Kill to the fake's receipt of the failover write, one per round, sorted.
    pub latencies: Vec<Duration>,
    /// Rounds whose failover was not written within the deadline.
    pub missed: usize,
    /// Probe interval.
    pub interval: Duration,
    /// Consecutive failures that mark an endpoint down.
    pub fall: u32,
}

/// The policy's rails opened wide: automatic failback after 100 ms, no spacing (`min_dwell`
/// 100 ms, TTL 1 s), a velocity budget and a damping threshold no run reaches.
const RAILS: &str = "failback = \"auto\"\nfailback_hold = \"100ms\"\nfailback_hold_max = \"100ms\"\nmin_dwell = \"100ms\"\n[damping]\npenalty = 1\nhalf_life = \"1s\"\nsuppress = 1000000\nreuse = 500000\nmax_suppress = \"10s\"\n[velocity]\nburst = 100000\nrefill = \"1s\"";

/// Runs `rounds` kills against `gslb run`.
pub async fn run(
    gslb: &Path,
    rounds: usize,
    interval: Duration,
    fall: u32,
) -> anyhow::Result<Detection> {
    let provider = Provider::start(1).await?;
    let [primary_at, standby_at] = [10, 11].map(|host| {
        std::net::TcpListener::bind(("127.1.0.".to_owned() + &host.to_string(), 0))
            .and_then(|l| l.local_addr())
    });
    let (primary_at, standby_at): (SocketAddr, SocketAddr) = (primary_at?, standby_at?);
    let mut primary = Origins::start(0, &[primary_at]).await?;
    let standby = Origins::start(0, &[standby_at]).await?;
    let shape = Shape {
        services: 1,
        per_service: 2,
        interval,
        fall,
        extra: RAILS.into(),
        target_extra: "ttl = \"1s\"".into(),
    };
    let urls = [primary_at, standby_at].map(|a| format!("http://{a}/health"));
    let folder = generate::write(
        &shape,
        &urls,
        &provider.base_url,
        "bench",
        // A switch and its failback every round: more calls than the default budget of 20 a
        // minute allows (the budget would hold the next round's write, not measure detection),
        // and more than gslb's default pace of the token (300 per 5 minutes, 1 a second after a
        // burst of 10: an isolated failover has the whole burst, but a switch every few seconds
        // drains it and then waits up to 1 s per call). The token gets Cloudflare's own limit,
        // 1,200 per 5 minutes (this key continues the daemon settings' `[cloudflare]` table).
        "requests_per_window = 1200\n[reconcile]\nresync = \"5s\"\nprovider_calls_per_minute = 600",
    )?;
    let mut daemon = Daemon::spawn(gslb, &folder, None)?;
    daemon.ready(Duration::from_secs(60)).await?;
    // Both origins probed healthy (rise 2) before the first kill.
    tokio::time::sleep(interval * 3).await;
    let deadline = interval * (fall + 2) + Duration::from_secs(10);
    let mut latencies = Vec::with_capacity(rounds);
    let mut missed = 0;
    for round in 0..rounds {
        let pause = rand::rng().random_range(Duration::ZERO..interval);
        tokio::time::sleep(interval * 2 + pause).await;
        let killed = SystemTime::now();
        primary.stop();
        let written = wait_write(&provider, killed, deadline).await;
        match written {
            Some(at) => latencies.push(at.duration_since(killed).unwrap_or_default()),
            None => missed += 1,
        }
        primary = Origins::start(0, &[primary_at]).await?;
        let after = written.unwrap_or(killed) + Duration::from_micros(1);
        if wait_write(&provider, after, deadline).await.is_none() {
            return Err(daemon.fail(&format!(
                "round {}: no failback write within {deadline:?} after the origin came back",
                round + 1
            )));
        }
    }
    drop(daemon);
    primary.stop();
    standby.stop();
    provider.stop();
    latencies.sort_unstable();
    Ok(Detection {
        latencies,
        missed,
        interval,
        fall,
    })
}

/// The first write the fake received at or after `from`, waited for up to `limit`.
async fn wait_write(provider: &Provider, from: SystemTime, limit: Duration) -> Option<SystemTime> {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if let Some(at) = provider.first_write_after(from) {
            return Some(at);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    None
}

impl Detection {
    /// The printed lines (a markdown table).
    pub fn report(&self) -> String {
        let n = self.latencies.len();
        let q = |q: f64| {
            if n == 0 {
                return Duration::ZERO;
            }
            self.latencies[((q * n as f64).ceil() as usize).clamp(1, n) - 1]
        };
        let (p50, p99) = (q(0.5), q(0.99));
        let max = self.latencies.last().copied().unwrap_or_default();
        let bound = self.interval * self.fall + Duration::from_millis(300);
        let ms = |d: Duration| d.as_millis();
        let verdict = if self.missed > 0 {
            format!("NOT met: {} round(s) missed", self.missed)
        } else if p99 <= bound {
            "met".to_owned()
        } else {
            format!("NOT met by {} ms", ms(p99 - bound))
        };
        format!(
            "| detection to provider write, `gslb run`, interval {} ms, fall {} | |\n|---|---|\n| rounds (missed) | {n} ({}) |\n| p50 / p99 / max | {} / {} / {} ms |\n| bound fall x interval + 300 ms | {} ms: **{verdict}** |\n",
            ms(self.interval),
            self.fall,
            self.missed,
            ms(p50),
            ms(p99),
            ms(max),
            ms(bound),
        )
    }
}
