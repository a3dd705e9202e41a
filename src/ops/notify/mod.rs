//! Webhook notifications: switches, holds and drills sent to `[[notify.webhooks]]` sinks as
//! gslb's JSON ([`message`]) or a Slack message ([`slack`]).
//!
//! Each sink is two tasks. The reader subscribes to the controller's event broadcast, keeps
//! what the sink wants, formats it and queues it; it never waits on the network, so it keeps
//! up with the broadcast. The deliverer sends queued messages one at a time, in order, with
//! retries (`deliver.rs`). The queue is bounded: when full, the oldest message is dropped and
//! counted. At shutdown, [`Notifier::drain`] sends what is still queued for a few seconds.
//! Nothing here can delay a decision: the engine loop's `send` on the broadcast never
//! waits on a listener (a reader that lags misses events, counted as `lagged` here).
//!
//! Metrics: `gslb_webhook_deliveries_total{sink,result}`, `result` = `delivered`, `retried`
//! (an attempt failed and will be retried), `failed` (attempts spent or not retryable),
//! `dropped` (a message pushed out of a full queue), `lagged` (broadcast events the reader
//! missed by falling more than [`crate::ops::events::CAPACITY`] behind: mostly probe results, which
//! are never sent, but a missed switch is among them when one was).

mod deliver;
pub mod message;
mod restart;
pub mod slack;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, broadcast};
use tokio::task::JoinSet;

use crate::config::{Webhook, WebhookFormat};
use crate::io::clock::Clock;
use crate::ops::logging::List;
use crate::ops::metrics::Metrics;
use crate::ops::status::StatusBoard;
use crate::ops::telemetry::Telemetry;
use deliver::Deliverer;
use gslb_core::event::Event;
use gslb_core::model::{ServiceId, VantageId};
use message::Notification;
pub use restart::Notified;

/// The `result` label values, pre-created per sink so they read 0.
pub const RESULTS: [&str; 5] = ["delivered", "retried", "failed", "dropped", "lagged"];

/// A sink's HTTP client could not be built.
#[derive(Debug, thiserror::Error)]
#[error("notify.webhooks '{sink}': cannot build the HTTP client: {source}")]
pub struct SinkError {
    /// The sink.
    pub sink: String,
    /// Why.
    pub source: reqwest::Error,
}

/// How long shutdown waits, in all, for the webhook messages still queued: 5 s.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// The sinks' queues and deliverers, to send what is still queued at shutdown.
#[must_use = "drain it at shutdown, or queued messages are lost"]
pub struct Notifier {
    sinks: Vec<(Arc<Queue>, Arc<Deliverer>)>,
}

impl Notifier {
    /// Delivers the messages still queued, in order, every sink in parallel, with the usual
    /// retries, for at most `within` in all (see [`DRAIN_TIMEOUT`]); what is left then is
    /// logged and lost. Call it once the sinks' tasks are stopped (at shutdown): a message that
    /// was in flight when its deliverer task stopped is lost, and events sent after the reader
    /// stopped are not queued.
    pub async fn drain(self, within: Duration) {
        let mut set = JoinSet::new();
        for (queue, deliverer) in self.sinks {
            queue.close();
            set.spawn(async move {
                while let Some(body) = queue.pop().await {
                    deliverer.deliver(&body).await;
                }
            });
        }
        let all = async { while set.join_next().await.is_some() {} };
        if tokio::time::timeout(within, all).await.is_err() {
            tracing::warn!(
                within = %humantime::format_duration(within),
                "webhook messages still queued at shutdown were not all delivered in time; the rest are lost"
            );
        }
    }
}

/// Starts every sink on `tasks`: each subscribes to `telemetry`'s events now, so it sees
/// everything sent after this returns; the returned [`Notifier`] drains their queues at
/// shutdown. Messages name `vantage`; drill changes are dated by the telemetry's clock; a
/// service's `mode` is read from its status board (the engine loop updates it before it
/// publishes a decision; `enforce` for a service it does not show yet). A hold the earlier run ended in
/// and already notified (`notified`, see [`Notified`]) is not sent again.
///
/// # Errors
/// [`SinkError`] when a sink's HTTP client cannot be built; nothing is started then.
pub fn spawn(
    tasks: &mut JoinSet<()>,
    webhooks: &[Webhook],
    telemetry: &Telemetry,
    vantage: &VantageId,
    notified: &Notified,
) -> Result<Notifier, SinkError> {
    let Telemetry {
        board,
        metrics,
        events,
        clock,
        ..
    } = telemetry;
    let deliverers = webhooks
        .iter()
        .map(|w| {
            Deliverer::new(w, metrics.clone()).map_err(|source| SinkError {
                sink: w.name.clone(),
                source,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut notifier = Notifier { sinks: Vec::new() };
    for (w, deliverer) in webhooks.iter().zip(deliverers) {
        let deliverer = Arc::new(deliverer);
        for r in RESULTS {
            metrics
                .webhook_deliveries_total
                .with_label_values(&[&w.name, r]);
        }
        let queue = Arc::new(Queue::new(w.queue));
        let reader = Reader {
            sink: w.clone(),
            events: events.subscribe(),
            queue: queue.clone(),
            metrics: metrics.clone(),
            clock: *clock,
            vantage: vantage.clone(),
            board: board.clone(),
            notified: notified.clone(),
        };
        tasks.spawn(reader.run());
        notifier.sinks.push((queue.clone(), deliverer.clone()));
        tasks.spawn(async move {
            while let Some(body) = queue.pop().await {
                deliverer.deliver(&body).await;
            }
        });
        let format = match w.format {
            WebhookFormat::Json => "json",
            WebhookFormat::Slack => "slack",
        };
        let events: Vec<_> = w.events.iter().map(|k| k.as_str()).collect();
        tracing::info!(sink = %w.name, format, events = %List(&events), "webhook sink started");
    }
    Ok(notifier)
}

/// The JSON body `format` sends for `n`.
fn body(format: WebhookFormat, n: &Notification) -> Vec<u8> {
    let value = match format {
        WebhookFormat::Json => serde_json::to_value(n),
        WebhookFormat::Slack => Ok(slack::payload(n)),
    };
    // Serialising plain strings, numbers and lists cannot fail.
    value
        .map(|v| v.to_string().into_bytes())
        .unwrap_or_default()
}

struct Reader {
    sink: Webhook,
    events: broadcast::Receiver<Event>,
    queue: Arc<Queue>,
    metrics: Metrics,
    clock: Clock,
    vantage: VantageId,
    board: Arc<StatusBoard>,
    notified: Notified,
}

impl Reader {
    async fn run(mut self) {
        let name = self.sink.name.clone();
        let dropped = self
            .metrics
            .webhook_deliveries_total
            .with_label_values(&[&name, "dropped"]);
        let lagged = self
            .metrics
            .webhook_deliveries_total
            .with_label_values(&[&name, "lagged"]);
        loop {
            let event = match self.events.recv().await {
                Ok(e) => e,
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    lagged.inc_by(missed);
                    tracing::warn!(sink = %name, missed, "webhook sink fell behind the event stream; events missed");
                    continue;
                }
                Err(broadcast::error::RecvError::Closed) => {
                    self.queue.close();
                    return;
                }
            };
            if let Event::Decision(d) = &event
                && self.notified.repeats(d)
            {
                tracing::info!(sink = %name, service = %d.service, rule = d.rule.as_str(), "hold already notified before the restart; not sent again");
                continue;
            }
            let mode = |s: &ServiceId| self.board.mode(s).unwrap_or_default();
            let Some(n) = Notification::from_event(&event, &self.vantage, self.clock.now(), mode)
            else {
                continue;
            };
            if !self.sink.events.contains(&n.kind) {
                continue;
            }
            if self.queue.push(body(self.sink.format, &n)) {
                dropped.inc();
                tracing::warn!(sink = %name, capacity = self.sink.queue, "webhook queue full; oldest message dropped");
            }
        }
    }
}

/// A bounded FIFO that drops its oldest entry when full.
struct Queue {
    state: Mutex<(VecDeque<Vec<u8>>, bool)>,
    capacity: usize,
    ready: Notify,
}

impl Queue {
    fn new(capacity: usize) -> Self {
        Self {
            state: Mutex::new((VecDeque::with_capacity(capacity.min(1024)), false)),
            capacity,
            ready: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (VecDeque<Vec<u8>>, bool)> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues `item`; true when the oldest entry was dropped to make room.
    fn push(&self, item: Vec<u8>) -> bool {
        let dropped = {
            let mut s = self.lock();
            let full = s.0.len() >= self.capacity;
            if full {
                s.0.pop_front();
            }
            s.0.push_back(item);
            full
        };
        self.ready.notify_one();
        dropped
    }

    /// No more items will come; `pop` returns `None` once the queue is empty.
    fn close(&self) {
        self.lock().1 = true;
        self.ready.notify_one();
    }

    /// The oldest item, waiting for one; `None` when closed and empty.
    async fn pop(&self) -> Option<Vec<u8>> {
        loop {
            {
                let mut s = self.lock();
                if let Some(item) = s.0.pop_front() {
                    return Some(item);
                }
                if s.1 {
                    return None;
                }
            }
            // `notify_one` stores a permit when no one waits: no wake-up is lost.
            self.ready.notified().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_queue_drops_its_oldest_entry() {
        let q = Queue::new(2);
        assert!(!q.push(b"1".to_vec()));
        assert!(!q.push(b"2".to_vec()));
        assert!(q.push(b"3".to_vec()));
        q.close();
        assert_eq!(q.pop().await, Some(b"2".to_vec()));
        assert_eq!(q.pop().await, Some(b"3".to_vec()));
        assert_eq!(q.pop().await, None);
    }
}
