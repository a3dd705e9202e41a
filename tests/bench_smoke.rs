//! The probe benchmark (`gslb-bench`) end to end at toy size: it starts its origins process,
//! measures gslb, reports a missing blackbox_exporter instead of failing, measures detection
//! latency, prints every figure and stops by itself. The real run is documented in `docs/benchmarks.md`.

use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn the_benchmark_runs_small_and_prints_every_figure() {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_gslb-bench"))
        .args([
            "--endpoints",
            "20",
            "--interval",
            "200ms",
            "--duration",
            "1s",
            "--warmup",
            "600ms",
            "--blackbox",
            "/nonexistent/blackbox_exporter",
            "--kills",
            "2",
        ])
        .output()
        .expect("gslb-bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for figure in [
        " cores, ",
        "20 endpoints",
        "origins: 20 listening in process",
        "| probes per second",
        "| CPU seconds per 1,000 probes",
        "| scheduling lateness p50 / p99 / max",
        "| timeouts",
        "| peak RSS of the prober process",
        "CPU per probe ratio: not measured (/nonexistent/blackbox_exporter not found)",
        "blackbox_exporter: /nonexistent/blackbox_exporter not found",
        "detection to provider write (2 kills, interval 200 ms, fall 2)",
        "target p99 <= fall x interval + 300 ms = 700 ms",
    ] {
        assert!(stdout.contains(figure), "missing {figure:?} in\n{stdout}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "stops by itself"
    );
}
