//! Coordination of several gslb instances through etcd (placeholder until the foundation lands).

pub mod election;
pub mod fence;
pub mod seat;
