//! The test harness around the fake, shared by this crate's tests and the gslb crate's: the
//! adapter's settings, binding and provider for the fixture in [`ids`].

use std::num::NonZeroU32;
use std::time::Duration;

use super::{Fake, ids};
use crate::{
    ApiToken, CloudflareBinding, CloudflarePool, CloudflareProvider, CloudflareSettings,
    LoadBalancerRef,
};

/// Requests per 5-minute window the harness allows: Cloudflare's whole limit per token
/// (1,200, Cloudflare API docs, "Rate limits"), so the rate limiter never paces a test. The
/// gslb crate's end-to-end tests write it as `[cloudflare] requests_per_window`.
pub const REQUESTS_PER_WINDOW: u32 = 1200;

/// Production settings pointed at `fake` with its token, [`REQUESTS_PER_WINDOW`], backoffs of
/// 10 ms to 50 ms and a 2 s attempt deadline. A test in paused time sets `attempt_timeout:
/// None` (see [`CloudflareSettings::attempt_timeout`]).
pub fn settings(fake: &Fake) -> CloudflareSettings {
    CloudflareSettings {
        api_base: fake.base_url(),
        requests_per_window: NonZeroU32::new(REQUESTS_PER_WINDOW).unwrap_or(NonZeroU32::MIN),
        backoff_base: Duration::from_millis(10),
        backoff_max: Duration::from_millis(50),
        attempt_timeout: Some(Duration::from_secs(2)),
        ..CloudflareSettings::new(ApiToken::new(ids::TOKEN))
    }
}

/// Production settings, backoffs included, pointed at `fake` with its token and
/// [`REQUESTS_PER_WINDOW`], for tests in paused tokio time: no attempt deadline (see
/// [`CloudflareSettings::attempt_timeout`]), so simulated time never cuts a socket wait short.
pub fn paused_settings(fake: &Fake) -> CloudflareSettings {
    CloudflareSettings {
        api_base: fake.base_url(),
        requests_per_window: NonZeroU32::new(REQUESTS_PER_WINDOW).unwrap_or(NonZeroU32::MIN),
        attempt_timeout: None,
        ..CloudflareSettings::new(ApiToken::new(ids::TOKEN))
    }
}

/// The fixture's load balancer by `lb` (id or name, [`LoadBalancerRef::parse`]), pools NCP
/// then GCP.
pub fn binding(lb: &str) -> CloudflareBinding {
    CloudflareBinding {
        account_id: ids::ACCOUNT.into(),
        zone_id: ids::ZONE.into(),
        load_balancer: LoadBalancerRef::parse(lb),
        pools: [ids::NCP, ids::GCP]
            .map(|p| CloudflarePool { pool_id: p.into() })
            .to_vec(),
    }
}

/// A provider for the fixture's load balancer, named by id, with [`settings`].
///
/// # Panics
/// Never for the fixture: its binding is valid.
pub fn provider(fake: &Fake) -> CloudflareProvider {
    CloudflareProvider::new(settings(fake), binding(ids::LB)).expect("provider")
}

/// The fixture's pool refs in priority order: NCP, GCP.
pub fn priority() -> Vec<String> {
    vec![ids::NCP.into(), ids::GCP.into()]
}
