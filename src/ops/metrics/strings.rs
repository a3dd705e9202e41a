//! [`Strings`]: the label values of every table of one metric set, each stored once per
//! process and named by a `u32` id, so a series' key is a few ids (4 bytes per label) instead
//! of a pointer per label to a shared copy.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Label values shared by every table of one metric set: a service's name is stored once,
/// not once per series. A value is dropped (and its id reused) when the last series key
/// holding it is dropped.
///
/// Lock order: a table's lock, then this one; never this one twice on one thread.
#[derive(Debug, Default)]
pub(super) struct Strings(RwLock<Interned>);

impl Strings {
    /// The values, for reading keys.
    pub(super) fn read(&self) -> RwLockReadGuard<'_, Interned> {
        self.0.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The values, for adding and releasing keys.
    pub(super) fn write(&self) -> RwLockWriteGuard<'_, Interned> {
        self.0.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many distinct label values are kept.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.read().ids.len()
    }
}

/// The values by id and the ids by value, with how many keys hold each.
#[derive(Debug, Default)]
pub(super) struct Interned {
    ids: HashMap<Arc<str>, u32>,
    /// By id: the value and the number of keys holding it; `None` for a free id.
    values: Vec<Option<(Arc<str>, u32)>>,
    /// Ids no key holds, reused first.
    free: Vec<u32>,
}

impl Interned {
    /// The value of `id` (a free id reads empty: no key holds one).
    pub(super) fn get(&self, id: u32) -> &str {
        self.values
            .get(id as usize)
            .and_then(Option::as_ref)
            .map_or("", |(v, _)| v)
    }

    /// The id of `value` for one more key holding it, stored the first time.
    ///
    /// # Panics
    /// With 2^32 distinct values held (far beyond any memory this process has).
    pub(super) fn hold(&mut self, value: &str) -> u32 {
        if let Some(&id) = self.ids.get(value) {
            if let Some((_, holders)) = &mut self.values[id as usize] {
                *holders += 1;
            }
            return id;
        }
        let v: Arc<str> = Arc::from(value);
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                self.values.push(None);
                u32::try_from(self.values.len() - 1).expect("fewer than 2^32 label values")
            }
        };
        self.values[id as usize] = Some((v.clone(), 1));
        self.ids.insert(v, id);
        id
    }

    /// One key holding `id` is gone; the value is dropped with its last key.
    pub(super) fn release(&mut self, id: u32) {
        let Some(Some((v, holders))) = self.values.get_mut(id as usize) else {
            return;
        };
        *holders -= 1;
        if *holders == 0 {
            self.ids.remove(&**v);
            self.values[id as usize] = None;
            self.free.push(id);
        }
    }
}
