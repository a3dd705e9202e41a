//! `gslb plan` in a cluster (`[cluster]`): the other vantage points' votes, read from etcd, so
//! the plan evaluates what `gslb run` here would: the published verdicts, counted only for
//! vantage points whose heartbeat is seen changing within their freshness window on this
//! host's clock (a heartbeat key that merely exists proves nothing). Waits at most that window
//! (`3 x heartbeat`) for every peer's heartbeat to change.

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_client::GetOptions;
use gslb_core::engine::Input;
use gslb_core::model::{Millis, VantageId, Verdict};
use tokio::time::Instant;

use crate::config::ClusterSettings;
use crate::io::coordination::keys::VoteKey;
use crate::io::coordination::votes::parse_verdict;
use crate::io::coordination::{Clients, ErrorCounter};

/// How often the heartbeats are read while waiting for them to change.
const POLL: Duration = Duration::from_millis(100);

/// The other vantage points as read from etcd.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Peers {
    /// Whether etcd answered (else `gslb run` here would fail static).
    pub reachable: bool,
    /// Every peer's published verdicts.
    pub verdicts: Vec<(VoteKey, Verdict)>,
    /// Peers whose heartbeat was seen changing, with how long before the end of the read.
    pub fresh: BTreeMap<VantageId, Duration>,
}

impl Peers {
    /// The engine inputs that give an evaluation ending at `now` this view of the cluster:
    /// the cluster and its coordination at `start`, the verdicts, and a heartbeat of every
    /// fresh peer at each of `times` (the probe rounds), so they stay fresh throughout.
    pub fn inputs(
        &self,
        cluster: &ClusterSettings,
        me: &VantageId,
        start: Millis,
        times: &[Millis],
    ) -> Vec<(Millis, Input)> {
        let mut steps = vec![
            (
                start,
                Input::Cluster {
                    local: me.clone(),
                    vantages: cluster.vantages.clone(),
                    min_voters: cluster.min_voters(),
                    fresh_for: cluster.fresh_for(),
                },
            ),
            (
                start,
                Input::Coordination {
                    coordinated: self.reachable,
                },
            ),
        ];
        for (key, verdict) in &self.verdicts {
            let input = Input::RemoteVerdict {
                vantage: key.vantage.clone(),
                service: key.service.clone(),
                endpoint: key.endpoint.clone(),
                verdict: *verdict,
            };
            steps.push((start, input));
        }
        for at in times {
            for vantage in self.fresh.keys() {
                let vantage = vantage.clone();
                steps.push((*at, Input::Heartbeat { vantage }));
            }
        }
        steps
    }
}

/// Reads the other vantage points' votes and watches their heartbeats change for at most
/// `cluster.fresh_for()`. etcd not answering gives `reachable: false` and no votes.
pub async fn read(cluster: &ClusterSettings, me: &VantageId) -> Peers {
    let Ok(clients) = Clients::connect(cluster.connect(), ErrorCounter::detached()).await else {
        return Peers::default();
    };
    let Some(first) = heartbeats(&clients).await else {
        return Peers::default();
    };
    let mut kv = clients.kv.clone();
    let prefix = Some(GetOptions::new().with_prefix());
    let Ok(read) = kv.get(clients.keys.votes(), prefix).await else {
        return Peers::default();
    };
    let verdicts = read
        .kvs()
        .iter()
        .filter_map(|kv| {
            let key = clients.keys.parse_vote(kv.key())?;
            (key.vantage != *me).then_some((key, parse_verdict(kv.value())?))
        })
        .collect();
    let peers: Vec<&VantageId> = cluster.vantages.iter().filter(|v| *v != me).collect();
    let started = Instant::now();
    let mut changed: BTreeMap<VantageId, Instant> = BTreeMap::new();
    while changed.len() < peers.len() && started.elapsed() < cluster.fresh_for() {
        tokio::time::sleep(POLL).await;
        let Some(now) = heartbeats(&clients).await else {
            break;
        };
        for v in &peers {
            if now.get(*v).is_some_and(|c| first.get(*v) != Some(c)) {
                changed.entry((*v).clone()).or_insert_with(Instant::now);
            }
        }
    }
    let end = Instant::now();
    Peers {
        reachable: true,
        verdicts,
        fresh: changed
            .into_iter()
            .map(|(v, at)| (v, end.saturating_duration_since(at)))
            .collect(),
    }
}

/// Every heartbeat counter by vantage point; `None` when etcd does not answer.
async fn heartbeats(clients: &Clients) -> Option<BTreeMap<VantageId, Vec<u8>>> {
    let mut kv = clients.kv.clone();
    let prefix = Some(GetOptions::new().with_prefix());
    let read = kv.get(clients.keys.heartbeats(), prefix).await.ok()?;
    Some(
        read.kvs()
            .iter()
            .filter_map(|kv| Some((clients.keys.parse_heartbeat(kv.key())?, kv.value().to_vec())))
            .collect(),
    )
}

/// One line per pool of `decision` with each vantage point's vote: its verdict, and whether it
/// counts (with how long ago a peer's heartbeat was seen changing), e.g.
/// `ncp: a unhealthy (this instance), b healthy (fresh, heartbeat 0.4s ago), c healthy (stale)`.
/// None alone.
pub fn lines(decision: &gslb_core::engine::Decision, peers: &Peers, me: &VantageId) -> Vec<String> {
    decision
        .pools
        .iter()
        .filter(|(_, state)| !state.by_vantage.is_empty())
        .map(|(pool, state)| {
            let votes: Vec<String> = state
                .by_vantage
                .iter()
                .map(|(v, vote)| {
                    let how = match (v == me, peers.fresh.get(v)) {
                        (true, _) => "this instance".to_owned(),
                        (false, Some(age)) if vote.counted => {
                            format!("fresh, heartbeat {:.1}s ago", age.as_secs_f64())
                        }
                        _ => "stale".to_owned(),
                    };
                    format!("{v} {} ({how})", vote.verdict)
                })
                .collect();
            format!("{pool}: {}", votes.join(", "))
        })
        .collect()
}
