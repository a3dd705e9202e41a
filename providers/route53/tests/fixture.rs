//! The failover pair every adapter test steers: `api.example.com A`, seoul PRIMARY
//! (192.0.2.1), tokyo SECONDARY (192.0.2.2), TTL 60 s. Included by both support modules.

use std::time::Duration;

use gslb_route53::{Route53Binding, Route53Pool};

/// The record name of the pair.
pub const NAME: &str = "api.example.com";

/// The pair in hosted zone `zone`.
pub fn binding(zone: &str) -> Route53Binding {
    let pool = |id: &str, value: &str| Route53Pool {
        set_identifier: id.into(),
        values: vec![value.into()],
        alias: None,
    };
    Route53Binding {
        hosted_zone_id: zone.to_owned(),
        record_name: NAME.into(),
        record_type: "A".into(),
        ttl: Duration::from_secs(60),
        pools: vec![pool("seoul", "192.0.2.1"), pool("tokyo", "192.0.2.2")],
    }
}
