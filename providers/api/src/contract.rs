//! The shared contract suite (feature `contract`, tests only): every adapter runs these
//! functions against its own fake or emulator, so all adapters are held to the same rules.
//!
//! - [`converges`]: observe → plan → apply → observe converges, and a second pass plans
//!   nothing;
//! - [`refuses_foreign`]: an object the binding names but gslb does not manage is refused
//!   ([`ProviderError::Unowned`]) by observe;
//! - [`classifies_faults`]: a throttled call is [`ProviderError::RateLimited`], a server
//!   error [`ProviderError::Transient`] (both retryable), an authentication failure
//!   [`ProviderError::Auth`] (fatal).
//!
//! Each function panics with a message on a broken rule, like an assertion.

use std::collections::BTreeSet;
use std::future::Future;

use crate::{DesiredState, PoolRef, Provider, ProviderError, diff};

/// A fault a harness can make its provider's next calls run into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The provider throttles (HTTP 429, Route 53 `Throttling`).
    Throttled,
    /// The provider fails on its side (HTTP 5xx) on every attempt.
    ServerError,
    /// The credentials are refused (HTTP 401/403, `AccessDenied`).
    AuthFailure,
}

/// What an adapter's tests provide to run the suite.
pub trait Harness {
    /// The provider under test.
    type P: Provider;

    /// The provider, bound to pools [`Harness::priority`] that gslb manages.
    fn provider(&self) -> &Self::P;

    /// The binding's pool refs in priority order (at least two).
    fn priority(&self) -> Vec<PoolRef>;

    /// Makes an object the binding names foreign (not marked as managed by gslb).
    fn make_foreign(&mut self) -> impl Future<Output = ()>;

    /// Makes the provider's calls from now on fail with `fault`, until [`Harness::heal`].
    fn inject(&mut self, fault: Fault) -> impl Future<Output = ()>;

    /// Removes an injected fault.
    fn heal(&mut self) -> impl Future<Output = ()>;
}

/// Observe → apply the plan that makes the second pool serve → observe converges; a second
/// pass plans nothing; then back to the first pool, also converging.
///
/// # Panics
/// When a call fails or a rule is broken.
pub async fn converges<H: Harness>(h: &mut H) {
    let priority = h.priority();
    let p = h.provider();
    for active in [&priority[1], &priority[0]] {
        let desired = DesiredState::for_active(p.style(), &priority, active, &BTreeSet::new());
        let before = p.observe().await.expect("observe");
        let plan = diff(&desired, &before).expect("plan");
        p.apply(&plan).await.expect("apply");
        let after = p.observe().await.expect("observe after apply");
        assert_eq!(
            after.active(&priority),
            Some(active),
            "after applying {plan:?} the provider serves {:?}",
            after.active(&priority)
        );
        let again = diff(&desired, &after).expect("second plan");
        assert!(again.is_empty(), "a second pass still plans {again:?}");
    }
}

/// A foreign object is refused by observe with [`ProviderError::Unowned`].
///
/// # Panics
/// When observe does not refuse it.
pub async fn refuses_foreign<H: Harness>(h: &mut H) {
    h.make_foreign().await;
    let got = h.provider().observe().await;
    assert!(
        matches!(got, Err(ProviderError::Unowned(_))),
        "observe of a foreign object gave {got:?}"
    );
}

/// Each [`Fault`] is classified the same way by every adapter: throttling and server errors
/// are retryable (`rate_limited`, `transient`), an authentication failure is fatal (`auth`).
///
/// # Panics
/// When a fault is classified otherwise.
pub async fn classifies_faults<H: Harness>(h: &mut H) {
    for (fault, code, retryable) in [
        (Fault::Throttled, "rate_limited", true),
        (Fault::ServerError, "transient", true),
        (Fault::AuthFailure, "auth", false),
    ] {
        h.inject(fault).await;
        let err = h
            .provider()
            .observe()
            .await
            .expect_err("observe under an injected fault");
        assert_eq!(err.code(), code, "{fault:?} gave {err:?}");
        assert_eq!(err.is_retryable(), retryable, "{fault:?} gave {err:?}");
        h.heal().await;
    }
}
