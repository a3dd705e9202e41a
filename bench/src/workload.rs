//! The probe workload blackbox_exporter gets (the same endpoints, interval and timeout as the
//! daemon's policies), and its measured window.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::procfs;

/// One prober's workload.
pub struct Workload {
    /// Interval of each.
    pub interval: Duration,
    /// Probe timeout.
    pub timeout: Duration,
    /// Before the window.
    pub warmup: Duration,
    /// The window.
    pub duration: Duration,
    /// In-flight bound.
    pub max_in_flight: usize,
    /// The origins' process id (its CPU is kept apart from the rest of the machine's).
    pub origins_pid: String,
    /// Clock ticks per second of `/proc` ([`procfs::clock_ticks`]).
    pub ticks: u64,
}

/// What one prober's measured window gives.
pub struct Measured {
    /// Length of the window.
    pub elapsed: Duration,
    /// CPU time of the prober's process in the window.
    pub cpu: Option<Duration>,
    /// CPU time of processes other than the prober and the origins in the window.
    pub others: Option<Duration>,
    /// Peak resident set size of the prober's process, bytes.
    pub peak_rss: Option<u64>,
}

impl Workload {
    /// The measured window: `measuring` is on for [`Workload::duration`]; the CPU counters of
    /// `prober` (a process id), the origins and the machine are read around it, the prober's
    /// peak RSS after it.
    pub async fn window(&self, prober: &str, measuring: &AtomicBool) -> Measured {
        let cpu = procfs::Window::start(&[prober.to_owned(), self.origins_pid.clone()], self.ticks);
        let started = Instant::now();
        measuring.store(true, Ordering::Relaxed);
        tokio::time::sleep(self.duration).await;
        measuring.store(false, Ordering::Relaxed);
        let elapsed = started.elapsed();
        let usage = cpu.end();
        Measured {
            elapsed,
            cpu: usage.cpu.first().copied().flatten(),
            others: usage.others,
            peak_rss: procfs::peak_rss(prober),
        }
    }
}
