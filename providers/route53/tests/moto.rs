//! Against moto 5.2.5 on 127.0.0.1, started by the test: provision, observe, and the verdict
//! check's `Inverted` round-trip (moto's strength: health checks).
//!
//! moto gaps this test must not lean on (shared/reference/route53.md): DELETE is checked
//! against a journal, not the current record (no CAS), batches are not atomic, GetChange is
//! always INSYNC, UpdateHealthCheck neither bumps nor checks `HealthCheckVersion`. So nothing
//! here asserts on CAS, atomicity, PENDING or version fencing; `tests/ministack.rs` and the
//! mocked tests cover those.
//!
//! Measured with this adapter: moto accepts a CALCULATED check with `HealthThreshold = 0` and
//! an empty `ChildHealthChecks`, returns it with `HealthThreshold` 0 and no children, and lists
//! records with their `HealthCheckId`; names come back with a trailing dot.

mod emulator_support;

use aws_sdk_route53::config::interceptors::BeforeSerializationInterceptorContextRef;
use aws_sdk_route53::config::{ConfigBag, Intercept, SharedInterceptor};
use aws_sdk_route53::error::BoxError;
use aws_sdk_route53::operation::change_resource_record_sets::ChangeResourceRecordSetsInput;
use emulator_support::emulators::{Emulator, Kind};
use emulator_support::*;
use gslb_provider::{Change, DesiredState, FailoverStyle, Provider, diff};
use gslb_route53::{ProvisionAction, Route53Provider};

#[tokio::test]
async fn moto_provision_observe_apply_round_trip() {
    let moto = Emulator::start(Kind::Moto);
    let raw = client(&moto.endpoint(), vec![]);
    let zone = hosted_zone(&raw).await;
    let p = Route53Provider::new(client(&moto.endpoint(), vec![]), settings(), binding(&zone));

    // Provision from nothing: both records and both verdict checks are created.
    let report = p.provision().await.expect("provision");
    assert!(
        report
            .pools
            .iter()
            .all(|r| r.action == ProvisionAction::Created && r.created_health_check),
        "{report:?}"
    );
    let after_provision = records(&raw, &zone).await;
    assert_eq!(
        values_of(&after_provision, "seoul"),
        Some(vec!["192.0.2.1".to_owned()])
    );
    assert_eq!(
        values_of(&after_provision, "tokyo"),
        Some(vec!["192.0.2.2".to_owned()])
    );
    for (record, pool) in after_provision.iter().zip(&report.pools) {
        assert_eq!(
            record.health_check_id.as_deref(),
            Some(pool.health_check_id.as_str())
        );
        assert_eq!(record.ttl, Some(60));
    }

    // Observe: both enabled, each with a version.
    let observed = p.observe().await.expect("observe");
    assert_eq!(observed.order, None);
    assert!(
        observed
            .pools
            .values()
            .all(|o| o.enabled && o.version.is_some()),
        "{observed:?}"
    );

    // Make tokyo active: the pure diff disables seoul, apply inverts seoul's verdict check.
    let priority = vec!["seoul".to_owned(), "tokyo".to_owned()];
    let desired = DesiredState::for_active(
        FailoverStyle::Enablement,
        &priority,
        "tokyo",
        &Default::default(),
    );
    let plan = diff(&desired, &observed).unwrap();
    assert!(
        matches!(plan.as_slice(), [Change::SetEnabled { pool, enabled: false, .. }] if pool == "seoul")
    );
    p.apply(&plan).await.expect("apply");

    let observed = p.observe().await.expect("observe after apply");
    assert!(
        !observed.pools["seoul"].enabled,
        "Inverted round-trips through moto"
    );
    assert!(observed.pools["tokyo"].enabled);
    assert!(
        diff(&desired, &observed).unwrap().is_empty(),
        "nothing left to do"
    );
    let check = raw
        .get_health_check()
        .health_check_id(&report.pools[0].health_check_id)
        .send()
        .await
        .unwrap();
    assert_eq!(
        check
            .health_check
            .unwrap()
            .health_check_config
            .unwrap()
            .inverted,
        Some(true)
    );
    assert_eq!(
        records(&raw, &zone).await,
        after_provision,
        "apply never touches records"
    );

    // A second provision finds everything in place: no write, the disabled pool stays disabled.
    let checks_before = raw
        .list_health_checks()
        .send()
        .await
        .unwrap()
        .health_checks
        .len();
    let again = p.provision().await.expect("second provision");
    assert!(again.is_noop(), "{again:?}");
    assert_eq!(
        raw.list_health_checks()
            .send()
            .await
            .unwrap()
            .health_checks
            .len(),
        checks_before
    );
    assert_eq!(records(&raw, &zone).await, after_provision);
    assert!(!p.observe().await.unwrap().pools["seoul"].enabled);
}

/// Fails every `ChangeResourceRecordSets` before it is sent.
#[derive(Debug)]
struct RefuseChangeBatches;

impl Intercept for RefuseChangeBatches {
    fn name(&self) -> &'static str {
        "RefuseChangeBatches"
    }

    fn read_before_execution(
        &self,
        context: &BeforeSerializationInterceptorContextRef<'_>,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        match context
            .input()
            .downcast_ref::<ChangeResourceRecordSetsInput>()
        {
            Some(_) => Err("change batch refused by the test".into()),
            None => Ok(()),
        }
    }
}

#[tokio::test]
async fn a_record_name_outside_the_hosted_zone_is_refused_before_any_write() {
    let moto = Emulator::start(Kind::Moto);
    let raw = client(&moto.endpoint(), vec![]);
    let zone = hosted_zone(&raw).await;
    let mut b = binding(&zone);
    b.record_name = "api.not-in-zone.org".into();
    let p = Route53Provider::new(client(&moto.endpoint(), vec![]), settings(), b);
    for dry_run in [true, false] {
        let err = p
            .provision_with(gslb_route53::ProvisionOptions {
                dry_run,
                adopt: false,
            })
            .await
            .expect_err("refused");
        let msg = err.to_string();
        assert!(
            msg.contains("api.not-in-zone.org is not in hosted zone")
                && msg.contains("example.com"),
            "{msg}"
        );
    }
    assert_eq!(check_count(&raw).await, 0, "no verdict check made");
}

/// How many health checks the account holds.
async fn check_count(raw: &aws_sdk_route53::Client) -> usize {
    raw.list_health_checks()
        .send()
        .await
        .expect("list checks")
        .health_checks
        .len()
}

#[tokio::test]
async fn refused_change_batches_reuse_their_verdict_checks_instead_of_leaking_more() {
    let moto = Emulator::start(Kind::Moto);
    let raw = client(&moto.endpoint(), vec![]);
    let zone = hosted_zone(&raw).await;
    // Every change batch fails, after the verdict checks were made.
    let refuse = SharedInterceptor::new(RefuseChangeBatches);
    let p = Route53Provider::new(
        client(&moto.endpoint(), vec![refuse]),
        settings(),
        binding(&zone),
    );
    for run in 1..=3 {
        let err = p.provision().await.expect_err("the batch is refused");
        assert!(
            err.to_string().contains("refused by the test"),
            "run {run}: {err}"
        );
        assert_eq!(
            check_count(&raw).await,
            2,
            "run {run}: one verdict check per pool, reused by every later run"
        );
    }
}

#[tokio::test]
async fn a_verdict_check_shared_by_two_records_is_refused_by_observe_and_split_by_provision() {
    let moto = Emulator::start(Kind::Moto);
    let raw = client(&moto.endpoint(), vec![]);
    let zone = hosted_zone(&raw).await;
    let p = Route53Provider::new(client(&moto.endpoint(), vec![]), settings(), binding(&zone));
    let first = p.provision().await.expect("provision");
    let seoul_check = first.pools[0].health_check_id.clone();
    // Someone points tokyo's record at seoul's verdict check.
    let listed = records(&raw, &zone).await;
    let tokyo = listed[1].clone();
    let mut moved = tokyo.clone();
    moved.health_check_id = Some(seoul_check.clone());
    let change = |action, r| {
        aws_sdk_route53::types::Change::builder()
            .action(action)
            .resource_record_set(r)
            .build()
            .unwrap()
    };
    raw.change_resource_record_sets()
        .hosted_zone_id(&zone)
        .change_batch(
            aws_sdk_route53::types::ChangeBatch::builder()
                .changes(change(aws_sdk_route53::types::ChangeAction::Delete, tokyo))
                .changes(change(aws_sdk_route53::types::ChangeAction::Create, moved))
                .build()
                .unwrap(),
        )
        .send()
        .await
        .expect("share the check");

    // ... and deletes tokyo's own check. (Were it left, provision would reuse it and CREATE
    // tokyo's first record again, which moto's journal refuses as existing: a moto gap.)
    raw.delete_health_check()
        .health_check_id(first.pools[1].health_check_id.clone())
        .send()
        .await
        .expect("delete tokyo's check");

    let err = p.observe().await.expect_err("a shared check is refused");
    let msg = err.to_string();
    assert!(
        matches!(err, gslb_provider::ProviderError::Invalid(_))
            && msg.contains("\"tokyo\"")
            && msg.contains("seoul")
            && msg.contains(&seoul_check)
            && msg.contains("gslb provision"),
        "{msg}"
    );

    let fixed = p.provision().await.expect("provision splits the check");
    assert_eq!(
        fixed.pools[0].action,
        ProvisionAction::Unchanged,
        "{fixed:?}"
    );
    assert!(
        matches!(&fixed.pools[1].action, ProvisionAction::Replaced { reason } if reason.contains(&seoul_check)),
        "{fixed:?}"
    );
    assert_ne!(fixed.pools[1].health_check_id, seoul_check);
    assert_eq!(p.observe().await.expect("observe").pools.len(), 2);
}
