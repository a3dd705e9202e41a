//! [`Table`]: the series of one high-cardinality family (per endpoint, pool, service or
//! binding), kept by label values in the order the text format writes them and encoded
//! straight into the scrape's buffer. Each label value is stored once per process
//! ([`Strings`]) and each series costs its key (one pointer per label) and its cell, where the
//! `prometheus` crate keeps a copy of the family's description and of every label pair per
//! series and copies them all again at every scrape.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use super::Family;
use super::cells::{Cell, Layout};
use super::text;

/// Label values shared by every table of one metric set: a service's name is stored once,
/// not once per series. Strings no series holds any more are dropped after removals.
#[derive(Debug, Default)]
pub(super) struct Strings {
    set: Mutex<HashSet<Arc<str>>>,
    /// Series removed since the last sweep of unused strings.
    removed: AtomicUsize,
}

impl Strings {
    /// The shared copy of `v`, made the first time.
    fn intern(&self, v: &str) -> Arc<str> {
        let mut set = self.set.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(s) = set.get(v) {
            return s.clone();
        }
        let s: Arc<str> = Arc::from(v);
        set.insert(s.clone());
        s
    }

    /// Counts a removed series; once removals since the last sweep reach half the strings
    /// kept, drops the strings no series holds (amortized: one sweep per that many removals).
    fn removed(&self) {
        let n = self.removed.fetch_add(1, AtomicOrdering::Relaxed) + 1;
        let mut set = self.set.lock().unwrap_or_else(PoisonError::into_inner);
        if n * 2 >= set.len() {
            set.retain(|s| Arc::strong_count(s) > 1);
            self.removed.store(0, AtomicOrdering::Relaxed);
        }
    }

    /// How many distinct label values are kept.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.set
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// Label values compared in the order of the sorted label names, whether stored ([`Key`]) or
/// borrowed from a caller ([`Lookup`]), so a lookup copies nothing.
trait Labels {
    fn count(&self) -> usize;
    fn at(&self, i: usize) -> &str;
}

impl Ord for dyn Labels + '_ {
    fn cmp(&self, other: &Self) -> Ordering {
        let mine = (0..self.count()).map(|i| self.at(i));
        mine.cmp((0..other.count()).map(|i| other.at(i)))
    }
}

impl PartialOrd for dyn Labels + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for dyn Labels + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for dyn Labels + '_ {}

/// A series' label values, in the order of the sorted label names.
#[derive(Debug)]
struct Key(Box<[Arc<str>]>);

impl Labels for Key {
    fn count(&self) -> usize {
        self.0.len()
    }

    fn at(&self, i: usize) -> &str {
        &self.0[i]
    }
}

impl<'a> Borrow<dyn Labels + 'a> for Key {
    fn borrow(&self) -> &(dyn Labels + 'a) {
        self
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        let (a, b): (&dyn Labels, &dyn Labels) = (self, other);
        a.cmp(b)
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Key {}

/// A caller's label values (in the declared order) seen in the sorted order.
struct Lookup<'a> {
    values: &'a [&'a str],
    order: &'a [usize],
}

impl Labels for Lookup<'_> {
    fn count(&self) -> usize {
        self.order.len()
    }

    fn at(&self, i: usize) -> &str {
        self.values[self.order[i]]
    }
}

/// The series of one family by label values, sorted as the text format writes them; `C` is
/// the cell ([`GaugeCell`](super::GaugeCell), [`CounterCell`](super::CounterCell),
/// [`HistogramCell`](super::HistogramCell)). Clones share the series.
#[derive(Debug)]
pub struct Table<C> {
    shared: Arc<Shared<C>>,
}

impl<C> Clone for Table<C> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

#[derive(Debug)]
struct Shared<C> {
    family: Family,
    /// The label names sorted; `order[i]` is the position of `names[i]` among the declared.
    names: Box<[&'static str]>,
    order: Box<[usize]>,
    buckets: &'static [f64],
    /// `buckets` as text (`le` values).
    le: Box<[String]>,
    strings: Arc<Strings>,
    series: RwLock<BTreeMap<Key, C>>,
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
                series: RwLock::default(),
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
            return C::new(s.buckets);
        }
        let lookup = Lookup {
            values,
            order: &s.order,
        };
        let found = s.read().get(&lookup as &dyn Labels).cloned();
        found.unwrap_or_else(|| {
            let mut series = s.series.write().unwrap_or_else(PoisonError::into_inner);
            if let Some(c) = series.get(&lookup as &dyn Labels) {
                return c.clone();
            }
            let key = Key((0..lookup.count())
                .map(|i| s.strings.intern(lookup.at(i)))
                .collect());
            series
                .entry(key)
                .or_insert_with(|| C::new(s.buckets))
                .clone()
        })
    }

    /// Removes the series of `values` (declared order); false when there was none. A cell
    /// still held elsewhere keeps counting but is no longer exported.
    pub fn remove_label_values(&self, values: &[&str]) -> bool {
        let s = &*self.shared;
        if values.len() != s.order.len() {
            return false;
        }
        let lookup = Lookup {
            values,
            order: &s.order,
        };
        let removed = s
            .series
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&lookup as &dyn Labels)
            .is_some();
        if removed {
            s.strings.removed();
        }
        removed
    }

    /// How many series the family has.
    pub fn len(&self) -> usize {
        self.shared.read().len()
    }

    /// Whether the family has no series (it is then not exported, as the crate's registry
    /// leaves out an empty family).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<C> Shared<C> {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<Key, C>> {
        self.series.read().unwrap_or_else(PoisonError::into_inner)
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
        if series.is_empty() {
            return;
        }
        text::header(out, s.family.name, s.family.help, C::KIND);
        let layout = Layout {
            name: s.family.name,
            label_names: &s.names,
            le: &s.le,
        };
        for (key, cell) in series.iter() {
            cell.write(out, &layout, &key.0);
        }
    }
}
