//! The status's view of Route 53 data-plane mode: what Route 53's tally of every instance's
//! votes serves, as this instance reads their vote URLs (written by
//! `crate::daemon::tally`, shown as the service's `apply.route53_tally`).

use std::collections::BTreeMap;

use serde::Serialize;

use gslb_core::model::{Millis, PoolId};

/// What Route 53's tally checks serve, from the votes this instance read.
///
/// It is what Route 53 answers once its checkers see what this instance sees: a vote URL this
/// instance cannot reach counts as no vote here, as it does for Route 53's checkers when they
/// cannot reach it either (a firewall may treat them differently: see
/// `docs/route53-data-plane.md`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TallyView {
    /// The pool Route 53 answers with for these votes: the PRIMARY when its tally check is
    /// healthy, else the SECONDARY when its is, else the PRIMARY.
    pub serves: PoolId,
    /// Since when the votes have given `serves` (this instance's reads; its start at the
    /// latest).
    pub since: Millis,
    /// When Route 53's checkers have surely followed: `since` plus `request_interval x
    /// failure_threshold` plus one `request_interval`.
    pub settled_at: Millis,
    /// When the vote URLs were last read.
    pub read_at: Millis,
    /// Instances whose URLs answered a vote, serve or drain, on every pool.
    pub voters: usize,
    /// Instances listed in `[route53.data_plane] instances`.
    pub instances: usize,
    /// Per pool, in priority order (PRIMARY first).
    pub pools: Vec<PoolTally>,
}

/// One pool's tally check as this instance reads its votes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolTally {
    /// The pool.
    pub pool: PoolId,
    /// Whether its tally check is healthy: at least as many voting instances say serve as
    /// drain.
    pub healthy: bool,
    /// Per instance name: `serve`, `drain`, or `no vote` with why (e.g. `no vote
    /// (unreachable)`).
    pub votes: BTreeMap<String, String>,
}

impl TallyView {
    /// One line for logs and the status's "decided but not applied" reason, e.g. `Route 53's
    /// tally serves seoul (seoul: 2 serve, 1 drain; tokyo: 3 serve)`.
    pub fn summary(&self) -> String {
        let pools: Vec<String> = self
            .pools
            .iter()
            .map(|p| {
                let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
                for v in p.votes.values() {
                    let word = v.split(" (").next().unwrap_or(v);
                    *counts.entry(word).or_default() += 1;
                }
                let counts: Vec<String> = ["serve", "drain", "no vote"]
                    .iter()
                    .filter_map(|w| counts.get(w).map(|n| format!("{n} {w}")))
                    .collect();
                format!("{}: {}", p.pool, counts.join(", "))
            })
            .collect();
        format!(
            "Route 53's tally serves {} ({})",
            self.serves,
            pools.join("; ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_counts_each_pools_votes_in_the_policys_words() {
        let votes = |v: &[&str]| {
            v.iter()
                .enumerate()
                .map(|(i, w)| (format!("i{i}"), (*w).to_owned()))
                .collect()
        };
        let view = TallyView {
            serves: PoolId("seoul".into()),
            since: Millis(0),
            settled_at: Millis(120_000),
            read_at: Millis(1_000),
            voters: 2,
            instances: 3,
            pools: vec![
                PoolTally {
                    pool: PoolId("seoul".into()),
                    healthy: true,
                    votes: votes(&["serve", "drain", "no vote (unreachable)"]),
                },
                PoolTally {
                    pool: PoolId("tokyo".into()),
                    healthy: true,
                    votes: votes(&["serve", "serve", "no vote (unreachable)"]),
                },
            ],
        };
        assert_eq!(
            view.summary(),
            "Route 53's tally serves seoul (seoul: 1 serve, 1 drain, 1 no vote; tokyo: 2 serve, 1 no vote)"
        );
    }
}
