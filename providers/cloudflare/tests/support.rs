//! What the fake-API tests share: settings and a binding for the fake's fixture.
#![allow(dead_code)]

use std::num::NonZeroU32;
use std::time::Duration;

use gslb_cloudflare::fake::{Fake, ids};
use gslb_cloudflare::{
    ApiToken, CloudflareBinding, CloudflarePool, CloudflareProvider, CloudflareSettings,
    LoadBalancerRef,
};

/// Production settings pointed at `fake`, with short backoffs and a 2 s attempt timeout.
pub fn settings(fake: &Fake) -> CloudflareSettings {
    CloudflareSettings {
        api_base: fake.base_url(),
        requests_per_window: NonZeroU32::new(1200).unwrap(),
        backoff_base: Duration::from_millis(10),
        backoff_max: Duration::from_millis(50),
        attempt_timeout: Some(Duration::from_secs(2)),
        ..CloudflareSettings::new(ApiToken::new(ids::TOKEN))
    }
}

/// The fixture's load balancer by `lb` (id or name), pools NCP then GCP.
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

/// A provider for the fixture's load balancer, named by id.
pub fn provider(fake: &Fake) -> CloudflareProvider {
    CloudflareProvider::new(settings(fake), binding(ids::LB)).expect("provider")
}

/// The pool refs in priority order.
pub fn priority() -> Vec<String> {
    vec![ids::NCP.into(), ids::GCP.into()]
}
