//! What operators see and say: status, metrics, the event channel, webhooks, the failover
//! timeline task and its observers, and the admin API.

pub mod admin;
pub mod events;
pub mod metrics;
pub mod notify;
pub mod status;
pub mod telemetry;
pub mod timeline;
