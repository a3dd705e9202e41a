//! Vantage-point quorum: many vantage points' views of a pool -> one verdict. PURE.
//!
//! A pool is down (or up) only when more than half of the fresh votes say so. Stale or missing
//! reports are not votes at all (never "down"); a suspect vantage point's down votes are
//! discounted; a tie keeps the pool's current verdict.

use serde::Serialize;

use crate::model::Verdict;

/// One vantage point's (or the provider's) view of a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vote {
    /// The view: healthy, unhealthy, or reported but not yet decided by rise/fall.
    pub verdict: Verdict,
    /// Whether the voter is suspect (its down votes are discounted).
    pub suspect: bool,
}

/// The count of fresh votes for one pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    /// Votes for healthy.
    pub up: u32,
    /// Votes for unhealthy (suspect voters excluded).
    pub down: u32,
    /// Fresh voters that have not decided yet (rise/fall in progress).
    pub undecided: u32,
    /// Down votes of suspect voters, not counted.
    pub discounted: u32,
}

impl Tally {
    /// Counts `votes`.
    pub fn of(votes: impl IntoIterator<Item = Vote>) -> Self {
        let mut t = Self::default();
        for v in votes {
            match (v.verdict, v.suspect) {
                (Verdict::Healthy, _) => t.up += 1,
                (Verdict::Unhealthy, false) => t.down += 1,
                (Verdict::Unhealthy, true) => t.discounted += 1,
                (Verdict::Unknown, _) => t.undecided += 1,
            }
        }
        t
    }

    /// Voters that count.
    pub fn voters(&self) -> u32 {
        self.up + self.down + self.undecided
    }

    /// The quorum verdict: a strict majority of counted voters, else a tie between up and down
    /// keeps `current`, else unknown.
    pub fn verdict(&self, current: Verdict) -> Verdict {
        let n = self.voters();
        if 2 * self.down > n {
            Verdict::Unhealthy
        } else if 2 * self.up > n {
            Verdict::Healthy
        } else if self.up == self.down && self.up > 0 {
            current
        } else {
            Verdict::Unknown
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Verdict::*;

    fn vote(verdict: Verdict) -> Vote {
        Vote {
            verdict,
            suspect: false,
        }
    }

    #[test]
    fn majority_of_fresh_votes() {
        let t = Tally::of([vote(Unhealthy), vote(Healthy), vote(Healthy)]);
        assert_eq!(t.verdict(Healthy), Healthy, "one of three cut off");
        let t = Tally::of([vote(Unhealthy), vote(Unhealthy), vote(Healthy)]);
        assert_eq!(t.verdict(Healthy), Unhealthy);
        assert_eq!(Tally::of([vote(Unhealthy)]).verdict(Healthy), Unhealthy);
        assert_eq!(Tally::of([]).verdict(Healthy), Unknown, "no votes");
    }

    #[test]
    fn a_tie_keeps_the_current_verdict() {
        let t = Tally::of([vote(Unhealthy), vote(Healthy)]);
        assert_eq!(t.verdict(Healthy), Healthy);
        assert_eq!(t.verdict(Unhealthy), Unhealthy);
        assert_eq!(t.verdict(Unknown), Unknown);
    }

    #[test]
    fn suspect_down_votes_are_discounted_and_undecided_votes_dilute() {
        let suspect = Vote {
            verdict: Unhealthy,
            suspect: true,
        };
        let t = Tally::of([suspect]);
        assert_eq!(t.discounted, 1);
        assert_eq!(t.verdict(Healthy), Unknown);
        assert_eq!(
            Tally::of([suspect, vote(Healthy)]).verdict(Unknown),
            Healthy
        );
        let t = Tally::of([vote(Unhealthy), vote(Unknown), vote(Unknown)]);
        assert_eq!(t.verdict(Healthy), Unknown);
    }
}
