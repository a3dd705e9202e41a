//! The controller's event channel: [`Event`]s broadcast to whoever listens (the failover
//! timeline, webhooks, the demo's drill report, tests). Sending never blocks a loop: slow
//! listeners miss events, never delay them.

use gslb_core::event::Event;

/// The sending side; cloned into every loop.
pub type EventSender = tokio::sync::broadcast::Sender<Event>;

/// Room of the daemon's event channel: 16,384 events (a power of two, as tokio's broadcast
/// rounds up to one), about 1.6 s of issue 6's target load of 10,000 endpoints probed every
/// second, each probe one [`Event::Probe`]. A listener that falls further behind misses the
/// oldest events, decisions among them, so a listener counts what it missed (e.g. the webhook
/// sinks' `result="lagged"`). Memory: one slot per event, allocated at start.
pub const CAPACITY: usize = 16_384;

/// A channel with room for `capacity` events per listener before the oldest are dropped.
pub fn channel(capacity: usize) -> EventSender {
    tokio::sync::broadcast::channel(capacity).0
}
