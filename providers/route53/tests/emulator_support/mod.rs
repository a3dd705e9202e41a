//! What the emulator tests share: the emulator process helper (the workspace's
//! `tests/support/emulators.rs`), an SDK client for an emulator, a hosted zone, a binding, and
//! a plain reading of the pair's records.
#![allow(dead_code)]

#[path = "../../../../tests/support/emulators.rs"]
pub mod emulators;

use std::num::NonZeroU32;
use std::time::Duration;

use aws_sdk_route53::Client;
use aws_sdk_route53::config::SharedInterceptor;
use aws_sdk_route53::types::ResourceRecordSet;
use gslb_route53::{Route53Binding, Route53Settings};

#[path = "../fixture.rs"]
mod fixture;

/// The record name every emulator test uses.
pub use fixture::NAME;

/// [`gslb_route53::testing::emulator_client`] for `endpoint`, plus `interceptors`.
pub fn client(endpoint: &str, interceptors: Vec<SharedInterceptor>) -> Client {
    let mut builder = gslb_route53::testing::emulator_client(endpoint)
        .config()
        .to_builder();
    for i in interceptors {
        builder.push_interceptor(i);
    }
    Client::from_conf(builder.build())
}

/// Creates the hosted zone `example.com` and returns its id as Route 53 returns it
/// (`/hostedzone/...`).
pub async fn hosted_zone(client: &Client) -> String {
    let out = client
        .create_hosted_zone()
        .name("example.com")
        .caller_reference(format!("gslb-test-{}", std::process::id()))
        .send()
        .await
        .expect("create hosted zone");
    out.hosted_zone.expect("zone").id
}

/// `api.example.com A`, seoul PRIMARY (192.0.2.1), tokyo SECONDARY (192.0.2.2), TTL 60 s.
pub fn binding(zone: &str) -> Route53Binding {
    fixture::binding(zone)
}

/// Fast settings for an emulator on loopback: no meaningful rate limit, 20 ms polls.
pub fn settings() -> Route53Settings {
    Route53Settings {
        requests_per_second: NonZeroU32::new(1000).unwrap(),
        poll_interval: Duration::from_millis(20),
        change_timeout: Duration::from_secs(10),
        ..Route53Settings::default()
    }
}

/// Every `api.example.com` record in the zone, as listed, sorted by set identifier.
pub async fn records(client: &Client, zone: &str) -> Vec<ResourceRecordSet> {
    let out = client
        .list_resource_record_sets()
        .hosted_zone_id(zone)
        .send()
        .await
        .expect("list records");
    let mut ours: Vec<_> = out
        .resource_record_sets
        .into_iter()
        .filter(|r| r.name.trim_end_matches('.') == NAME)
        .collect();
    ours.sort_by(|a, b| a.set_identifier.cmp(&b.set_identifier));
    ours
}

/// The values of the record with `set_identifier`, or `None` when there is none.
pub fn values_of(records: &[ResourceRecordSet], set_identifier: &str) -> Option<Vec<String>> {
    records
        .iter()
        .find(|r| r.set_identifier.as_deref() == Some(set_identifier))
        .map(|r| {
            r.resource_records()
                .iter()
                .map(|v| v.value().to_owned())
                .collect()
        })
}
