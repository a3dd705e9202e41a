//! The value of one series of a [`Table`](super::Table): a gauge or a counter (one atomic
//! word) or a histogram (bucket counts, sum and count under a lock). A cell is a handle: clones
//! share the value, so a caller can resolve it once and update it without a lookup.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::text;

/// How a table writes one series: the family's name, its label names (sorted) and, for a
/// histogram, its `le` bounds as text.
#[derive(Debug)]
pub struct Layout<'a> {
    /// The family's name (`probe_success`).
    pub name: &'a str,
    /// The label names, sorted (the order the text format writes them in).
    pub label_names: &'a [&'static str],
    /// A histogram's bounds as `f64`'s `Display` writes them (`0.005`, `1`, `120`); empty
    /// for other families.
    pub le: &'a [String],
}

impl Layout<'_> {
    /// Writes `name` + `suffix` and the series' labels, without the closing brace.
    fn start(&self, out: &mut String, suffix: &str, values: &[Arc<str>]) {
        out.push_str(self.name);
        out.push_str(suffix);
        text::labels(out, self.label_names, values.iter().map(|v| &**v));
    }
}

/// A series' value as a table stores and writes it.
pub trait Cell: Clone + Send + Sync + 'static {
    /// The `# TYPE` of the family: `gauge`, `counter` or `histogram`.
    const KIND: &'static str;
    /// A new series reading 0; `buckets` are a histogram's `le` bounds (ignored otherwise).
    fn new(buckets: &'static [f64]) -> Self;
    /// Writes the series' sample lines (`values` are its label values in `layout`'s order).
    fn write(&self, out: &mut String, layout: &Layout<'_>, values: &[Arc<str>]);
}

/// A gauge: an `f64` set by its owner.
#[derive(Debug, Clone, Default)]
pub struct GaugeCell(Arc<AtomicU64>);

impl GaugeCell {
    /// Sets the value.
    pub fn set(&self, v: f64) {
        self.0.store(v.to_bits(), Ordering::Relaxed);
    }

    /// The value.
    pub fn get(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }
}

impl Cell for GaugeCell {
    const KIND: &'static str = "gauge";

    fn new(_: &'static [f64]) -> Self {
        Self::default()
    }

    fn write(&self, out: &mut String, layout: &Layout<'_>, values: &[Arc<str>]) {
        layout.start(out, "", values);
        out.push('}');
        text::value(out, self.get());
    }
}

/// A counter: a count that only rises.
#[derive(Debug, Clone, Default)]
pub struct CounterCell(Arc<AtomicU64>);

impl CounterCell {
    /// Adds 1.
    pub fn inc(&self) {
        self.inc_by(1);
    }

    /// Adds `n`.
    pub fn inc_by(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// The count.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl Cell for CounterCell {
    const KIND: &'static str = "counter";

    fn new(_: &'static [f64]) -> Self {
        Self::default()
    }

    fn write(&self, out: &mut String, layout: &Layout<'_>, values: &[Arc<str>]) {
        layout.start(out, "", values);
        out.push('}');
        text::count(out, self.get());
    }
}

/// A histogram: observations counted in the first bucket whose bound (`le`, inclusive) they do
/// not exceed, with their sum and count.
#[derive(Debug, Clone)]
pub struct HistogramCell(Arc<Mutex<Histogram>>);

#[derive(Debug)]
struct Histogram {
    bounds: &'static [f64],
    /// Observations per bucket (not cumulative); above the last bound only in `count`.
    buckets: Box<[u64]>,
    sum: f64,
    count: u64,
}

impl HistogramCell {
    /// Records one observation `v`.
    pub fn observe(&self, v: f64) {
        let mut h = self.lock();
        if let Some(i) = h.bounds.iter().position(|le| v <= *le) {
            h.buckets[i] += 1;
        }
        h.sum += v;
        h.count += 1;
    }

    /// Observations recorded.
    pub fn get_sample_count(&self) -> u64 {
        self.lock().count
    }

    /// Sum of the observations recorded.
    pub fn get_sample_sum(&self) -> f64 {
        self.lock().sum
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Histogram> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Cell for HistogramCell {
    const KIND: &'static str = "histogram";

    fn new(bounds: &'static [f64]) -> Self {
        Self(Arc::new(Mutex::new(Histogram {
            bounds,
            buckets: vec![0; bounds.len()].into_boxed_slice(),
            sum: 0.0,
            count: 0,
        })))
    }

    /// `_bucket` per bound (cumulative) and `+Inf`, `_sum`, `_count`, from one snapshot.
    fn write(&self, out: &mut String, layout: &Layout<'_>, values: &[Arc<str>]) {
        let h = self.lock();
        let mut cumulative = 0;
        let bounds = layout.le.iter().map(String::as_str).chain(["+Inf"]);
        let counts = h
            .buckets
            .iter()
            .copied()
            .chain([h.count - h.buckets.iter().sum::<u64>()]);
        for (le, n) in bounds.zip(counts) {
            cumulative += n;
            layout.start(out, "_bucket", values);
            out.push_str(",le=\"");
            out.push_str(le);
            out.push_str("\"}");
            text::count(out, cumulative);
        }
        layout.start(out, "_sum", values);
        out.push('}');
        text::value(out, h.sum);
        layout.start(out, "_count", values);
        out.push('}');
        text::count(out, h.count);
    }
}
