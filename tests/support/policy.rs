//! Policy fixtures: parse expecting errors, assert one error by key and reason, edit a
//! shipped policy's text, a fast-probing two-pool policy on loopback origins.

use std::net::SocketAddr;
use std::path::Path;

use gslb_core::policy::{self, Policy, PolicyError};

/// The errors of `text` parsed as `p.toml`; panics if it is valid.
pub fn errors(text: &str) -> Vec<PolicyError> {
    match policy::parse(Path::new("p.toml"), text) {
        Ok(p) => panic!("expected errors, got a valid policy for {}", p.service),
        Err(e) => e.0,
    }
}

/// Asserts one error has exactly `key` and a reason containing `needle`.
pub fn assert_error(errs: &[PolicyError], key: &str, needle: &str) {
    assert!(
        errs.iter()
            .any(|e| e.key == key && e.reason.contains(needle) && e.file == Path::new("p.toml")),
        "no error at key {key:?} containing {needle:?}; got:\n{}",
        errs.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// `valid` with the first `from` replaced by `to`; `from` must be in it.
pub fn edit(valid: &str, from: &str, to: &str) -> String {
    assert!(
        valid.contains(from),
        "fixture text {from:?} not in the shipped policy"
    );
    valid.replacen(from, to, 1)
}

/// The pools and Route 53 target of a two-region test policy: `seoul` (priority 1) probed at
/// `seoul`, `tokyo` (priority 2) at `tokyo` (whole endpoint URLs), failover records in zone
/// `zone` with a 1 s TTL and values 192.0.2.1 / 192.0.2.2 (TEST-NET-1). Append it to the
/// top-level keys, `[probe]` and `[health]`.
pub fn seoul_tokyo_route53(seoul: &str, tokyo: &str, zone: &str) -> String {
    format!(
        r#"[[pools]]
name = "seoul"
priority = 1
endpoints = ["{seoul}"]
[[pools]]
name = "tokyo"
priority = 2
endpoints = ["{tokyo}"]
[target.route53]
hosted_zone_id = "{zone}"
ttl = "1s"
[target.route53.pools.seoul]
values = ["192.0.2.1"]
[target.route53.pools.tokyo]
values = ["192.0.2.2"]
"#
    )
}

/// Service `service` (`<service>.example.test`) over origins `seoul` and `tokyo` (path
/// `/<service>`), probed every 100 ms (timeout 80 ms), rise 2, fall `fall`, Route 53 zone
/// `ZTEST`.
pub fn fast_seoul_tokyo(service: &str, fall: u32, seoul: SocketAddr, tokyo: SocketAddr) -> Policy {
    let text = format!(
        r#"service = "{service}"
hostname = "{service}.example.test"
[probe]
interval = "100ms"
timeout = "80ms"
[health]
fall = {fall}
rise = 2
{pools}"#,
        pools = seoul_tokyo_route53(
            &format!("http://{seoul}/{service}"),
            &format!("http://{tokyo}/{service}"),
            "ZTEST",
        ),
    );
    policy::parse(Path::new("p.toml"), &text).expect("valid policy")
}
