//! gslb's side: the real probe loops (`run_endpoint`, one per endpoint, one shared `Prober`)
//! feeding a counting task in place of the engine loop, measured over a window after warm-up.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gslb::io::clock::Clock;
use gslb::io::probe::{DnsSettings, Prober, ProbingSettings, run_endpoint};
use gslb_core::model::{EndpointId, VantageId};
use gslb_core::policy::{Endpoint, EndpointKind, ProbeSpec};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::Workload;
use crate::procfs;
use crate::report::{Figures, quantile};

/// Runs the workload against `addrs` with gslb's probe loops.
pub async fn run(w: &Workload, addrs: &[SocketAddr], ticks: u64) -> anyhow::Result<Figures> {
    let prober = Arc::new(Prober::with_limits(
        &DnsSettings::default(),
        &ProbingSettings {
            max_in_flight: w.max_in_flight,
            late_after: Duration::from_millis(50),
        },
    )?);
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
    let (tx, mut rx) = mpsc::channel(gslb::daemon::inbox::MESSAGE_BUFFER);
    // Stands in for the engine loop: counts results by reason while measuring.
    let counting = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = counting.clone();
    let counter = tokio::spawn(async move {
        let mut reasons = BTreeMap::<&'static str, u64>::new();
        let mut durations = Vec::new();
        while let Some(o) = rx.recv().await {
            let o: gslb_core::model::Observation = o;
            if flag.load(std::sync::atomic::Ordering::Relaxed) {
                *reasons.entry(o.outcome.reason.as_str()).or_default() += 1;
                durations.push(o.outcome.duration);
            }
        }
        (reasons, durations)
    });
    let mut loops = JoinSet::new();
    for addr in addrs {
        let url = format!("http://{addr}/health");
        let endpoint = Endpoint {
            id: EndpointId(url.clone()),
            kind: EndpointKind::Http(url::Url::parse(&url)?),
        };
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
    drop(tx);
    tokio::time::sleep(w.warmup).await;
    let before = prober.stats().snapshot();
    let cpu = procfs::Window::start("self", &w.origins_pid, ticks);
    let started = Instant::now();
    counting.store(true, std::sync::atomic::Ordering::Relaxed);
    tokio::time::sleep(w.duration).await;
    counting.store(false, std::sync::atomic::Ordering::Relaxed);
    let elapsed = started.elapsed();
    let (cpu, others) = cpu.end("self", &w.origins_pid, ticks);
    let window = prober.stats().snapshot().since(&before);
    let rss = procfs::peak_rss("self");
    loops.shutdown().await;
    let (reasons, mut durations) = counter.await?;
    durations.sort_unstable();
    let done: u64 = reasons.values().sum();
    let failed: u64 = reasons
        .iter()
        .filter(|(r, _)| **r != "ok")
        .map(|(_, n)| n)
        .sum();
    Ok(Figures {
        probes: done,
        elapsed,
        cpu,
        others,
        lateness: Some((
            window.lateness.quantile(0.5),
            window.lateness.quantile(0.99),
            window.lateness.max(),
        )),
        durations: Some((
            quantile(&durations, 0.5),
            quantile(&durations, 0.99),
            durations.last().copied().unwrap_or_default(),
        )),
        late: Some(window.late),
        skipped: Some(window.skipped),
        timeouts: window.timeouts,
        failed,
        failures: reasons
            .into_iter()
            .filter(|(r, _)| *r != "ok")
            .map(|(r, n)| format!("{r} {n}"))
            .collect(),
        peak_rss: rss,
    })
}
