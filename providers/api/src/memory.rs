//! An in-process provider: the embedded default for `gslb demo`, benchmarks and tests.

use std::sync::Mutex;
use std::time::SystemTime;

use crate::{
    Change, FailoverStyle, ObservedPool, ObservedState, Plan, PoolRef, Provider, ProviderError,
};

/// One accepted write, with the wall-clock time it was accepted.
#[derive(Debug, Clone)]
pub struct RecordedWrite {
    /// When the provider accepted the change.
    pub at: SystemTime,
    /// The change.
    pub change: Change,
}

/// A provider that keeps its state in memory and fences writes on per-pool versions like
/// Route 53 health checks do.
#[derive(Debug)]
pub struct MemoryProvider {
    style: FailoverStyle,
    state: Mutex<(ObservedState, Vec<RecordedWrite>)>,
}

impl MemoryProvider {
    /// A provider whose pools `pools` are all enabled, with the given style.
    pub fn new(style: FailoverStyle, pools: &[PoolRef]) -> Self {
        let state = ObservedState {
            order: (style == FailoverStyle::Order).then(|| pools.to_vec()),
            pools: pools
                .iter()
                .map(|p| {
                    (
                        p.clone(),
                        ObservedPool {
                            enabled: true,
                            version: Some("1".into()),
                            healthy: None,
                        },
                    )
                })
                .collect(),
            fallback: None,
            writer_epoch: None,
            served: None,
        };
        Self {
            style,
            state: Mutex::new((state, Vec::new())),
        }
    }

    /// Every write accepted so far, oldest first.
    pub fn writes(&self) -> Vec<RecordedWrite> {
        self.lock().1.clone()
    }

    /// The current state, as `observe` would return it.
    pub fn snapshot(&self) -> ObservedState {
        self.lock().0.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (ObservedState, Vec<RecordedWrite>)> {
        // A poisoned lock only means a panic elsewhere; the state itself is always whole.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Provider for MemoryProvider {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn style(&self) -> FailoverStyle {
        self.style
    }

    async fn observe(&self) -> Result<ObservedState, ProviderError> {
        Ok(self.snapshot())
    }

    async fn apply(&self, plan: &Plan) -> Result<(), ProviderError> {
        let mut guard = self.lock();
        for change in plan {
            if let Change::SetEnabled {
                pool,
                expected_version,
                ..
            } = change
            {
                let current = guard
                    .0
                    .pools
                    .get(pool)
                    .ok_or_else(|| ProviderError::NotFound(pool.clone()))?;
                if current.version != *expected_version {
                    return Err(ProviderError::Conflict(format!(
                        "pool {pool} version moved"
                    )));
                }
            }
        }
        guard.0 = guard.0.applied(plan);
        let at = SystemTime::now();
        guard.1.extend(plan.iter().map(|change| RecordedWrite {
            at,
            change: change.clone(),
        }));
        Ok(())
    }
}
