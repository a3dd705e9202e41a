//! gslb's side: the real probe loops (`run_endpoint`, one per endpoint, one shared `Prober`)
//! feeding a counting task in place of the engine loop, measured over a window after warm-up.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use gslb::daemon::inbox::MESSAGE_BUFFER;
use gslb::io::clock::Clock;
use gslb::io::probe::{DnsSettings, Prober, ProbingSettings, StatsSnapshot, run_endpoint};
use gslb_core::model::{Observation, VantageId};
use gslb_core::policy::ProbeSpec;
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};

use crate::report::{Figures, spread};
use crate::{Measured, Workload};

/// Runs the workload against `addrs` with gslb's probe loops.
pub async fn run(w: &Workload, addrs: &[SocketAddr]) -> anyhow::Result<Figures> {
    let prober = Arc::new(Prober::with_limits(
        &DnsSettings::default(),
        &ProbingSettings {
            max_in_flight: w.max_in_flight,
            ..ProbingSettings::default()
        },
    )?);
    let (tx, rx) = mpsc::channel(MESSAGE_BUFFER);
    let counter = Counter::spawn(rx);
    let mut loops = probe_loops(&prober, w, addrs, &tx)?;
    drop(tx);
    tokio::time::sleep(w.warmup).await;
    let before = prober.stats().snapshot();
    let measured = w.window("self", &counter.measuring).await;
    let stats = prober.stats().snapshot().since(&before);
    loops.shutdown().await;
    let counts = counter.task.await?;
    Ok(summarise(measured, &stats, counts))
}

/// One probe loop per origin, every one probing `http://<addr>/health` as a policy endpoint
/// would be, sending its observations to `tx`.
fn probe_loops(
    prober: &Arc<Prober>,
    w: &Workload,
    addrs: &[SocketAddr],
    tx: &mpsc::Sender<Observation>,
) -> anyhow::Result<JoinSet<()>> {
    let spec = ProbeSpec {
        interval: w.interval,
        timeout: w.timeout,
        expected_status: vec![200],
        body_contains: None,
        host_header: None,
        tls_server_name: None,
        tls_verify: true,
        follow_redirects: false,
    };
    let mut loops = JoinSet::new();
    for addr in addrs {
        let endpoint = gslb_core::policy::endpoint(&format!("http://{addr}/health"), "origin")
            .map_err(anyhow::Error::msg)?;
        let target = prober.target(&spec, &endpoint)?;
        loops.spawn(run_endpoint(
            prober.clone(),
            target,
            VantageId("bench".into()),
            Clock::system(),
            tx.clone(),
            |o| o,
        ));
    }
    Ok(loops)
}

/// Stands in for the engine loop: counts results by reason, and keeps their durations, while
/// `measuring` is on; ends when every probe loop has.
struct Counter {
    measuring: Arc<AtomicBool>,
    task: JoinHandle<Counts>,
}

/// What the [`Counter`] saw in the window.
struct Counts {
    /// Results by reason (`ok` included).
    reasons: BTreeMap<&'static str, u64>,
    /// How long each probe took, unsorted.
    durations: Vec<Duration>,
}

impl Counter {
    /// Starts counting what arrives on `rx`, with `measuring` off.
    fn spawn(mut rx: mpsc::Receiver<Observation>) -> Counter {
        let measuring = Arc::new(AtomicBool::new(false));
        let flag = measuring.clone();
        let task = tokio::spawn(async move {
            let mut counts = Counts {
                reasons: BTreeMap::new(),
                durations: Vec::new(),
            };
            while let Some(o) = rx.recv().await {
                if flag.load(Ordering::Relaxed) {
                    *counts.reasons.entry(o.outcome.reason.as_str()).or_default() += 1;
                    counts.durations.push(o.outcome.duration);
                }
            }
            counts
        });
        Counter { measuring, task }
    }
}

/// The figures of the window: results from the counter, lateness, late, skipped slots and
/// timeouts from the prober's own statistics.
fn summarise(m: Measured, stats: &StatsSnapshot, counts: Counts) -> Figures {
    let Counts {
        reasons,
        mut durations,
    } = counts;
    durations.sort_unstable();
    let failures: Vec<(&str, u64)> = reasons
        .iter()
        .filter(|(r, _)| **r != "ok")
        .map(|(r, n)| (*r, *n))
        .collect();
    Figures {
        probes: reasons.values().sum(),
        elapsed: m.elapsed,
        cpu: m.cpu,
        others: m.others,
        lateness: Some((
            stats.lateness.quantile(0.5),
            stats.lateness.quantile(0.99),
            stats.lateness.max(),
        )),
        durations: Some(spread(&durations)),
        late: Some(stats.late),
        skipped: Some(stats.skipped),
        timeouts: stats.timeouts,
        failed: failures.iter().map(|(_, n)| n).sum(),
        failures: failures
            .into_iter()
            .map(|(r, n)| format!("{r} {n}"))
            .collect(),
        peak_rss: m.peak_rss,
    }
}
