//! The one way a controller is put together: `gslb run`, `gslb demo`, the benchmark and the
//! tests all start it here, so they run the same wiring.
//!
//! [`Builder`] collects what differs between them (policies, engine settings, vantage point,
//! resync period, journal and saved drills, telemetry, prober); [`Builder::start`] starts the
//! engine loop and returns a [`Daemon`], to which services are attached with their provider.
//! What only `gslb run` adds (admin API, webhooks, failover timeline task, canaries, policy
//! reload) is in [`crate::cli::run`].

use std::sync::Arc;
use std::time::Duration;

use gslb_core::engine::{EngineSettings, Override};
use gslb_core::model::VantageId;
use gslb_core::policy::Policy;
use gslb_provider::Provider;
use tokio::task::JoinSet;

use super::cluster::Cluster;
use super::controller::{self, Controller};
use super::inbox::MessageSender;
use super::reconcile;
use crate::io::clock::Clock;
use crate::io::journal::Journal;
use crate::io::probe::{DnsSettings, ProbeError, ProbeTarget, Prober};
use crate::ops::events;
use crate::ops::telemetry::Telemetry;

/// Default period of a reconciler's resync read: 60 s, the `[reconcile] resync` default.
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(60);

/// What a controller is started with. Every part has a default: the engine's default
/// settings, vantage point `local`, a [`DEFAULT_RESYNC`] resync, no journal and no saved
/// drills, fresh telemetry on the system clock with [`events::CAPACITY`] events, a prober with
/// the default DNS settings and probe limits.
#[derive(Debug)]
pub struct Builder {
    policies: Vec<Policy>,
    engine: EngineSettings,
    vantage: VantageId,
    resync: Duration,
    calls_per_minute: u32,
    journal: Journal,
    saved: Vec<Override>,
    telemetry: Option<Telemetry>,
    prober: Option<Arc<Prober>>,
    cluster: Option<Arc<Cluster>>,
}

impl Builder {
    /// A controller for `policies`, with every other part at its default.
    pub fn new(policies: Vec<Policy>) -> Self {
        Self {
            policies,
            engine: EngineSettings::default(),
            vantage: VantageId("local".into()),
            resync: DEFAULT_RESYNC,
            calls_per_minute: reconcile::DEFAULT_CALLS_PER_MINUTE,
            journal: Journal::default(),
            saved: Vec::new(),
            telemetry: None,
            prober: None,
            cluster: None,
        }
    }

    /// This instance's cluster membership (`[cluster]`): every attached service then joins its
    /// binding's election and writes only as the elected, fenced writer. Default: none, one
    /// instance alone writes every plan.
    pub fn cluster(mut self, cluster: Arc<Cluster>) -> Self {
        self.cluster = Some(cluster);
        self
    }

    /// The engine's settings (`[engine]`).
    pub fn engine(mut self, settings: EngineSettings) -> Self {
        self.engine = settings;
        self
    }

    /// This instance's vantage point: the name its probe results carry.
    pub fn vantage(mut self, vantage: VantageId) -> Self {
        self.vantage = vantage;
        self
    }

    /// How often each reconciler reads its provider when nothing else wakes it.
    pub fn resync(mut self, resync: Duration) -> Self {
        self.resync = resync;
        self
    }

    /// Each binding's budget of provider calls that decisions cause, per minute (`[reconcile]
    /// provider_calls_per_minute`; default [`reconcile::DEFAULT_CALLS_PER_MINUTE`]).
    pub fn calls_per_minute(mut self, calls: u32) -> Self {
        self.calls_per_minute = calls;
        self
    }

    /// Where the engine loop records its inputs, decisions and drills, and the drills read
    /// back from the state file (`saved`), loaded first.
    pub fn journal(mut self, journal: Journal, saved: Vec<Override>) -> Self {
        self.journal = journal;
        self.saved = saved;
        self
    }

    /// The status board, metrics, event channel and clock to report to (default: fresh ones,
    /// see [`Telemetry::new`]).
    pub fn telemetry(mut self, telemetry: Telemetry) -> Self {
        self.telemetry = Some(telemetry);
        self
    }

    /// The prober every probe loop shares.
    pub fn prober(mut self, prober: Arc<Prober>) -> Self {
        self.prober = Some(prober);
        self
    }

    /// Starts the engine loop. No service probes or writes before [`Daemon::attach`].
    ///
    /// # Errors
    /// The default prober could not be built (the system's DNS configuration is unreadable).
    pub fn start(self) -> Result<Daemon, ProbeError> {
        let prober = match self.prober {
            Some(p) => p,
            None => Arc::new(Prober::new(&DnsSettings::default())?),
        };
        let telemetry = self
            .telemetry
            .unwrap_or_else(|| Telemetry::new(Clock::system(), events::CAPACITY));
        let controller = Controller::start(
            &self.policies,
            &self.engine,
            telemetry.clone(),
            self.journal,
            self.saved,
            self.cluster.as_ref().map(|c| c.outputs.clone()),
        );
        Ok(Daemon {
            telemetry,
            controller,
            tasks: JoinSet::new(),
            prober,
            vantage: self.vantage,
            resync: self.resync,
            calls_per_minute: self.calls_per_minute,
            cluster: self.cluster,
        })
    }
}

/// A running controller: the engine loop, and per attached service its probe loops, adoption
/// read and reconciler. [`Daemon::stop`] ends it.
#[derive(Debug)]
pub struct Daemon {
    /// Where everything reports: status board, metrics, events, clock.
    pub telemetry: Telemetry,
    controller: Controller,
    tasks: JoinSet<()>,
    prober: Arc<Prober>,
    vantage: VantageId,
    resync: Duration,
    calls_per_minute: u32,
    cluster: Option<Arc<Cluster>>,
}

impl Daemon {
    /// Starts probing `policy`'s endpoints, its adoption read and the reconciler that pushes
    /// its decisions to `provider`. In a cluster, the service also joins its binding's
    /// election, and its reconciler writes only as the fenced writer, unless the provider is
    /// not [`Provider::elected`] (data-plane votes).
    ///
    /// # Errors
    /// A probe target that cannot be built (e.g. an invalid TLS server name).
    pub fn attach<P: Provider>(
        &mut self,
        policy: &Policy,
        provider: Arc<P>,
    ) -> Result<(), ProbeError> {
        let mut steering = controller::steering(policy, self.resync);
        steering.calls_per_minute = self.calls_per_minute;
        // A provider that writes only this instance's own state (data-plane votes) applies
        // every decision itself: no election.
        let cluster = self.cluster.as_ref().filter(|_| provider.elected());
        let election = cluster.map(|c| {
            let (seat, task) = c.seat(&policy.service);
            steering.seat = Some(Box::new(seat));
            task
        });
        let attached = self.controller.attach(
            &mut self.tasks,
            policy,
            provider,
            steering,
            &self.prober,
            &self.vantage,
        );
        if let Some(task) = election {
            self.controller.track(&policy.service, task.abort_handle());
        }
        attached
    }

    /// This instance's cluster membership, when it has one.
    pub fn cluster(&self) -> Option<&Arc<Cluster>> {
        self.cluster.as_ref()
    }

    /// Starts probing the vantage point's canary targets.
    pub fn attach_canaries(&mut self, targets: Vec<ProbeTarget>) {
        self.controller
            .attach_canaries(&mut self.tasks, targets, &self.prober, &self.vantage);
    }

    /// Where operator commands (drills, re-arms) go: the engine loop's own inbox.
    pub fn commands(&self) -> MessageSender {
        self.controller.commands()
    }

    /// The controller, e.g. for its policy set or a reload.
    pub fn controller(&self) -> &Controller {
        &self.controller
    }

    /// The prober every probe loop shares.
    pub fn prober(&self) -> &Arc<Prober> {
        &self.prober
    }

    /// The controller's tasks (probe loops, reconcilers), e.g. to notice one that stopped.
    pub fn tasks(&mut self) -> &mut JoinSet<()> {
        &mut self.tasks
    }

    /// Stops every probe loop and reconciler, then lets the engine loop finish what it has
    /// received and flush its journal.
    pub async fn stop(self) {
        let Self {
            controller,
            mut tasks,
            ..
        } = self;
        controller.stop(&mut tasks).await;
    }
}
