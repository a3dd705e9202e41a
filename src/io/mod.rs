//! The I/O edges: probes, persistence (recording, audit log, drill state file, the JSON-lines
//! appender), the loops' clock, bounded reads of HTTP bodies, and loopback origins for the demo
//! and the tests.
//!
//! Must not know the engine's rules or a provider: these edges turn bytes into data and data
//! into bytes; a failed probe is an outcome, never an error.

pub mod audit;
pub mod clock;
pub mod coordination;
pub mod drill_store;
pub mod http_body;
pub mod journal;
pub mod jsonl;
pub mod origin;
pub mod probe;
pub mod signals;
pub mod state_file;
