//! What the loops report to and what operators are told: the [`telemetry`] handle (status
//! board, metrics, event channel, clock, [`health`]), webhooks, and the failover timeline task with its
//! observers. Nothing here drives the engine.

pub mod cluster;
pub mod endpoints;
pub mod events;
pub mod health;
pub mod logging;
pub mod metrics;
pub mod notify;
pub mod status;
pub mod telemetry;
pub mod timeline;
