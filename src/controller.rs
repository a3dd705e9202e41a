//! Wiring: one engine loop for every service, and per service its probe loops, the adoption
//! read and the reconciler. Probes of every service feed the one engine loop, so what is
//! controller-wide (suspect vantage points, the controller-wide velocity limit, drills) is
//! decided in one place, in order.
//!
//! Generic over the provider; only `main.rs` names concrete providers.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use gslb_provider::{Backoff, Provider};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use crate::control::{Command, CommandSender};
use crate::engine::{Decision, Engine, EngineSettings, Override};
use crate::engine_loop::{self, MESSAGE_BUFFER, Message, MessageSender};
use crate::journal::Journal;
use crate::model::{PoolId, ServiceId, VantageId};
use crate::policy::{Policy, Target};
use crate::probe::{ProbeError, ProbeTarget, Prober};
use crate::reconcile::{self, BACKOFF_BASE, BACKOFF_MAX, Binding, HealthVotes, Sinks};

/// Longest time between two evaluations of a service without new input: 1 s, so expiries,
/// staleness and holds are noticed promptly even with long probe intervals.
pub const MAX_TICK: Duration = Duration::from_secs(1);

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
        shadow: policy.mode == crate::policy::Mode::Shadow,
        health_votes: None,
    }
}

/// A running engine loop, to which services are attached.
#[derive(Debug)]
pub struct Controller {
    engine_loop: tokio::task::JoinHandle<()>,
    /// Adoption reads: they end by themselves, so they are kept apart from the tasks whose end
    /// means trouble.
    adoptions: std::sync::Mutex<JoinSet<()>>,
    messages: MessageSender,
    decisions: BTreeMap<ServiceId, watch::Receiver<Option<Decision>>>,
    sinks: Sinks,
}

impl Controller {
    /// Starts the engine loop for `policies`; [`Controller::stop`] ends it. `saved` overrides (from the drill
    /// state file) are loaded first, through the loop, so they are recorded like any input.
    pub fn start(
        policies: &[Policy],
        settings: &EngineSettings,
        sinks: Sinks,
        journal: Journal,
        saved: Vec<Override>,
    ) -> Self {
        let engine = Engine::new(policies.iter().cloned(), settings);
        let (tx, rx) = mpsc::channel(MESSAGE_BUFFER);
        let mut senders = BTreeMap::new();
        let mut decisions = BTreeMap::new();
        for p in policies {
            let (dtx, drx) = watch::channel(None);
            senders.insert(p.service.clone(), dtx);
            decisions.insert(p.service.clone(), drx);
        }
        let tick = policies
            .iter()
            .map(|p| p.probe.interval)
            .min()
            .unwrap_or(MAX_TICK)
            .min(MAX_TICK);
        if !saved.is_empty() {
            // The channel is empty: this cannot fail for lack of room.
            let _ = tx.try_send(Message::LoadOverrides(saved));
        }
        let engine_loop = tokio::spawn(engine_loop::run(
            engine,
            rx,
            senders,
            sinks.clone(),
            tick,
            journal,
        ));
        Self {
            engine_loop,
            adoptions: std::sync::Mutex::new(JoinSet::new()),
            messages: tx,
            decisions,
            sinks,
        }
    }

    /// Stops every task on `tasks` (probes, reconcilers, the command forwarder), then lets the
    /// engine loop finish what it has received and flush its journal.
    pub async fn stop(self, tasks: &mut JoinSet<()>) {
        tasks.shutdown().await;
        let mut adoptions = self
            .adoptions
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        adoptions.shutdown().await;
        drop(self.messages);
        let _ = self.engine_loop.await;
    }

    /// Where operator commands go (the admin API's side): a channel forwarded into the engine
    /// loop by a small task that ends when either side is gone.
    pub fn commands(&self, tasks: &mut JoinSet<()>) -> CommandSender {
        let (tx, mut rx) = mpsc::channel::<Command>(64);
        let messages = self.messages.clone();
        tasks.spawn(async move {
            while let Some(c) = rx.recv().await {
                if messages.send(Message::Command(c)).await.is_err() {
                    return;
                }
            }
        });
        tx
    }

    /// Starts probing `policy`'s endpoints from `vantage`, the adoption read and the
    /// reconciler that pushes its decisions to `provider`.
    ///
    /// # Errors
    /// A probe target that cannot be built (e.g. an invalid TLS server name).
    pub fn attach<P: Provider>(
        &self,
        tasks: &mut JoinSet<()>,
        policy: &Policy,
        provider: Arc<P>,
        binding: Binding,
        prober: &Arc<Prober>,
        vantage: &VantageId,
    ) -> Result<(), ProbeError> {
        let mut targets = Vec::new();
        for pool in &policy.pools {
            for endpoint in &pool.endpoints {
                targets.push(prober.target(&policy.probe, endpoint)?);
            }
        }
        for target in targets {
            let service = policy.service.clone();
            tasks.spawn(crate::probe::run_endpoint(
                prober.clone(),
                target,
                vantage.clone(),
                self.sinks.clock,
                self.messages.clone(),
                move |observation| Message::Observation {
                    service: service.clone(),
                    observation,
                },
            ));
        }
        self.adoptions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .spawn(adopt(
                provider.clone(),
                binding.clone(),
                self.messages.clone(),
                self.sinks.clone(),
            ));
        let Some(decisions) = self.decisions.get(&policy.service).cloned() else {
            return Ok(());
        };
        let mut binding = binding;
        if policy.quorum.provider_vote {
            let (messages, service) = (self.messages.clone(), policy.service.clone());
            // Two resync periods: one missed read does not drop the vote.
            let fresh_for = binding.resync * 2;
            binding.health_votes = Some(HealthVotes(Arc::new(move |pool, healthy| {
                // A full engine loop drops a vote rather than stall the reconciler; the next
                // read votes again.
                let _ = messages.try_send(Message::ProviderHealth {
                    service: service.clone(),
                    pool: pool.clone(),
                    healthy,
                    fresh_for,
                });
            })));
        }
        tasks.spawn(reconcile::run(
            provider,
            binding,
            decisions,
            self.sinks.clone(),
        ));
        Ok(())
    }

    /// Starts probing the vantage point's canary targets (see
    /// [`EngineSettings::canaries`]).
    pub fn attach_canaries(
        &self,
        tasks: &mut JoinSet<()>,
        targets: Vec<ProbeTarget>,
        prober: &Arc<Prober>,
        vantage: &VantageId,
    ) {
        for target in targets {
            tasks.spawn(crate::probe::run_endpoint(
                prober.clone(),
                target,
                vantage.clone(),
                self.sinks.clock,
                self.messages.clone(),
                Message::Canary,
            ));
        }
    }
}

/// Reads the provider until it answers, then reports which pool it serves. Writes nothing.
/// Failed reads are recorded like the reconciler's, so the status shows why no decision is
/// made yet.
async fn adopt<P: Provider>(provider: Arc<P>, binding: Binding, tx: MessageSender, sinks: Sinks) {
    let mut backoff = Backoff::new(BACKOFF_BASE, BACKOFF_MAX);
    while !tx.is_closed() {
        sinks
            .metrics
            .provider_calls_total
            .with_label_values(&[provider.name(), "observe"])
            .inc();
        match provider.observe().await {
            Ok(observed) => {
                let _ = tx
                    .send(Message::Adopted {
                        service: binding.service.clone(),
                        pool: binding.serving(&observed),
                    })
                    .await;
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
