//! [`AnyProvider`]: a provider whose concrete type is chosen at run time, from a policy's
//! target. The daemon is generic over [`Provider`]; the binary, the only code that names the
//! concrete adapters, wraps each in an `AnyProvider` so one daemon runs Route 53 and
//! Cloudflare bindings side by side. The cost is one boxed future per provider call.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::{FailoverStyle, ObservedState, Plan, Provider, ProviderError, Stamp};

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// [`Provider`] with boxed futures, so it can stand behind a `dyn`.
trait DynProvider: Send + Sync {
    fn name(&self) -> &'static str;
    fn style(&self) -> FailoverStyle;
    fn elected(&self) -> bool;
    fn decided(&self);
    fn fences_writes(&self) -> bool;
    fn observe(&self) -> BoxFuture<'_, Result<ObservedState, ProviderError>>;
    fn observe_within(
        &self,
        max_age: Duration,
    ) -> BoxFuture<'_, Result<ObservedState, ProviderError>>;
    fn apply<'a>(&'a self, plan: &'a Plan) -> BoxFuture<'a, Result<(), ProviderError>>;
    fn apply_as<'a>(
        &'a self,
        plan: &'a Plan,
        stamp: Stamp,
    ) -> BoxFuture<'a, Result<(), ProviderError>>;
}

impl<P: Provider> DynProvider for P {
    fn name(&self) -> &'static str {
        Provider::name(self)
    }

    fn style(&self) -> FailoverStyle {
        Provider::style(self)
    }

    fn elected(&self) -> bool {
        Provider::elected(self)
    }

    fn decided(&self) {
        Provider::decided(self);
    }

    fn fences_writes(&self) -> bool {
        Provider::fences_writes(self)
    }

    fn observe(&self) -> BoxFuture<'_, Result<ObservedState, ProviderError>> {
        Box::pin(Provider::observe(self))
    }

    fn observe_within(
        &self,
        max_age: Duration,
    ) -> BoxFuture<'_, Result<ObservedState, ProviderError>> {
        Box::pin(Provider::observe_within(self, max_age))
    }

    fn apply<'a>(&'a self, plan: &'a Plan) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(Provider::apply(self, plan))
    }

    fn apply_as<'a>(
        &'a self,
        plan: &'a Plan,
        stamp: Stamp,
    ) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(Provider::apply_as(self, plan, stamp))
    }
}

/// Any [`Provider`], its type erased. Cloning shares the provider.
#[derive(Clone)]
pub struct AnyProvider(Arc<dyn DynProvider>);

impl AnyProvider {
    /// Wraps `provider` (shared: the caller may keep its own handle, e.g. to inspect an
    /// in-memory provider in tests).
    pub fn new<P: Provider>(provider: Arc<P>) -> Self {
        Self(provider)
    }
}

impl std::fmt::Debug for AnyProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AnyProvider({})", self.0.name())
    }
}

impl Provider for AnyProvider {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn style(&self) -> FailoverStyle {
        self.0.style()
    }

    fn elected(&self) -> bool {
        self.0.elected()
    }

    fn decided(&self) {
        self.0.decided();
    }

    fn fences_writes(&self) -> bool {
        self.0.fences_writes()
    }

    fn observe(&self) -> impl Future<Output = Result<ObservedState, ProviderError>> + Send {
        self.0.observe()
    }

    fn observe_within(
        &self,
        max_age: Duration,
    ) -> impl Future<Output = Result<ObservedState, ProviderError>> + Send {
        self.0.observe_within(max_age)
    }

    async fn apply(&self, plan: &Plan) -> Result<(), ProviderError> {
        self.0.apply(plan).await
    }

    async fn apply_as(&self, plan: &Plan, stamp: Stamp) -> Result<(), ProviderError> {
        self.0.apply_as(plan, stamp).await
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::{DesiredState, MemoryProvider, PoolRef, diff};

    #[test]
    fn an_erased_provider_reads_and_writes_the_one_it_wraps() {
        let pools: Vec<PoolRef> = vec!["seoul".into(), "tokyo".into()];
        let inner = Arc::new(MemoryProvider::new(FailoverStyle::Enablement, &pools));
        let any = AnyProvider::new(inner.clone());
        assert_eq!(Provider::name(&any), "memory");
        let observe = |p: &AnyProvider| block_on(Provider::observe(p)).expect("reads");
        let want =
            DesiredState::for_active(Provider::style(&any), &pools, "tokyo", &BTreeSet::new());
        let plan = diff(&want, &observe(&any)).expect("plans");
        assert!(!plan.is_empty());
        block_on(Provider::apply(&any, &plan)).expect("writes");
        assert_eq!(
            inner.writes().len(),
            plan.len(),
            "the wrapped provider took the write"
        );
        assert!(diff(&want, &observe(&any)).expect("plans").is_empty());
    }

    /// Polls a future that never waits (the memory provider's) to completion.
    fn block_on<F: Future>(f: F) -> F::Output {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut f = std::pin::pin!(f);
        loop {
            if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
                return v;
            }
        }
    }
}
