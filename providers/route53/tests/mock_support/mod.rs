//! Scripted Route 53 answers for `aws-smithy-mocks` tests: a binding, the records and verdict
//! checks Route 53 would return for it, and Route 53's error bodies as sent on the wire (so the
//! SDK's own error parsing is part of what is tested).
#![allow(dead_code)]

use std::num::NonZeroU32;

use aws_sdk_route53::Client;
use aws_sdk_route53::operation::get_health_check::GetHealthCheckOutput;
use aws_sdk_route53::operation::list_resource_record_sets::ListResourceRecordSetsOutput;
use aws_sdk_route53::primitives::DateTime;
use aws_sdk_route53::types::{
    ChangeInfo, ChangeStatus, HealthCheck, HealthCheckConfig, HealthCheckType, ResourceRecord,
    ResourceRecordSet, ResourceRecordSetFailover, RrType,
};
use gslb_route53::{Route53Binding, Route53Provider, Route53Settings};

#[path = "../fixture.rs"]
mod fixture;

/// The binding every mocked test steers: `api.example.com A`, seoul PRIMARY, tokyo SECONDARY.
pub fn binding() -> Route53Binding {
    fixture::binding("Z0TEST")
}

/// Production settings except a rate limit high enough not to matter in a test.
pub fn settings() -> Route53Settings {
    Route53Settings {
        requests_per_second: NonZeroU32::new(1000).unwrap(),
        ..Route53Settings::default()
    }
}

/// A provider around a mocked client.
pub fn provider(client: Client, settings: Route53Settings) -> Route53Provider {
    Route53Provider::new(client, settings, binding())
}

/// The verdict check id used for pool `index`.
pub fn check_id(index: usize) -> String {
    format!("hc-{index}")
}

/// Pool `index`'s record as Route 53 lists it (trailing dot), pointing at `check_id(index)`.
pub fn listed_record(index: usize) -> ResourceRecordSet {
    let b = binding();
    let role = if index == 0 {
        ResourceRecordSetFailover::Primary
    } else {
        ResourceRecordSetFailover::Secondary
    };
    ResourceRecordSet::builder()
        .name("api.example.com.")
        .r#type(RrType::A)
        .set_identifier(&b.pools[index].set_identifier)
        .failover(role)
        .ttl(60)
        .resource_records(
            ResourceRecord::builder()
                .value(&b.pools[index].values[0])
                .build()
                .unwrap(),
        )
        .health_check_id(check_id(index))
        .build()
        .unwrap()
}

/// A `ListResourceRecordSets` answer with `records`, not truncated.
pub fn listing(records: Vec<ResourceRecordSet>) -> ListResourceRecordSetsOutput {
    ListResourceRecordSetsOutput::builder()
        .set_resource_record_sets(Some(records))
        .is_truncated(false)
        .max_items(300)
        .build()
        .unwrap()
}

/// A health check as `GetHealthCheck` returns it.
pub fn health_check(id: &str, caller_reference: &str, inverted: bool, version: i64) -> HealthCheck {
    let config = HealthCheckConfig::builder()
        .r#type(HealthCheckType::Calculated)
        .health_threshold(0)
        .inverted(inverted)
        .disabled(false)
        .build()
        .unwrap();
    HealthCheck::builder()
        .id(id)
        .caller_reference(caller_reference)
        .health_check_config(config)
        .health_check_version(version)
        .build()
        .unwrap()
}

/// `GetHealthCheck` of a gslb verdict check.
pub fn verdict_output(id: &str, inverted: bool, version: i64) -> GetHealthCheckOutput {
    GetHealthCheckOutput::builder()
        .health_check(health_check(id, &format!("gslb-{id}-0"), inverted, version))
        .build()
}

/// A change with `status`.
pub fn change_info(status: ChangeStatus) -> ChangeInfo {
    ChangeInfo::builder()
        .id("/change/C0TEST")
        .status(status)
        .submitted_at(DateTime::from_secs(0))
        .build()
        .unwrap()
}

/// A Route 53 error body as sent on the wire (restXml `ErrorResponse`).
pub fn error_body(code: &str, message: &str) -> String {
    format!(
        "<?xml version=\"1.0\"?>\n<ErrorResponse xmlns=\"https://route53.amazonaws.com/doc/2013-04-01/\">\
         <Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error>\
         <RequestId>00000000-0000-0000-0000-000000000000</RequestId></ErrorResponse>"
    )
}

/// HTTP 400 `Throttling` "Rate exceeded", as Route 53 throttles.
pub fn throttling() -> String {
    error_body("Throttling", "Rate exceeded")
}
