//! Retries, error classes, rate limiting, observe and apply against scripted Route 53 answers
//! (`aws-smithy-mocks`): the answers no emulator produces (Throttling,
//! PriorRequestNotComplete, HealthCheckVersionMismatch, AccessDenied). Time is paused, so
//! backoff and pacing cost no wall-clock time and can be measured exactly.

mod mock_support;

use aws_credential_types::provider::error::CredentialsError;
use aws_credential_types::provider::{ProvideCredentials, future};
use aws_sdk_route53::Client;
use aws_sdk_route53::config::SharedCredentialsProvider;
use aws_sdk_route53::operation::list_resource_record_sets::ListResourceRecordSetsOutput;
use aws_sdk_route53::operation::update_health_check::UpdateHealthCheckOutput;
use aws_sdk_route53::types::RrType;
use aws_smithy_mocks::{RuleMode, mock, mock_client};
use gslb_provider::{Change, FailoverStyle, ObservedPool, Provider, ProviderError};
use mock_support::*;

fn list_ok() -> aws_smithy_mocks::Rule {
    mock!(Client::list_resource_record_sets)
        .then_output(|| listing(vec![listed_record(0), listed_record(1)]))
}

fn get_ok() -> aws_smithy_mocks::Rule {
    mock!(Client::get_health_check)
        .then_compute_output(|req| verdict_output(req.health_check_id().unwrap(), false, 7))
}

#[tokio::test(start_paused = true)]
async fn throttling_then_success_is_retried() {
    let list = mock!(Client::list_resource_record_sets)
        .sequence()
        .http_status(400, Some(throttling()))
        .times(2)
        .output(|| listing(vec![listed_record(0), listed_record(1)]))
        .build();
    let get = get_ok();
    let p = provider(
        mock_client!(aws_sdk_route53, RuleMode::MatchAny, [&list, &get]),
        settings(),
    );
    let observed = p
        .observe()
        .await
        .expect("observe succeeds after throttling");
    assert_eq!(list.num_calls(), 3);
    assert_eq!(
        observed.pools["seoul"],
        ObservedPool {
            enabled: true,
            version: Some("7".into()),
            healthy: None,
        }
    );
}

#[tokio::test(start_paused = true)]
async fn server_errors_are_retried() {
    let list = mock!(Client::list_resource_record_sets)
        .sequence()
        .http_status(503, None)
        .output(|| listing(vec![listed_record(0), listed_record(1)]))
        .build();
    let get = get_ok();
    let p = provider(
        mock_client!(aws_sdk_route53, RuleMode::MatchAny, [&list, &get]),
        settings(),
    );
    p.observe().await.expect("observe succeeds after a 503");
    assert_eq!(list.num_calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn persistent_throttling_ends_rate_limited_after_max_attempts() {
    let list = mock!(Client::list_resource_record_sets)
        .sequence()
        .http_status(400, Some(throttling()))
        .repeatedly()
        .build();
    let s = gslb_route53::Route53Settings {
        max_attempts: 4,
        ..settings()
    };
    let p = provider(
        mock_client!(aws_sdk_route53, RuleMode::MatchAny, [&list]),
        s,
    );
    let err = p.observe().await.unwrap_err();
    // The pause still ahead: the fourth throttled answer's step, 8 s, half of it random.
    let ProviderError::RateLimited {
        retry_after: Some(pause),
    } = err
    else {
        panic!("{err:?}");
    };
    assert!(
        pause >= std::time::Duration::from_secs(4) && pause <= std::time::Duration::from_secs(8),
        "{pause:?}"
    );
    assert_eq!(list.num_calls(), 4, "max_attempts counts the first attempt");
}

/// Throttling pauses the whole account, exponentially (issue 26: 35 throttled calls in 21 s
/// before): the attempts of one call are spaced by at least 0.5, 1 and 2 s (each step of 1, 2,
/// 4 s half random), and another binding of the account waits out the pause too.
#[tokio::test(start_paused = true)]
async fn throttling_pauses_every_binding_of_the_account_exponentially() {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;
    let sent = Arc::new(Mutex::new(Vec::new()));
    let list = mock!(Client::list_resource_record_sets)
        .match_requests({
            let sent = sent.clone();
            move |_| {
                sent.lock().unwrap().push(tokio::time::Instant::now());
                true
            }
        })
        .sequence()
        .http_status(400, Some(throttling()))
        .repeatedly()
        .build();
    let s = gslb_route53::Route53Settings {
        max_attempts: 4,
        ..settings()
    };
    let client = mock_client!(aws_sdk_route53, RuleMode::MatchAny, [&list]);
    let account = gslb_route53::Route53Account::new(&client, &s);
    let a = gslb_route53::Route53Provider::with_account(&account, s.clone(), binding());
    let b = gslb_route53::Route53Provider::with_account(&account, s, binding());
    a.observe().await.unwrap_err();
    let ended = tokio::time::Instant::now();
    b.observe().await.unwrap_err();
    let sent = sent.lock().unwrap().clone();
    assert_eq!(sent.len(), 8);
    for (i, least) in [(1, 500), (2, 1000), (3, 2000)] {
        let gap = sent[i] - sent[i - 1];
        assert!(gap >= Duration::from_millis(least), "gap {i}: {gap:?}");
    }
    // The other binding's first call waited out the pause the fourth answer started (4-8 s).
    let waited = sent[4] - ended;
    assert!(waited >= Duration::from_secs(4), "{waited:?}");
    // Its own answers keep doubling the pause (steps of 16, 32 and 60 s, half random).
    let gap = sent[7] - sent[6];
    assert!(gap >= Duration::from_secs(30), "{gap:?}");
}

#[tokio::test(start_paused = true)]
async fn access_denied_is_auth_and_not_retried() {
    let body = error_body(
        "AccessDenied",
        "User: arn:aws:iam::123456789012:user/gslb is not authorized to perform: route53:ListResourceRecordSets",
    );
    let list = mock!(Client::list_resource_record_sets)
        .sequence()
        .http_status(403, Some(body))
        .repeatedly()
        .build();
    let p = provider(
        mock_client!(aws_sdk_route53, RuleMode::MatchAny, [&list]),
        settings(),
    );
    let err = p.observe().await.unwrap_err();
    assert!(
        matches!(&err, ProviderError::Auth(m) if m.contains("AccessDenied")),
        "{err:?}"
    );
    assert!(!err.is_retryable());
    assert_eq!(list.num_calls(), 1);
}

#[derive(Debug)]
struct NoCredentials;

impl ProvideCredentials for NoCredentials {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::ready(Err(CredentialsError::not_loaded(
            "no credentials in this test",
        )))
    }
}

#[tokio::test(start_paused = true)]
async fn missing_credentials_are_auth() {
    // A raw HTTP answer, not a modeled output: the mock interceptor sets modeled outputs after
    // the attempt, which would hide the credentials failure. Were the request sent, the 500
    // would make it Transient.
    let list = mock!(Client::list_resource_record_sets)
        .sequence()
        .http_status(500, None)
        .repeatedly()
        .build();
    let client = mock_client!(aws_sdk_route53, RuleMode::MatchAny, [&list], |c| c
        .credentials_provider(SharedCredentialsProvider::new(NoCredentials)));
    let err = provider(client, settings()).observe().await.unwrap_err();
    assert!(
        matches!(&err, ProviderError::Auth(m) if m.contains("credentials")),
        "{err:?}"
    );
    assert_eq!(list.num_calls(), 1, "not retried");
}

#[tokio::test(start_paused = true)]
async fn observe_reports_inversion_and_version_per_pool() {
    let list = list_ok();
    let get = mock!(Client::get_health_check).then_compute_output(|req| {
        verdict_output(
            req.health_check_id().unwrap(),
            req.health_check_id() == Some("hc-0"),
            12,
        )
    });
    let p = provider(
        mock_client!(aws_sdk_route53, RuleMode::MatchAny, [&list, &get]),
        settings(),
    );
    assert_eq!(p.name(), "route53");
    assert_eq!(p.style(), FailoverStyle::Enablement);
    let observed = p.observe().await.unwrap();
    assert_eq!(observed.order, None);
    assert_eq!(
        observed.pools["seoul"],
        ObservedPool {
            enabled: false,
            version: Some("12".into()),
            healthy: None,
        }
    );
    assert_eq!(
        observed.pools["tokyo"],
        ObservedPool {
            enabled: true,
            version: Some("12".into()),
            healthy: None,
        }
    );
    assert_eq!(list.num_calls(), 1, "one list call for the pair");
}

#[tokio::test(start_paused = true)]
async fn observe_pages_only_while_the_pair_continues() {
    // Page 1 ends inside the pair (next: tokyo); page 2 ends at another name, so no page 3.
    let list = mock!(Client::list_resource_record_sets).then_compute_output(|req| {
        let page = ListResourceRecordSetsOutput::builder()
            .is_truncated(true)
            .max_items(1)
            .next_record_type(RrType::A);
        match req.start_record_identifier() {
            None => page
                .resource_record_sets(listed_record(0))
                .next_record_name("API.example.com.")
                .next_record_identifier("tokyo"),
            Some(_) => page
                .resource_record_sets(listed_record(1))
                .next_record_name("www.example.com."),
        }
        .build()
        .unwrap()
    });
    let get = get_ok();
    let p = provider(
        mock_client!(aws_sdk_route53, RuleMode::MatchAny, [&list, &get]),
        settings(),
    );
    let observed = p.observe().await.expect("observe");
    assert_eq!(list.num_calls(), 2);
    assert_eq!(observed.pools.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn observe_refuses_a_check_gslb_does_not_manage() {
    let list = list_ok();
    let get = mock!(Client::get_health_check).then_compute_output(|req| {
        let id = req.health_check_id().unwrap();
        aws_sdk_route53::operation::get_health_check::GetHealthCheckOutput::builder()
            .health_check(health_check(id, "terraform-20240101", false, 1))
            .build()
    });
    let p = provider(
        mock_client!(aws_sdk_route53, RuleMode::MatchAny, [&list, &get]),
        settings(),
    );
    let err = p.observe().await.unwrap_err();
    assert!(
        matches!(&err, ProviderError::Unowned(m) if m.contains("hc-0") && m.contains("CallerReference")),
        "{err:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn observe_without_records_says_to_provision() {
    let list =
        mock!(Client::list_resource_record_sets).then_output(|| listing(vec![listed_record(1)]));
    let p = provider(
        mock_client!(aws_sdk_route53, RuleMode::MatchAny, [&list]),
        settings(),
    );
    let err = p.observe().await.unwrap_err();
    assert!(
        matches!(&err, ProviderError::NotFound(m) if m.contains("PRIMARY") && m.contains("run `gslb provision`")),
        "{err:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn apply_inverts_the_verdict_check_fenced_by_the_observed_version() {
    let (list, get) = (list_ok(), get_ok());
    let update = mock!(Client::update_health_check)
        .match_requests(|r| {
            r.health_check_id() == Some("hc-0")
                && r.health_check_version() == Some(7)
                && r.inverted() == Some(true)
        })
        .then_output(|| UpdateHealthCheckOutput::builder().build());
    let p = provider(
        mock_client!(aws_sdk_route53, RuleMode::MatchAny, [&list, &get, &update]),
        settings(),
    );
    let observed = p.observe().await.unwrap();
    let plan = vec![Change::SetEnabled {
        pool: "seoul".into(),
        enabled: false,
        expected_version: observed.pools["seoul"].version.clone(),
    }];
    p.apply(&plan).await.expect("apply");
    assert_eq!(update.num_calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn version_mismatch_is_a_conflict_and_not_retried() {
    let (list, get) = (list_ok(), get_ok());
    let body = error_body(
        "HealthCheckVersionMismatch",
        "The value of HealthCheckVersion in the request doesn't match",
    );
    let update = mock!(Client::update_health_check)
        .sequence()
        .http_status(409, Some(body))
        .repeatedly()
        .build();
    let p = provider(
        mock_client!(aws_sdk_route53, RuleMode::MatchAny, [&list, &get, &update]),
        settings(),
    );
    p.observe().await.unwrap();
    let plan = vec![Change::SetEnabled {
        pool: "seoul".into(),
        enabled: false,
        expected_version: Some("7".into()),
    }];
    let err = p.apply(&plan).await.unwrap_err();
    assert!(
        matches!(&err, ProviderError::Conflict(m) if m.contains("HealthCheckVersionMismatch")),
        "{err:?}"
    );
    assert_eq!(update.num_calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn apply_before_observe_is_a_conflict_and_set_order_is_invalid() {
    let update = mock!(Client::update_health_check)
        .then_output(|| UpdateHealthCheckOutput::builder().build());
    let p = provider(
        mock_client!(aws_sdk_route53, RuleMode::MatchAny, [&update]),
        settings(),
    );
    let enable = Change::SetEnabled {
        pool: "seoul".into(),
        enabled: false,
        expected_version: Some("1".into()),
    };
    assert!(matches!(
        p.apply(&vec![enable.clone()]).await,
        Err(ProviderError::Conflict(_))
    ));
    let reorder = Change::SetOrder {
        from: vec!["seoul".into()],
        to: vec!["tokyo".into()],
    };
    assert!(matches!(
        p.apply(&vec![reorder, enable]).await,
        Err(ProviderError::Invalid(_))
    ));
    let stranger = Change::SetEnabled {
        pool: "paris".into(),
        enabled: false,
        expected_version: Some("1".into()),
    };
    assert!(matches!(
        p.apply(&vec![stranger]).await,
        Err(ProviderError::NotFound(_))
    ));
    assert_eq!(update.num_calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_rate_limiter_paces_every_call() {
    let (list, get) = (list_ok(), get_ok());
    let s = gslb_route53::Route53Settings {
        requests_per_second: std::num::NonZeroU32::new(2).unwrap(),
        ..settings()
    };
    let p = provider(
        mock_client!(aws_sdk_route53, RuleMode::MatchAny, [&list, &get]),
        s,
    );
    let start = tokio::time::Instant::now();
    p.observe().await.unwrap();
    p.observe().await.unwrap();
    // 6 calls at 2/s with no burst: the last 5 wait 0.5 s each.
    let elapsed = start.elapsed();
    assert!(
        elapsed >= std::time::Duration::from_millis(2500),
        "{elapsed:?}"
    );
    assert!(
        elapsed < std::time::Duration::from_millis(2600),
        "{elapsed:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn bindings_on_one_account_share_its_one_rate_limiter() {
    let (list, get) = (list_ok(), get_ok());
    let s = gslb_route53::Route53Settings {
        requests_per_second: std::num::NonZeroU32::new(2).unwrap(),
        ..settings()
    };
    let client = mock_client!(aws_sdk_route53, RuleMode::MatchAny, [&list, &get]);
    let account = gslb_route53::Route53Account::new(&client, &s);
    let (a, b) = (
        gslb_route53::Route53Provider::with_account(&account, s.clone(), binding()),
        gslb_route53::Route53Provider::with_account(&account, s, binding()),
    );
    let start = tokio::time::Instant::now();
    let (ra, rb) = tokio::join!(a.observe(), b.observe());
    ra.unwrap();
    rb.unwrap();
    // 6 calls through one limiter at 2/s: 2.5 s (two limiters would take 1 s).
    let elapsed = start.elapsed();
    assert!(
        elapsed >= std::time::Duration::from_millis(2500),
        "{elapsed:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn resync_reads_of_bindings_on_one_account_share_one_listing_each() {
    use aws_sdk_route53::operation::list_health_checks::ListHealthChecksOutput;
    let list = list_ok();
    let checks = mock!(Client::list_health_checks).then_output(|| {
        ListHealthChecksOutput::builder()
            .set_health_checks(Some(
                (0..2)
                    .map(|i| health_check(&check_id(i), &format!("gslb-{i}-0"), false, 7))
                    .collect(),
            ))
            .marker("")
            .is_truncated(false)
            .max_items(100)
            .build()
            .unwrap()
    });
    let get = get_ok();
    let client = mock_client!(aws_sdk_route53, RuleMode::MatchAny, [&list, &checks, &get]);
    let account = gslb_route53::Route53Account::new(&client, &settings());
    let bindings: Vec<_> = (0..6)
        .map(|_| gslb_route53::Route53Provider::with_account(&account, settings(), binding()))
        .collect();
    let max_age = std::time::Duration::from_secs(30);
    for _ in 0..3 {
        for p in &bindings {
            let o = p.observe_within(max_age).await.expect("shared read");
            assert!(o.pools.values().all(|p| p.enabled));
        }
        tokio::time::advance(std::time::Duration::from_secs(10)).await;
    }
    // 18 resync reads within 30 s: one listing of the zone and one of the checks.
    assert_eq!(
        (list.num_calls(), checks.num_calls(), get.num_calls()),
        (1, 1, 0)
    );
    // A fresh read (a decision's) does not use them: the pair and its two checks.
    bindings[0].observe().await.expect("fresh read");
    assert_eq!((list.num_calls(), get.num_calls()), (2, 2));
}
