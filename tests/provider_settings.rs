//! The daemon's `[route53]` and `[cloudflare]` tables (plain data in `gslb::config`, which does
//! not depend on the adapters) default to what the adapters default to, and convert to the
//! adapters' settings with the one call the binary makes.

use std::time::Duration;

use gslb::config::{CloudflareSettings, Route53Settings};

#[test]
fn route53_defaults_are_the_adapter_s() {
    let ours = Route53Settings::default();
    let adapter = gslb_route53::Route53Settings::default();
    assert_eq!(ours.endpoint_url, adapter.endpoint_url);
    assert_eq!(ours.region, adapter.region);
    assert_eq!(ours.requests_per_second, adapter.requests_per_second);
    assert_eq!(ours.change_timeout, adapter.change_timeout);
    let converted = gslb_route53::Route53Settings::configured(
        ours.endpoint_url,
        ours.region,
        ours.requests_per_second,
        ours.change_timeout,
    );
    assert_eq!(converted, adapter);
}

#[test]
fn cloudflare_defaults_are_the_adapter_s() {
    let ours = CloudflareSettings::default();
    assert_eq!(ours.api_base, gslb_cloudflare::DEFAULT_API_BASE);
    assert_eq!(
        ours.requests_per_window.get(),
        gslb_cloudflare::DEFAULT_REQUESTS_PER_WINDOW
    );
    let token = gslb_cloudflare::ApiToken::new("t");
    let converted = gslb_cloudflare::CloudflareSettings::configured(
        ours.api_base,
        ours.requests_per_window,
        token.clone(),
    );
    let adapter = gslb_cloudflare::CloudflareSettings::new(token);
    assert_eq!(converted.api_base, adapter.api_base);
    assert_eq!(converted.requests_per_window, adapter.requests_per_window);
    assert_eq!(converted.attempt_timeout, Some(Duration::from_secs(10)));
}
