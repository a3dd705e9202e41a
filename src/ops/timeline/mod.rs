//! The failover timeline's daemon side: the task that feeds the core's
//! [`gslb_core::timeline::Recorder`] from the event channel and acts on its updates (metrics,
//! audit lines), and the observers that watch DNS and the public URL from the outside.
//!
//! Must not decide phases: the recorder does, from events; this side only does the I/O it asks
//! for, and never delays the engine loop (it listens on the broadcast).

pub mod observer;
pub mod task;
#[cfg(test)]
mod tests;

pub use task::{TimelineStore, TimelineTask, spawn};
