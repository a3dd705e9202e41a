//! [`Words`]: the values of a table's gauges or counters, one 64-bit word per series in
//! chunks of [`CHUNK`] shared by the series' handles ([`Word`]), instead of one allocation
//! per series. A chunk costs 12 bytes per slot (the value and its handle count).
//!
//! A removed series' slot is reused only once no handle of it is left (its handle count is
//! zero), so a handle kept past the removal never writes into a series created later.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Slots per chunk.
pub(super) const CHUNK: usize = 64;

/// [`CHUNK`] values and, for each, how many [`Word`]s point at it.
struct Chunk {
    values: [AtomicU64; CHUNK],
    handles: [AtomicU32; CHUNK],
}

impl Chunk {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            values: [const { AtomicU64::new(0) }; CHUNK],
            handles: [const { AtomicU32::new(0) }; CHUNK],
        })
    }
}

/// A handle of one slot: clones share the value. 16 bytes.
pub struct Word {
    chunk: Arc<Chunk>,
    /// The slot within `chunk`.
    index: u32,
}

impl Word {
    /// A handle of `chunk`'s slot `index` (counted).
    fn new(chunk: &Arc<Chunk>, index: usize) -> Self {
        chunk.handles[index].fetch_add(1, Ordering::Relaxed);
        Self {
            chunk: chunk.clone(),
            // `index` < CHUNK.
            index: index as u32,
        }
    }

    pub(super) fn load(&self) -> u64 {
        self.chunk.values[self.index as usize].load(Ordering::Relaxed)
    }

    pub(super) fn store(&self, v: u64) {
        self.chunk.values[self.index as usize].store(v, Ordering::Relaxed);
    }

    pub(super) fn add(&self, n: u64) {
        self.chunk.values[self.index as usize].fetch_add(n, Ordering::Relaxed);
    }
}

impl Clone for Word {
    fn clone(&self) -> Self {
        Self::new(&self.chunk, self.index as usize)
    }
}

impl Drop for Word {
    fn drop(&mut self) {
        // Release: this handle's writes happen before a reuse that reads the count as zero.
        self.chunk.handles[self.index as usize].fetch_sub(1, Ordering::Release);
    }
}

impl std::fmt::Debug for Word {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Word").field(&self.load()).finish()
    }
}

/// One table's slots: numbered from 0, slot `n` in chunk `n / CHUNK`.
#[derive(Default)]
pub(super) struct Words {
    chunks: Vec<Arc<Chunk>>,
    /// Slots handed out so far (used or retired).
    used: usize,
    /// Slots of removed series, reused once their handle count is zero.
    retired: VecDeque<u32>,
}

/// Retired slots tried per allocation before taking a new one.
const TRIES: usize = 4;

impl Words {
    /// A slot reading 0 for a new series: a retired one no handle points at (the oldest
    /// retired first, up to [`TRIES`] of them), or a new one.
    ///
    /// # Panics
    /// With 2^32 slots in one table (far beyond any memory this process has).
    pub(super) fn alloc(&mut self) -> u32 {
        for _ in 0..self.retired.len().min(TRIES) {
            let Some(slot) = self.retired.pop_front() else {
                break;
            };
            let (chunk, i) = self.at(slot);
            // Acquire: the last handle's writes are done before the value is reset.
            if chunk.handles[i].load(Ordering::Acquire) == 0 {
                chunk.values[i].store(0, Ordering::Relaxed);
                return slot;
            }
            self.retired.push_back(slot);
        }
        if self.used.is_multiple_of(CHUNK) {
            self.chunks.push(Chunk::new());
        }
        self.used += 1;
        u32::try_from(self.used - 1).expect("fewer than 2^32 series per table")
    }

    /// A handle of `slot`.
    pub(super) fn handle(&self, slot: u32) -> Word {
        let (chunk, i) = self.at(slot);
        Word::new(chunk, i)
    }

    /// The value of `slot`.
    pub(super) fn load(&self, slot: u32) -> u64 {
        let (chunk, i) = self.at(slot);
        chunk.values[i].load(Ordering::Relaxed)
    }

    /// `slot`'s series was removed: the slot is reused once no handle of it is left.
    pub(super) fn retire(&mut self, slot: u32) {
        self.retired.push_back(slot);
    }

    fn at(&self, slot: u32) -> (&Arc<Chunk>, usize) {
        let slot = slot as usize;
        (&self.chunks[slot / CHUNK], slot % CHUNK)
    }
}

impl std::fmt::Debug for Words {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Words")
            .field("used", &self.used)
            .field("retired", &self.retired.len())
            .finish_non_exhaustive()
    }
}
