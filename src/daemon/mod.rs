//! The daemon around the core: the engine loop (the one task that owns the engine), the
//! reconciler per provider binding, the controller that wires them per service, the engine
//! loop's inbox (the one message type it takes), and policy reload. Generic over the
//! provider: the binary names concrete providers.

pub mod builder;
pub mod controller;
pub mod engine_loop;
pub mod inbox;
pub mod reconcile;
pub mod reload;
pub mod run;
