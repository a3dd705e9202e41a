//! A service's safety state as plain data: what must outlive a restart or a change of writer
//! (the velocity budget, flap-damping penalties, the last switch and the failback hold's
//! failover count), so a cluster keeps it in etcd and a new writer or a restarted cluster
//! continues it. PURE: no clock; times are [`Millis`] taken from inputs.
//!
//! Restoring merges conservatively ([`SafetyState::merge`]): the smaller velocity credit, the
//! larger penalty, the later switch times, the larger failover count. Restoring the same state
//! twice, or an older one, changes nothing; the order of restores does not matter.

use serde::{Deserialize, Serialize};

use crate::model::{ByPool, Millis, pools_as_map};
use crate::policy::Damping;

use super::damping::FlapPenalty;
use super::velocity::TokenBucket;

/// One service's safety state. JSON shape: `{"bucket": {...}, "penalties": {"seoul": {...}},
/// "last_change": 1700000000000, "last_failover": ..., "consecutive_failovers": 1}` (times in
/// milliseconds since the Unix epoch).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SafetyState {
    /// The velocity budget (token bucket).
    pub bucket: TokenBucket,
    /// Flap-damping penalty per pool.
    #[serde(serialize_with = "pools_as_map")]
    pub penalties: ByPool<FlapPenalty>,
    /// When the serving pool last changed.
    pub last_change: Option<Millis>,
    /// When the last automatic failover happened.
    pub last_failover: Option<Millis>,
    /// Failovers in a row, which lengthen the failback hold (`failback_hold.after`).
    pub consecutive_failovers: u32,
}

impl SafetyState {
    /// Whether `other` says the same as this state at `now`: the same budget left, the same
    /// penalties (no penalty equals no entry), times and count. Two instances that last updated
    /// an unchanged state at different moments hold the same state; the shared state is put
    /// only when it is not the same (a put for every service and round otherwise).
    pub fn same_at(&self, other: &Self, now: Millis) -> bool {
        let none = FlapPenalty::default();
        let penalties = self
            .penalties
            .keys()
            .chain(other.penalties.keys())
            .all(|pool| {
                let ours = self.penalties.get(pool).unwrap_or(&none);
                ours.same_as(other.penalties.get(pool).unwrap_or(&none))
            });
        self.bucket.same_at(&other.bucket, now)
            && penalties
            && (
                self.last_change,
                self.last_failover,
                self.consecutive_failovers,
            ) == (
                other.last_change,
                other.last_failover,
                other.consecutive_failovers,
            )
    }

    /// Merges `saved` into `self` at `now`, keeping the more cautious of each part (see the
    /// module doc); `damping` decays the penalties to compare them. `saved` is bounded first:
    /// no time after `now`, no penalty above the damping ceiling. A saved state comes from
    /// another instance (etcd): one claiming a switch or a penalty in the future would hold
    /// every instance's failover or failback until then, and keep it held by each instance
    /// saving the merge again; bounded, the most one state can do is what a real switch or
    /// flap now would.
    pub fn merge(&mut self, saved: &Self, now: Millis, damping: &Damping) {
        self.bucket.spend_like(&saved.bucket, now);
        for (pool, theirs) in &saved.penalties {
            let theirs = theirs.bounded(now, damping);
            let ours = self.penalties.entry(pool.clone()).or_default();
            if theirs.value(now, damping) > ours.value(now, damping) {
                *ours = theirs;
            }
        }
        let bounded = |t: Option<Millis>| t.map(|t| t.min(now));
        self.last_change = self.last_change.max(bounded(saved.last_change));
        let last_failover = bounded(saved.last_failover);
        if last_failover > self.last_failover {
            self.last_failover = last_failover;
            self.consecutive_failovers = saved.consecutive_failovers;
        } else if last_failover == self.last_failover {
            self.consecutive_failovers =
                self.consecutive_failovers.max(saved.consecutive_failovers);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::model::PoolId;
    use crate::policy::Velocity;

    fn velocity() -> Velocity {
        Velocity {
            burst: 2,
            refill: Duration::from_secs(1800),
        }
    }

    fn damping() -> Damping {
        Damping {
            penalty: 1000,
            half_life: Duration::from_secs(900),
            suppress: 3000,
            reuse: 750,
            max_suppress: Duration::from_secs(3600),
        }
    }

    fn fresh(now: Millis) -> SafetyState {
        SafetyState {
            bucket: TokenBucket::full(velocity(), now),
            penalties: ByPool::default(),
            last_change: None,
            last_failover: None,
            consecutive_failovers: 0,
        }
    }

    #[test]
    fn penalties_are_a_json_object_by_pool_even_when_empty() {
        let mut state = fresh(Millis(0));
        let empty = serde_json::to_value(&state).expect("json");
        assert_eq!(empty["penalties"], serde_json::json!({}));
        state
            .penalties
            .insert(PoolId::from("seoul"), FlapPenalty::default());
        let one = serde_json::to_string(&state).expect("json");
        assert!(one.contains(r#""penalties":{"seoul":"#), "{one}");
        let back: SafetyState = serde_json::from_str(&one).expect("reads back");
        assert_eq!(back.penalties.len(), 1);
        let old: SafetyState = serde_json::from_value(empty).expect("reads an empty object");
        assert!(old.penalties.is_empty());
    }

    #[test]
    fn states_updated_at_other_moments_are_the_same_until_something_changes() {
        let (a, mut b) = (fresh(Millis(0)), fresh(Millis(5_000)));
        assert_ne!(a, b, "their buckets were last updated at other times");
        assert!(a.same_at(&b, Millis(9_000)), "both full");
        b.penalties
            .insert(PoolId::from("seoul"), FlapPenalty::default());
        assert!(a.same_at(&b, Millis(9_000)), "no penalty is none");
        b.penalties
            .get_mut(&PoolId::from("seoul"))
            .expect("seoul")
            .flap(Millis(6_000), &damping());
        assert!(!a.same_at(&b, Millis(9_000)), "a flap");
        let mut spent = fresh(Millis(0));
        assert!(spent.bucket.try_take(Millis(1_000)));
        assert!(!a.same_at(&spent, Millis(9_000)), "a switch spent");
        let mut failed_over = fresh(Millis(0));
        failed_over.last_failover = Some(Millis(1_000));
        assert!(!a.same_at(&failed_over, Millis(9_000)));
    }

    #[test]
    fn a_spent_budget_survives_a_restore_into_a_full_one() {
        let d = damping();
        let mut spent = fresh(Millis(0));
        assert!(spent.bucket.try_take(Millis(1_000)));
        assert!(spent.bucket.try_take(Millis(2_000)));
        spent.last_failover = Some(Millis(2_000));
        spent.consecutive_failovers = 2;
        let saved: SafetyState =
            serde_json::from_str(&serde_json::to_string(&spent).expect("json")).expect("back");
        let mut restarted = fresh(Millis(10_000));
        restarted.merge(&saved, Millis(10_000), &d);
        assert_eq!(restarted.bucket.available(Millis(10_000)), 0, "still spent");
        assert_eq!(restarted.consecutive_failovers, 2);
        assert_eq!(restarted.last_failover, Some(Millis(2_000)));
        // The budget still refills with time: one switch after the refill period.
        assert_eq!(restarted.bucket.available(Millis(2_000 + 1_800_000)), 1);
    }

    #[test]
    fn a_saved_state_from_the_future_or_above_the_ceiling_is_bounded_at_now() {
        let d = damping();
        let now = Millis(10_000_000);
        let year_2099 = Millis(4_070_908_800_000);
        let mut forged = fresh(now);
        forged.last_change = Some(year_2099);
        forged.last_failover = Some(year_2099);
        let mut huge = FlapPenalty::default();
        for _ in 0..1_000 {
            huge.flap(year_2099, &d);
        }
        forged.penalties.insert(PoolId::from("tokyo"), huge);
        let mut ours = fresh(now);
        ours.merge(&forged, now, &d);
        assert_eq!(ours.last_change, Some(now), "no switch in the future");
        assert_eq!(ours.last_failover, Some(now));
        let penalty = ours.penalties.get(&PoolId::from("tokyo")).expect("tokyo");
        assert!(penalty.value(now, &d) <= d.ceiling(), "at most the ceiling");
        // It decays from now: below reuse after max_suppress, as a real flap's would.
        let later = now.plus(d.max_suppress + Duration::from_secs(1));
        assert!(penalty.value(later, &d) < f64::from(d.reuse));
    }

    #[test]
    fn restoring_twice_or_an_older_state_changes_nothing() {
        let d = damping();
        let mut a = fresh(Millis(0));
        assert!(a.bucket.try_take(Millis(5_000)));
        a.last_failover = Some(Millis(5_000));
        a.consecutive_failovers = 1;
        let older = fresh(Millis(0));
        let mut b = a.clone();
        b.merge(&a, Millis(6_000), &d);
        b.merge(&older, Millis(6_000), &d);
        assert_eq!(
            b.bucket.available(Millis(6_000)),
            a.bucket.available(Millis(6_000))
        );
        assert_eq!(b.last_failover, a.last_failover);
        assert_eq!(b.consecutive_failovers, 1);
    }
}
