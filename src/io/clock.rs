//! Wall-clock time for the I/O edges, derived from tokio's clock so paused-time tests move it.
//!
//! The engine never reads a clock; loops read this one and pass [`Millis`] in.

use std::time::{SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

use gslb_core::model::Millis;

/// Maps tokio's monotonic clock onto Unix milliseconds, anchored once at creation.
///
/// Under `tokio::time::pause()` it advances exactly as far as the paused clock does.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    anchor_wall: Millis,
    anchor: Instant,
}

impl Clock {
    /// A clock anchored at the current system time.
    pub fn system() -> Self {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Self::anchored_at(Millis(u64::try_from(wall.as_millis()).unwrap_or(u64::MAX)))
    }

    /// A clock that reads `wall` now (for tests and replays).
    pub fn anchored_at(wall: Millis) -> Self {
        Self {
            anchor_wall: wall,
            anchor: Instant::now(),
        }
    }

    /// The current time.
    pub fn now(&self) -> Millis {
        self.anchor_wall.plus(self.anchor.elapsed())
    }
}
