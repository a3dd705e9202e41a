//! `gslb run`: the controller of [`crate::daemon::builder`] plus what only the daemon has: the
//! admin API, webhooks, the failover timeline task, canaries, and policy reload (SIGHUP and file
//! changes) until SIGTERM or Ctrl-C.
//!
//! Providers come from a [`Bind`]: the binary implements it, being the only code that names the
//! concrete adapters.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use gslb_core::engine::Override;
use gslb_core::model::ServiceId;
use gslb_core::policy::{self, Policy};
use gslb_provider::AnyProvider;
use tokio::sync::mpsc;

use crate::admin;
use crate::admin::votes::{VoteServerError, spawn as spawn_vote_listener};
use crate::config::{Route53Settings, Settings};
use crate::daemon::builder::{Builder, Daemon};
use crate::daemon::cluster::{self, Cluster, ClusterError};
use crate::daemon::controller;
use crate::daemon::dataplane::{self, VoteRegistry};
use crate::daemon::reload::{self, Reloader, Trigger};
use crate::daemon::shared_drills;
use crate::daemon::votes;
use crate::io::audit::{AuditLog, Past};
use crate::io::clock::Clock;
use crate::io::coordination::ErrorCounter;
use crate::io::drill_store::{self, DrillStore};
use crate::io::journal::Journal;
use crate::io::jsonl::{self, JsonlWriter};
use crate::io::probe::{self, Prober, error_chain};
use crate::io::state_file::StateFile;
use crate::ops::logging::List;
use crate::ops::telemetry::Telemetry;
use crate::ops::{events, notify, timeline};

/// A [`Bind`] that gives each data-plane service its
/// [`VoteBoard`](crate::daemon::dataplane::VoteBoard) and every other service
/// the wrapped binder's provider.
pub struct VotingBinder<'a, B> {
    /// The binder of every other service (the binary's adapters).
    pub inner: &'a B,
    /// Where the boards go.
    pub registry: VoteRegistry,
    /// `[route53]`, for the modes and `[route53.data_plane]`.
    pub settings: &'a Route53Settings,
}

impl<B: Bind> Bind for VotingBinder<'_, B> {
    async fn bind(&self, policy: &Policy) -> Result<AnyProvider, BoxError> {
        if self.settings.data_plane_of(&policy.service.0).is_some() {
            let board = self.registry.board(policy, self.settings)?;
            return Ok(AnyProvider::new(board));
        }
        self.inner.bind(policy).await
    }

    fn forget(&self, service: &ServiceId) {
        self.registry.remove(&service.0);
        self.inner.forget(service);
    }
}

/// Any error, boxed: why a provider could not be set up for a policy (e.g. no Cloudflare API
/// token, see [`Bind`]), or the cause of a [`RunError`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Turns a policy's target into its provider. The binary implements it: it is the only code
/// that names the concrete adapters (`gslb-route53`, `gslb-cloudflare`).
pub trait Bind: Sync {
    /// The provider `policy`'s target names, ready to read and write.
    ///
    /// # Errors
    /// The provider cannot be set up from the settings (a settings problem, exit code 2).
    fn bind(&self, policy: &Policy) -> impl Future<Output = Result<AnyProvider, BoxError>> + Send;

    /// For `gslb plan` of a Route 53 data-plane service: per pool, a line saying its tally
    /// check, threshold and record state, and whether `gslb provision` has something to do;
    /// read only. `None` (the default) for any other service.
    ///
    /// # Errors
    /// Route 53 could not be read, or a vote secret not be read.
    fn data_plane(
        &self,
        _policy: &Policy,
    ) -> impl Future<Output = Result<Option<(Vec<String>, bool)>, BoxError>> + Send {
        async { Ok(None) }
    }

    /// `service` was removed by a reload: drop what `bind` set up for it outside its provider
    /// (a data-plane vote board). Default: nothing.
    fn forget(&self, service: &ServiceId) {
        let _ = service;
    }

    /// Read-only: how the records `policy`'s target names differ from what the policy says
    /// (values or Alias target, TTL, role, health check), one line per record, for `gslb plan`
    /// to show (`gslb run` never rewrites records: `gslb provision` does). Empty when they
    /// match, cannot be read (observe reports that), or the provider has no such records.
    /// Default: empty.
    fn record_drift(&self, policy: &Policy) -> impl Future<Output = Vec<String>> + Send {
        let _ = policy;
        async { Vec::new() }
    }
}

/// `gslb run` failed; [`RunError::exit_code`] is the process's exit code. Displayed as its
/// context (when it has one) followed, in the source chain, by the error itself.
#[derive(Debug)]
pub struct RunError {
    exit_code: u8,
    context: Option<String>,
    source: BoxError,
}

impl RunError {
    /// Bad settings or policies: exit code 2.
    pub fn config(e: impl Into<BoxError>) -> Self {
        Self {
            exit_code: 2,
            context: None,
            source: e.into(),
        }
    }

    /// A failure at run time: exit code 1.
    pub fn runtime(e: impl Into<BoxError>) -> Self {
        Self {
            exit_code: 1,
            context: None,
            source: e.into(),
        }
    }

    /// The same error, saying what was being done.
    #[must_use]
    pub fn context(mut self, context: impl Into<String>) -> Self {
        self.context = Some(context.into());
        self
    }

    /// The same error with exit code `code` (e.g. `gslb plan`, where 2 says "changes
    /// pending", exits 1 on bad settings).
    #[must_use]
    pub fn with_exit_code(mut self, code: u8) -> Self {
        self.exit_code = code;
        self
    }

    /// 2 for bad settings or policies, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        self.exit_code
    }
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.context {
            Some(c) => f.write_str(c),
            None => self.source.fmt(f),
        }
    }
}

impl std::error::Error for RunError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.context {
            Some(_) => Some(&*self.source),
            None => self.source.source(),
        }
    }
}

/// Runs the controller for `policies` until SIGTERM or Ctrl-C. `reloader` tracks their files
/// from when they were read and `hangup` delivers SIGHUP; both are set up by the caller before
/// it read (and possibly provisioned) the policies, so a change in between is reloaded.
///
/// # Errors
/// Bad settings (exit code 2: admin token, webhooks, state files, canaries, a provider that
/// cannot be set up), or a runtime failure (exit code 1: the admin API cannot listen, a
/// controller task stopped).
pub async fn run<B: Bind>(
    settings: Settings,
    policies: Vec<Policy>,
    binder: &B,
    mut reloader: Reloader,
    mut hangup: mpsc::Receiver<()>,
) -> Result<(), RunError> {
    let auth = super::preflight::check(&settings)
        .map_err(|problems| RunError::config(problems.join("\n")))?;
    let telemetry = Telemetry::new(Clock::system(), events::CAPACITY);
    // The policies loaded (a failed load exits before here); reloads record theirs too.
    telemetry
        .metrics
        .record_policy_load(true, unix_secs(&telemetry));
    // This instance's vantage point reads "not suspect" from the start, not absent.
    telemetry
        .metrics
        .record_vantage_points(&[(settings.vantage.clone(), None)]);
    let prober = prober(&settings, &telemetry)?;
    let mut extra = tokio::task::JoinSet::new();
    let past = past(&settings).await;
    let notified = notify::Notified::new(past.decisions);
    let notifier = webhooks(&settings, &telemetry, &mut extra, &notified)?;
    let (journal, saved, audit) = journal(&settings, &telemetry.metrics).await?;
    let (builder, journal, saved) =
        join_cluster(&settings, &telemetry, &policies, (journal, saved)).await?;
    let mut daemon = builder
        .engine(settings.engine.engine_settings())
        .vantage(settings.vantage.clone())
        .resync(settings.reconcile.resync)
        .calls_per_minute(settings.reconcile.provider_calls_per_minute)
        .journal(journal, saved)
        .telemetry(telemetry.clone())
        .prober(prober)
        .start()
        .map_err(|e| RunError::runtime(e).context("building the prober"))?;
    // Subscribed before any service is attached, so no switch is missed; a reload replaces
    // the policy set it reads.
    if let (Some(member), Some(cluster)) = (daemon.cluster().cloned(), &settings.cluster) {
        votes::join(&member, cluster, &telemetry, &daemon.commands(), &mut extra).await;
    }
    share_through_etcd(&daemon, &policies, &audit, &mut extra);
    let (timelines, timeline_task) = timeline::spawn(
        &telemetry,
        Some(audit),
        settings.dns.clone(),
        daemon.controller().policies(),
    );
    timelines.restore(past.timelines);
    attach_canaries(&mut daemon, &settings)?;
    let binder = &VotingBinder {
        inner: binder,
        registry: vote_listener(&settings, own_view(&daemon), &telemetry, &mut extra).await?,
        settings: &settings.route53,
    };
    for policy in &policies {
        let provider = binder.bind(policy).await.map_err(RunError::config)?;
        daemon
            .attach(policy, Arc::new(provider))
            .map_err(RunError::config)?;
    }
    // The controller keeps the set in force (and the engine its own): this copy would be a
    // third, about 2.8 kB per service, for as long as the daemon runs.
    drop(policies);
    let admin = admin::AdminState::new(&telemetry, Some(daemon.commands()), auth, timelines);
    serve_admin(&settings, admin, &mut extra).await?;
    tracing::info!(vantage = %settings.vantage, "gslb running (policies reload on SIGHUP and file changes; daemon settings need a restart)");
    let outcome = serve(&mut daemon, &mut extra, binder, &mut reloader, &mut hangup).await;
    extra.shutdown().await;
    daemon.stop().await;
    // After the engine's last events: open timelines are audited as interrupted.
    timeline_task.stop().await;
    // Webhook messages still queued get a short, bounded chance to go out.
    notifier.drain(notify::DRAIN_TIMEOUT).await;
    outcome
}

/// A [`Builder`] of `policies`, with the journal and the drills to load first. With
/// `[cluster]`: connects to etcd and starts keeping this instance's lease, for a builder that
/// joins each service's election; the journal then keeps drills in etcd and leaves their
/// expiries to the shared drills ([`shared_drills`]), and the state file's drills are not
/// loaded (etcd is the only drill store). Without it: a plain builder, the journal and the
/// saved drills as they are.
///
/// # Errors
/// `[cluster]` that leaves no room for a write, or a TLS file that cannot be read (exit code 2).
async fn join_cluster(
    settings: &Settings,
    telemetry: &Telemetry,
    policies: &[Policy],
    (journal, saved): (Journal, Vec<Override>),
) -> Result<(Builder, Journal, Vec<Override>), RunError> {
    let builder = Builder::new(policies.to_vec());
    let Some(cluster) = &settings.cluster else {
        return Ok((builder, journal, saved));
    };
    if !saved.is_empty() {
        tracing::warn!(
            drills = saved.len(),
            "the drill state file lists drills; in a cluster etcd is the only drill store, so they are not loaded"
        );
    }
    let errors = ErrorCounter::new(telemetry.metrics.cluster_etcd_errors_total.clone())
        .counting_requests(telemetry.metrics.cluster_etcd_requests_total.clone());
    let member = Cluster::start(cluster, settings.vantage.clone(), errors)
        .await
        .map_err(|e| match e {
            ClusterError::Settings(_) => RunError::config(e),
            ClusterError::Connect(_) => {
                RunError::config(e).context("connecting to etcd ([cluster])")
            }
        })?;
    let store = DrillStore::Etcd(Box::new(drill_store::Shared {
        clients: member.clients.clone(),
        vantage: settings.vantage.clone(),
        coordinated: member.coordinated(),
    }));
    Ok((
        builder.cluster(Arc::new(member)),
        journal.in_cluster(store),
        Vec::new(),
    ))
}

/// With `[cluster]`: keeps `policies`' safety state and the drills shared through etcd, on
/// `tasks` (see [`cluster::keep_safety`], [`shared_drills::keep_drills`]).
fn share_through_etcd(
    daemon: &Daemon,
    policies: &[Policy],
    audit: &AuditLog,
    tasks: &mut tokio::task::JoinSet<()>,
) {
    let Some(member) = daemon.cluster() else {
        return;
    };
    let telemetry = &daemon.telemetry;
    let services = policies.iter().map(|p| p.service.clone()).collect();
    tasks.spawn(cluster::keep_safety(
        member.clone(),
        services,
        daemon.commands(),
        telemetry.clock,
    ));
    tasks.spawn(shared_drills::keep_drills(
        member.clone(),
        daemon.commands(),
        Some(audit.clone()),
        telemetry.clock,
    ));
}

/// With `[cluster]`: what a data-plane vote follows while coordination is lost (this
/// instance's own verdicts, see [`dataplane::OwnView`]).
fn own_view(daemon: &Daemon) -> Option<dataplane::OwnView> {
    daemon.cluster().map(|member| dataplane::OwnView {
        coordinated: member.coordinated(),
        verdicts: member.outputs.verdicts(),
    })
}

/// With a service in Route 53 data-plane mode: starts the vote listener
/// (`[route53.data_plane] listen`) on `tasks`; the registry it reads (votes following `own`
/// while coordination is lost, each board's tally read into `telemetry`) is returned for the
/// binder to fill. Without one: an empty registry and no listener.
///
/// # Errors
/// The listener cannot bind or the tally's client cannot be built (exit code 1), or its TLS
/// files cannot be read (exit code 2).
async fn vote_listener(
    settings: &Settings,
    own: Option<dataplane::OwnView>,
    telemetry: &Telemetry,
    tasks: &mut tokio::task::JoinSet<()>,
) -> Result<VoteRegistry, RunError> {
    let registry = VoteRegistry::new(dataplane::stale_after(settings.reconcile.resync), own)
        .with_tally(telemetry.clone())
        .map_err(|e| RunError::runtime(e).context("building the vote tally's HTTP client"))?;
    let r53 = &settings.route53;
    let Some(dp) = r53.data_plane.as_ref().filter(|_| {
        r53.modes
            .keys()
            .any(|service| r53.data_plane_of(service).is_some())
    }) else {
        return Ok(registry);
    };
    match spawn_vote_listener(dp, registry.clone(), tasks).await {
        Ok(_) => Ok(registry),
        Err(e @ VoteServerError::Tls(_)) => Err(RunError::config(e)),
        Err(e) => Err(RunError::runtime(e)),
    }
}

/// Listens on `admin.listen` (and `admin.metrics_listen` when set) and serves the admin API
/// on `tasks`, over TLS when `admin.tls_cert_file` is set (reloaded on change).
///
/// # Errors
/// The TLS certificate or key cannot be loaded (exit code 2), an address cannot be bound
/// (exit code 1).
async fn serve_admin(
    settings: &Settings,
    state: admin::AdminState,
    tasks: &mut tokio::task::JoinSet<()>,
) -> Result<(), RunError> {
    let tls = match (&settings.admin.tls_cert_file, &settings.admin.tls_key_file) {
        (Some(cert), Some(key)) => {
            let store = Arc::new(admin::tls::CertStore::load(cert, key).map_err(RunError::config)?);
            let acceptor = store.acceptor().map_err(RunError::config)?;
            tasks.spawn(store.watch());
            Some(acceptor)
        }
        _ => None,
    };
    let metrics = settings.admin.metrics_listen;
    let mut listeners = vec![(
        settings.admin.listen,
        admin::Routes::All {
            with_metrics: metrics.is_none(),
        },
    )];
    listeners.extend(metrics.map(|m| (m, admin::Routes::Metrics)));
    for (addr, routes) in listeners {
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
            RunError::runtime(e).context(format!("binding the admin API on {addr}"))
        })?;
        let (state, tls) = (state.clone(), tls.clone());
        tasks.spawn(async move {
            if let Err(e) = admin::serve_on(listener, tls, state, routes).await {
                tracing::error!(error = %e, "admin API stopped");
            }
        });
    }
    Ok(())
}

/// Waits for SIGTERM or Ctrl-C, reloading the policies on SIGHUP and file changes meanwhile.
///
/// # Errors
/// A controller task (or one of `extra`: webhooks, admin API) stopped unexpectedly.
async fn serve<B: Bind>(
    daemon: &mut Daemon,
    extra: &mut tokio::task::JoinSet<()>,
    binder: &B,
    reloader: &mut Reloader,
    hangup: &mut mpsc::Receiver<()>,
) -> Result<(), RunError> {
    let shutdown = crate::io::signals::shutdown();
    tokio::pin!(shutdown);
    let mut poll = tokio::time::interval(reload::POLL_INTERVAL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    poll.tick().await;
    loop {
        let trigger = tokio::select! {
            () = &mut shutdown => {
                tracing::info!("shutting down");
                return Ok(());
            }
            Some(r) = daemon.tasks().join_next() => match r {
                // A reload stopped the tasks of a changed or removed service.
                Err(e) if e.is_cancelled() => continue,
                _ => return Err(stopped()),
            },
            Some(_) = extra.join_next() => return Err(stopped()),
            Some(()) = hangup.recv() => Trigger::Signal,
            _ = poll.tick() => Trigger::Poll,
        };
        reload(daemon, binder, reloader, trigger).await;
    }
}

fn stopped() -> RunError {
    RunError::runtime("a controller task stopped unexpectedly")
}

/// Starts the `[[notify.webhooks]]` sinks on `tasks`.
///
/// # Errors
/// A webhook URL cannot be resolved (exit code 2) or a sink cannot be built (exit code 1).
fn webhooks(
    settings: &Settings,
    telemetry: &Telemetry,
    tasks: &mut tokio::task::JoinSet<()>,
    notified: &notify::Notified,
) -> Result<notify::Notifier, RunError> {
    let webhooks = settings
        .notify
        .resolve(|v| std::env::var(v).ok())
        .map_err(RunError::config)?;
    notify::spawn(tasks, &webhooks, telemetry, &settings.vantage, notified)
        .map_err(RunError::runtime)
}

/// What the earlier run left in the audit log ([`Past::read`], on the blocking pool): its
/// timelines and last decisions. An unreadable log is logged and read as empty: the history
/// is lost from `/v1/events`, nothing else.
async fn past(settings: &Settings) -> Past {
    let path = settings.state.audit_log();
    let read = tokio::task::spawn_blocking(move || Past::read(&path)).await;
    match read {
        Ok(Ok(past)) => {
            if past.skipped > 0 {
                tracing::warn!(
                    lines = past.skipped,
                    "audit log lines that are not audit entries skipped"
                );
            }
            tracing::info!(
                timelines = past.timelines.len(),
                "failover timelines read back from the audit log"
            );
            past
        }
        Ok(Err(e)) => {
            tracing::error!(error = %e, "cannot read the audit log back; earlier timelines are not listed");
            Past::default()
        }
        Err(e) => {
            tracing::error!(error = %e, "reading the audit log back failed");
            Past::default()
        }
    }
}

/// The prober, with the open-file limit raised first and its metrics registered.
fn prober(settings: &Settings, telemetry: &Telemetry) -> Result<Arc<Prober>, RunError> {
    match probe::raise_open_file_limit() {
        Ok(n) => tracing::debug!(open_files = n, "open-file limit"),
        Err(e) => tracing::warn!(error = %e, "cannot raise the open-file limit"),
    }
    let prober = Prober::with_limits(&settings.dns, &settings.probing)
        .map_err(|e| RunError::runtime(e).context("building the prober"))?;
    let prober = Arc::new(prober);
    telemetry
        .metrics
        .register_prober(&prober)
        .map_err(|e| RunError::runtime(e).context("registering the probe metrics"))?;
    tracing::info!(
        max_in_flight = prober.max_in_flight(),
        "probes in flight bounded"
    );
    Ok(prober)
}

/// The engine loop's journal (recording, audit log, drill state file), the drills the state
/// file holds, and the audit log for the timeline task.
async fn journal(
    settings: &Settings,
    metrics: &crate::ops::metrics::Metrics,
) -> Result<(Journal, Vec<Override>, AuditLog), RunError> {
    let state = StateFile::new(settings.state.overrides_file());
    let saved = state.load().map_err(RunError::config)?;
    let audit = AuditLog::open(settings.state.audit_log())
        .await
        .map_err(|e| RunError::config(e).context("opening the audit log ([state] dir)"))?;
    let dropped = |log: &str| metrics.log_lines_dropped_total.with_label_values(&[log]);
    audit.count_drops_in(dropped("audit"));
    let recording = match &settings.record.observations {
        Some(path) => Some(
            JsonlWriter::open(path, jsonl::DEFAULT_CAPACITY)
                .await
                .map_err(|e| {
                    RunError::config(e)
                        .context("opening the observation recording ([record] observations)")
                })
                .inspect(|w| w.count_drops_in(dropped("recording")))?,
        ),
        None => None,
    };
    let journal = Journal::new(recording, Some(audit.clone()), DrillStore::File(state));
    Ok((journal, saved, audit))
}

/// Starts probing the `[engine] canaries`.
fn attach_canaries(daemon: &mut Daemon, settings: &Settings) -> Result<(), RunError> {
    let (spec, endpoints) = settings
        .engine
        .canary_endpoints()
        .map_err(RunError::config)?;
    let targets = endpoints
        .iter()
        .map(|e| daemon.prober().target(&spec, e))
        .collect::<Result<Vec<_>, _>>()
        .map_err(RunError::config)?;
    daemon.attach_canaries(targets);
    Ok(())
}

fn unix_secs(telemetry: &Telemetry) -> f64 {
    Duration::from_millis(telemetry.clock.now().0).as_secs_f64()
}

/// Reloads the policies when their files changed: the whole new set is loaded, validated and
/// bound to its providers and probe targets first; on any error the last good set keeps
/// running (logged with file, key and reason; `gslb_policy_reload_success` 0).
async fn reload<B: Bind>(
    daemon: &mut Daemon,
    binder: &B,
    reloader: &mut Reloader,
    trigger: Trigger,
) {
    let telemetry = daemon.telemetry.clone();
    let failed = |reloader: &mut Reloader, error: &dyn std::fmt::Display| {
        tracing::error!(
            trigger = trigger.as_str(),
            "policy reload failed; the last good policies keep running:\n{error}"
        );
        telemetry
            .metrics
            .record_policy_load(false, unix_secs(&telemetry));
        reloader.settle(false);
    };
    // Reads and parses files: off the async workers' hot path.
    let policies = match tokio::task::block_in_place(|| reloader.check(trigger)) {
        Ok(Some(p)) => p,
        Ok(None) => {
            if trigger == Trigger::Signal {
                tracing::info!("SIGHUP: the policy files are unchanged; nothing to reload");
            }
            return;
        }
        Err(e) => return failed(reloader, &e),
    };
    let diff = daemon.controller().diff(policies);
    let mut bound = Vec::new();
    for p in diff.changed_policies() {
        let checked = match controller::probe_targets(p, daemon.prober()) {
            Ok(_) => binder.bind(p).await.map_err(|e| error_chain(&*e)),
            Err(e) => Err(error_chain(&e)),
        };
        match checked {
            Ok(provider) => bound.push((p.clone(), provider)),
            Err(e) => {
                let e = format!("service {}: {e}", p.service);
                return failed(reloader, &e);
            }
        }
    }
    daemon.controller().reload(&diff).await;
    for service in &diff.removed {
        binder.forget(service);
    }
    for (policy, provider) in bound {
        if let Err(e) = daemon.attach(&policy, Arc::new(provider)) {
            // Checked above; a target that builds once builds again.
            tracing::error!(service = %policy.service, error = %e, "cannot probe the reloaded service");
        }
    }
    tracing::info!(
        changed = %List(&diff.changed),
        unchanged = %List(&diff.unchanged),
        removed = %List(&diff.removed),
        "policies reloaded"
    );
    telemetry
        .metrics
        .record_policy_load(true, unix_secs(&telemetry));
    reloader.settle(true);
}

/// Loads the daemon settings and the policies they name, with a [`Reloader`] of the policy
/// files fingerprinted just before they were read: a change from then on (during
/// `run --provision` too) is a reload.
///
/// # Errors
/// Bad settings or policies (exit code 2), every problem with file, key and reason.
pub fn load(config: &std::path::Path) -> Result<(Settings, Vec<Policy>, Reloader), RunError> {
    let settings = Settings::load(config).map_err(RunError::config)?;
    let reloader = Reloader::new(settings.policies.clone());
    let policies = policy::load(&settings.policies).map_err(RunError::config)?;
    let policies = policies.into_iter().map(|(_, p)| p).collect();
    Ok((settings, policies, reloader))
}
