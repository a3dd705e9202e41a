//! [`Table`]: the series of one high-cardinality family (per endpoint, pool, service or
//! binding), kept by label values in the order the text format writes them and encoded
//! straight into the scrape's buffer. Each label value is stored once per process
//! ([`Strings`]); a series costs its key (a 4-byte id per label) and slot number in the
//! table's [`Index`] and its value in the table's slots ([`Cell::Slots`]: 12 bytes for a gauge
//! or a counter), where the `prometheus` crate keeps a copy of the family's description and
//! of every label pair per series and copies them all again at every scrape.

use std::sync::{Arc, PoisonError, RwLock};

use super::Family;
use super::cells::{Cell, Layout, Slots};
use super::index::{Index, Lookup};
use super::strings::Strings;
use super::text;

/// The series of one family by label values, sorted as the text format writes them; `C` is
/// the cell ([`GaugeCell`](super::GaugeCell), [`CounterCell`](super::CounterCell),
/// [`HistogramCell`](super::HistogramCell)). Clones share the series.
#[derive(Debug)]
pub struct Table<C: Cell> {
    shared: Arc<Shared<C>>,
}

impl<C: Cell> Clone for Table<C> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

#[derive(Debug)]
struct Shared<C: Cell> {
    family: Family,
    /// The label names sorted; `order[i]` is the position of `names[i]` among the declared.
    names: Box<[&'static str]>,
    order: Box<[usize]>,
    buckets: &'static [f64],
    /// `buckets` as text (`le` values).
    le: Box<[String]>,
    strings: Arc<Strings>,
    series: RwLock<Series<C::Slots>>,
}

/// A table's series: their keys and slots, and their values.
#[derive(Debug)]
struct Series<S> {
    index: Index,
    slots: S,
}

impl<C: Cell> Table<C> {
    /// An empty table of `family` (at least one label), values interned in `strings`;
    /// `buckets` are a histogram's `le` bounds (increasing, without `+Inf`), empty otherwise.
    pub(super) fn new(family: &Family, buckets: &'static [f64], strings: Arc<Strings>) -> Self {
        let mut order: Vec<usize> = (0..family.labels.len()).collect();
        order.sort_by_key(|&i| family.labels[i]);
        Self {
            shared: Arc::new(Shared {
                family: *family,
                names: order.iter().map(|&i| family.labels[i]).collect(),
                order: order.into_boxed_slice(),
                buckets,
                le: buckets.iter().map(f64::to_string).collect(),
                strings,
                series: RwLock::new(Series {
                    index: Index::new(family.labels.len()),
                    slots: C::Slots::default(),
                }),
            }),
        }
    }

    /// The series of `values` (one per declared label, in the declared order), created
    /// reading 0 the first time. A wrong number of values gives a cell that is not exported
    /// (and fails a debug build's assertion).
    pub fn with_label_values(&self, values: &[&str]) -> C {
        let s = &*self.shared;
        if values.len() != s.order.len() {
            debug_assert_eq!(values.len(), s.order.len(), "{}", s.family.name);
            return C::detached(s.buckets);
        }
        let lookup = Lookup {
            values,
            order: &s.order,
        };
        {
            let series = s.read();
            if let Some(slot) = series.index.find(&s.strings.read(), &lookup) {
                return series.slots.cell(slot);
            }
        }
        let mut series = s.write();
        let Series { index, slots } = &mut *series;
        let mut strings = s.strings.write();
        let slot = index.entry(&mut strings, &lookup, || slots.alloc(s.buckets));
        slots.cell(slot)
    }

    /// Removes the series of `values` (declared order); false when there was none. A cell
    /// still held elsewhere keeps counting but is no longer exported, and never counts in a
    /// series created later.
    pub fn remove_label_values(&self, values: &[&str]) -> bool {
        let s = &*self.shared;
        if values.len() != s.order.len() {
            return false;
        }
        let lookup = Lookup {
            values,
            order: &s.order,
        };
        let mut series = s.write();
        let removed = series.index.remove(&mut s.strings.write(), &lookup);
        if let Some(slot) = removed {
            series.slots.retire(slot);
        }
        removed.is_some()
    }

    /// How many series the family has.
    pub fn len(&self) -> usize {
        self.shared.read().index.len()
    }

    /// Whether the family has no series (it is then not exported, as the crate's registry
    /// leaves out an empty family).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<C: Cell> Shared<C> {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Series<C::Slots>> {
        self.series.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Series<C::Slots>> {
        self.series.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A family [`Metrics::render`](super::Metrics::render) writes, found by name.
pub(super) trait Encode: Send + Sync + std::fmt::Debug {
    /// The family's name.
    fn name(&self) -> &'static str;
    /// Appends the family (`# HELP`, `# TYPE`, every series sorted by label values) to `out`;
    /// nothing when it has no series.
    fn encode(&self, out: &mut String);
}

impl<C: Cell + std::fmt::Debug> Encode for Table<C> {
    fn name(&self) -> &'static str {
        self.shared.family.name
    }

    fn encode(&self, out: &mut String) {
        let s = &*self.shared;
        let series = s.read();
        if series.index.len() == 0 {
            return;
        }
        text::header(out, s.family.name, s.family.help, C::KIND);
        let layout = Layout {
            name: s.family.name,
            label_names: &s.names,
            le: &s.le,
        };
        let strings = s.strings.read();
        let mut values = Vec::with_capacity(s.names.len());
        series.index.for_each(&strings, |key, slot| {
            values.clear();
            values.extend(key.iter().map(|&id| strings.get(id)));
            series.slots.write(slot, out, &layout, &values);
        });
    }
}
