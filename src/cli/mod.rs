//! Commands other than `gslb run`: drill clients, events, plan, replay, the demo and the
//! container health check.

pub mod check;
pub mod demo;
pub mod drill;
pub mod healthcheck;
pub mod plan;
pub mod replay;
