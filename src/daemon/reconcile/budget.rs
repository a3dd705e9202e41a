//! The per-binding provider call budget (issue 14, item 3): at most
//! [`Steering::calls_per_minute`](super::Steering::calls_per_minute) provider calls that
//! are not paced by a timer (the read of a pass after a changed decision, a write, a role
//! change or a budget wait, and every write) in any 60 s window, whatever the decisions do.
//! Reads on a timer (the resync, a backoff after a failure, a cluster fence's wait) are paced
//! by that timer and not counted. A pass that would exceed the budget sends nothing: the decision
//! stays "decided but not applied" with the reason in the status (`budget`), the pass is
//! counted in `gslb_provider_budget_exhausted_total{provider,service}`, and the reconciler
//! waits until the oldest call in the window is a minute old.

use std::collections::VecDeque;
use std::time::Duration;

use gslb_core::engine::Decision;
use gslb_provider::Provider;
use tokio::time::Instant;

use super::{Pass, Reconciler};

/// The window the budget counts over: one minute.
pub const BUDGET_WINDOW: Duration = Duration::from_secs(60);

/// The calls of the last [`BUDGET_WINDOW`], oldest first.
#[derive(Debug)]
pub(super) struct CallBudget {
    per_minute: usize,
    recent: VecDeque<Instant>,
    /// Whether the budget is spent (shown in the status) until the next call.
    spent: bool,
}

impl CallBudget {
    /// A budget of `per_minute` calls (at least 1).
    pub(super) fn new(per_minute: u32) -> Self {
        let per_minute = usize::try_from(per_minute.max(1)).unwrap_or(usize::MAX);
        Self {
            per_minute,
            recent: VecDeque::with_capacity(per_minute),
            spent: false,
        }
    }

    /// Takes one call at `now`, or says how long until one is allowed.
    fn take(&mut self, now: Instant) -> Result<(), Duration> {
        while self
            .recent
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= BUDGET_WINDOW)
        {
            self.recent.pop_front();
        }
        if self.recent.len() >= self.per_minute {
            let oldest = self.recent.front().copied().unwrap_or(now);
            return Err((oldest + BUDGET_WINDOW).saturating_duration_since(now));
        }
        self.recent.push_back(now);
        Ok(())
    }
}

impl<P: Provider> Reconciler<'_, P> {
    /// Spends one provider call of the budget on `decision`'s pass, or ends the pass: the
    /// decision is pending with the reason, the pass counted, and the reconciler waits.
    pub(super) fn spend(&mut self, decision: Option<&Decision>) -> Result<(), Pass> {
        let budget = &mut self.budget;
        match budget.take(Instant::now()) {
            Ok(()) => {
                if std::mem::take(&mut budget.spent) {
                    self.telemetry
                        .board
                        .update_apply(self.service(), |a| a.budget = None);
                }
                Ok(())
            }
            Err(left) => {
                let per_minute = budget.per_minute;
                let first = !std::mem::replace(&mut budget.spent, true);
                let (service, name) = (self.service(), self.name());
                self.telemetry
                    .metrics
                    .provider_budget_exhausted_total
                    .with_label_values(&[name, service.0.as_str()])
                    .inc();
                let wait = humantime::format_duration(Duration::from_secs(left.as_secs().max(1)));
                let reason = format!(
                    "provider call budget spent: {per_minute} calls in the last minute; next call in {wait}"
                );
                if first {
                    tracing::warn!(service = %service, provider = name, %reason, "not calling the provider");
                }
                self.mark_pending(decision, |a| a.budget = Some(reason));
                Err(Pass::Budget(left))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn no_more_than_the_budget_in_any_minute() {
        let mut budget = CallBudget::new(3);
        let start = Instant::now();
        for _ in 0..3 {
            assert_eq!(budget.take(Instant::now()), Ok(()));
            tokio::time::advance(Duration::from_secs(10)).await;
        }
        // 30 s after the first call: 30 s more to wait.
        assert_eq!(budget.take(Instant::now()), Err(Duration::from_secs(30)));
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(budget.take(Instant::now()), Ok(()));
        assert_eq!(Instant::now() - start, BUDGET_WINDOW);
        assert!(
            budget.take(Instant::now()).is_err(),
            "still three in the window"
        );
    }
}
