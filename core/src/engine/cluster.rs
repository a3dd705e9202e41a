//! Several instances, one controller: what this engine knows of the other vantage points
//! (their published rise/fall verdicts and their heartbeats, fed as recorded inputs) and the
//! rules that make their votes count. PURE: time is an argument.
//!
//! - A remote vote counts only while its vantage point's heartbeat is fresh on THIS engine's
//!   clock (the time of the step that fed the heartbeat): never by etcd lease expiry alone,
//!   which etcd extends when its own leader changes.
//! - A stale or unknown vantage point's votes are unknown, never down: they are not votes.
//! - A pool's verdict needs at least `min_voters` counted vantage-point votes, else it is
//!   unknown (and unknown never switches).
//! - While coordination is lost (etcd unreachable, our lease lost, the minority side) no
//!   remote vote counts and every pool is unknown: the engine fails static.
//!
//! Without a [`ClusterView`] (no `[cluster]`), the engine runs alone, exactly as before.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Serialize;

use crate::model::{EndpointId, Millis, VantageId, Verdict};

/// Remote verdicts of one service: by endpoint, then vantage point.
pub(super) type RemoteVerdicts = BTreeMap<EndpointId, BTreeMap<VantageId, Verdict>>;

/// One vantage point's vote on a pool, as status and `gslb plan` show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct VantageVote {
    /// Its view of the pool (the pool verdict of its endpoint verdicts).
    pub verdict: Verdict,
    /// Whether it counts now: fresh (heartbeat, or this instance's own recent probes) and not
    /// suspect.
    pub counted: bool,
}

/// The cluster as this engine sees it: configured vantage points, the votes a pool needs,
/// heartbeats by vantage point (on this engine's clock), and whether coordination holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterView {
    /// This instance's own vantage point (its votes are its own probes' evidence).
    pub local: VantageId,
    /// The configured vantage points (`[cluster] vantages`); others' votes are ignored.
    pub vantages: BTreeSet<VantageId>,
    /// Counted vantage-point votes a pool's verdict needs (`[cluster] min_voters`).
    pub min_voters: u32,
    /// How long a heartbeat keeps a vantage point fresh.
    pub fresh_for: Duration,
    heartbeats: BTreeMap<VantageId, Millis>,
    coordinated: bool,
}

impl ClusterView {
    /// `local`'s view of a cluster of `vantages` needing `min_voters`, heartbeats fresh for
    /// `fresh_for`. Starts not coordinated (failing static) until an
    /// [`Input::Coordination`](super::Input) says so.
    pub fn new(
        local: VantageId,
        vantages: BTreeSet<VantageId>,
        min_voters: u32,
        fresh_for: Duration,
    ) -> Self {
        Self {
            local,
            vantages,
            min_voters,
            fresh_for,
            heartbeats: BTreeMap::new(),
            coordinated: false,
        }
    }

    /// Records a heartbeat of `vantage` seen at `at`. Returns whether it was stale before
    /// (its votes start counting now). Unconfigured vantage points are ignored.
    pub fn heartbeat(&mut self, vantage: &VantageId, at: Millis) -> bool {
        if !self.vantages.contains(vantage) || *vantage == self.local {
            return false;
        }
        let was = self.fresh(vantage, at);
        self.heartbeats.insert(vantage.clone(), at);
        !was
    }

    /// Sets whether coordination holds. Returns whether that changed.
    pub fn set_coordinated(&mut self, coordinated: bool) -> bool {
        std::mem::replace(&mut self.coordinated, coordinated) != coordinated
    }

    /// Whether coordination holds.
    pub fn coordinated(&self) -> bool {
        self.coordinated
    }

    /// Whether `vantage`'s votes count at `now`: coordinated, and (for another vantage point)
    /// its last heartbeat seen within `fresh_for`.
    pub fn fresh(&self, vantage: &VantageId, now: Millis) -> bool {
        self.coordinated
            && (*vantage == self.local
                || self
                    .heartbeats
                    .get(vantage)
                    .is_some_and(|t| now.since(*t) <= self.fresh_for))
    }

    /// The first time after `now` that a vantage point fresh at `now` is stale (its votes stop
    /// counting by time alone); `None` when none is fresh.
    pub(super) fn next_stale(&self, now: Millis) -> Option<Millis> {
        self.heartbeats
            .values()
            .map(|t| t.plus(self.fresh_for))
            .filter(|expires| *expires >= now)
            .min()
            .map(|expires| expires.plus(Duration::from_millis(1)))
    }

    /// How long ago `vantage`'s last heartbeat was seen, at `now`; `None` before the first.
    pub fn age(&self, vantage: &VantageId, now: Millis) -> Option<Duration> {
        self.heartbeats.get(vantage).map(|t| now.since(*t))
    }

    /// Whether `votes` (counted vantage-point votes of one pool) are enough for a verdict.
    pub fn enough(&self, votes: u32) -> bool {
        self.coordinated && votes >= self.min_voters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(name: &str) -> VantageId {
        VantageId(name.into())
    }

    fn view() -> ClusterView {
        let vantages = ["a", "b", "c"].map(v).into_iter().collect();
        ClusterView::new(v("a"), vantages, 2, Duration::from_secs(6))
    }

    #[test]
    fn a_heartbeat_is_fresh_for_its_window_on_the_readers_clock() {
        let mut c = view();
        assert!(c.set_coordinated(true));
        assert!(!c.fresh(&v("b"), Millis(0)), "no heartbeat yet");
        assert!(c.heartbeat(&v("b"), Millis(1_000)), "stale before");
        assert!(!c.heartbeat(&v("b"), Millis(2_000)), "fresh before");
        assert!(c.fresh(&v("b"), Millis(8_000)));
        assert!(!c.fresh(&v("b"), Millis(8_001)), "6 s after the last one");
        assert_eq!(
            c.age(&v("b"), Millis(8_001)),
            Some(Duration::from_millis(6_001))
        );
        assert!(!c.heartbeat(&v("z"), Millis(2_000)), "not configured");
        assert!(!c.fresh(&v("z"), Millis(2_000)));
        assert!(c.fresh(&v("a"), Millis(99_000)), "this instance itself");
    }

    #[test]
    fn nothing_counts_without_coordination() {
        let mut c = view();
        c.heartbeat(&v("b"), Millis(1_000));
        assert!(!c.fresh(&v("b"), Millis(1_000)), "starts not coordinated");
        assert!(!c.enough(3));
        c.set_coordinated(true);
        assert!(c.fresh(&v("b"), Millis(1_000)));
        assert!(c.enough(2) && !c.enough(1));
        assert!(!c.set_coordinated(true), "no change");
    }
}
