//! The contract between gslb and a DNS/traffic provider.
//!
//! This crate knows nothing of probes, policies or the engine: it speaks only of provider-side
//! pools (a Route 53 set identifier, a Cloudflare pool id), what gslb wants them to do
//! ([`DesiredState`]), what the provider says they do ([`ObservedState`]), and the pure
//! [`diff`] between the two ([`Plan`]). Adapters implement [`Provider`]; the reconciler in the
//! `gslb` crate drives them. Errors are classified once, in [`ProviderError::is_retryable`].
//!
//! Invariant (checked by the contract tests): for any desired `d` and observed `o`,
//! `diff(d, o.applied(diff(d, o)))` is empty.

mod any;
mod backoff;
#[cfg(feature = "contract")]
pub mod contract;
mod error;
mod memory;
#[cfg(feature = "shared")]
mod shared;
mod state;

pub use any::AnyProvider;
pub use backoff::{Backoff, RETRY_AFTER_MAX, retry_after_secs};
pub use error::ProviderError;
pub use memory::{MemoryProvider, RecordedWrite};
#[cfg(feature = "shared")]
pub use shared::SharedRead;
pub use state::{
    Change, DesiredState, FailoverStyle, ObservedPool, ObservedState, Plan, PoolRef, Served, diff,
};

use std::future::Future;

/// A provider binding: one target (a Route 53 failover pair, a Cloudflare load balancer) that
/// gslb steers.
///
/// Implementations must be idempotent: applying a plan computed from a fresh [`observe`] twice
/// changes nothing the second time. They fence their writes (a health-check version, an exact
/// DELETE, a read-back) and report a lost race as [`ProviderError::Conflict`].
///
/// [`observe`]: Provider::observe
pub trait Provider: Send + Sync + 'static {
    /// Short, stable provider name used in metric labels and logs (`"route53"`, `"memory"`).
    fn name(&self) -> &'static str;

    /// How this provider expresses "which pool serves".
    fn style(&self) -> FailoverStyle;

    /// Reads the provider's current state of every pool the binding names. Always a fresh read.
    ///
    /// # Errors
    /// [`ProviderError::NotFound`] when a named object is missing, [`ProviderError::Unowned`]
    /// when it exists but is not one gslb manages, and the transport classes otherwise.
    fn observe(&self) -> impl Future<Output = Result<ObservedState, ProviderError>> + Send;

    /// As [`Provider::observe`], but may answer from a read shared with other bindings of
    /// the same zone or account (`SharedRead`, feature `shared`) that started at most `max_age` ago: the
    /// reconciler's periodic resync passes its resync period, so steady-state reads grow with
    /// the zones and accounts, not with the services. `Duration::ZERO` asks for a read that
    /// started after this call (what `observe` means). The default is [`Provider::observe`]:
    /// a provider without shared reads reads afresh.
    ///
    /// # Errors
    /// As [`Provider::observe`].
    fn observe_within(
        &self,
        max_age: std::time::Duration,
    ) -> impl Future<Output = Result<ObservedState, ProviderError>> + Send {
        let _ = max_age;
        self.observe()
    }

    /// Applies a plan computed by [`diff`] against a fresh [`Provider::observe`].
    ///
    /// # Errors
    /// [`ProviderError::Conflict`] when a fence shows another writer got there first: the
    /// caller re-observes and re-plans. Other classes as for `observe`.
    fn apply(&self, plan: &Plan) -> impl Future<Output = Result<(), ProviderError>> + Send;

    /// Applies `plan` as the elected cluster writer of this binding (`[cluster]`), carrying
    /// its [`Stamp`]. A provider without compare-and-set stamps the epoch on what it writes
    /// and checks it on read-back (Cloudflare: the load balancer's `description`, read back
    /// into [`ObservedState::writer_epoch`]), and sends no request once the stamp's
    /// `deadline` has passed. The default is [`Provider::apply`]: a provider with its own
    /// version fence (Route 53's `HealthCheckVersion`) needs nothing more.
    ///
    /// # Errors
    /// As [`Provider::apply`]; [`ProviderError::Transient`] when the deadline passed before a
    /// request was sent; [`ProviderError::Conflict`] when the read-back shows another epoch.
    fn apply_as(
        &self,
        plan: &Plan,
        stamp: Stamp,
    ) -> impl Future<Output = Result<(), ProviderError>> + Send {
        let _ = stamp;
        self.apply(plan)
    }
    /// Whether, in a cluster (`[cluster]`), only the binding's elected writer may apply.
    /// Default `true`. `false` for a provider that writes only this instance's own state
    /// (Route 53 data-plane votes: every instance votes its own view, and Route 53 counts
    /// the votes), so every instance applies its own decisions, elected or not.
    fn elected(&self) -> bool {
        true
    }
    /// Told after each pass that found the provider holding a decision that pushes a pool
    /// (in sync, or just written). Default: nothing. A provider that answers only with what
    /// this instance decided (Route 53 data-plane votes) gives no answer before the first
    /// such pass after a start: the state it started with is no decision.
    fn decided(&self) {}
    /// Whether the provider itself refuses a write made under a stale view (a version fence:
    /// Route 53's `HealthCheckVersion`). Default `true`. `false` for a provider without
    /// compare-and-set (Cloudflare): a write a former cluster writer sent can land after a
    /// newer writer's, so the newer writer reads back often for a while after taking over
    /// (see the reconciler's `fenced` module).
    fn fences_writes(&self) -> bool {
        true
    }
}

/// What a cluster writer's write carries: its epoch (the fencing token: the creation revision
/// of its etcd leader key, larger for every newer writer) and the monotonic instant after which
/// it must not send any request (the end of its apply's one hard deadline).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// The writer's epoch.
    pub epoch: u64,
    /// No request is sent at or after this instant.
    pub deadline: std::time::Instant,
}
