//! The value of one series of a [`Table`](super::Table): a gauge or a counter (one atomic
//! word in a chunk the table shares among its series, see `slab`) or a histogram (bucket
//! counts, sum and count under a lock). A cell is a handle: clones share the value, so a
//! caller can resolve it once and update it without a lookup. A table keeps a slot number per
//! series, not a handle: the values are in [`Cell::Slots`].

use std::sync::{Arc, Mutex, PoisonError};

use super::slab::{Word, Words};
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
    fn start(&self, out: &mut String, suffix: &str, values: &[&str]) {
        out.push_str(self.name);
        out.push_str(suffix);
        text::labels(out, self.label_names, values.iter().copied());
    }
}

/// A series' value as callers hold it.
pub trait Cell: Clone + Send + Sync + 'static {
    /// The `# TYPE` of the family: `gauge`, `counter` or `histogram`.
    const KIND: &'static str;
    /// Where a table keeps the values of its series.
    type Slots: Slots<Cell = Self>;
    /// A series of its own reading 0, in no table (never exported); `buckets` are a
    /// histogram's `le` bounds (ignored otherwise).
    fn detached(buckets: &'static [f64]) -> Self {
        let mut slots = Self::Slots::default();
        let slot = slots.alloc(buckets);
        slots.cell(slot)
    }
}

/// The values of one table's series by slot number (the `u32` the table keeps per series).
pub trait Slots: Default + Send + Sync + std::fmt::Debug + 'static {
    /// The handle of one series.
    type Cell;
    /// The slot of a new series reading 0 (a removed series' slot once no handle of it is
    /// left, or a new one); `buckets` are a histogram's `le` bounds (ignored otherwise).
    fn alloc(&mut self, buckets: &'static [f64]) -> u32;
    /// A handle of `slot`'s series.
    fn cell(&self, slot: u32) -> Self::Cell;
    /// `slot`'s series was removed from the table.
    fn retire(&mut self, slot: u32);
    /// Writes `slot`'s sample lines (`values` are its label values in `layout`'s order).
    fn write(&self, slot: u32, out: &mut String, layout: &Layout<'_>, values: &[&str]);
}

/// Gauges' or counters' values: 64-bit words (`C` is the handle).
pub struct WordSlots<C>(Words, std::marker::PhantomData<fn() -> C>);

impl<C> Default for WordSlots<C> {
    fn default() -> Self {
        Self(Words::default(), std::marker::PhantomData)
    }
}

impl<C> std::fmt::Debug for WordSlots<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A cell whose value is one 64-bit word: a gauge (`f64` bits) or a counter.
pub trait WordCell: Cell {
    /// The cell of `word`.
    fn of(word: Word) -> Self;
    /// Writes ` value\n` for the word `bits`.
    fn write_value(out: &mut String, bits: u64);
}

impl<C: WordCell> Slots for WordSlots<C> {
    type Cell = C;

    fn alloc(&mut self, _: &'static [f64]) -> u32 {
        self.0.alloc()
    }

    fn cell(&self, slot: u32) -> C {
        C::of(self.0.handle(slot))
    }

    fn retire(&mut self, slot: u32) {
        self.0.retire(slot);
    }

    fn write(&self, slot: u32, out: &mut String, layout: &Layout<'_>, values: &[&str]) {
        layout.start(out, "", values);
        out.push('}');
        C::write_value(out, self.0.load(slot));
    }
}

/// A gauge: an `f64` set by its owner.
#[derive(Debug, Clone)]
pub struct GaugeCell(Word);

impl GaugeCell {
    /// Sets the value.
    pub fn set(&self, v: f64) {
        self.0.store(v.to_bits());
    }

    /// The value.
    pub fn get(&self) -> f64 {
        f64::from_bits(self.0.load())
    }
}

impl Cell for GaugeCell {
    const KIND: &'static str = "gauge";
    type Slots = WordSlots<Self>;
}

impl WordCell for GaugeCell {
    fn of(word: Word) -> Self {
        Self(word)
    }

    fn write_value(out: &mut String, bits: u64) {
        text::value(out, f64::from_bits(bits));
    }
}

/// A counter: a count that only rises.
#[derive(Debug, Clone)]
pub struct CounterCell(Word);

impl CounterCell {
    /// Adds 1.
    pub fn inc(&self) {
        self.inc_by(1);
    }

    /// Adds `n`.
    pub fn inc_by(&self, n: u64) {
        self.0.add(n);
    }

    /// The count.
    pub fn get(&self) -> u64 {
        self.0.load()
    }
}

impl Cell for CounterCell {
    const KIND: &'static str = "counter";
    type Slots = WordSlots<Self>;
}

impl WordCell for CounterCell {
    fn of(word: Word) -> Self {
        Self(word)
    }

    fn write_value(out: &mut String, bits: u64) {
        text::count(out, bits);
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
    type Slots = HistogramSlots;
}

impl HistogramCell {
    /// A new histogram of `bounds` reading 0.
    fn new(bounds: &'static [f64]) -> Self {
        Self(Arc::new(Mutex::new(Histogram {
            bounds,
            buckets: vec![0; bounds.len()].into_boxed_slice(),
            sum: 0.0,
            count: 0,
        })))
    }
}

/// Histograms' values: a cell per slot (histogram series are few: per provider, and per
/// service and phase after a failover).
#[derive(Debug, Default)]
pub struct HistogramSlots {
    /// By slot; a removed series' cell stays until its slot is reused (by a new cell, so a
    /// handle kept past the removal never counts in the new series).
    cells: Vec<HistogramCell>,
    free: Vec<u32>,
}

impl Slots for HistogramSlots {
    type Cell = HistogramCell;

    fn alloc(&mut self, buckets: &'static [f64]) -> u32 {
        let cell = HistogramCell::new(buckets);
        if let Some(slot) = self.free.pop() {
            self.cells[slot as usize] = cell;
            return slot;
        }
        self.cells.push(cell);
        u32::try_from(self.cells.len() - 1).expect("fewer than 2^32 series per table")
    }

    fn cell(&self, slot: u32) -> HistogramCell {
        self.cells[slot as usize].clone()
    }

    fn retire(&mut self, slot: u32) {
        self.free.push(slot);
    }

    fn write(&self, slot: u32, out: &mut String, layout: &Layout<'_>, values: &[&str]) {
        self.cells[slot as usize].write(out, layout, values);
    }
}

impl HistogramCell {
    /// `_bucket` per bound (cumulative) and `+Inf`, `_sum`, `_count`, from one snapshot.
    fn write(&self, out: &mut String, layout: &Layout<'_>, values: &[&str]) {
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
