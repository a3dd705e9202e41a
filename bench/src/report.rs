//! The printed markdown table: the daemon's figures beside blackbox_exporter's and the target
//! of each (issue 14, item 2), ready to paste into `docs/benchmarks.md`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use gslb_core::model::ProbeReason;

use crate::blackbox::Figures;
use crate::product::Product;

fn secs(d: Option<Duration>) -> f64 {
    d.map_or(0.0, |d| d.as_secs_f64())
}

fn ms(seconds: f64) -> String {
    if seconds.is_infinite() {
        "> 10 s".into()
    } else {
        format!("{:.0} ms", seconds * 1000.0)
    }
}

fn mb(bytes: f64) -> String {
    // Below 1 MB in kB, so a small run's size does not read 0.0.
    if bytes < 1e6 {
        format!("{:.1} kB", bytes / 1e3)
    } else {
        format!("{:.1} MB", bytes / 1e6)
    }
}

/// `GET pools 12, PATCH lb 1` per minute over `span`, with the total first.
fn per_minute(calls: &BTreeMap<String, u64>, span: Duration) -> String {
    let scale = 60.0 / span.as_secs_f64().max(1e-9);
    let total: u64 = calls.values().sum();
    let kinds: Vec<String> = calls
        .iter()
        .map(|(k, n)| format!("{k} {:.0}", *n as f64 * scale))
        .collect();
    format!(
        "{:.0} ({})",
        total as f64 * scale,
        if kinds.is_empty() {
            "none".into()
        } else {
            kinds.join(", ")
        }
    )
}

/// `late / prober-side / failed (reason n, ...)` from `gslb_probes_total` deltas by reason:
/// `late` is a probe the process was too starved to run ([`ProbeReason::Late`]), prober-side
/// the vantage point's own resolver or resources ([`ProbeReason::is_prober_side`]) or
/// unprobeable from here; every other reason but `ok` counts against the origin.
fn results(reasons: &BTreeMap<String, f64>) -> String {
    let (mut late, mut prober, mut failed) = (0.0, 0.0, 0.0);
    let mut origin = Vec::new();
    for (name, n) in reasons.iter().filter(|(_, n)| **n > 0.0) {
        let reason: Option<ProbeReason> = serde_json::from_value(name.as_str().into()).ok();
        match reason {
            Some(ProbeReason::Ok) => {}
            Some(ProbeReason::Late) => late += n,
            Some(r) if r.is_prober_side() || r == ProbeReason::Unprobeable => prober += n,
            _ => {
                failed += n;
                origin.push(format!("{name} {n:.0}"));
            }
        }
    }
    let detail = if origin.is_empty() {
        String::new()
    } else {
        format!(" ({})", origin.join(", "))
    };
    format!("{late:.0} / {prober:.0} / {failed:.0}{detail}")
}

/// One row: figure, `gslb run`, blackbox_exporter, target.
type Row = [String; 4];

/// What the rows share.
struct Ctx<'a> {
    p: &'a Product,
    bb: Option<&'a Figures>,
    /// The window, seconds.
    window: f64,
    /// The daemon's CPU in the window, seconds.
    daemon_cpu: f64,
    /// The daemon's CPU per probe, ms.
    cpu_per_probe: f64,
}

fn dash() -> String {
    "-".to_owned()
}

impl Ctx<'_> {
    /// The blackbox_exporter column of a row, `-` without it.
    fn bb(&self, f: impl Fn(&Figures) -> String) -> String {
        self.bb.map_or_else(dash, f)
    }

    /// Window delta of one of the daemon's counters.
    fn counter(&self, k: &str) -> f64 {
        self.p.steady.counters.get(k).copied().unwrap_or(0.0)
    }
}

fn probe_rows(c: &Ctx) -> Vec<Row> {
    let s = &c.p.steady;
    let late = format!(
        "{:.2} % of {:.0}",
        s.lateness.late_share * 100.0,
        s.lateness.count
    );
    let bb_late = c.bb(|f| {
        let share = f.late as f64 * 100.0 / f.probes.max(1) as f64;
        format!("{share:.2} % (scrape loop)")
    });
    let bb_lateness = c.bb(|f| {
        let (p50, p99, _) = f.lateness;
        format!("{} / {}", ms(p50.as_secs_f64()), ms(p99.as_secs_f64()))
    });
    let bb_cpu = c.bb.and_then(Figures::cpu_ms_per_probe);
    let ratio = bb_cpu.map(|b| c.cpu_per_probe / b);
    vec![
        [
            "probes per second (planned)".into(),
            format!("{:.0} ({:.0})", s.probes_per_s, s.planned_per_s),
            c.bb(|f| format!("{:.0}", f.rate())),
            "all".into(),
        ],
        [
            "probes started > 50 ms after their slot".into(),
            late,
            bb_late,
            "<= 0.1 %".into(),
        ],
        [
            "lateness p50 / p99 (histogram bucket bound)".into(),
            format!("<= {} / <= {}", ms(s.lateness.p50), ms(s.lateness.p99)),
            bb_lateness,
            "p99.9 <= 50 ms".into(),
        ],
        [
            "CPU per probe, whole process".into(),
            format!("{:.3} ms", c.cpu_per_probe),
            bb_cpu.map_or_else(dash, |b| format!("{b:.3} ms")),
            "<= 1/4 of blackbox_exporter's".into(),
        ],
        [
            "CPU per probe, gslb / blackbox_exporter".into(),
            ratio.map_or_else(dash, |r| format!("**{r:.2}**")),
            String::new(),
            "<= 0.25".into(),
        ],
    ]
}

fn resource_rows(c: &Ctx) -> Vec<Row> {
    let p = c.p;
    let renders = &p.metrics.took;
    let max = renders.iter().max().copied().unwrap_or_default();
    let min = renders.iter().min().copied().unwrap_or_default();
    vec![
        [
            "cores used by the process".into(),
            format!("{:.2}", c.daemon_cpu / c.window),
            c.bb(|f| format!("{:.2}", secs(f.cpu) / f.elapsed.as_secs_f64().max(1e-9))),
            "<= 1.2".into(),
        ],
        [
            "peak RSS (VmHWM)".into(),
            p.peak_rss.map_or_else(dash, |b| mb(b as f64)),
            c.bb(|f| f.peak_rss.map_or_else(dash, |b| mb(b as f64))),
            "<= 200 MB".into(),
        ],
        [
            "start-up: /readyz ready / every endpoint probed".into(),
            format!(
                "{:.1} s / {:.1} s",
                p.startup.ready.as_secs_f64(),
                p.startup.first_round.as_secs_f64()
            ),
            dash(),
            "< 3 s".into(),
        ],
        [
            "start-up: CPU of the daemon".into(),
            format!("{:.1} s", secs(p.startup.cpu)),
            dash(),
            String::new(),
        ],
        [
            "`/metrics` size, scrape as Prometheus makes it (gzip, on the wire)".into(),
            mb(p.metrics.sizes.wire as f64),
            dash(),
            "< 10 MB".into(),
        ],
        [
            "`/metrics` size, uncompressed".into(),
            mb(p.metrics.sizes.uncompressed as f64),
            dash(),
            String::new(),
        ],
        [
            format!(
                "`/metrics` scrape (gzip), time to the whole answer, min / max of {}",
                renders.len()
            ),
            format!(
                "{:.0} / {:.0} ms",
                min.as_secs_f64() * 1e3,
                max.as_secs_f64() * 1e3
            ),
            dash(),
            "< 300 ms".into(),
        ],
        [
            "`/v1/status` size, uncompressed / gzip".into(),
            format!(
                "{} / {}",
                mb(p.status_bytes.uncompressed as f64),
                mb(p.status_bytes.wire as f64)
            ),
            dash(),
            String::new(),
        ],
    ]
}

fn provider_rows(c: &Ctx) -> Vec<Row> {
    let s = &c.p.steady;
    let per_30s = 30.0 / s.counters_span.as_secs_f64().max(1e-9);
    let cores = |i: usize| secs(s.cpu.get(i).copied().flatten()) / c.window;
    vec![
        [
            "provider calls per minute, steady state".into(),
            per_minute(&s.calls, s.elapsed),
            dash(),
            "<= 24 at 1,000 services".into(),
        ],
        [
            "provider calls per minute, start-up".into(),
            per_minute(&c.p.startup.calls, c.p.startup.first_round),
            dash(),
            String::new(),
        ],
        [
            "probes started > 50 ms late / slots skipped (daemon's counters)".into(),
            format!("{:.0} / {:.0}", c.counter("late"), c.counter("skipped")),
            c.bb(|f| format!("{} / -", f.late)),
            "0".into(),
        ],
        [
            "probes not ok: late (starved, not evidence) / prober-side / failed (the origin's), by reason".into(),
            results(&s.reasons),
            c.bb(|f| format!("- / - / {}", f.failed)),
            "failed 0 (origins healthy)".into(),
        ],
        [
            "decision changes per 30 s: metrics (decisions + holds) / audit log".into(),
            format!(
                "{:.0} / {:.0}",
                (c.counter("decisions") + c.counter("holds")) * per_30s,
                c.counter("audit") * per_30s
            ),
            dash(),
            "0 in steady state".into(),
        ],
        [
            "CPU of origins / fake / every other process (cores)".into(),
            format!(
                "{:.2} / {:.2} / {:.2}",
                cores(1),
                cores(2),
                secs(s.others) / c.window
            ),
            c.bb(|f| {
                format!(
                    "others {:.2}",
                    secs(f.others) / f.elapsed.as_secs_f64().max(1e-9)
                )
            }),
            "others ~0 (idle machine)".into(),
        ],
    ]
}

/// The table for `p`, with `bb` (blackbox_exporter's version and figures, or why not).
pub fn table(p: &Product, bb: &Result<(String, Figures), String>) -> String {
    let s = &p.steady;
    let window = s.elapsed.as_secs_f64().max(1e-9);
    let daemon_cpu = secs(s.cpu.first().copied().flatten());
    let probes = (s.probes_per_s * window).max(1.0);
    let c = Ctx {
        p,
        bb: bb.as_ref().ok().map(|(_, f)| f),
        window,
        daemon_cpu,
        cpu_per_probe: daemon_cpu * 1000.0 / probes,
    };
    let name = bb.as_ref().map_or("blackbox_exporter".into(), |(v, _)| {
        format!("blackbox_exporter {v}")
    });
    let mut out = format!("| figure | `gslb run` | {name} | target |\n|---|---|---|---|\n");
    for [a, b, c, d] in [probe_rows(&c), resource_rows(&c), provider_rows(&c)].concat() {
        let _ = writeln!(out, "| {a} | {b} | {c} | {d} |");
    }
    if let Err(why) = bb {
        let _ = writeln!(out, "\nblackbox_exporter: {why}");
    }
    if let Some(f) = c.bb.filter(|f| !f.failures.is_empty()) {
        let _ = writeln!(
            out,
            "\nblackbox_exporter failures: {}",
            f.failures.join(", ")
        );
    }
    if let Some(q) = &p.quota {
        let _ = writeln!(out, "\nCPU quota: {q}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_tell_starvation_and_the_prober_from_the_origin() {
        let reasons: BTreeMap<String, f64> = [
            ("ok", 900.0),
            ("late", 70.0),
            ("resolver_unavailable", 4.0),
            ("local_resources", 1.0),
            ("timeout", 3.0),
            ("connection_reset", 2.0),
            ("http_status", 0.0),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        assert_eq!(
            results(&reasons),
            "70 / 5 / 5 (connection_reset 2, timeout 3)"
        );
        assert_eq!(results(&BTreeMap::new()), "0 / 0 / 0");
    }
}
