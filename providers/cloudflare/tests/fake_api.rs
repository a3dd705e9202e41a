//! The adapter against the stateful fake Cloudflare API on 127.0.0.1, which validates every
//! request and response body against the official OpenAPI subset.

use std::collections::BTreeSet;
use std::time::Duration;

use gslb_cloudflare::CloudflareProvider;
use gslb_cloudflare::fake::{Fake, binding, ids, priority, provider, settings};
use gslb_provider::{Change, DesiredState, FailoverStyle, Provider, ProviderError, diff};
use serde_json::json;

fn no_violations(fake: &Fake) {
    let v = fake.violations();
    assert!(v.is_empty(), "schema violations: {v:#?}");
}

#[tokio::test]
async fn observe_is_two_list_calls_whatever_the_pool_count() {
    let fake = Fake::start().await;
    let p = provider(&fake);
    let o = p.observe().await.expect("observe");
    assert_eq!(o.order, Some(priority()));
    assert_eq!(o.fallback.as_deref(), Some(ids::GCP));
    assert!(o.pools.values().all(|p| p.enabled));
    let paths: Vec<String> = fake
        .requests()
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(
        paths,
        vec![
            format!("GET /zones/{}/load_balancers", ids::ZONE),
            format!("GET /accounts/{}/load_balancers/pools", ids::ACCOUNT),
        ]
    );
    no_violations(&fake);
}

#[tokio::test]
async fn a_load_balancer_named_by_name_costs_no_extra_call() {
    let fake = Fake::start().await;
    let p = CloudflareProvider::new(settings(&fake), binding(ids::LB_NAME)).expect("provider");
    let o = p.observe().await.expect("observe");
    assert_eq!(o.order, Some(priority()));
    p.observe().await.expect("observe again");
    let requests = fake.requests();
    let lists = requests
        .iter()
        .filter(|r| r.path == format!("/zones/{}/load_balancers", ids::ZONE))
        .count();
    assert_eq!((lists, requests.len()), (2, 4), "{requests:?}");
    no_violations(&fake);
}

#[tokio::test]
async fn failover_patches_only_default_pools_with_steering_off() {
    let fake = Fake::start().await;
    let p = provider(&fake);
    let before = fake.load_balancer();
    let desired = DesiredState::for_active(
        FailoverStyle::Order,
        &priority(),
        ids::GCP,
        &BTreeSet::new(),
    );
    let plan = diff(&desired, &p.observe().await.unwrap()).unwrap();
    assert!(
        matches!(plan.as_slice(), [Change::SetOrder { .. }]),
        "{plan:?}"
    );
    p.apply(&plan).await.expect("apply");
    assert_eq!(
        fake.default_pools(),
        vec![ids::GCP.to_owned(), ids::NCP.to_owned()]
    );
    let after = fake.load_balancer();
    for key in [
        "fallback_pool",
        "session_affinity",
        "ttl",
        "proxied",
        "description",
        "name",
    ] {
        assert_eq!(after[key], before[key], "{key} changed");
    }
    assert_eq!(after["steering_policy"], "off");
    // Both pools stay enabled: Cloudflare keeps monitoring them as a second opinion.
    assert_eq!(fake.pool(ids::NCP)["enabled"], true);
    assert_eq!(fake.writes(), 1);
    assert!(
        diff(&desired, &p.observe().await.unwrap())
            .unwrap()
            .is_empty()
    );
    no_violations(&fake);
}

#[tokio::test]
async fn steering_other_than_off_is_rewritten_to_off() {
    let fake = Fake::start().await;
    fake.edit_load_balancer(json!({"steering_policy": "dynamic_latency"}));
    let p = provider(&fake);
    let desired = DesiredState::for_active(
        FailoverStyle::Order,
        &priority(),
        ids::NCP,
        &BTreeSet::new(),
    );
    let plan = diff(&desired, &p.observe().await.unwrap()).unwrap();
    assert_eq!(plan.len(), 1, "{plan:?}");
    p.apply(&plan).await.expect("apply");
    assert_eq!(fake.load_balancer()["steering_policy"], "off");
    no_violations(&fake);
}

#[tokio::test]
async fn the_default_steering_policy_serves_default_pools_in_order() {
    // `""` (Cloudflare's default) without region, country or PoP pools is failover in
    // `default_pools` order: the load balancer serves NCP, and nothing needs writing.
    let fake = Fake::start().await;
    fake.edit_load_balancer(json!({"steering_policy": ""}));
    let p = provider(&fake);
    let observed = p.observe().await.expect("observe");
    assert_eq!(observed.order, Some(priority()));
    assert_eq!(
        observed.active(&priority()).map(String::as_str),
        Some(ids::NCP)
    );
    let keep = DesiredState::for_active(
        FailoverStyle::Order,
        &priority(),
        ids::NCP,
        &BTreeSet::new(),
    );
    assert_eq!(diff(&keep, &observed).unwrap(), vec![]);
    // A write still sends `off` explicitly.
    let failover = DesiredState::for_active(
        FailoverStyle::Order,
        &priority(),
        ids::GCP,
        &BTreeSet::new(),
    );
    p.apply(&diff(&failover, &observed).unwrap())
        .await
        .expect("apply");
    assert_eq!(fake.load_balancer()["steering_policy"], "off");
    // The OpenAPI file spells the empty value as the literal `"\"\""` (see its enum), so
    // the fake flags the real API's default in its GET answers; nothing else may be flagged.
    let v = fake.violations();
    assert!(
        v.iter().all(|v| v.starts_with("response to GET")
            && v.contains(r#""" is not one of"#)
            && v.ends_with("/steering_policy")),
        "schema violations: {v:#?}"
    );
}

#[tokio::test]
async fn a_drill_drain_and_restore_round_trip_patch_only_enabled() {
    let fake = Fake::start().await;
    let p = provider(&fake);
    let drained = BTreeSet::from([ids::NCP.to_owned()]);
    let drain = DesiredState::for_active(FailoverStyle::Order, &priority(), ids::GCP, &drained);
    let plan = diff(&drain, &p.observe().await.unwrap()).unwrap();
    p.apply(&plan).await.expect("drain");
    assert_eq!(fake.pool(ids::NCP)["enabled"], false);
    assert_eq!(
        fake.pool(ids::NCP)["origins"][0]["address"],
        "192.0.2.10",
        "origins untouched"
    );
    let o = p.observe().await.unwrap();
    assert!(!o.pools[ids::NCP].enabled);
    assert_eq!(o.active(&priority()).map(String::as_str), Some(ids::GCP));
    assert!(diff(&drain, &o).unwrap().is_empty());

    let restore = DesiredState::for_active(
        FailoverStyle::Order,
        &priority(),
        ids::NCP,
        &BTreeSet::new(),
    );
    let plan = diff(&restore, &p.observe().await.unwrap()).unwrap();
    p.apply(&plan).await.expect("restore");
    assert_eq!(fake.pool(ids::NCP)["enabled"], true);
    let order = |to: [&str; 2]| json!({"default_pools": to, "steering_policy": "off"});
    assert_eq!(
        fake.patch_bodies(),
        [
            order([ids::GCP, ids::NCP]),
            json!({"enabled": false}),
            order([ids::NCP, ids::GCP]),
            json!({"enabled": true})
        ]
    );
    assert_eq!(fake.default_pools(), priority());
    assert!(
        diff(&restore, &p.observe().await.unwrap())
            .unwrap()
            .is_empty()
    );
    no_violations(&fake);
}

#[tokio::test]
async fn the_fallback_pool_is_never_disabled() {
    let fake = Fake::start().await;
    let p = provider(&fake);
    p.observe().await.unwrap();
    let plan = vec![Change::SetEnabled {
        pool: ids::GCP.into(),
        enabled: false,
        expected_version: None,
    }];
    let err = p.apply(&plan).await.expect_err("refused");
    assert!(
        matches!(&err, ProviderError::Invalid(m) if m.contains("fallback")),
        "{err:?}"
    );
    assert_eq!(fake.writes(), 0);
}

#[tokio::test]
async fn a_concurrent_reverter_is_a_conflict_on_read_back() {
    let fake = Fake::start().await;
    let p = provider(&fake);
    fake.reverter(true);
    let desired = DesiredState::for_active(
        FailoverStyle::Order,
        &priority(),
        ids::GCP,
        &BTreeSet::new(),
    );
    let plan = diff(&desired, &p.observe().await.unwrap()).unwrap();
    let err = p.apply(&plan).await.expect_err("reverted");
    assert!(
        matches!(&err, ProviderError::Conflict(m) if m.contains("another writer")),
        "{err:?}"
    );
    assert!(err.is_retryable());
    assert_eq!(fake.reverts(), 1);
    no_violations(&fake);
}

#[tokio::test]
async fn unknown_fields_enum_values_and_a_malformed_pool_are_tolerated() {
    let fake = Fake::start().await;
    // A newer API: fields and enum values the 2024 schema does not know.
    let mut ncp = fake.pool(ids::NCP);
    ncp["health_sources"] = json!(["regional", "global"]);
    ncp["origin_steering"] = json!({"policy": "quantum"});
    ncp["origins"][0]["port"] = json!(8443);
    ncp["origins"][0]["flatten_cname"] = json!(false);
    fake.put_pool(ids::NCP, ncp.clone());
    fake.edit_load_balancer(json!({"session_affinity": "brand_new_mode", "networks": ["x"]}));
    // A foreign pool gslb does not name, malformed for our models.
    fake.put_pool(
        "ffff0000ffff0000ffff0000ffff0000",
        json!({"id": "ffff0000ffff0000ffff0000ffff0000", "enabled": "sometimes"}),
    );
    let p = provider(&fake);
    let o = p.observe().await.expect("observe despite the oddities");
    assert_eq!(o.pools.len(), 2);
    let desired = DesiredState::for_active(
        FailoverStyle::Order,
        &priority(),
        ids::GCP,
        &BTreeSet::new(),
    );
    p.apply(&diff(&desired, &o).unwrap()).await.expect("apply");
    // Nothing gslb does rewrites what it does not understand: the one write carries only
    // what gslb sets.
    assert_eq!(
        fake.patch_bodies(),
        [json!({"default_pools": [ids::GCP, ids::NCP], "steering_policy": "off"})]
    );
    assert_eq!(fake.pool(ids::NCP), ncp);
    assert_eq!(fake.load_balancer()["session_affinity"], "brand_new_mode");
    // The fake saw the oddities as schema violations of its own answers, and nothing else.
    assert!(!fake.violations().is_empty());
    for v in fake.violations() {
        assert!(
            v.contains("quantum") || v.contains("sometimes") || v.contains("brand_new_mode"),
            "{v}"
        );
    }
}

#[tokio::test]
async fn a_malformed_foreign_load_balancer_in_the_zone_list_is_skipped() {
    let fake = Fake::start().await;
    fake.put_load_balancer(
        "eeee0000eeee0000eeee0000eeee0000",
        json!({"id": "eeee0000eeee0000eeee0000eeee0000", "default_pools": "not-a-list"}),
    );
    let o = provider(&fake).observe().await.expect("observe despite it");
    assert_eq!(o.order, Some(priority()));
}

#[tokio::test]
async fn a_named_pool_that_cannot_be_read_is_invalid_not_a_panic() {
    let fake = Fake::start().await;
    let mut ncp = fake.pool(ids::NCP);
    ncp["enabled"] = json!("sometimes");
    fake.put_pool(ids::NCP, ncp);
    let err = provider(&fake).observe().await.expect_err("unreadable");
    // Skipped from the list with its id and why.
    assert!(
        matches!(&err, ProviderError::Invalid(m) if m.contains(&format!("pool {} is listed but cannot be read", ids::NCP)) && m.contains("expected a boolean")),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_foreign_pool_in_default_pools_is_refused() {
    let fake = Fake::start().await;
    fake.edit_load_balancer(json!({"default_pools": [ids::NCP, ids::OTHER, ids::GCP]}));
    let err = provider(&fake).observe().await.expect_err("foreign");
    assert!(
        matches!(&err, ProviderError::Unowned(m) if m.contains(ids::OTHER)),
        "{err:?}"
    );
}

#[tokio::test]
async fn rate_limited_calls_honour_retry_after_without_sending() {
    let fake = Fake::start().await;
    let p = provider(&fake);
    fake.rate_limit_for(Duration::from_secs(120));
    let err = p.observe().await.expect_err("429");
    let ProviderError::RateLimited {
        retry_after: Some(d),
    } = err
    else {
        panic!("{err:?}")
    };
    assert!(
        d > Duration::from_secs(100) && d <= Duration::from_secs(120),
        "{d:?}"
    );
    let sent = fake.requests().len();
    assert_eq!(sent, 1, "a 429 is not retried in place");
    let again = p.observe().await.expect_err("still blocked");
    assert!(matches!(
        again,
        ProviderError::RateLimited {
            retry_after: Some(_)
        }
    ));
    assert_eq!(
        fake.requests().len(),
        sent,
        "nothing is sent while Retry-After runs"
    );
    no_violations(&fake);
}

#[tokio::test]
async fn server_errors_are_retried_with_backoff() {
    let fake = Fake::start().await;
    let p = provider(&fake);
    fake.fail_next(2);
    p.observe().await.expect("third attempt succeeds");
    assert_eq!(
        fake.requests().iter().filter(|r| r.status == 502).count(),
        2
    );
    fake.fail_next(10);
    let err = provider(&fake).observe().await.expect_err("5xx every time");
    assert_eq!(err.code(), "transient");
    no_violations(&fake);
}

#[tokio::test]
async fn slow_answers_time_out_as_transient() {
    let fake = Fake::start().await;
    let mut s = settings(&fake);
    s.attempt_timeout = Some(Duration::from_millis(100));
    s.max_attempts = 1;
    let p = CloudflareProvider::new(s, binding(ids::LB)).unwrap();
    fake.slow(Some(Duration::from_millis(500)));
    let err = p.observe().await.expect_err("too slow");
    assert_eq!(err.code(), "transient", "{err:?}");
}

#[tokio::test]
async fn auth_failures_are_fatal_and_not_retried() {
    let fake = Fake::start().await;
    let p = provider(&fake);
    fake.auth_failure(true);
    let err = p.observe().await.expect_err("403");
    assert!(
        matches!(&err, ProviderError::Auth(m) if m.contains("10000")),
        "{err:?}"
    );
    assert!(!err.is_retryable());
    assert_eq!(fake.requests().len(), 1);
    no_violations(&fake);
}

#[tokio::test]
async fn a_wrong_token_is_an_auth_error_and_never_echoed() {
    let fake = Fake::start().await;
    let mut s = settings(&fake);
    s.token = gslb_cloudflare::ApiToken::new("not-the-token");
    let err = CloudflareProvider::new(s, binding(ids::LB))
        .unwrap()
        .observe()
        .await
        .expect_err("403");
    assert_eq!(err.code(), "auth");
    assert!(!err.to_string().contains("not-the-token"));
}

#[tokio::test]
async fn the_fake_refuses_a_body_the_schema_refuses() {
    let fake = Fake::start().await;
    let resp = reqwest::Client::new()
        .patch(format!(
            "{}/zones/{}/load_balancers/{}",
            fake.base_url(),
            ids::ZONE,
            ids::LB
        ))
        .bearer_auth(ids::TOKEN)
        .header("content-type", "application/json")
        .body(r#"{"default_pools": "not-a-list", "ttl": "thirty"}"#)
        .send()
        .await
        .expect("answer");
    assert_eq!(resp.status().as_u16(), 400);
    let body: serde_json::Value = serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap();
    assert_eq!(body["success"], false);
    assert_eq!(body["errors"][0]["code"], 1002);
    assert_eq!(fake.writes(), 0);
    assert!(
        fake.violations()
            .iter()
            .any(|v| v.contains("default_pools")),
        "{:?}",
        fake.violations()
    );
}
