//! `gslb demo --cluster`: three gslb instances (vantage points) and a three-member etcd on
//! loopback, one in-process provider they share. One vantage point alone sees the primary
//! down: it is outvoted, no failover. Then two do: one failover, written once, by the elected
//! writer. Then the writer is killed: its lease runs out and another instance takes over with
//! a larger epoch. Each instance's probes leave from its own address (127.0.29.11-13), and the
//! primary origin fails only for the addresses chosen. etcd runs as in production: TLS, one
//! user per vantage point named by its client certificate, auth on; one instance's certificate
//! cannot forge another's vote ([`super::access`]).
//!
//! Without `etcd` on `PATH` it says how to install it and fails.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gslb_provider::{FailoverStyle, MemoryProvider};
use tokio::task::JoinSet;

use super::{DemoError, say};
use super::{access, etcd};
use crate::config::ClusterSettings;
use crate::daemon::builder::{Builder, Daemon};
use crate::daemon::cluster::Cluster;
use crate::daemon::votes;
use crate::io::clock::Clock;
use crate::io::coordination::ErrorCounter;
use crate::io::origin::Origin;
use crate::io::probe::{DnsSettings, Prober, ProbingSettings};
use crate::ops::telemetry::Telemetry;
use gslb_core::model::{ServiceId, VantageId, Verdict};
use gslb_core::policy::Policy;

/// The three vantage points, named for where they would run.
const VANTAGES: [&str; 3] = ["aws-seoul", "aws-tokyo", "gcp-osaka"];
/// How long any one phase may take before the demo gives up.
const PHASE_DEADLINE: Duration = Duration::from_secs(30);
/// The instances' lease TTL: 4 s, the shortest with room for a write.
const LEASE_TTL: &str = "4s";

/// One in-process instance.
struct Instance {
    vantage: String,
    source: IpAddr,
    daemon: Option<Daemon>,
    _votes: JoinSet<()>,
}

/// Runs the cluster demo, printing as it goes.
///
/// # Errors
/// [`DemoError::NoEtcd`] without `etcd` on `PATH`; otherwise as the single-instance demo.
pub async fn run(out: &mut impl std::io::Write) -> Result<(), DemoError> {
    let Some(exe) = etcd::find() else {
        return Err(DemoError::NoEtcd);
    };
    let mut users = VANTAGES.to_vec();
    users.push(crate::io::coordination::access::ROOT);
    let etcd = etcd::Etcd::start(&exe, &users).await?;
    say(
        out,
        &format!("etcd: three members at {}\n", etcd.endpoints().join(", ")),
    );
    let vantages: Vec<VantageId> = VANTAGES.iter().map(|v| VantageId((*v).into())).collect();
    access::set_up(out, &etcd, &vantages).await?;
    // Tokyo answers for as long as the demo runs (it stops when dropped).
    let (seoul, _tokyo, policy) = super::origins_and_policy().await?;
    let provider = Arc::new(MemoryProvider::new(
        FailoverStyle::Enablement,
        &["seoul".into(), "tokyo".into()],
    ));
    let mut instances = Vec::new();
    for (i, v) in VANTAGES.iter().enumerate() {
        instances.push(Instance::start(i, v, &policy, &etcd, provider.clone()).await?);
    }
    let (writer, epoch) = wait(|| elected(&instances, None), "a writer elected").await?;
    say(
        out,
        &format!(
            "three instances ({}), probes from 127.0.29.11-13; writer of {}: {} (epoch {epoch}); min_voters 2 of 3\n",
            VANTAGES.join(", "),
            policy.service,
            instances[writer].vantage
        ),
    );
    access::forge(out, &etcd, VANTAGES[1], VANTAGES[0], &policy).await?;
    outvoted(out, &instances, &seoul, &provider).await?;
    failover(out, &instances, &seoul, &provider).await?;
    takeover(out, &mut instances, writer, epoch).await?;
    for x in &mut instances {
        if let Some(d) = x.daemon.take() {
            d.stop().await;
        }
    }
    Ok(())
}

impl Instance {
    async fn start(
        i: usize,
        vantage: &str,
        policy: &Policy,
        etcd: &etcd::Etcd,
        provider: Arc<MemoryProvider>,
    ) -> Result<Self, DemoError> {
        let tls = etcd.tls(vantage);
        let text = format!(
            "endpoints = {:?}\nvantages = {VANTAGES:?}\nlease_ttl = \"{LEASE_TTL}\"\nheartbeat = \"500ms\"\nprefix = {:?}\n[tls]\nca = {:?}\ncert = {:?}\nkey = {:?}\n",
            etcd.endpoints(),
            access::PREFIX,
            tls.ca,
            tls.cert,
            tls.key
        );
        let settings: ClusterSettings =
            toml::from_str(&text).map_err(|e| DemoError::Cluster(e.to_string()))?;
        let telemetry = Telemetry::new(Clock::system(), 4096);
        let errors = ErrorCounter::new(telemetry.metrics.cluster_etcd_errors_total.clone())
            .counting_requests(telemetry.metrics.cluster_etcd_requests_total.clone());
        let id = VantageId(vantage.into());
        let member = Cluster::start(&settings, id.clone(), errors)
            .await
            .map_err(|e| DemoError::Cluster(e.to_string()))?;
        let member = Arc::new(member);
        let source = IpAddr::V4(Ipv4Addr::new(127, 0, 29, 11 + u8::try_from(i).unwrap_or(0)));
        let probing = ProbingSettings {
            source_address: Some(source),
            ..ProbingSettings::default()
        };
        let prober = Prober::with_limits(&DnsSettings::default(), &probing)?;
        let mut daemon = Builder::new(vec![policy.clone()])
            .vantage(id)
            .resync(Duration::from_secs(1))
            .telemetry(telemetry.clone())
            .prober(Arc::new(prober))
            .cluster(member.clone())
            .start()?;
        let mut tasks = JoinSet::new();
        votes::join(
            &member,
            &settings,
            &telemetry,
            &daemon.commands(),
            &mut tasks,
        )
        .await;
        daemon.attach(policy, provider)?;
        Ok(Self {
            vantage: vantage.into(),
            source,
            daemon: Some(daemon),
            _votes: tasks,
        })
    }

    /// Its status of the demo service: (role, writer's epoch, serving pool the engine wants).
    fn seen(&self) -> Option<(&'static str, Option<u64>, Option<String>)> {
        let board = self.daemon.as_ref()?.telemetry.board.snapshot();
        let s = board.get(&ServiceId("demo-api".into()))?;
        let c = s.apply.cluster.as_ref()?;
        Some((c.role, c.epoch, s.active.as_ref().map(|p| p.0.clone())))
    }
}

/// The writer every running instance (but `skip`) agrees on, and its epoch.
fn elected(instances: &[Instance], skip: Option<usize>) -> Option<(usize, u64)> {
    let mut writer = None;
    let mut epochs = Vec::new();
    for (i, x) in instances
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != skip)
    {
        let (role, epoch, _) = x.seen()?;
        if role == "writer" {
            writer = Some(i);
        }
        epochs.push(epoch?);
    }
    let first = *epochs.first()?;
    epochs
        .iter()
        .all(|e| *e == first)
        .then_some((writer?, first))
}

/// Polls `check` every 50 ms until it returns `Some`, within [`PHASE_DEADLINE`].
async fn wait<T>(mut check: impl FnMut() -> Option<T>, what: &'static str) -> Result<T, DemoError> {
    let deadline = Instant::now() + PHASE_DEADLINE;
    loop {
        if let Some(t) = check() {
            return Ok(t);
        }
        if Instant::now() > deadline {
            return Err(DemoError::Timeout(what));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether every instance's engine has seen `vantage`'s probes of seoul fail (its vote down).
fn sees_down(instances: &[Instance], vantage: &str) -> bool {
    instances.iter().all(|x| {
        x.daemon.as_ref().is_some_and(|d| {
            d.telemetry.board.snapshot().values().any(|s| {
                s.pools.iter().any(|p| {
                    p.pool.0 == "seoul"
                        && p.state.as_ref().is_some_and(|st| {
                            st.by_vantage
                                .get(&VantageId(vantage.into()))
                                .is_some_and(|v| v.verdict == Verdict::Unhealthy)
                        })
                })
            })
        })
    })
}

async fn outvoted(
    out: &mut impl std::io::Write,
    instances: &[Instance],
    seoul: &Origin,
    provider: &MemoryProvider,
) -> Result<(), DemoError> {
    let lone = &instances[0];
    seoul.fail_for([lone.source]);
    say(
        out,
        &format!("\n1. seoul fails only for {}'s probes\n", lone.vantage),
    );
    wait(
        || sees_down(instances, &lone.vantage).then_some(()),
        "the lone vote seen",
    )
    .await?;
    let serving: Vec<String> = instances
        .iter()
        .filter_map(|x| x.seen().and_then(|s| s.2))
        .collect();
    say(
        out,
        &format!(
            "   every instance sees {}'s vote down and two votes up: outvoted, no failover (engines want {}); provider writes: {}\n",
            lone.vantage,
            serving.join(", "),
            provider.writes().len()
        ),
    );
    Ok(())
}

async fn failover(
    out: &mut impl std::io::Write,
    instances: &[Instance],
    seoul: &Origin,
    provider: &MemoryProvider,
) -> Result<(), DemoError> {
    seoul.fail_for([instances[0].source, instances[1].source]);
    say(
        out,
        &format!(
            "\n2. seoul fails for {} and {} too\n",
            instances[0].vantage, instances[1].vantage
        ),
    );
    let started = Instant::now();
    wait(
        || (!provider.writes().is_empty()).then_some(()),
        "the failover write",
    )
    .await?;
    let took = started.elapsed();
    wait(
        || {
            instances
                .iter()
                .all(|x| x.seen().and_then(|s| s.2).as_deref() == Some("tokyo"))
                .then_some(())
        },
        "every engine on tokyo",
    )
    .await?;
    say(
        out,
        &format!(
            "   quorum (2 of 3) says seoul is down: failover to tokyo, written {} ms after the second vote went down; provider writes: {} (only the writer wrote)\n",
            took.as_millis(),
            provider.writes().len()
        ),
    );
    Ok(())
}

async fn takeover(
    out: &mut impl std::io::Write,
    instances: &mut [Instance],
    writer: usize,
    epoch: u64,
) -> Result<(), DemoError> {
    say(
        out,
        &format!(
            "\n3. the writer, {}, is killed\n",
            instances[writer].vantage
        ),
    );
    let killed = Instant::now();
    if let Some(d) = instances[writer].daemon.take() {
        d.stop().await;
    }
    let (next, new_epoch) = wait(
        || elected(instances, Some(writer)).filter(|(_, e)| *e != epoch),
        "another writer",
    )
    .await?;
    say(
        out,
        &format!(
            "   its lease ran out; {} took over {} ms later with epoch {new_epoch} (was {epoch}); it writes after its takeover delay (1s), fenced by that epoch\n",
            instances[next].vantage,
            killed.elapsed().as_millis()
        ),
    );
    Ok(())
}
