//! Safety guards between a decision and a provider write, used by [`crate::daemon::reconcile`]:
//!
//! - [`fallback_refusal`] (pure): refuses a plan that disables the provider's fallback pool,
//!   or whose traffic would land on the fallback pool while gslb's probes say it is unhealthy.
//!   Cloudflare sends traffic to its `fallback_pool` when every pool in `default_pools` is
//!   down or disabled, and never health-checks it there; gslb must not lead it there blind.
//!   The reconciler drops a drain of the fallback pool before building the desired state (so
//!   the rest of a decision, e.g. a failover, still applies); `fallback_disabled` is the
//!   backstop should a disabling plan reach this guard anyway.
//! - [`FightGuard`]: detects another writer reverting gslb's writes. A re-apply of the very
//!   state gslb already wrote is *drift*; more than [`WRITE_FIGHT_LIMIT`] re-applies within
//!   [`WRITE_FIGHT_WINDOW`] is a *write fight*: gslb stops writing that state until the
//!   window has passed, and says so (metric, status, log) instead of fighting forever.
//!
//! Neither does I/O; the adapter never sees gslb's verdicts (it only reports which pool is the
//! fallback, in [`ObservedState::fallback`]).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use gslb_provider::{DesiredState, ObservedState, PoolRef};
use tokio::time::Instant;

use gslb_core::model::Verdict;

/// Re-applies of one desired state tolerated per [`WRITE_FIGHT_WINDOW`] before gslb calls it
/// a write fight and stops writing. 3: one revert can be an operator's slip, a steady stream is
/// an automation (Terraform apply, a second controller) that a retry will never beat.
pub const WRITE_FIGHT_LIMIT: usize = 3;

/// The window drift is counted in, and how long gslb stops writing once a fight is declared.
/// 5 minutes, the same as Cloudflare's rate-limit window: a fight must never cost the token
/// its request budget.
pub const WRITE_FIGHT_WINDOW: Duration = Duration::from_secs(300);

/// Why a plan is refused, as a bounded metric label and a sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// `fallback_disabled` or `fallback_unhealthy`.
    pub code: &'static str,
    /// What was refused and why.
    pub reason: String,
}

/// Checks `desired` against the provider's fallback pool in `observed`. `verdicts` are gslb's
/// verdicts by provider pool ref; a pool without one counts as unknown.
///
/// Traffic under `desired` lands on the first pool in `desired.order` that is enabled and not
/// unhealthy; when there is none, on the fallback pool. Returns a refusal when `desired`
/// disables the fallback pool, or when traffic would land on it while its verdict is
/// unhealthy. `None` when the provider has no fallback pool.
pub fn fallback_refusal(
    desired: &DesiredState,
    observed: &ObservedState,
    verdicts: &BTreeMap<PoolRef, Verdict>,
) -> Option<Refusal> {
    let fallback = observed.fallback.as_ref()?;
    if desired.enabled.get(fallback) == Some(&false) {
        return Some(Refusal {
            code: "fallback_disabled",
            reason: format!(
                "the plan disables pool {fallback}, the load balancer's fallback pool: with \
                 every other pool down, nothing would answer; gslb never disables it"
            ),
        });
    }
    let verdict = |p: &PoolRef| verdicts.get(p).copied().unwrap_or(Verdict::Unknown);
    let lands_on_default = desired.order.iter().any(|p| {
        desired.enabled.get(p).copied().unwrap_or(true) && verdict(p) != Verdict::Unhealthy
    });
    if !lands_on_default && verdict(fallback) == Verdict::Unhealthy {
        return Some(Refusal {
            code: "fallback_unhealthy",
            reason: format!(
                "every pool in the plan is disabled or unhealthy, so traffic would go to the \
                 fallback pool {fallback}, which gslb's probes find unhealthy (the provider \
                 never health-checks its fallback pool); holding"
            ),
        });
    }
    None
}

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
        until: Instant,
        /// Whether this pass declared the fight (report it once).
        declared: bool,
    },
}

/// Counts drift of one binding; see the module docs. One per reconciler.
#[derive(Debug, Default)]
pub struct FightGuard {
    last_written: Option<DesiredState>,
    drifts: VecDeque<Instant>,
    stopped_until: Option<Instant>,
}

impl FightGuard {
    /// Whether `desired` may be written now (a non-empty plan was computed for it).
    pub fn before_apply(&mut self, desired: &DesiredState, now: Instant) -> FightCheck {
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
            .is_some_and(|t| now.duration_since(*t) >= WRITE_FIGHT_WINDOW)
        {
            self.drifts.pop_front();
        }
        self.drifts.push_back(now);
        if self.drifts.len() > WRITE_FIGHT_LIMIT {
            let until = now + WRITE_FIGHT_WINDOW;
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

    use gslb_provider::{FailoverStyle, ObservedPool};

    use super::*;

    fn refs() -> Vec<PoolRef> {
        vec!["ncp".into(), "gcp".into()]
    }

    fn observed(fallback: &str) -> ObservedState {
        ObservedState {
            order: Some(refs()),
            pools: refs()
                .into_iter()
                .map(|p| {
                    (
                        p,
                        ObservedPool {
                            enabled: true,
                            version: None,
                            healthy: None,
                        },
                    )
                })
                .collect(),
            fallback: Some(fallback.into()),
        }
    }

    fn verdicts(ncp: Verdict, gcp: Verdict) -> BTreeMap<PoolRef, Verdict> {
        BTreeMap::from([("ncp".into(), ncp), ("gcp".into(), gcp)])
    }

    #[test]
    fn refuses_to_disable_the_fallback_pool() {
        let drained = BTreeSet::from(["gcp".to_owned()]);
        let d = DesiredState::for_active(FailoverStyle::Order, &refs(), "ncp", &drained);
        let r = fallback_refusal(
            &d,
            &observed("gcp"),
            &verdicts(Verdict::Healthy, Verdict::Healthy),
        );
        assert_eq!(r.map(|r| r.code), Some("fallback_disabled"));
    }

    #[test]
    fn refuses_traffic_landing_on_an_unhealthy_fallback() {
        let d = DesiredState::for_active(FailoverStyle::Order, &refs(), "gcp", &BTreeSet::new());
        let all_down = verdicts(Verdict::Unhealthy, Verdict::Unhealthy);
        let r = fallback_refusal(&d, &observed("gcp"), &all_down).expect("refused");
        assert_eq!(r.code, "fallback_unhealthy");
        assert!(r.reason.contains("fallback pool gcp"), "{}", r.reason);
        // A healthy default pool catches the traffic first: nothing to refuse.
        let ncp_up = verdicts(Verdict::Healthy, Verdict::Unhealthy);
        assert_eq!(fallback_refusal(&d, &observed("gcp"), &ncp_up), None);
        // Unknown is not evidence of anything.
        let unknown = verdicts(Verdict::Unhealthy, Verdict::Unknown);
        assert_eq!(fallback_refusal(&d, &observed("gcp"), &unknown), None);
        let mut no_fallback = observed("gcp");
        no_fallback.fallback = None;
        assert_eq!(fallback_refusal(&d, &no_fallback, &all_down), None);
    }

    #[test]
    fn a_fight_is_declared_after_the_limit_and_ends_with_the_window() {
        let d = DesiredState::for_active(FailoverStyle::Order, &refs(), "gcp", &BTreeSet::new());
        let mut g = FightGuard::default();
        let t0 = Instant::now();
        assert_eq!(g.before_apply(&d, t0), FightCheck::Apply { drift: false });
        g.wrote(&d);
        for i in 1..=WRITE_FIGHT_LIMIT as u64 {
            let t = t0 + Duration::from_secs(i);
            assert_eq!(g.before_apply(&d, t), FightCheck::Apply { drift: true });
            g.wrote(&d);
        }
        let t = t0 + Duration::from_secs(10);
        let FightCheck::Stop {
            until,
            declared: true,
        } = g.before_apply(&d, t)
        else {
            panic!("expected a fight")
        };
        assert_eq!(until, t + WRITE_FIGHT_WINDOW);
        assert!(matches!(
            g.before_apply(&d, t + Duration::from_secs(1)),
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
