//! `gslb demo`: the whole loop on one machine with nothing else installed.
//!
//! Two loopback origins stand in for Seoul and Tokyo; the real probers, engine, service loop
//! and reconciler run against an in-process provider with 200 ms probes. The demo stops the
//! Seoul origin, prints the failover timeline's drill report ([`gslb_core::timeline::report`]:
//! first failed probe, marked down, decision, provider accepted, in sync, with detection,
//! decision and apply times), then restores Seoul and shows the failback rule at work.

mod access;
mod cluster;
mod etcd;
pub mod pki;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use gslb_provider::{Change, FailoverStyle, MemoryProvider};
use tokio::sync::broadcast;

use crate::daemon::builder::{Builder, Daemon};
use crate::io::clock::Clock;
use crate::io::origin::Origin;
use crate::ops::telemetry::Telemetry;
use crate::ops::timeline::TimelineStore;
use gslb_core::engine::Rule;
use gslb_core::event::Event;
use gslb_core::model::{VantageId, Verdict};
use gslb_core::policy::{self, Policy};
use gslb_core::timeline::{Status, report};

/// The embedded policy template.
const POLICY: &str = include_str!("../demo_policy.toml");
/// How long any one demo phase may take before the demo gives up.
const PHASE_DEADLINE: Duration = Duration::from_secs(15);

/// Why the demo failed.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// A local origin could not be started.
    #[error("cannot start a local origin: {0}")]
    Origin(#[from] std::io::Error),
    /// The embedded policy did not validate (a bug).
    #[error("embedded demo policy is invalid:\n{0}")]
    Policy(#[from] policy::PolicyErrors),
    /// The prober could not be built.
    #[error("cannot build the prober: {0}")]
    Probe(#[from] crate::io::probe::ProbeError),
    /// A phase did not complete in time.
    #[error("timed out waiting for: {0}")]
    Timeout(&'static str),
    /// `--cluster` without an `etcd` executable on `PATH`.
    #[error(
        "gslb demo --cluster needs an etcd executable on PATH: install it (Debian, Ubuntu: \
         apt-get install etcd-server) or put etcd from https://github.com/etcd-io/etcd/releases \
         on PATH, then run it again"
    )]
    NoEtcd,
    /// The cluster could not be joined.
    #[error("cannot join the demo cluster: {0}")]
    Cluster(String),
}

/// `gslb demo` options.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DemoArgs {
    /// Three gslb instances and a three-member etcd on loopback (needs `etcd` on PATH):
    /// vantage-point quorum, one fenced writer, a writer taking over.
    #[arg(long)]
    pub cluster: bool,
}

/// The demo's running parts: the origins, the controller and what watches it.
struct Demo {
    policy: Policy,
    seoul: Origin,
    /// Kept running for the whole demo.
    _tokyo: Origin,
    clock: Clock,
    provider: Arc<MemoryProvider>,
    daemon: Daemon,
    rx: broadcast::Receiver<Event>,
    timelines: TimelineStore,
}

/// Runs the demo (`args.cluster`: the cluster demo, [`cluster`]) and returns the
/// report it printed, line by line, as it goes.
///
/// # Errors
/// See [`DemoError`].
pub async fn run(args: DemoArgs, out: &mut impl std::io::Write) -> Result<(), DemoError> {
    if args.cluster {
        return cluster::run(out).await;
    }
    let mut demo = Demo::start().await?;
    say(
        out,
        &intro(&demo.policy, demo.seoul.addr(), demo._tokyo.addr()),
    );
    demo.steady(out).await?;
    demo.failover(out).await?;
    demo.failback(out).await?;
    demo.daemon.stop().await;
    Ok(())
}

/// The two loopback origins (Seoul, Tokyo) and the embedded demo policy probing them.
async fn origins_and_policy() -> Result<(Origin, Origin, Policy), DemoError> {
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let seoul = Origin::start(loopback, "seoul").await?;
    let tokyo = Origin::start(loopback, "tokyo").await?;
    let text = POLICY
        .replace("{seoul}", &seoul.addr().to_string())
        .replace("{tokyo}", &tokyo.addr().to_string());
    let policy = policy::parse(Path::new("<embedded demo policy>"), &text)?;
    Ok((seoul, tokyo, policy))
}

impl Demo {
    /// Starts the two origins and the controller on the embedded policy.
    async fn start() -> Result<Self, DemoError> {
        let (seoul, tokyo, policy) = origins_and_policy().await?;
        let clock = Clock::system();
        let provider = Arc::new(MemoryProvider::new(
            FailoverStyle::Enablement,
            &["seoul".into(), "tokyo".into()],
        ));
        let mut daemon = Builder::new(vec![policy.clone()])
            .vantage(VantageId("demo".into()))
            .resync(Duration::from_secs(5))
            .telemetry(Telemetry::new(clock, 4096))
            .start()?;
        let rx = daemon.telemetry.events.subscribe();
        daemon.attach(&policy, provider.clone())?;
        Ok(Self {
            policy,
            seoul,
            _tokyo: tokyo,
            clock,
            provider,
            daemon,
            rx,
            timelines: TimelineStore::default(),
        })
    }

    /// Waits for the first event `pick` extracts something from (see [`wait_for`]).
    async fn wait<T>(
        &mut self,
        what: &'static str,
        pick: impl FnMut(&Event) -> Option<T>,
    ) -> Result<T, DemoError> {
        wait_for(&mut self.rx, &self.timelines, what, pick).await
    }

    /// Both pools healthy, Seoul serving.
    async fn steady(&mut self, out: &mut impl std::io::Write) -> Result<(), DemoError> {
        let mut healthy = std::collections::BTreeSet::new();
        self.wait("seoul and tokyo healthy, seoul serving", |e| {
            if let Event::EndpointVerdict {
                pool,
                verdict: Verdict::Healthy,
                ..
            } = e
            {
                healthy.insert(pool.0.clone());
            }
            (healthy.len() == 2).then_some(())
        })
        .await?;
        say(
            out,
            "  steady state: both pools healthy, seoul serving, provider untouched\n",
        );
        Ok(())
    }

    /// Stops Seoul and prints the failover timeline's drill report.
    async fn failover(&mut self, out: &mut impl std::io::Write) -> Result<(), DemoError> {
        // Drill: stop Seoul. The failover timeline records the phases; the report is its own.
        let injected = self.clock.now();
        self.seoul.stop().await;
        let (mut plan, mut failover) = (Vec::new(), None);
        let timelines = self.timelines.clone();
        let timeline = self
            .wait("failover timeline in sync", |e| {
                match e {
                    Event::Applied { plan: p, .. } => plan.clone_from(p),
                    Event::Decision(d) if d.rule == Rule::Failover => failover = Some(d.clone()),
                    _ => {}
                }
                timelines
                    .list(None, 1)
                    .into_iter()
                    .find(|t| t.status == Status::Complete && t.rule == Rule::Failover.as_str())
            })
            .await?;
        say(out, "\nDrill report: Seoul origin stopped\n");
        say(
            out,
            &format!(
                "  failure injected: seoul origin stopped at {}\n",
                injected.rfc3339()
            ),
        );
        say(out, &report::render(&timeline));
        say(out, &format!("  provider write: {}\n", describe(&plan)));
        let in_sync = timeline.phases.provider_in_sync.unwrap_or(injected);
        say(
            out,
            &format!(
                "  detection bound: fall {} x interval {} ms + timeout {} ms + {} = {} ms at most (failure -> decision)\n  failover time  {} ms (failure injected -> provider in sync)\n",
                self.policy.thresholds.fall,
                self.policy.probe.interval.as_millis(),
                self.policy.probe.timeout.as_millis(),
                waits_ms(&self.policy),
                self.policy.detection_bound().as_millis(),
                in_sync.since(injected).as_millis(),
            ),
        );
        say(out, "  reasons:\n");
        say_reasons(out, &failover.map(|d| d.reasons).unwrap_or_default());
        Ok(())
    }

    /// Restores Seoul and shows the failback rule at work.
    async fn failback(&mut self, out: &mut impl std::io::Write) -> Result<(), DemoError> {
        // Restore Seoul: the failback rule decides what happens next.
        let restored = self.clock.now();
        self.seoul.start_again().await?;
        let up_at = self
            .wait("seoul healthy again", |e| match e {
                Event::EndpointVerdict {
                    pool,
                    verdict: Verdict::Healthy,
                    at,
                    ..
                } if pool.0 == "seoul" => Some(*at),
                _ => None,
            })
            .await?;
        let held = self
            .wait("failback rule", |e| match e {
                Event::Decision(d) if d.rule == Rule::FailbackManual => Some(d.clone()),
                _ => None,
            })
            .await?;
        say(out, "\nFailback: Seoul origin restored\n");
        say(
            out,
            &format!(
                "  seoul healthy again (rise {}) {} ms after the restore\n",
                self.policy.thresholds.rise,
                up_at.since(restored).as_millis()
            ),
        );
        say(
            out,
            &format!(
                "  decision: {} -> {} keeps serving\n",
                held.rule.as_str(),
                held.active.as_ref().map_or("-", |p| p.0.as_str())
            ),
        );
        say_reasons(out, &held.reasons);
        let serving = self
            .provider
            .snapshot()
            .active(&["seoul".into(), "tokyo".into()])
            .cloned()
            .unwrap_or_default();
        let writes = self.provider.writes().len();
        say(
            out,
            &format!("  provider now serves {serving}; {writes} write(s) in total\n"),
        );
        let board = self.daemon.telemetry.board.snapshot();
        if let Some(s) = board.values().next() {
            say(
                out,
                &format!("  status: apply state {}\n", s.apply.state.as_str()),
            );
        }
        say(
            out,
            &format!(
                "\nfailback = \"manual\": an operator moves traffic back (gslb drill restore --service {} --pool seoul --reason ...); with failback = \"auto\" it returns once seoul has been healthy for the failback hold ({} per consecutive failover), is not flap-suppressed, and the spacing rail ({}) allows it.\n",
                self.policy.service,
                humantime::format_duration(self.policy.failback_hold.step),
                humantime::format_duration(self.policy.spacing())
            ),
        );
        Ok(())
    }
}

fn intro(policy: &Policy, seoul: SocketAddr, tokyo: SocketAddr) -> String {
    format!(
        "gslb demo: service {} ({}), in-process provider standing in for Route 53\n  seoul (priority 1) origin http://{seoul}\n  tokyo (priority 2) origin http://{tokyo}\n  probe every {} ms, timeout {} ms, fall {}, rise {}, failback {}\n",
        policy.service,
        policy.hostname,
        policy.probe.interval.as_millis(),
        policy.probe.timeout.as_millis(),
        policy.thresholds.fall,
        policy.thresholds.rise,
        if policy.failback == gslb_core::policy::Failback::Manual {
            "manual"
        } else {
            "auto"
        },
    )
}

fn describe(plan: &[Change]) -> String {
    plan.iter()
        .map(|c| match c {
            Change::SetEnabled {
                pool,
                enabled: false,
                ..
            } => format!("{pool} disabled (verdict check inverted)"),
            Change::SetEnabled {
                pool,
                enabled: true,
                ..
            } => format!("{pool} enabled"),
            Change::SetOrder { to, .. } => format!("order {}", to.join(", ")),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn say_reasons(out: &mut impl std::io::Write, reasons: &[String]) {
    for r in reasons {
        say(out, &format!("    - {r}\n"));
    }
}

fn say(out: &mut impl std::io::Write, text: &str) {
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// Waits for the first event `pick` extracts something from, within [`PHASE_DEADLINE`]; every
/// event received feeds `timelines` first.
async fn wait_for<T>(
    rx: &mut broadcast::Receiver<Event>,
    timelines: &TimelineStore,
    what: &'static str,
    mut pick: impl FnMut(&Event) -> Option<T>,
) -> Result<T, DemoError> {
    let found = async {
        loop {
            match rx.recv().await {
                Ok(e) => {
                    timelines.apply(&e);
                    if let Some(t) = pick(&e) {
                        return Some(t);
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    };
    match tokio::time::timeout(PHASE_DEADLINE, found).await {
        Ok(Some(t)) => Ok(t),
        _ => Err(DemoError::Timeout(what)),
    }
}

/// The engine's waits in a failover as `confirm_target 150 ms`, joined by ` + `.
fn waits_ms(policy: &Policy) -> String {
    policy
        .failover_waits()
        .iter()
        .map(|(name, w)| format!("{name} {} ms", w.as_millis()))
        .collect::<Vec<_>>()
        .join(" + ")
}
