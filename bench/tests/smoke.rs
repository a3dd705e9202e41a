//! The product benchmark (`gslb-bench`) end to end at toy size: `gslb run` (the binary next to
//! `gslb-bench`, built by `cargo test --workspace` for the gslb crate's own tests; `cargo build
//! --bin gslb` first when testing this package alone) over 20 origins and the Cloudflare fake,
//! then two detection rounds. Checks that the figures are there and sane (probes answered, a
//! provider call counted, a failover write timed) and that it stops by itself. The real run
//! is documented in `docs/benchmarks.md`.

use std::path::PathBuf;
use std::process::Command;

fn gslb_bench(args: &[&str]) -> String {
    let bench = PathBuf::from(env!("CARGO_BIN_EXE_gslb-bench"));
    let gslb = bench.with_file_name("gslb");
    let out = Command::new(&bench)
        .args(args)
        .arg("--gslb")
        .arg(&gslb)
        .output()
        .expect("gslb-bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    stdout
}

/// The `gslb run` column of the row starting with `figure`.
fn cell<'a>(table: &'a str, figure: &str) -> &'a str {
    let row = table
        .lines()
        .find(|l| l.starts_with(&format!("| {figure}")))
        .unwrap_or_else(|| panic!("no row {figure:?} in\n{table}"));
    row.split('|').nth(2).map_or("", str::trim)
}

/// A size as the report writes it (`12.3 kB`, `4.5 MB`), in bytes.
fn bytes(text: &str) -> f64 {
    let scale = if text.contains(" MB") { 1e6 } else { 1e3 };
    number(text) * scale
}

/// The first number in `text`.
fn number(text: &str) -> f64 {
    let digits: String = text
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no number in {text:?}"))
}

#[test]
fn the_benchmark_drives_gslb_run_and_reports_sane_figures() {
    let out = gslb_bench(&[
        "--endpoints",
        "20",
        "--per-service",
        "2",
        "--interval",
        "500ms",
        "--duration",
        "2s",
        "--warmup",
        "500ms",
        "--scrapes",
        "2",
        "--blackbox",
        "/nonexistent/blackbox_exporter",
    ]);
    assert!(
        out.contains("10 services x 2 endpoints = 20 endpoints"),
        "{out}"
    );
    let rate = number(cell(&out, "probes per second (planned)"));
    assert!(rate > 0.0, "no probe answered:\n{out}");
    assert!(
        number(cell(&out, "CPU per probe, whole process")) > 0.0,
        "{out}"
    );
    assert!(number(cell(&out, "peak RSS (VmHWM)")) > 0.0, "{out}");
    let wire = bytes(cell(&out, "`/metrics` size, scrape as Prometheus"));
    let uncompressed = bytes(cell(&out, "`/metrics` size, uncompressed"));
    assert!(wire > 0.0, "{out}");
    assert!(uncompressed > wire, "the scrape was not compressed:\n{out}");
    let startup_calls = cell(&out, "provider calls per minute, start-up");
    assert!(
        startup_calls.contains("GET "),
        "no provider call counted: {startup_calls}\n{out}"
    );
    assert!(
        out.contains("blackbox_exporter: /nonexistent/blackbox_exporter not found"),
        "{out}"
    );
}

#[test]
fn detection_rounds_time_the_failover_write_through_gslb_run() {
    let out = gslb_bench(&[
        "detect",
        "--rounds",
        "2",
        "--interval",
        "200ms",
        "--fall",
        "2",
    ]);
    assert!(out.contains("| rounds (missed) | 2 (0) |"), "{out}");
    assert!(
        out.contains("| bound fall x interval + 300 ms | 700 ms"),
        "{out}"
    );
    // The first failed probe comes at most one interval after the kill; fall - 1 more follow.
    let p50 = number(cell(&out, "p50 / p99 / max"));
    assert!(
        p50 >= 200.0,
        "a failover write before (fall - 1) x interval can have passed: {out}"
    );
}
