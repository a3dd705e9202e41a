//! The few figures the benchmark reads from the daemon's `/metrics` text: sums of counters
//! over all their series (or by one label), and the lateness histogram's buckets.

use std::collections::BTreeMap;

/// The sum of every sample of `name` (all label sets; `0` when absent).
pub fn sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The sum of every sample of `name` by the value of its label `label` (series without it
/// are left out).
pub fn sum_by(text: &str, name: &str, label: &str) -> BTreeMap<String, f64> {
    let key = format!(",{label}=\"");
    let mut sums = BTreeMap::new();
    for l in text.lines() {
        let Some(rest) = l.strip_prefix(name).and_then(|r| r.strip_prefix('{')) else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let labels = format!(",{labels}");
        let Some(v) = labels
            .split(&key)
            .nth(1)
            .and_then(|after| after.split('"').next())
        else {
            continue;
        };
        if let Ok(n) = value.parse::<f64>() {
            *sums.entry(v.to_owned()).or_insert(0.0) += n;
        }
    }
    sums
}

/// The cumulative buckets `(le, count)` of histogram `name` (one series, no labels but `le`),
/// in order; `+Inf` as infinity.
pub fn buckets(text: &str, name: &str) -> Vec<(f64, f64)> {
    let prefix = format!("{name}_bucket{{le=\"");
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(&prefix)?;
            let (le, rest) = rest.split_once('"')?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, rest.rsplit(' ').next()?.parse().ok()?))
        })
        .collect()
}

/// Lateness over a window, from the histogram's buckets at its start and end.
#[derive(Debug, Clone, Copy, Default)]
pub struct Lateness {
    /// Probes started in the window.
    pub count: f64,
    /// Upper bound of the bucket holding the median, seconds.
    pub p50: f64,
    /// Upper bound of the bucket holding the 99th percentile, seconds.
    pub p99: f64,
    /// Share of probes that started more than `late_after` seconds late.
    pub late_share: f64,
}

/// The window's lateness: `end` minus `start` buckets; `late_after` must be a bucket bound.
pub fn lateness(start: &[(f64, f64)], end: &[(f64, f64)], late_after: f64) -> Lateness {
    let delta: Vec<(f64, f64)> = end
        .iter()
        .map(|(le, n)| {
            let before = start.iter().find(|(l, _)| l == le).map_or(0.0, |(_, b)| *b);
            (*le, n - before)
        })
        .collect();
    let count = delta.last().map_or(0.0, |(_, n)| *n);
    let quantile = |q: f64| {
        delta
            .iter()
            .find(|(_, n)| *n >= q * count)
            .map_or(f64::INFINITY, |(le, _)| *le)
    };
    let on_time = delta
        .iter()
        .find(|(le, _)| (*le - late_after).abs() < 1e-9)
        .map_or(0.0, |(_, n)| *n);
    Lateness {
        count,
        p50: quantile(0.5),
        p99: quantile(0.99),
        late_share: if count > 0.0 {
            1.0 - on_time / count
        } else {
            0.0
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# HELP x\ngslb_probe_lateness_seconds_bucket{le=\"0.001\"} 10\ngslb_probe_lateness_seconds_bucket{le=\"0.05\"} 90\ngslb_probe_lateness_seconds_bucket{le=\"+Inf\"} 100\ngslb_decisions_total{rule=\"a\",service=\"s\"} 2\ngslb_decisions_total{rule=\"b\",service=\"t\"} 3\ngslb_decisions_totally 7\n";

    #[test]
    fn sums_every_series_of_one_name_only() {
        assert!((sum(TEXT, "gslb_decisions_total") - 5.0).abs() < 1e-9);
        assert!(sum(TEXT, "gslb_missing").abs() < 1e-9);
    }

    #[test]
    fn sums_by_one_label() {
        let text = "gslb_probes_total{endpoint=\"a\",reason=\"ok\"} 5\ngslb_probes_total{endpoint=\"b\",reason=\"ok\"} 2\ngslb_probes_total{endpoint=\"b\",reason=\"late\"} 3\ngslb_probes_totally{reason=\"ok\"} 9\n";
        let by = sum_by(text, "gslb_probes_total", "reason");
        assert_eq!(by.len(), 2);
        assert!((by["ok"] - 7.0).abs() < 1e-9);
        assert!((by["late"] - 3.0).abs() < 1e-9);
        assert!(sum_by(text, "gslb_probes_total", "service").is_empty());
    }

    #[test]
    fn lateness_of_a_window_from_two_scrapes() {
        let end = buckets(TEXT, "gslb_probe_lateness_seconds");
        assert_eq!(end.len(), 3);
        let start = vec![(0.001, 10.0), (0.05, 10.0), (f64::INFINITY, 10.0)];
        let l = lateness(&start, &end, 0.05);
        assert!((l.count - 90.0).abs() < 1e-9);
        assert!((l.p50 - 0.05).abs() < 1e-9);
        assert!(l.p99.is_infinite());
        assert!((l.late_share - 10.0 / 90.0).abs() < 1e-9);
    }
}
