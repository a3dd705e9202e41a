//! The figures of one prober over the measured window, and the printed table.

use std::fmt::Write as _;
use std::time::Duration;

/// What one prober did in the measured window.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    /// Probes completed.
    pub probes: u64,
    /// Length of the window.
    pub elapsed: Duration,
    /// CPU time (user + system) of the prober's process in the window.
    pub cpu: Option<Duration>,
    /// Start minus plan: p50, p99, max.
    pub lateness: Option<(Duration, Duration, Duration)>,
    /// How long probes took: p50, p99, max (blackbox_exporter: its `probe_duration_seconds`).
    pub durations: Option<(Duration, Duration, Duration)>,
    /// Probes that started more than 50 ms late.
    pub late: Option<u64>,
    /// Planned probes skipped because their whole interval passed (gslb only).
    pub skipped: Option<u64>,
    /// Probes that hit the timeout.
    pub timeouts: u64,
    /// Probes that failed for any reason (timeouts included).
    pub failed: u64,
    /// Failures by reason, e.g. `timeout 3`.
    pub failures: Vec<String>,
    /// Peak resident set size of the prober's process, bytes.
    pub peak_rss: Option<u64>,
    /// CPU used in the window by processes other than the prober and the origins (the rest of
    /// the machine, the scrape loop for blackbox_exporter included).
    pub others: Option<Duration>,
}

impl Figures {
    /// Probes per second.
    pub fn rate(&self) -> f64 {
        self.probes as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// CPU seconds per 1,000 probes.
    pub fn cpu_per_1000(&self) -> Option<f64> {
        let cpu = self.cpu?;
        (self.probes > 0).then(|| cpu.as_secs_f64() * 1000.0 / self.probes as f64)
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// How one row writes a prober's figure (`-` where it has none).
type Figure = fn(&Figures) -> String;

/// The table's rows, in order: a name and its [`Figure`].
const ROWS: [(&str, Figure); 9] = [
    ("probes per second", |f| format!("{:.0}", f.rate())),
    ("CPU seconds per 1,000 probes", |f| {
        f.cpu_per_1000().map_or_else(none, |c| format!("{c:.3}"))
    }),
    ("scheduling lateness p50 / p99 / max", |f| {
        triple(f.lateness)
    }),
    ("probe duration p50 / p99 / max", |f| triple(f.durations)),
    ("late (> 50 ms) / skipped slots", |f| {
        let skipped = f.skipped.map_or_else(none, |n| n.to_string());
        format!("{} / {skipped}", f.late.unwrap_or(0))
    }),
    ("timeouts", |f| f.timeouts.to_string()),
    ("failed probes (all reasons)", |f| f.failed.to_string()),
    ("other processes' CPU (cores, average)", others),
    ("peak RSS of the prober process", |f| {
        f.peak_rss.map_or_else(none, mib)
    }),
];

/// The side-by-side table, then each prober's failures and the CPU ratio; `blackbox` is
/// `Err(why)` when it did not run.
pub fn table(gslb: &Figures, blackbox: &Result<(String, Figures), String>) -> String {
    let bb = blackbox.as_ref().ok().map(|(_, f)| f);
    let bb_name = match blackbox {
        Ok((version, _)) => format!("blackbox_exporter {version}"),
        Err(_) => "blackbox_exporter".to_owned(),
    };
    let mut s = String::new();
    let _ = writeln!(s, "| {:<38} | {:>34} | {:>34} |", "", "gslb", bb_name);
    let _ = writeln!(s, "|{:-<40}|{:-<36}|{:-<36}|", "", "", "");
    for (name, figure) in ROWS {
        let (g, b) = (figure(gslb), bb.map_or_else(none, figure));
        let _ = writeln!(s, "| {name:<38} | {g:>34} | {b:>34} |");
    }
    for (who, f) in [("gslb", Some(gslb)), ("blackbox_exporter", bb)] {
        if let Some(f) = f.filter(|f| !f.failures.is_empty()) {
            let _ = writeln!(s, "{who} failures: {}", f.failures.join(", "));
        }
    }
    let why = blackbox.as_ref().err().map(String::as_str);
    s.push_str(&ratio(gslb, bb, why));
    s
}

/// The CPU-per-probe ratio line, against issue 6's target of at most a third; `why` is why
/// blackbox_exporter did not run, if it did not.
fn ratio(gslb: &Figures, bb: Option<&Figures>, why: Option<&str>) -> String {
    match bb.and_then(Figures::cpu_per_1000).zip(gslb.cpu_per_1000()) {
        Some((b, g)) if b > 0.0 => {
            let ratio = g / b;
            format!(
                "CPU per probe, gslb / blackbox_exporter: {ratio:.3} (blackbox_exporter uses {:.1}x gslb's CPU per probe; target at most 0.333: {})\n",
                b / g.max(1e-12),
                if ratio <= 1.0 / 3.0 { "met" } else { "NOT met" }
            )
        }
        _ => format!(
            "CPU per probe ratio: not measured ({})\n",
            why.unwrap_or("no CPU figure")
        ),
    }
}

fn none() -> String {
    "-".to_owned()
}

fn others(f: &Figures) -> String {
    f.others.map_or_else(none, |c| {
        format!("{:.2}", c.as_secs_f64() / f.elapsed.as_secs_f64().max(1e-9))
    })
}

fn triple(t: Option<(Duration, Duration, Duration)>) -> String {
    t.map_or_else(none, |(p50, p99, max)| {
        format!("{} / {} / {}", ms(p50), ms(p99), ms(max))
    })
}

/// p50, p99 and max of sorted `values` (zero when empty).
pub fn spread(sorted: &[Duration]) -> (Duration, Duration, Duration) {
    (
        quantile(sorted, 0.5),
        quantile(sorted, 0.99),
        sorted.last().copied().unwrap_or_default(),
    )
}

/// Quantile `q` of sorted `values` (nearest rank); zero when empty.
pub fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}
