//! The loops around the core: the engine loop (the one task that owns the engine) and its
//! [`inbox`] (the one message type it takes), a reconciler per provider binding, the
//! controller that wires them per service, policy reload, and the [`builder`] every caller
//! starts a controller with. Generic over the provider: the binary names concrete providers.
//!
//! Must not decide anything: every rule is the core's (the engine decides, the planner refuses);
//! these loops only carry inputs in and writes out, in order.

pub mod builder;
pub mod cluster;
pub mod controller;
pub mod dataplane;
pub mod engine_loop;
pub mod inbox;
pub mod outputs;
pub mod reconcile;
pub mod reload;
pub mod shared_drills;
pub mod tally;
pub mod votes;
