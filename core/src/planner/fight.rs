//! Write-fight detection: another writer reverting gslb's writes.
//!
//! A re-apply of the very state gslb already wrote is *drift*; more than [`WRITE_FIGHT_LIMIT`]
//! re-applies within [`WRITE_FIGHT_WINDOW`] is a *write fight*: gslb stops writing that state
//! until the window has passed, and says so (metric, status, log) instead of fighting forever.
//!
//! Pure: time is the caller's `now` ([`Millis`]); nothing here reads a clock.

use std::collections::VecDeque;
use std::time::Duration;

use gslb_provider::DesiredState;

use crate::model::Millis;

/// Re-applies of one desired state tolerated per [`WRITE_FIGHT_WINDOW`] before gslb calls it
/// a write fight and stops writing. 3: one revert can be an operator's slip, a steady stream is
/// an automation (Terraform apply, a second controller) that a retry will never beat.
pub const WRITE_FIGHT_LIMIT: usize = 3;

/// The window drift is counted in, and how long gslb stops writing once a fight is declared.
/// 5 minutes, the same as Cloudflare's rate-limit window: a fight must never cost the token
/// its request budget.
pub const WRITE_FIGHT_WINDOW: Duration = Duration::from_secs(300);

/// What [`FightGuard::before_apply`] allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FightCheck {
    /// Write. `drift` is true when this re-applies a state gslb already wrote (another writer
    /// changed it since).
    Apply {
        /// Whether this write re-applies a state gslb already wrote.
        drift: bool,
    },
    /// Do not write before `until`. `declared` is true on the pass that declared the fight.
    Stop {
        /// When writing this state may resume.
        until: Millis,
        /// Whether this pass declared the fight (report it once).
        declared: bool,
    },
}

/// Counts drift of one provider binding; see the module docs. One per reconciler; `gslb plan`
/// starts from a fresh one (no earlier write, so never a fight).
#[derive(Debug, Default)]
pub struct FightGuard {
    last_written: Option<DesiredState>,
    drifts: VecDeque<Millis>,
    stopped_until: Option<Millis>,
}

impl FightGuard {
    /// Whether `desired` may be written at `now` (a non-empty plan was computed for it).
    pub fn before_apply(&mut self, desired: &DesiredState, now: Millis) -> FightCheck {
        if self.last_written.as_ref() != Some(desired) {
            // A new target: the old fight, if any, was about something else.
            self.drifts.clear();
            self.stopped_until = None;
            return FightCheck::Apply { drift: false };
        }
        if let Some(until) = self.stopped_until {
            if now < until {
                return FightCheck::Stop {
                    until,
                    declared: false,
                };
            }
            self.stopped_until = None;
            self.drifts.clear();
        }
        while self
            .drifts
            .front()
            .is_some_and(|t| now.since(*t) >= WRITE_FIGHT_WINDOW)
        {
            self.drifts.pop_front();
        }
        self.drifts.push_back(now);
        if self.drifts.len() > WRITE_FIGHT_LIMIT {
            let until = now.plus(WRITE_FIGHT_WINDOW);
            self.stopped_until = Some(until);
            return FightCheck::Stop {
                until,
                declared: true,
            };
        }
        FightCheck::Apply { drift: true }
    }

    /// Records that `desired` was written (accepted, or reverted under our feet).
    pub fn wrote(&mut self, desired: &DesiredState) {
        self.last_written = Some(desired.clone());
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use gslb_provider::{FailoverStyle, PoolRef};

    use super::*;

    fn refs() -> Vec<PoolRef> {
        vec!["ncp".into(), "gcp".into()]
    }

    #[test]
    fn a_fight_is_declared_after_the_limit_and_ends_with_the_window() {
        let d = DesiredState::for_active(FailoverStyle::Order, &refs(), "gcp", &BTreeSet::new());
        let mut g = FightGuard::default();
        let t0 = Millis(1_000_000);
        assert_eq!(g.before_apply(&d, t0), FightCheck::Apply { drift: false });
        g.wrote(&d);
        for i in 1..=WRITE_FIGHT_LIMIT as u64 {
            let t = t0.plus(Duration::from_secs(i));
            assert_eq!(g.before_apply(&d, t), FightCheck::Apply { drift: true });
            g.wrote(&d);
        }
        let t = t0.plus(Duration::from_secs(10));
        let FightCheck::Stop {
            until,
            declared: true,
        } = g.before_apply(&d, t)
        else {
            panic!("expected a fight")
        };
        assert_eq!(until, t.plus(WRITE_FIGHT_WINDOW));
        assert!(matches!(
            g.before_apply(&d, t.plus(Duration::from_secs(1))),
            FightCheck::Stop {
                declared: false,
                ..
            }
        ));
        assert_eq!(g.before_apply(&d, until), FightCheck::Apply { drift: true });
        // A new decision starts afresh.
        let other =
            DesiredState::for_active(FailoverStyle::Order, &refs(), "ncp", &BTreeSet::new());
        assert_eq!(
            g.before_apply(&other, until),
            FightCheck::Apply { drift: false }
        );
    }
}
