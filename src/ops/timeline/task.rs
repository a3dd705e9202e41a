//! The timeline task: feeds every controller event to the [`Recorder`] and acts on what it
//! answers: `gslb_failover_phase_seconds` observations, one audit line per closed timeline
//! (action `failover.timeline`), and the observers of open timelines. It never blocks a loop:
//! it listens on the event broadcast, and if it falls behind it misses events (logged), it
//! never delays them. At shutdown it audits the timelines still open as `interrupted`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{broadcast, oneshot, watch};
use tokio::task::{AbortHandle, JoinHandle, JoinSet};

use super::observer::{self, Job};
use crate::io::audit::{AuditEntry, AuditLog, CONTROLLER_ACTOR, TIMELINE_ACTION};
use crate::io::probe::DnsSettings;
use crate::ops::telemetry::Telemetry;
use gslb_core::event::Event;
use gslb_core::model::ServiceId;
use gslb_core::policy::{Mode, Policy};
use gslb_core::timeline::{DEFAULT_WINDOW, Expect, Recorder, Timeline, Update};

/// How often open timelines are checked against their window: 1 s.
pub const EXPIRY_TICK: Duration = Duration::from_secs(1);

/// The recorder, shared between the task and the admin API's `GET /v1/events`. Cheap to
/// clone; `Default` is an empty store nothing feeds.
#[derive(Debug, Clone, Default)]
pub struct TimelineStore(Arc<Mutex<Recorder>>);

impl TimelineStore {
    fn recorder(&self) -> std::sync::MutexGuard<'_, Recorder> {
        // A poisoned lock only means a panic elsewhere; the recorder is always whole.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The timelines, newest first, of `service` when given, at most `limit`.
    pub fn list(&self, service: Option<&ServiceId>, limit: usize) -> Vec<Timeline> {
        self.recorder().list(service, limit)
    }

    /// Puts back the timelines of an earlier run (oldest first, from [`crate::io::audit::Past`])
    /// behind those recorded since ([`Recorder::restore`]), so `GET /v1/events` lists them
    /// after a restart.
    pub fn restore(&self, past: Vec<Timeline>) {
        self.recorder().restore(past);
    }

    /// Feeds one event (the task does; `gslb demo` feeds its own store).
    pub fn apply(&self, event: &Event) -> Vec<Update> {
        self.recorder().apply(event)
    }

    /// Sets what each policy's timelines wait for and forgets removed services and endpoints
    /// ([`Recorder::retain`]); returns the timelines this closed. A service's phase histograms
    /// are created when its first timeline opens ([`crate::ops::metrics::Metrics::declare_failover_phases`]), not
    /// here: a service that never switched exports none.
    pub fn configure(&self, policies: &[Policy]) -> Vec<Update> {
        let mut r = self.recorder();
        // In name order, the recorder's: each new service goes at the end of its list.
        let mut by_name: Vec<&Policy> = policies.iter().collect();
        by_name.sort_by(|a, b| a.service.cmp(&b.service));
        for p in by_name {
            let observe = p.observe.as_ref();
            let dns = observe.is_some()
                && p.pools
                    .iter()
                    .any(|pool| p.target.dns_values(&pool.id).is_some_and(|v| !v.is_empty()));
            r.expect(
                p.service.clone(),
                Expect {
                    provider: p.mode == Mode::Enforce,
                    dns,
                    served_by: observe.is_some_and(|o| o.served_by.is_some()),
                    window: observe.map_or(DEFAULT_WINDOW, |o| o.window),
                },
            );
        }
        r.retain(policies)
    }
}

/// The running timeline task. Stop it with [`TimelineTask::stop`] so the timelines still open
/// reach the audit log; dropping it stops the task the same way without waiting.
#[derive(Debug)]
pub struct TimelineTask {
    stop: oneshot::Sender<()>,
    handle: JoinHandle<()>,
}

impl TimelineTask {
    /// Stops the task: it applies the events already queued, closes every open timeline as
    /// `interrupted` (audited like any closed timeline), stops its observers and flushes the
    /// audit log; returns when that is done. A flush failure is logged, not returned.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        if let Err(e) = self.handle.await {
            tracing::error!(error = %e, "the failover timeline task failed");
        }
    }
}

/// Starts the timeline task and returns its store (for the admin API) and the task (to stop
/// it at shutdown, after the controller so its last events are recorded).
///
/// `policies` is the current policy set; a reload replaces it, new timelines follow the new
/// set and the timelines of removed services close as `interrupted` ([`Recorder::retain`]).
/// `dns` is the daemon's `[dns]`, the observers' default resolver. `audit`: where closed
/// timelines are written, if anywhere.
pub fn spawn(
    telemetry: &Telemetry,
    audit: Option<AuditLog>,
    dns: DnsSettings,
    mut policies: watch::Receiver<Arc<Vec<Policy>>>,
) -> (TimelineStore, TimelineTask) {
    let store = TimelineStore::default();
    store.configure(&policies.borrow_and_update());
    let mut rx = telemetry.events.subscribe();
    let (stop, mut stopped) = oneshot::channel();
    let (telemetry, task_store) = (telemetry.clone(), store.clone());
    let mut out = Outlet {
        telemetry: telemetry.clone(),
        audit,
        dns,
        observers: Observers::default(),
    };
    let handle = tokio::spawn(async move {
        let mut tick = tokio::time::interval(EXPIRY_TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut reloads = true;
        loop {
            let updates = tokio::select! {
                e = rx.recv() => match e {
                    Ok(e) => task_store.apply(&e),
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "failover timeline fell behind the controller's events; phases may be missing");
                        continue;
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                },
                _ = &mut stopped => {
                    let mut queued = Vec::new();
                    loop {
                        match rx.try_recv() {
                            Ok(e) => queued.extend(task_store.apply(&e)),
                            Err(broadcast::error::TryRecvError::Lagged(_)) => {}
                            Err(_) => break,
                        }
                    }
                    out.publish(queued, &policies);
                    break;
                }
                changed = policies.changed(), if reloads => match changed {
                    Ok(()) => task_store.configure(&policies.borrow_and_update()),
                    Err(_) => {
                        reloads = false;
                        continue;
                    }
                },
                _ = tick.tick() => task_store.recorder().expire(telemetry.clock.now()),
                Some(_) = out.observers.set.join_next(), if !out.observers.set.is_empty() => continue,
            };
            out.publish(updates, &policies);
        }
        out.publish(task_store.recorder().interrupt(), &policies);
        out.observers.set.shutdown().await;
        if let Some(a) = &out.audit
            && let Err(e) = a.flush().await
        {
            tracing::error!(error = %e, "flushing the audit log after the last failover timelines");
        }
    });
    (store, TimelineTask { stop, handle })
}

/// Where the task's updates go: the phase metrics, the audit log, the observers.
struct Outlet {
    telemetry: Telemetry,
    audit: Option<AuditLog>,
    dns: DnsSettings,
    observers: Observers,
}

impl Outlet {
    /// Publishes `updates`, in order, against the policy set in force.
    fn publish(
        &mut self,
        updates: impl IntoIterator<Item = Update>,
        policies: &watch::Receiver<Arc<Vec<Policy>>>,
    ) {
        let current = policies.borrow().clone();
        for u in updates {
            publish(
                u,
                &self.telemetry,
                self.audit.as_ref(),
                &current,
                &self.dns,
                &mut self.observers,
            );
        }
    }
}

/// Running observers, at most one per service (the newest switch's).
#[derive(Default)]
struct Observers {
    set: JoinSet<()>,
    by_service: BTreeMap<ServiceId, (String, AbortHandle)>,
}

fn publish(
    u: Update,
    telemetry: &Telemetry,
    audit: Option<&AuditLog>,
    policies: &[Policy],
    dns: &DnsSettings,
    observers: &mut Observers,
) {
    match u {
        Update::Phase {
            service,
            phase,
            seconds,
        } => telemetry
            .metrics
            .failover_phase_seconds
            .with_label_values(&[service.0.as_str(), phase.as_str()])
            .observe(seconds),
        Update::Opened(t) => {
            telemetry.metrics.declare_failover_phases(&t.service);
            tracing::info!(service = %t.service, timeline = %t.id, from = t.from.as_ref().map(|p| p.0.as_str()), to = t.to.as_ref().map(|p| p.0.as_str()), rule = %t.rule, "failover timeline opened");
            let job = policies
                .iter()
                .find(|p| p.service == t.service)
                .and_then(|p| Job::new(p, &t, dns));
            if let Some(job) = job {
                let handle = observers.set.spawn(observer::run(
                    job,
                    telemetry.events.clone(),
                    telemetry.clock,
                ));
                if let Some((_, old)) = observers
                    .by_service
                    .insert(t.service.clone(), (t.id.clone(), handle))
                {
                    old.abort();
                }
            }
        }
        Update::Closed(t) => {
            if observers
                .by_service
                .get(&t.service)
                .is_some_and(|(id, _)| *id == t.id)
                && let Some((_, h)) = observers.by_service.remove(&t.service)
            {
                h.abort();
            }
            let status = t.status.as_str();
            tracing::info!(service = %t.service, timeline = %t.id, status, "failover timeline closed");
            if let Some(a) = audit {
                a.record(
                    &AuditEntry::new(
                        telemetry.clock.now(),
                        CONTROLLER_ACTOR,
                        TIMELINE_ACTION,
                        &t.rule,
                        status,
                    )
                    .with_service(t.service.clone())
                    .with_detail(serde_json::to_value(&t).unwrap_or_default()),
                );
            }
        }
    }
}
