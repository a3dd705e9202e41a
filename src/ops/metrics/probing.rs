//! The probe loops' own metrics, read from the prober's [`ProbeStats`] at scrape time (a
//! collector, so probe loops never touch the registry): scheduling lateness, late, skipped and
//! started probes, probes in flight and the bound on them.

use std::collections::HashMap;
use std::time::Duration;

use prometheus::core::{Collector, Desc};
use prometheus::proto::{self, MetricFamily, MetricType};

use crate::io::probe::ProbeStats;

/// `le` bounds of `gslb_probe_lateness_seconds`, in seconds.
pub const LATENESS_BUCKETS: [f64; 12] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

const FAMILIES: [(&str, &str); 6] = [
    (
        "gslb_probe_lateness_seconds",
        "How late probes started against their planned time (timer delay, waiting for room among the probes in flight, a full engine channel).",
    ),
    (
        "gslb_probes_started_total",
        "Probes started by the probe loops.",
    ),
    (
        "gslb_probes_late_total",
        "Probes that started more than probing.late_after after their planned time.",
    ),
    (
        "gslb_probes_skipped_total",
        "Planned probes dropped because their whole interval passed before they could start.",
    ),
    ("gslb_probes_in_flight", "Probes running now."),
    (
        "gslb_probe_max_in_flight",
        "The bound on probes in flight (probing.max_in_flight, capped by the open-file limit).",
    ),
];

/// Exports one prober's stats.
pub(super) struct ProbeStatsCollector {
    stats: ProbeStats,
    max_in_flight: usize,
    descs: Vec<Desc>,
}

impl ProbeStatsCollector {
    pub(super) fn new(stats: ProbeStats, max_in_flight: usize) -> prometheus::Result<Self> {
        let descs = FAMILIES
            .iter()
            .map(|(name, help)| {
                Desc::new(
                    (*name).to_owned(),
                    (*help).to_owned(),
                    Vec::new(),
                    HashMap::new(),
                )
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            stats,
            max_in_flight,
            descs,
        })
    }
}

impl Collector for ProbeStatsCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let s = self.stats.snapshot();
        let mut histogram = proto::Histogram::default();
        histogram.set_sample_count(s.lateness.count());
        histogram.set_sample_sum(s.lateness.sum().as_secs_f64());
        histogram.set_bucket(
            LATENESS_BUCKETS
                .iter()
                .map(|le| {
                    let mut b = proto::Bucket::default();
                    b.set_upper_bound(*le);
                    b.set_cumulative_count(s.lateness.count_at_most(Duration::from_secs_f64(*le)));
                    b
                })
                .collect(),
        );
        let mut lateness = proto::Metric::default();
        lateness.set_histogram(histogram);
        #[allow(clippy::cast_precision_loss)]
        let values = [
            (MetricType::COUNTER, s.started as f64),
            (MetricType::COUNTER, s.late as f64),
            (MetricType::COUNTER, s.skipped as f64),
            (MetricType::GAUGE, s.in_flight as f64),
            (MetricType::GAUGE, self.max_in_flight as f64),
        ];
        let mut families = vec![family(0, MetricType::HISTOGRAM, lateness)];
        for (i, (kind, value)) in values.into_iter().enumerate() {
            let mut m = proto::Metric::default();
            if kind == MetricType::GAUGE {
                let mut g = proto::Gauge::default();
                g.set_value(value);
                m.set_gauge(g);
            } else {
                let mut c = proto::Counter::default();
                c.set_value(value);
                m.set_counter(c);
            }
            families.push(family(i + 1, kind, m));
        }
        families
    }
}

fn family(i: usize, kind: MetricType, metric: proto::Metric) -> MetricFamily {
    let (name, help) = FAMILIES[i];
    let mut f = MetricFamily::default();
    f.set_name(name.to_owned());
    f.set_help(help.to_owned());
    f.set_field_type(kind);
    f.set_metric(vec![metric]);
    f
}
