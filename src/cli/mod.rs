//! The commands: `gslb run` ([`run`]: the controller with the admin API, webhooks, the
//! failover timeline and policy reload), `check`, `plan`, `replay`, `demo`, the drill, re-arm
//! and events clients of the admin API, and the container health check. The binary parses
//! the command line and calls these.
//!
//! Must not name a concrete provider: `gslb run` and `gslb plan` get theirs from the binary's
//! [`run::Bind`].

pub mod check;
pub mod demo;
pub mod drill;
pub mod healthcheck;
pub mod plan;
pub mod replay;
pub mod run;
