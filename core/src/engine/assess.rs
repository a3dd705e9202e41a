//! Assessing one service's pools: the fresh votes of each vantage point (suspect ones
//! discounted) and of the provider, the quorum verdict, flapping and the last passing probe of
//! each pool, as a plain value ([`Assessment`]); and the one-line description of a pool's
//! evidence. Reads the service engine's evidence and never changes it: recording the
//! assessment (damping, pool states) and committing a decision is the service engine's part.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::model::{ByPool, EndpointId, Millis, PoolId, ProbeReason, VantageId, Verdict};
use crate::policy::Policy;

use super::by_vantage::ByVantage;
use super::cluster::{ClusterView, RemoteVerdicts, VantageVote};
use super::decide::PoolVerdict;
use super::health::{EndpointHealth, pool_verdict};
use super::quorum::{Tally, Vote};
use super::vantage::{Suspicion, Vantages};

/// Each endpoint's rise/fall state, by endpoint then vantage point.
pub(super) type ByEndpoint = BTreeMap<EndpointId, ByVantage>;

/// The provider's health signal per pool: the verdict, when it was read and how long it counts.
pub(super) type ProviderVotes = ByPool<(Verdict, Millis, Duration)>;

/// One pool's evidence at one evaluation, before damping: what [`Assessor::assess`] found.
pub(super) struct PoolAssessment {
    /// The pool's verdict before this evaluation.
    pub(super) previous: Verdict,
    /// Its quorum verdict now.
    pub(super) verdict: Verdict,
    /// The fresh votes behind it.
    pub(super) votes: Tally,
    /// The weighted state-change percentage of its most flapping endpoint.
    pub(super) flap_percent: f64,
    /// Whether any of its endpoints is flapping.
    pub(super) flapping: bool,
    /// When a probe of it last passed, from a vantage point not found suspect.
    pub(super) last_ok: Option<Millis>,
    /// Each vantage point's vote (cluster only; empty alone).
    pub(super) by_vantage: BTreeMap<VantageId, VantageVote>,
}

/// Every pool's assessment, in priority order, and a note per suspect vantage point that voted
/// a pool down (the decision's reasons list them before the rule).
pub(super) struct Assessment {
    pub(super) pools: Vec<(PoolId, PoolAssessment)>,
    pub(super) suspect_notes: BTreeSet<String>,
    /// Whether a vantage point with fresh views of a pool is suspect (then time alone can
    /// change the verdicts: its suspicion ends).
    pub(super) any_suspect: bool,
}

/// What an assessment reads of one service's engine: its policy and evidence, and each pool's
/// state at the previous evaluation.
#[derive(Clone, Copy)]
pub(super) struct Assessor<'a> {
    pub(super) policy: &'a Policy,
    pub(super) evidence: &'a ByEndpoint,
    pub(super) provider_votes: &'a ProviderVotes,
    pub(super) pools: &'a ByPool<PoolVerdict>,
    /// The other vantage points' published verdicts.
    pub(super) remote: &'a RemoteVerdicts,
    /// The cluster; `None` alone.
    pub(super) cluster: Option<&'a ClusterView>,
}

impl<'a> Assessor<'a> {
    /// The endpoints of `pool`.
    pub(super) fn members(self, pool: &'a PoolId) -> impl Iterator<Item = &'a EndpointId> + 'a {
        self.policy
            .pool(pool)
            .into_iter()
            .flat_map(|p| p.endpoints.iter().map(|e| &e.id))
    }

    /// Each vantage point's view of `pool` at `now`, for those that reported freshly.
    fn views(self, pool: &'a PoolId, now: Millis) -> BTreeMap<&'a VantageId, Verdict> {
        let fresh = self.policy.fresh_for();
        let mut by_vantage: BTreeMap<&VantageId, Vec<Verdict>> = BTreeMap::new();
        let mut reported: BTreeSet<&VantageId> = BTreeSet::new();
        for e in self.members(pool) {
            for (v, h) in self.evidence.get(e).into_iter().flatten() {
                let verdict = h.verdict_at(now, fresh);
                if h.last_at.is_some_and(|t| now.since(t) <= fresh) {
                    reported.insert(v);
                }
                by_vantage.entry(v).or_default().push(verdict);
            }
        }
        by_vantage
            .into_iter()
            .filter(|(v, _)| reported.contains(v))
            .map(|(v, vs)| (v, pool_verdict(vs)))
            .collect()
    }

    /// Assesses every pool at `now`, in priority order: the fresh votes of each vantage point
    /// (suspect ones discounted) and the provider's, the quorum verdict, flapping, and the last
    /// passing probe. Reads the evidence, changes nothing.
    pub(super) fn assess(self, now: Millis, vantages: &Vantages) -> Assessment {
        // Each vantage point's suspicion, looked up once, when a pool's fresh views first name
        // it; a later pool's last passing probe only discounts the vantage points named so far.
        let mut suspects: BTreeMap<VantageId, Option<Suspicion>> = BTreeMap::new();
        let mut suspect_notes = BTreeSet::new();
        let mut pools = Vec::new();
        for pool in self.policy.pools.iter().map(|p| p.id.clone()) {
            let mut votes: Vec<Vote> = Vec::new();
            let mut by_vantage = BTreeMap::new();
            for (v, verdict) in self.views(&pool, now) {
                let s = suspects
                    .entry(v.clone())
                    .or_insert_with(|| vantages.suspect(v, now));
                if let (Some(s), Verdict::Unhealthy) = (&*s, verdict) {
                    suspect_notes.insert(format!("vantage point {v} is suspect: {s}"));
                }
                let counted = s.is_none() || verdict != Verdict::Unhealthy;
                by_vantage.insert(v.clone(), VantageVote { verdict, counted });
                votes.push(Vote {
                    verdict,
                    suspect: s.is_some(),
                });
            }
            for (v, vote) in self.remote_views(&pool, now) {
                if vote.counted {
                    votes.push(Vote {
                        verdict: vote.verdict,
                        suspect: false,
                    });
                }
                by_vantage.entry(v).or_insert(vote);
            }
            let voters = votes
                .iter()
                .filter(|v| !(v.suspect && v.verdict == Verdict::Unhealthy))
                .count();
            votes.extend(self.provider_vote(&pool, now));
            let votes = Tally::of(votes);
            let previous = self
                .pools
                .get(&pool)
                .map_or(Verdict::Unknown, |p| p.verdict);
            let enough = self
                .cluster
                .is_none_or(|c| c.enough(u32::try_from(voters).unwrap_or(u32::MAX)));
            if self.cluster.is_none() {
                by_vantage.clear();
            }
            let histories = || self.histories(&pool).map(|(_, h)| &h.flap);
            let assessed = PoolAssessment {
                previous,
                verdict: if enough {
                    votes.verdict(previous)
                } else {
                    Verdict::Unknown
                },
                votes,
                flap_percent: histories().map(|h| h.percent()).fold(0.0, f64::max),
                flapping: histories().any(|h| h.flapping()),
                last_ok: self
                    .histories(&pool)
                    .filter(|(v, _)| suspects.get(*v).is_none_or(Option::is_none))
                    .filter(|(_, h)| h.last.as_ref().is_some_and(|o| o.success))
                    .filter_map(|(_, h)| h.last_at)
                    .max(),
                by_vantage,
            };
            pools.push((pool, assessed));
        }
        Assessment {
            pools,
            suspect_notes,
            any_suspect: suspects.values().any(Option::is_some),
        }
    }

    /// Each configured vantage point's published view of `pool` (the pool verdict of its
    /// endpoint verdicts, a missing one unknown), counted while its heartbeat is fresh. Only
    /// vantage points that published a verdict on the pool, or are configured, appear;
    /// alone, none.
    fn remote_views(self, pool: &'a PoolId, now: Millis) -> Vec<(VantageId, VantageVote)> {
        let Some(cluster) = self.cluster else {
            return Vec::new();
        };
        let local: BTreeSet<&VantageId> = self
            .members(pool)
            .filter_map(|e| self.evidence.get(e))
            .flat_map(|m| m.keys())
            .collect();
        cluster
            .vantages
            .iter()
            .filter(|v| **v != cluster.local && !local.contains(v))
            .filter_map(|v| {
                let mut published = false;
                let verdicts: Vec<Verdict> = self
                    .members(pool)
                    .map(|e| {
                        let got = self.remote.get(e).and_then(|m| m.get(v)).copied();
                        published |= got.is_some();
                        got.unwrap_or(Verdict::Unknown)
                    })
                    .collect();
                published.then(|| {
                    let vote = VantageVote {
                        verdict: pool_verdict(verdicts),
                        counted: cluster.fresh(v, now),
                    };
                    (v.clone(), vote)
                })
            })
            .collect()
    }

    /// The provider's vote for `pool`, when `quorum.provider_vote` and it is still fresh.
    fn provider_vote(self, pool: &PoolId, now: Millis) -> Option<Vote> {
        let (verdict, at, fresh_for) = self.provider_votes.get(pool)?;
        (self.policy.quorum.provider_vote && now.since(*at) <= *fresh_for).then_some(Vote {
            verdict: *verdict,
            suspect: false,
        })
    }

    /// Every vantage point's evidence of every endpoint of `pool`.
    fn histories(
        self,
        pool: &'a PoolId,
    ) -> impl Iterator<Item = (&'a VantageId, &'a EndpointHealth)> + 'a {
        self.members(pool)
            .filter_map(|e| self.evidence.get(e))
            .flat_map(|m| m.iter())
    }

    /// A one-line description of a pool's evidence, e.g.
    /// `pool seoul unhealthy by quorum (0 up, 1 down of 1 fresh): endpoint ... failed 3 ...`.
    pub(super) fn explain(self, pool: &PoolId, now: Millis) -> String {
        let fresh = self.policy.fresh_for();
        let th = self.policy.thresholds;
        let state = self.pools.get(pool);
        let v = state.map_or(Verdict::Unknown, |s| s.verdict);
        let t = state.map(|s| s.votes).unwrap_or_default();
        let vantages: BTreeSet<&VantageId> = self
            .members(pool)
            .filter_map(|e| self.evidence.get(e))
            .flat_map(|m| m.keys())
            .collect();
        let mut parts = Vec::new();
        for e in self.members(pool) {
            let per = self.evidence.get(e);
            if per.is_none_or(ByVantage::is_empty) {
                parts.push(format!("endpoint {e} no probe result yet"));
            }
            for (vantage, h) in per.into_iter().flatten() {
                let from = if vantages.len() > 1 {
                    format!(" from {vantage}")
                } else {
                    String::new()
                };
                let text = match h.verdict_at(now, fresh) {
                    _ if h.unprobeable_since.is_some() => h.explain(th, &self.policy.probe),
                    Verdict::Unknown if h.last_at.is_some() && h.verdict != Verdict::Unknown => {
                        stale(h.prober_side, fresh)
                    }
                    _ => h.explain(th, &self.policy.probe),
                };
                parts.push(format!("endpoint {e}{from} {text}"));
            }
        }
        let mut votes = format!("{} up, {} down of {} fresh", t.up, t.down, t.voters());
        if t.discounted > 0 {
            votes.push_str(&format!(", {} suspect discounted", t.discounted));
        }
        if let Some(c) = self.cluster {
            votes.push_str(&cluster_note(c, state.map(|s| &s.by_vantage)));
        }
        format!("pool {pool} {v} by quorum ({votes}): {}", parts.join("; "))
    }
}

/// Why an endpoint's evidence is stale: no result that counts for longer than `fresh`, and,
/// when every probe since failed on this vantage point's side (`prober_side`), that too.
fn stale(prober_side: Option<(Millis, ProbeReason)>, fresh: Duration) -> String {
    let fresh = humantime::format_duration(fresh);
    match prober_side {
        Some((since, reason)) => format!(
            "stale (no result that counts for over {fresh}: every probe from here since {} \
             failed on this vantage point's own side, last: {reason}, which says nothing of \
             the endpoint)",
            since.rfc3339()
        ),
        None => format!("stale (no result for over {fresh})"),
    }
}

/// The cluster's part of a pool's description: each vantage point's vote, and why the verdict
/// is unknown when coordination is lost or too few votes count, e.g.
/// `; votes: a unhealthy, b healthy, c stale; needs 2 fresh voters`.
fn cluster_note(c: &ClusterView, by_vantage: Option<&BTreeMap<VantageId, VantageVote>>) -> String {
    let votes: Vec<String> = by_vantage
        .into_iter()
        .flatten()
        .map(|(v, vote)| match vote.counted {
            true => format!("{v} {}", vote.verdict),
            false => format!("{v} stale"),
        })
        .collect();
    let counted = by_vantage.map_or(0, |m| m.values().filter(|v| v.counted).count());
    let mut note = format!(
        "; votes: {}",
        if votes.is_empty() {
            "none".into()
        } else {
            votes.join(", ")
        }
    );
    if !c.coordinated() {
        note.push_str("; coordination lost: fail static");
    } else if !c.enough(u32::try_from(counted).unwrap_or(u32::MAX)) {
        note.push_str(&format!(
            "; needs {} fresh voters (min_voters)",
            c.min_voters
        ));
    }
    note
}
