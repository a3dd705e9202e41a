//! Wiring of one service: probe loops -> service loop (engine) -> reconciler -> provider.
//!
//! Generic over the provider; only `main.rs` names concrete providers.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use gslb_provider::{Backoff, Provider};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;

use crate::engine::Engine;
use crate::model::{PoolId, VantageId};
use crate::policy::{Policy, Target};
use crate::probe::{ProbeError, Prober};
use crate::reconcile::{self, BACKOFF_BASE, BACKOFF_MAX, Binding, Sinks};
use crate::service;

/// Buffered probe results per service before probe loops wait for the engine.
const OBSERVATION_BUFFER: usize = 1024;

/// The provider binding a policy's target describes: provider pool refs in priority order.
pub fn binding(policy: &Policy, resync: Duration) -> Binding {
    let refs: BTreeMap<PoolId, String> = match &policy.target {
        Target::Route53(r) => r
            .pools
            .iter()
            .map(|p| (p.pool.clone(), p.set_identifier.clone()))
            .collect(),
        Target::Cloudflare(c) => c
            .pools
            .iter()
            .map(|p| (p.pool.clone(), p.pool_id.clone()))
            .collect(),
    };
    Binding {
        service: policy.service.clone(),
        priority: policy
            .pools
            .iter()
            .filter_map(|p| refs.get(&p.id).cloned())
            .collect(),
        refs,
        resync,
    }
}

/// Starts probing, deciding and reconciling one service on `tasks`.
///
/// # Errors
/// A probe target that cannot be built (e.g. an invalid TLS server name).
pub fn spawn_service<P: Provider>(
    tasks: &mut JoinSet<()>,
    policy: Policy,
    provider: Arc<P>,
    binding: Binding,
    prober: Arc<Prober>,
    vantage: VantageId,
    sinks: Sinks,
) -> Result<(), ProbeError> {
    let (obs_tx, obs_rx) = mpsc::channel(OBSERVATION_BUFFER);
    let mut targets = Vec::new();
    for pool in &policy.pools {
        for endpoint in &pool.endpoints {
            targets.push(prober.target(&policy.probe, endpoint)?);
        }
    }
    for target in targets {
        tasks.spawn(crate::probe::run_endpoint(
            prober.clone(),
            target,
            vantage.clone(),
            sinks.clock,
            obs_tx.clone(),
        ));
    }
    let (decision_tx, decision_rx) = watch::channel(None);
    let (adopt_tx, adopt_rx) = oneshot::channel();
    // Detached: it ends by itself once the provider answered or the service loop is gone.
    tokio::spawn(adopt(
        provider.clone(),
        binding.clone(),
        adopt_tx,
        sinks.clone(),
    ));
    let tick = policy.probe.interval;
    tasks.spawn(service::run(
        Engine::new(policy),
        obs_rx,
        adopt_rx,
        decision_tx,
        sinks.clone(),
        tick,
    ));
    tasks.spawn(reconcile::run(provider, binding, decision_rx, sinks));
    Ok(())
}

/// Reads the provider until it answers, then reports which pool it serves. Writes nothing.
/// Failed reads are recorded like the reconciler's, so the status shows why no decision is
/// made yet.
async fn adopt<P: Provider>(
    provider: Arc<P>,
    binding: Binding,
    tx: oneshot::Sender<Option<PoolId>>,
    sinks: Sinks,
) {
    let mut backoff = Backoff::new(BACKOFF_BASE, BACKOFF_MAX);
    while !tx.is_closed() {
        sinks
            .metrics
            .provider_calls_total
            .with_label_values(&[provider.name(), "observe"])
            .inc();
        match provider.observe().await {
            Ok(observed) => {
                let _ = tx.send(binding.serving(&observed));
                return;
            }
            Err(e) => {
                sinks.provider_failed(&binding.service, provider.name(), "observe", &e);
                let delay = if e.is_retryable() {
                    backoff.next_delay(rand::random::<f64>(), None)
                } else {
                    binding.resync
                };
                tokio::time::sleep(delay).await;
            }
        }
    }
}
