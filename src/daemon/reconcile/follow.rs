//! `[cluster]` only: keeps this instance's engine on the pool the provider serves while another
//! instance writes. Each instance decides on its own evidence, so two engines can briefly
//! disagree about the serving pool (one saw a pool recover a few milliseconds before the
//! other). Without this, an instance whose engine kept an older serving pool would, once it
//! became the writer, write that pool back: a switch nobody decided.
//!
//! The rule: whenever a follower's fresh read finds the provider serving another pool than its
//! previous read did (the writer wrote), and on the first pass after becoming the writer when
//! the provider serves another pool than this instance last read (the predecessor wrote since;
//! or nothing was read before), the instance hands the serving pool to its engine
//! ([`Input::Adopt`]) when its own decision names another one, and waits until the engine has
//! applied it; the next pass judges the decision made from there. A serving pool this instance
//! wrote itself never triggers it, nor does a predecessor that decided a switch but never wrote
//! it: the new writer writes its own decision of that switch, counted once.

use gslb_core::engine::{Decision, Input};
use gslb_core::model::{PoolId, ServiceId};
use gslb_provider::Provider;
use tokio::sync::oneshot;

use super::{Pass, Reconciler};
use crate::daemon::inbox::{Message, MessageSender, ReplyTo};
use crate::io::coordination::election::Role;

/// Hands a provider's serving pool to the engine loop and waits until it is applied.
#[derive(Debug, Clone)]
pub struct Follow {
    messages: MessageSender,
    service: ServiceId,
}

impl Follow {
    /// Adoptions of `service`'s serving pool, sent to the engine loop's priority lane `messages`.
    pub fn new(messages: MessageSender, service: ServiceId) -> Self {
        Self { messages, service }
    }

    /// Adopts `pool` and waits until the engine loop has stepped it (its decision published);
    /// returns at once when the loop is gone.
    async fn adopt(&self, pool: PoolId) {
        let (tx, rx) = oneshot::channel();
        let input = Input::Adopt {
            service: self.service.clone(),
            pool: Some(pool),
        };
        if self
            .messages
            .send(Message::command(input, ReplyTo::Applied(tx)))
            .await
            .is_ok()
        {
            let _ = rx.await;
        }
    }
}

/// What the reconciler remembers to follow the writer.
#[derive(Debug, Default)]
pub(super) struct Following {
    /// The serving pool of this instance's previous read.
    seen: Option<PoolId>,
    /// Whether the previous pass ran as the writer.
    was_writer: bool,
}

impl<P: Provider> Reconciler<'_, P> {
    /// Adopts `serving` (this pass's fresh read) by the rule of this module. `Some(pass)` ends
    /// the pass: the engine has been handed the pool, and the next pass (at once) judges the
    /// decision made from it.
    pub(super) async fn follow(
        &mut self,
        decision: Option<&Decision>,
        serving: Option<&PoolId>,
    ) -> Option<Pass> {
        let (Some(seat), Some(follow)) = (&self.steering.seat, &self.steering.follow) else {
            return None;
        };
        let writer = matches!(seat.role(), Role::Writer { .. });
        let seen = std::mem::replace(&mut self.following.seen, serving.cloned());
        let was_writer = std::mem::replace(&mut self.following.was_writer, writer);
        // A new writer adopts only what the provider was changed to since its last read: a
        // serving pool it saw before is one its engine already judged, and its decision away
        // from it (e.g. the failover its predecessor decided too but never wrote) stands, so
        // the switch is not decided, and counted, a second time.
        let changed = seen.as_ref() != serving;
        let moved = if writer {
            !was_writer && changed
        } else {
            seen.is_some() && changed
        };
        let serving = serving?;
        if !moved || decision.and_then(|d| d.active.as_ref()) == Some(serving) {
            return None;
        }
        tracing::info!(
            service = %self.service(),
            pool = %serving,
            "the provider serves a pool another writer chose: this instance's engine adopts it"
        );
        follow.adopt(serving.clone()).await;
        Some(Pass::Wait(std::time::Duration::ZERO))
    }
}
