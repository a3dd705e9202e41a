//! gslb-core: the pure core of gslb. Plain data in, plain data out: no network, no clock
//! reads, no await. Its Cargo.toml has no I/O crate (no tokio, reqwest, hyper, axum, aws-*),
//! so the compiler keeps it that way; the daemon (crate `gslb`) is the loops around it.
//!
//! Dependencies point one way: `model` <- `policy` <- `engine` <- `planner`; `event` (what
//! happened, as data) <- `timeline`.
//!
//! - [`model`]: vocabulary (ids, observations, verdicts, time as [`model::Millis`]).
//! - [`policy`]: TOML policies -> validated [`policy::Policy`], every error at once.
//! - [`engine`]: evidence, quorum, damping, velocity, drills, rails and the decision.
//! - [`planner`]: the write planner: decision + observed provider state -> writes, or why
//!   none (the fallback-pool rules, write-fight detection).
//! - [`event`]: what happened in the controller (probes, verdicts, decisions, writes).
//! - [`timeline`]: failover timelines, a recorder of [`event`]s, and the drill report.

pub mod engine;
pub mod event;
pub mod model;
pub mod planner;
pub mod policy;
pub mod timeline;
