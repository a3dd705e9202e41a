//! Coordination of several gslb instances through etcd (`[cluster]`): the client connection,
//! this instance's lease, the key layout and who may write which keys (`access`), votes and
//! heartbeats, and one fenced writer per provider binding (`election`, `fence`, `seat`) (see
//! `docs/cluster.md`).
//!
//! Must not: decide anything. What peers say becomes engine inputs; whether a vote counts
//! (freshness on the reader's clock, `min_voters`) is the engine's rule. No consensus of our
//! own: every agreement is an etcd transaction, lease or election.

pub mod access;
pub mod client;
pub mod drills;
pub mod election;
pub mod error;
mod failover;
pub mod fence;
pub mod keys;
pub mod leaders;
pub mod lease;
pub mod peers;
pub mod safety;
pub mod seat;
pub mod votes;

pub use client::{Clients, Connect, TlsFiles};
pub use error::ErrorCounter;
pub use error::{CoordinationError, EtcdOp};
pub use keys::Keys;
pub use lease::{LeaseState, LeaseTask};
pub use peers::{PeerEvent, Watcher};
pub use votes::{LocalVerdicts, Publisher};
