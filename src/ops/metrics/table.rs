//! [`Table`]: the series of one high-cardinality family (per endpoint, pool, service or
//! binding), kept by label values in the order the text format writes them and encoded
//! straight into the scrape's buffer. Each label value is stored once per process
//! ([`Strings`]); a series costs its key (a 4-byte id per label) and slot number in the
//! table's [`Index`] and its value in the table's slots ([`Cell::Slots`]: 12 bytes for a gauge
//! or a counter), where the `prometheus` crate keeps a copy of the family's description and
//! of every label pair per series and copies them all again at every scrape.

use std::ops::ControlFlow;
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

/// Text a table writes before handing it on ([`Encode::encode`]'s `flush`): 64 KiB, the
/// admin API's chunk. A family can be megabytes (`gslb_pool_verdict`: 3 MB at 5,000 services),
/// which a scrape would otherwise hold whole.
const PIECE: usize = 64 * 1024;

/// What `flush` is given: the text written so far, to take away (or leave, to keep it all).
pub(super) type Flush<'a> = dyn FnMut(&mut String) -> std::io::Result<()> + 'a;

/// A family [`Metrics::render`](super::Metrics::render) writes, found by name.
pub(super) trait Encode: Send + Sync + std::fmt::Debug {
    /// The family's name.
    fn name(&self) -> &'static str;
    /// Appends the family (`# HELP`, `# TYPE`, every series sorted by label values) to `out`,
    /// calling `flush` after each piece of about [`PIECE`] bytes and at the end, with the
    /// table's lock released; nothing when it has no series.
    ///
    /// # Errors
    /// `flush`'s.
    fn encode(&self, out: &mut String, flush: &mut Flush<'_>) -> std::io::Result<()>;
}

impl<C: Cell + std::fmt::Debug> Encode for Table<C> {
    fn name(&self) -> &'static str {
        self.shared.family.name
    }

    fn encode(&self, out: &mut String, flush: &mut Flush<'_>) -> std::io::Result<()> {
        let s = &*self.shared;
        if s.read().index.len() == 0 {
            return Ok(());
        }
        text::header(out, s.family.name, s.family.help, C::KIND);
        // The label values (sorted order) of the last series of the piece before.
        let mut after: Option<Vec<String>> = None;
        loop {
            after = self.encode_piece(out, after.as_deref());
            flush(out)?;
            if after.is_none() {
                return Ok(());
            }
        }
    }
}

impl<C: Cell + std::fmt::Debug> Table<C> {
    /// Writes the series after `after` until it wrote [`PIECE`] bytes to `out`; the label values
    /// of the last one written when it stopped early, `None` at the end of the family.
    fn encode_piece(&self, out: &mut String, after: Option<&[String]>) -> Option<Vec<String>> {
        let s = &*self.shared;
        let series = s.read();
        let layout = Layout {
            name: s.family.name,
            label_names: &s.names,
            le: &s.le,
        };
        let strings = s.strings.read();
        let after: Option<Vec<&str>> = after.map(|v| v.iter().map(String::as_str).collect());
        let sorted: Vec<usize> = (0..s.names.len()).collect();
        let after = after.as_ref().map(|values| Lookup {
            values,
            order: &sorted,
        });
        let mut values = Vec::with_capacity(s.names.len());
        let mut last = None;
        let start = out.len();
        let _ = series
            .index
            .for_each_after(&strings, after.as_ref(), |key, slot| {
                values.clear();
                values.extend(key.iter().map(|&id| strings.get(id)));
                series.slots.write(slot, out, &layout, &values);
                if out.len() - start < PIECE {
                    return ControlFlow::Continue(());
                }
                last = Some(values.iter().map(|v| (*v).to_owned()).collect());
                ControlFlow::Break(())
            });
        last
    }
}
