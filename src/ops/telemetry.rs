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
use crate::ops::health::Health;
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
    /// The loops' heartbeats and readiness (`/healthz`, `/readyz`).
    pub health: Health,
}

impl Telemetry {
    /// Fresh telemetry: an empty status board, a new metrics registry, an event channel with
    /// room for `events` events per listener (see [`events::CAPACITY`]), `clock`, and no
    /// heartbeats yet.
    pub fn new(clock: Clock, events: usize) -> Self {
        Self {
            board: Arc::new(StatusBoard::default()),
            metrics: Metrics::new(),
            events: events::channel(events),
            clock,
            health: Health::default(),
        }
    }

    /// Sets a service's apply gauges from the status board's derived view, their one source:
    /// `gslb_decision_applied{service}` 1 when the status reads the decision applied
    /// ([`StatusBoard::apply_gauges`]), else 0; `gslb_decision_unapplied_age_seconds{service}` now
    /// minus `pending_since` while the status reads `pending` ([`StatusBoard::pending_since`]),
    /// else 0. Called whenever the engine loop hands over a decision, whenever the reconciler
    /// reports, and at every engine tick (at most 1 s), so the age keeps rising while the
    /// reconciler waits inside a provider call or between retries.
    pub fn record_apply(&self, service: &ServiceId) {
        let labels = [service.0.as_str()];
        let (applied, pending_since) = self.board.apply_gauges(service);
        self.metrics
            .decision_applied
            .with_label_values(&labels)
            .set(f64::from(u8::from(applied)));
        let age = pending_since.map_or(0.0, |s| self.clock.now().since(s).as_secs_f64());
        self.metrics
            .decision_unapplied_age_seconds
            .with_label_values(&labels)
            .set(age);
    }

    /// Records a failed provider call of `service` in one place: the error metric by class,
    /// a warning log, and the status board's `last_error` (starting `pending_since` when a
    /// decision is waiting), with the apply gauges at once.
    pub fn provider_failed(
        &self,
        service: &ServiceId,
        provider: &str,
        operation: &str,
        e: &ProviderError,
    ) {
        self.metrics
            .provider_errors_total
            .with_label_values(&[provider, &service.0, operation, e.code()])
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
        self.record_apply(service);
    }
}
