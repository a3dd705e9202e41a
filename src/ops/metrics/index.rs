//! [`Index`]: a table's series sorted by label values, as flat arrays: a series is its key
//! (one [`Strings`](super::strings::Strings) id per label, 4 bytes each) and its slot number
//! (4 bytes), with no allocation or tree node of its own.
//!
//! Series are created at start-up and on reloads and looked up far more often, so the bulk
//! of them sits in one sorted array of exactly its size (`main`); new series go to a small
//! sorted array (`pending`, at most about the square root of `main`'s length) merged into
//! `main` when it fills: O(log n) lookups, O(√n) amortized insertion whatever the order of
//! creation. A removed series of `main` stays as a tombstone (its key still holding its
//! strings, revived if the series comes back) until tombstones are half of `main`.

use std::cmp::Ordering;
use std::ops::ControlFlow;

use super::strings::Interned;

/// The slot number of a tombstone.
const GONE: u32 = u32::MAX;

/// The fewest series `pending` holds before a merge.
const MIN_PENDING: usize = 32;

/// A caller's label values (in the declared order) seen in the sorted order of the names.
pub(super) struct Lookup<'a> {
    /// Label values in the declared order.
    pub(super) values: &'a [&'a str],
    /// `order[i]`: the position among the declared labels of the `i`-th sorted one.
    pub(super) order: &'a [usize],
}

impl Lookup<'_> {
    fn at(&self, i: usize) -> &str {
        self.values[self.order[i]]
    }

    /// A stored key against these values.
    fn cmp_key(&self, strings: &Interned, key: &[u32]) -> Ordering {
        key.iter()
            .enumerate()
            .map(|(i, &id)| strings.get(id).cmp(self.at(i)))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    }
}

/// Two stored keys compared by their values (equal ids are equal values, and distinct ids
/// distinct values).
fn cmp_keys(strings: &Interned, a: &[u32], b: &[u32]) -> Ordering {
    a.iter()
        .zip(b)
        .find(|(x, y)| x != y)
        .map_or(Ordering::Equal, |(&x, &y)| {
            strings.get(x).cmp(strings.get(y))
        })
}

/// Keys (`width` ids each) and slot numbers, sorted by key.
#[derive(Debug, Default)]
struct Sorted {
    keys: Vec<u32>,
    slots: Vec<u32>,
}

impl Sorted {
    fn key(&self, i: usize, width: usize) -> &[u32] {
        &self.keys[i * width..(i + 1) * width]
    }

    /// Where `cmp` (a key against the target) finds the target, or where it would go.
    fn search(&self, width: usize, cmp: impl Fn(&[u32]) -> Ordering) -> Result<usize, usize> {
        let (mut lo, mut hi) = (0, self.slots.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match cmp(self.key(mid, width)) {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }

    fn push(&mut self, key: &[u32], slot: u32) {
        self.keys.extend_from_slice(key);
        self.slots.push(slot);
    }
}

/// The series of one table sorted by label values; see the module's documentation.
#[derive(Debug)]
pub(super) struct Index {
    /// Labels per series.
    width: usize,
    main: Sorted,
    pending: Sorted,
    /// Tombstones in `main`.
    gone: usize,
}

impl Index {
    /// An empty index of series with `width` labels.
    pub(super) fn new(width: usize) -> Self {
        Self {
            width,
            main: Sorted::default(),
            pending: Sorted::default(),
            gone: 0,
        }
    }

    /// How many series there are.
    pub(super) fn len(&self) -> usize {
        self.main.slots.len() - self.gone + self.pending.slots.len()
    }

    /// The slot of `lookup`'s series.
    pub(super) fn find(&self, strings: &Interned, lookup: &Lookup<'_>) -> Option<u32> {
        let cmp = |key: &[u32]| lookup.cmp_key(strings, key);
        match self.main.search(self.width, cmp) {
            Ok(i) => Some(self.main.slots[i]).filter(|&s| s != GONE),
            Err(_) => self
                .pending
                .search(self.width, cmp)
                .ok()
                .map(|i| self.pending.slots[i]),
        }
    }

    /// The slot of `lookup`'s series, added in slot `new()` when it is not in the index.
    pub(super) fn entry(
        &mut self,
        strings: &mut Interned,
        lookup: &Lookup<'_>,
        new: impl FnOnce() -> u32,
    ) -> u32 {
        let w = self.width;
        if let Ok(i) = self.main.search(w, |key| lookup.cmp_key(strings, key)) {
            if self.main.slots[i] == GONE {
                // A tombstone, still holding its strings.
                self.main.slots[i] = new();
                self.gone -= 1;
            }
            return self.main.slots[i];
        }
        let at = match self.pending.search(w, |key| lookup.cmp_key(strings, key)) {
            Ok(i) => return self.pending.slots[i],
            Err(at) => at,
        };
        let slot = new();
        let key = (0..w).map(|i| strings.hold(lookup.at(i)));
        self.pending.keys.splice(at * w..at * w, key);
        self.pending.slots.insert(at, slot);
        let main = self.main.slots.len();
        if self.pending.slots.len() > MIN_PENDING.max(main.isqrt()) {
            self.merge(strings);
        }
        slot
    }

    /// Removes `lookup`'s series; its slot, or `None` when there was none.
    pub(super) fn remove(&mut self, strings: &mut Interned, lookup: &Lookup<'_>) -> Option<u32> {
        let w = self.width;
        if let Ok(i) = self.main.search(w, |key| lookup.cmp_key(strings, key)) {
            let slot = std::mem::replace(&mut self.main.slots[i], GONE);
            if slot == GONE {
                return None;
            }
            self.gone += 1;
            if self.gone * 2 >= self.main.slots.len() {
                self.merge(strings);
            }
            return Some(slot);
        }
        let i = self
            .pending
            .search(w, |key| lookup.cmp_key(strings, key))
            .ok()?;
        for id in self.pending.keys.drain(i * w..(i + 1) * w) {
            strings.release(id);
        }
        Some(self.pending.slots.remove(i))
    }

    /// Every series in key order after `after` (from the first when `None`), its key (ids in
    /// the sorted order of the names) and slot, until `f` breaks. `pending`'s series are
    /// placed by binary search, `main`'s runs between them copied. Resuming after the last key
    /// seen, with the lock released in between, writes no series twice and skips none that
    /// was there all along.
    pub(super) fn for_each_after(
        &self,
        strings: &Interned,
        after: Option<&Lookup<'_>>,
        mut f: impl FnMut(&[u32], u32) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let (w, main) = (self.width, &self.main);
        let first = |sorted: &Sorted| {
            after.map_or(0, |a| {
                let (Ok(i) | Err(i)) = sorted.search(w, |k| a.cmp_key(strings, k)).map(|i| i + 1);
                i
            })
        };
        let mut next = first(main);
        let mut main_until = |end: usize, f: &mut dyn FnMut(&[u32], u32) -> ControlFlow<()>| {
            for i in next..end.max(next) {
                if main.slots[i] != GONE {
                    f(main.key(i, w), main.slots[i])?;
                }
            }
            next = next.max(end);
            ControlFlow::Continue(())
        };
        for j in first(&self.pending)..self.pending.slots.len() {
            let key = self.pending.key(j, w);
            let (Ok(at) | Err(at)) = main.search(w, |k| cmp_keys(strings, k, key));
            main_until(at, &mut f)?;
            f(key, self.pending.slots[j])?;
        }
        main_until(main.slots.len(), &mut f)
    }

    /// Rebuilds `main` from its live series and `pending`'s, exactly its size; tombstones'
    /// strings are released.
    fn merge(&mut self, strings: &mut Interned) {
        let w = self.width;
        let len = self.len();
        let mut merged = Sorted {
            keys: Vec::with_capacity(len * w),
            slots: Vec::with_capacity(len),
        };
        let _ = self.for_each_after(strings, None, |key, slot| {
            merged.push(key, slot);
            ControlFlow::Continue(())
        });
        for (i, _) in self
            .main
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| **s == GONE)
        {
            for &id in self.main.key(i, w) {
                strings.release(id);
            }
        }
        self.main = merged;
        self.pending = Sorted::default();
        self.gone = 0;
    }
}
