//! The engine loop's inbox: the one message type its channels carry, and its two lanes. Probe
//! loops, the admin API's drill routes and the controller (reload, stop) send into the main
//! lane; the provider side (saved drills at start, adoption reads, a cluster follower's
//! adoptions, provider-health votes) into the priority lane, which the engine loop empties
//! first ([`Inbox::recv`]). There is no forwarder in between. An engine input travels as the
//! [`Input`] the engine records, with where its answer goes.
//!
//! Why two lanes: at start every probe loop sends its first result at once (10,000 at 10,000
//! endpoints), and an adoption queued behind them kept `/readyz` waiting until the engine loop
//! had stepped them all (issue 14). The priority lane carries at most a few inputs per binding
//! per resync, so it cannot starve probe results.
//!
//! This module only describes messages; the engine loop applies each lane in arrival order.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, watch};

use gslb_core::engine::{Decision, Input, Override, OverrideError, Reply};
use gslb_core::model::ServiceId;
use gslb_core::policy::PolicyDiff;

/// Buffered messages of the main lane before probe loops wait for the engine loop.
pub const MESSAGE_BUFFER: usize = 4096;

/// Buffered messages of the priority lane before adoption reads wait for the engine loop (a
/// provider-health vote finding it full is dropped; the next read votes again).
pub const PRIORITY_BUFFER: usize = 1024;

/// One message to the engine loop.
#[derive(Debug)]
pub enum Message {
    /// An engine input (probe result, adoption, provider vote, drill, re-arm, saved drills),
    /// recorded and stepped in arrival order.
    Input {
        /// What the engine is fed.
        input: Input,
        /// Where the engine's answer goes (operators' inputs), once the input is applied.
        reply: Option<ReplyTo>,
    },
    /// Read-only: the active overrides. Answered at once, not recorded.
    ListOverrides(oneshot::Sender<Vec<Override>>),
    /// A reloaded, validated policy set.
    Reload(Reload),
    /// Handle what came before, flush the journal and end (senders still held, such as the
    /// admin API's, get an error from then on).
    Stop,
}

impl From<Input> for Message {
    /// An input nobody waits an answer for.
    fn from(input: Input) -> Self {
        Self::Input { input, reply: None }
    }
}

impl Message {
    /// An operator's input, answered on `reply` once applied.
    pub fn command(input: Input, reply: ReplyTo) -> Self {
        Self::Input {
            input,
            reply: Some(reply),
        }
    }
}

/// Where an operator's answer goes: the reply channel of the kind of answer the input gets.
#[derive(Debug)]
pub enum ReplyTo {
    /// Adding or ending an override: the override, or why not.
    Override(oneshot::Sender<Result<Override, OverrideError>>),
    /// A re-arm: the services re-armed, or why not.
    Rearmed(oneshot::Sender<Result<Vec<ServiceId>, OverrideError>>),
    /// Any input: answered once it is applied and its decisions are published (a reconciler's
    /// adoption of the pool another writer chose).
    Applied(oneshot::Sender<()>),
}

impl ReplyTo {
    /// Sends the engine's `reply` when it is the kind this channel waits for (a mismatch, or
    /// no reply, drops the channel: the caller sees the loop as gone).
    pub fn send(self, reply: Option<Reply>) {
        match (self, reply) {
            (Self::Override(tx), Some(Reply::Override(r))) => {
                let _ = tx.send(r);
            }
            (Self::Rearmed(tx), Some(Reply::Rearmed(r))) => {
                let _ = tx.send(r);
            }
            (Self::Applied(tx), _) => {
                let _ = tx.send(());
            }
            _ => {}
        }
    }
}

/// A reloaded policy set for the engine loop ([`gslb_core::engine::Engine::reload`]).
#[derive(Debug)]
pub struct Reload {
    /// The new set and what changed, computed once by the caller.
    pub diff: PolicyDiff,
    /// A decision channel for each changed or added service (their reconcilers are new).
    pub decisions: BTreeMap<ServiceId, watch::Sender<Option<Arc<Decision>>>>,
    /// Answered once the new set is in force (the reset services' status and gauges are
    /// fresh), so their new tasks start after that and nothing they record is reset.
    pub done: oneshot::Sender<()>,
}

/// A sending side: of the main lane, cloned into probe loops and the admin API; of the
/// priority lane, into adoption reads and reconcilers (provider votes, a follower's adoptions).
pub type MessageSender = mpsc::Sender<Message>;

/// The engine loop's receiving side: both lanes.
#[derive(Debug)]
pub struct Inbox {
    priority: mpsc::Receiver<Message>,
    messages: mpsc::Receiver<Message>,
}

impl Inbox {
    /// A new inbox and its senders: the main lane's (holding [`MESSAGE_BUFFER`] messages)
    /// and the priority lane's ([`PRIORITY_BUFFER`]).
    pub fn new() -> (Self, MessageSender, MessageSender) {
        let (tx, messages) = mpsc::channel(MESSAGE_BUFFER);
        let (priority_tx, priority) = mpsc::channel(PRIORITY_BUFFER);
        (Self { priority, messages }, tx, priority_tx)
    }

    /// The next message: the priority lane's first, while it has one. `None` once every
    /// sender of the main lane is gone (the priority lane alone does not keep the loop
    /// running). Cancel safe (both lanes' `recv` are).
    pub async fn recv(&mut self) -> Option<Message> {
        tokio::select! {
            biased;
            Some(m) = self.priority.recv() => Some(m),
            m = self.messages.recv() => m,
        }
    }
}
