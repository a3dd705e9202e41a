//! Provisioning against scripted Route 53 answers (`aws-smithy-mocks`): the shape of the
//! compare-and-swap batch, PriorRequestNotComplete, and waiting for `INSYNC` under paused time
//! (no emulator can be told to stay PENDING).

mod mock_support;

use std::time::Duration;

use aws_sdk_route53::Client;
use aws_sdk_route53::operation::change_resource_record_sets::ChangeResourceRecordSetsOutput;
use aws_sdk_route53::operation::create_health_check::CreateHealthCheckOutput;
use aws_sdk_route53::operation::get_change::GetChangeOutput;
use aws_sdk_route53::operation::get_hosted_zone::GetHostedZoneOutput;
use aws_sdk_route53::operation::list_health_checks::ListHealthChecksOutput;
use aws_sdk_route53::types::{ChangeAction, ChangeStatus, HostedZone, ResourceRecordSetFailover};
use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};
use gslb_provider::ProviderError;
use gslb_route53::{ProvisionAction, Route53Settings};
use mock_support::*;

/// Nothing listed, so both records and both checks must be created.
fn empty_listing() -> Rule {
    mock!(Client::list_resource_record_sets).then_output(|| listing(vec![]))
}

/// Hosted zone `Z0TEST` is `example.com`.
fn zone() -> Rule {
    mock!(Client::get_hosted_zone).then_output(|| {
        GetHostedZoneOutput::builder()
            .hosted_zone(
                HostedZone::builder()
                    .id("/hostedzone/Z0TEST")
                    .name("example.com.")
                    .caller_reference("test")
                    .build()
                    .unwrap(),
            )
            .build()
    })
}

/// No health check in the account yet, so none is left over to reuse.
fn no_checks() -> Rule {
    mock!(Client::list_health_checks).then_output(|| {
        ListHealthChecksOutput::builder()
            .set_health_checks(Some(vec![]))
            .marker("")
            .is_truncated(false)
            .max_items(1000)
            .build()
            .unwrap()
    })
}

fn create_check() -> Rule {
    mock!(Client::create_health_check).then_compute_output(|req| {
        let reference = req.caller_reference().unwrap().to_owned();
        let id = format!("new-{}", reference.split('-').nth(1).unwrap());
        CreateHealthCheckOutput::builder()
            .health_check(health_check(&id, &reference, false, 1))
            .location(format!(
                "https://route53.amazonaws.com/2013-04-01/healthcheck/{id}"
            ))
            .build()
            .unwrap()
    })
}

fn change_output(status: ChangeStatus) -> ChangeResourceRecordSetsOutput {
    ChangeResourceRecordSetsOutput::builder()
        .change_info(change_info(status))
        .build()
}

fn get_change(status: ChangeStatus) -> GetChangeOutput {
    GetChangeOutput::builder()
        .change_info(change_info(status))
        .build()
}

#[tokio::test(start_paused = true)]
async fn provision_creates_both_records_in_one_batch_and_waits_for_insync() {
    let zone = zone();
    let (list, create, checks) = (empty_listing(), create_check(), no_checks());
    let change = mock!(Client::change_resource_record_sets)
        .match_requests(|req| {
            let changes = req.change_batch().unwrap().changes();
            let roles: Vec<_> = changes
                .iter()
                .map(|c| c.resource_record_set().unwrap().failover.clone())
                .collect();
            changes.iter().all(|c| c.action() == &ChangeAction::Create)
                && roles
                    == [
                        Some(ResourceRecordSetFailover::Primary),
                        Some(ResourceRecordSetFailover::Secondary),
                    ]
                && changes[0].resource_record_set().unwrap().health_check_id() == Some("new-seoul")
        })
        .then_output(|| change_output(ChangeStatus::Pending));
    let poll = mock!(Client::get_change)
        .sequence()
        .output(|| get_change(ChangeStatus::Pending))
        .times(2)
        .output(|| get_change(ChangeStatus::Insync))
        .build();
    let rules = [&zone, &list, &checks, &create, &change, &poll];
    let p = provider(
        mock_client!(aws_sdk_route53, RuleMode::MatchAny, rules),
        settings(),
    );
    let start = tokio::time::Instant::now();
    let report = p.provision().await.expect("provision");
    assert_eq!(change.num_calls(), 1, "both pools in one batch");
    assert_eq!(poll.num_calls(), 3, "polled until INSYNC");
    assert!(start.elapsed() >= 3 * settings().poll_interval);
    assert_eq!(report.change_id.as_deref(), Some("/change/C0TEST"));
    for (pool, name) in report.pools.iter().zip(["seoul", "tokyo"]) {
        assert_eq!(pool.action, ProvisionAction::Created);
        assert!(pool.created_health_check);
        assert_eq!(pool.health_check_id, format!("new-{name}"));
    }
    assert_eq!(create.num_calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn provision_fails_when_the_change_stays_pending_past_the_deadline() {
    let zone = zone();
    let (list, create, checks) = (empty_listing(), create_check(), no_checks());
    let change = mock!(Client::change_resource_record_sets)
        .then_output(|| change_output(ChangeStatus::Pending));
    let poll = mock!(Client::get_change).then_output(|| get_change(ChangeStatus::Pending));
    // 9 s: the deadline falls between two 2 s polls, so the count below is exact.
    let s = Route53Settings {
        change_timeout: Duration::from_secs(9),
        ..settings()
    };
    let p = provider(
        mock_client!(
            aws_sdk_route53,
            RuleMode::MatchAny,
            [&zone, &list, &checks, &create, &change, &poll]
        ),
        s,
    );
    let start = tokio::time::Instant::now();
    let err = p.provision().await.unwrap_err();
    assert!(
        matches!(&err, ProviderError::Transient(m) if m.contains("INSYNC")),
        "{err:?}"
    );
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(9),
        "gave up at the deadline, not before or after"
    );
    assert_eq!(poll.num_calls(), 4, "polled every 2 s until the deadline");
}

#[tokio::test(start_paused = true)]
async fn prior_request_not_complete_is_retried() {
    let zone = zone();
    let (list, create, checks) = (empty_listing(), create_check(), no_checks());
    let busy = error_body(
        "PriorRequestNotComplete",
        "The request was rejected because Route 53 was still processing a prior request.",
    );
    let change = mock!(Client::change_resource_record_sets)
        .sequence()
        .http_status(400, Some(busy))
        .output(|| change_output(ChangeStatus::Insync))
        .build();
    let p = provider(
        mock_client!(
            aws_sdk_route53,
            RuleMode::MatchAny,
            [&zone, &list, &checks, &create, &change]
        ),
        settings(),
    );
    let report = p
        .provision()
        .await
        .expect("provision succeeds after PriorRequestNotComplete");
    assert_eq!(change.num_calls(), 2);
    assert_eq!(
        create.num_calls(),
        2,
        "the retried batch reuses the checks already made"
    );
    assert!(!report.is_noop());
}

#[tokio::test(start_paused = true)]
async fn a_drifted_record_is_replaced_by_delete_as_listed_then_create() {
    let zone = zone();
    // seoul is listed with an old value; tokyo is as the binding says.
    let mut old_seoul = listed_record(0);
    old_seoul.resource_records = Some(vec![
        aws_sdk_route53::types::ResourceRecord::builder()
            .value("198.51.100.9")
            .build()
            .unwrap(),
    ]);
    let listed = old_seoul.clone();
    let list = mock!(Client::list_resource_record_sets)
        .then_compute_output(move |_| listing(vec![listed.clone(), listed_record(1)]));
    let get = mock!(Client::get_health_check)
        .then_compute_output(|req| verdict_output(req.health_check_id().unwrap(), true, 3));
    let expected_delete = old_seoul.clone();
    let change = mock!(Client::change_resource_record_sets)
        .match_requests(move |req| {
            let c = req.change_batch().unwrap().changes();
            c.len() == 2
                && c[0].action() == &ChangeAction::Delete
                && c[0].resource_record_set() == Some(&expected_delete)
                && c[1].action() == &ChangeAction::Create
                && c[1].resource_record_set().unwrap().resource_records()[0].value() == "192.0.2.1"
                && c[1].resource_record_set().unwrap().health_check_id() == Some("hc-0")
        })
        .then_output(|| change_output(ChangeStatus::Insync));
    let create = create_check();
    let p = provider(
        mock_client!(
            aws_sdk_route53,
            RuleMode::MatchAny,
            [&zone, &list, &get, &change, &create]
        ),
        settings(),
    );
    let report = p.provision().await.expect("provision");
    assert_eq!(change.num_calls(), 1);
    assert_eq!(
        create.num_calls(),
        0,
        "the valid (inverted) verdict check is kept"
    );
    assert!(
        matches!(&report.pools[0].action, ProvisionAction::Replaced { reason } if reason.contains("values"))
    );
    assert_eq!(report.pools[1].action, ProvisionAction::Unchanged);
}

#[tokio::test(start_paused = true)]
async fn provision_with_nothing_to_do_makes_no_write() {
    let zone = zone();
    let list = mock!(Client::list_resource_record_sets)
        .then_output(|| listing(vec![listed_record(0), listed_record(1)]));
    let get = mock!(Client::get_health_check)
        .then_compute_output(|req| verdict_output(req.health_check_id().unwrap(), false, 1));
    let change = mock!(Client::change_resource_record_sets)
        .then_output(|| change_output(ChangeStatus::Insync));
    let create = create_check();
    let p = provider(
        mock_client!(
            aws_sdk_route53,
            RuleMode::MatchAny,
            [&zone, &list, &get, &change, &create]
        ),
        settings(),
    );
    let report = p.provision().await.expect("provision");
    assert!(report.is_noop(), "{report:?}");
    assert_eq!((change.num_calls(), create.num_calls()), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_batch_refused_without_any_race_is_invalid_not_retried_forever() {
    let zone = zone();
    let (list, create, checks) = (empty_listing(), create_check(), no_checks());
    let refused = error_body(
        "InvalidChangeBatch",
        "RRSet of type CNAME with DNS name api.example.com. is not permitted",
    );
    let change = mock!(Client::change_resource_record_sets)
        .sequence()
        .http_status(400, Some(refused))
        .repeatedly()
        .build();
    let p = provider(
        mock_client!(
            aws_sdk_route53,
            RuleMode::MatchAny,
            [&zone, &list, &checks, &create, &change]
        ),
        settings(),
    );
    let err = p.provision().await.unwrap_err();
    assert!(
        matches!(&err, ProviderError::Invalid(m) if m.contains("did not change") && m.contains("not permitted")),
        "{err:?}"
    );
    assert_eq!(
        change.num_calls(),
        1,
        "the re-list showed no race, so no second batch"
    );
}
