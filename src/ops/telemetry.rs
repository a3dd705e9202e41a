//! The telemetry handle: the one value every loop (probes' engine loop, reconcilers, the
//! timeline task, webhooks, the admin API) reports to. Built once per controller, by the
//! daemon builder or by a test.
//!
//! Must not decide, nor wait on anyone: a listener that lags behind the event channel misses
//! events rather than delay the sender, and nothing recorded here feeds back into a decision.

use std::sync::Arc;

use gslb_core::model::ServiceId;
use gslb_provider::ProviderError;

use crate::io::clock::Clock;
use crate::ops::events::{self, EventSender};
use crate::ops::metrics::Metrics;
use crate::ops::status::{ApplyState, StatusBoard};

/// Where every loop reports: the status board, the metrics, the event channel, and the
/// clock that stamps them. Cloning shares them.
#[derive(Debug, Clone)]
pub struct Telemetry {
    /// Status board.
    pub board: Arc<StatusBoard>,
    /// Metrics.
    pub metrics: Metrics,
    /// Events.
    pub events: EventSender,
    /// Wall clock for timestamps.
    pub clock: Clock,
}

impl Telemetry {
    /// Fresh telemetry: an empty status board, a new metrics registry, an event channel with
    /// room for `events` events per listener (see [`events::CAPACITY`]), and `clock`.
    pub fn new(clock: Clock, events: usize) -> Self {
        Self {
            board: Arc::new(StatusBoard::default()),
            metrics: Metrics::new(),
            events: events::channel(events),
            clock,
        }
    }

    /// Records a failed provider call of `service` in one place: the error metric by class,
    /// a warning log, and the status board's `last_error` (starting `pending_since` when a
    /// decision is waiting).
    pub fn provider_failed(
        &self,
        service: &ServiceId,
        provider: &str,
        operation: &str,
        e: &ProviderError,
    ) {
        self.metrics
            .provider_errors_total
            .with_label_values(&[provider, operation, e.code()])
            .inc();
        tracing::warn!(service = %service, provider, operation, error = %e, "provider call failed");
        let now = self.clock.now();
        let message = e.to_string();
        self.board.update_apply(service, |a| {
            a.last_error = Some(message);
            if a.state == ApplyState::Pending {
                a.pending_since.get_or_insert(now);
            }
        });
    }
}
