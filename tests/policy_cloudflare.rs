//! Policy validation of the Cloudflare target (`[target.cloudflare]`): the shipped policy, and
//! every rejection with its key and message.

mod support;

use std::path::Path;
use std::time::Duration;

use gslb_core::policy::{self, Target};

use support::policy::{assert_error, errors};

const VALID: &str = include_str!("../policies/web-ncp-gcp.toml");

fn with(from: &str, to: &str) -> String {
    support::policy::edit(VALID, from, to)
}

#[test]
fn shipped_policy_is_valid_and_read_as_written() {
    let p = policy::parse(Path::new("web.toml"), VALID).expect("shipped policy validates");
    let Target::Cloudflare(t) = &p.target else {
        panic!("not a Cloudflare target")
    };
    assert_eq!(t.load_balancer, "web.example.com");
    assert_eq!(t.ttl, Duration::from_secs(30));
    let order: Vec<&str> = t.pools.iter().map(|p| p.pool.0.as_str()).collect();
    assert_eq!(order, ["ncp", "gcp"], "NCP first, GCP second");
    assert_eq!(t.pools[0].pool_id, "17b5962d775c646f3f9725cbc7a53df4");
    // fall 3 x interval 10 s + timeout 4 s + TTL 30 s.
    assert_eq!(p.worst_case_failover(), Duration::from_secs(64));
}

#[test]
fn defaults_load_balancer_to_hostname_and_ttl_to_30s() {
    let text = with("load_balancer = \"web.example.com\"     # the load balancer's name (or its 32-digit id)\n", "")
        .replace("ttl = \"30s\"                           # Cloudflare's default for DNS-only load balancers\n", "");
    let p = policy::parse(Path::new("p.toml"), &text).expect("valid");
    let Target::Cloudflare(t) = &p.target else {
        panic!()
    };
    assert_eq!(t.load_balancer, "web.example.com");
    assert_eq!(t.ttl, Duration::from_secs(30));
}

#[test]
fn a_load_balancer_id_is_accepted() {
    let text = with(
        "load_balancer = \"web.example.com\"",
        "load_balancer = \"699D98642C564D2E855E9661899B7252\"",
    );
    let p = policy::parse(Path::new("p.toml"), &text).expect("valid");
    let Target::Cloudflare(t) = &p.target else {
        panic!()
    };
    assert_eq!(t.load_balancer, "699d98642c564d2e855e9661899b7252");
}

#[test]
fn malformed_ids_are_rejected() {
    let text = with(
        "account_id = \"023e105f4ecef8ad9ca31a8372d0c353\"",
        "account_id = \"acme\"",
    )
    .replace(
        "zone_id = \"023e105f4ecef8ad9ca31a8372d0c354\"",
        "zone_id = \"\"",
    )
    .replace(
        "pool_id = \"17b5962d775c646f3f9725cbc7a53df4\"",
        "pool_id = \"ncp-pool\"",
    );
    let errs = errors(&text);
    assert_error(
        &errs,
        "target.cloudflare.account_id",
        "32 hexadecimal digits",
    );
    assert_error(&errs, "target.cloudflare.zone_id", "32 hexadecimal digits");
    assert_error(
        &errs,
        "target.cloudflare.pools.ncp.pool_id",
        "'ncp-pool' must be a Cloudflare id",
    );
}

#[test]
fn a_load_balancer_name_other_than_the_hostname_is_rejected() {
    let errs = errors(&with(
        "load_balancer = \"web.example.com\"",
        "load_balancer = \"www.example.com\"",
    ));
    assert_error(
        &errs,
        "target.cloudflare.load_balancer",
        "nor the policy hostname 'web.example.com'",
    );
}

#[test]
fn target_pools_must_match_policy_pools() {
    let errs = errors(&with(
        "[target.cloudflare.pools.gcp]",
        "[target.cloudflare.pools.aws]",
    ));
    assert_error(&errs, "target.cloudflare.pools.aws", "no pool named 'aws'");
    assert_error(&errs, "target.cloudflare.pools.gcp", "missing");
}

#[test]
fn one_cloudflare_pool_for_two_gslb_pools_is_rejected() {
    let errs = errors(&with(
        "pool_id = \"9290f38c5d07c2e2f4df57b1f61d4196\"",
        "pool_id = \"17b5962d775c646f3f9725cbc7a53df4\"",
    ));
    assert_error(
        &errs,
        "target.cloudflare.pools.gcp.pool_id",
        "is used by another pool",
    );
}

#[test]
fn a_bad_ttl_is_rejected() {
    let errs = errors(&with("ttl = \"30s\"", "ttl = \"1500ms\""));
    assert_error(&errs, "target.cloudflare.ttl", "whole number of seconds");
}

#[test]
fn unknown_keys_in_the_target_are_reported() {
    let errs = errors(&with(
        "[target.cloudflare.pools.ncp]\n",
        "[target.cloudflare.pools.ncp]\nweight = 0.9\n",
    ));
    assert_error(&errs, "target.cloudflare.pools.ncp.weight", "unknown key");
}

#[test]
fn exactly_one_target_table() {
    let two = format!("{VALID}\n[target.route53]\nhosted_zone_id = \"Z1\"\n");
    assert_error(&errors(&two), "target", "names two providers");
    let start = VALID.find("[target.cloudflare]").expect("target");
    let none = format!("{}[target]\n", &VALID[..start]);
    assert_error(
        &errors(&none),
        "target",
        "names no provider: add a [target.route53] or [target.cloudflare] table",
    );
}

#[test]
fn the_rto_budget_counts_the_load_balancer_ttl() {
    let errs = errors(&with("ttl = \"30s\"", "ttl = \"120s\""));
    assert_error(&errs, "rto_budget", "TTL 2m");
}
