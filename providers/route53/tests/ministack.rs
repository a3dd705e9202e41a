//! Against ministack 1.5.33 on 127.0.0.1, started by the test: provisioning's compare-and-swap
//! (ministack's strength: exact-match DELETE, atomic batches, PENDING then INSYNC).
//!
//! ministack gaps this test must not lean on (shared/reference/route53.md): health-check
//! booleans read back as false, CALCULATED children dropped, no failover-set validation.
//! Measured here as well: UpdateHealthCheck bumps `HealthCheckVersion` but does not check the
//! version sent (a stale one is accepted), so no test here asserts on version fencing; the
//! mocked tests do. ministack answers the first GetChange of a change with PENDING and every
//! later one with INSYNC, so "waited for INSYNC" shows as exactly two GetChange calls.

mod emulator_support;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use aws_sdk_route53::Client;
use aws_sdk_route53::config::interceptors::BeforeSerializationInterceptorContextRef;
use aws_sdk_route53::config::{ConfigBag, Intercept, SharedInterceptor};
use aws_sdk_route53::error::BoxError;
use aws_sdk_route53::operation::change_resource_record_sets::ChangeResourceRecordSetsInput;
use aws_sdk_route53::operation::get_change::GetChangeInput;
use aws_sdk_route53::types::{
    AliasTarget, Change, ChangeAction, ChangeBatch, ResourceRecord, ResourceRecordSet,
    ResourceRecordSetFailover, RrType,
};
use emulator_support::emulators::{Emulator, Kind};
use emulator_support::*;
use gslb_route53::{ProvisionAction, ProvisionOptions, Route53Alias, Route53Provider};

/// Runs `hook(op, n)` before the n-th call (from 1) of `ChangeResourceRecordSets` or
/// `GetChange` made through the provider's client, and counts them.
#[derive(Default)]
struct Tap {
    counts: Mutex<BTreeMap<&'static str, usize>>,
    hook: Option<Box<dyn Fn(&'static str, usize) + Send + Sync>>,
}

impl std::fmt::Debug for Tap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tap")
            .field("counts", &self.counts)
            .finish_non_exhaustive()
    }
}

impl Tap {
    fn count(&self, op: &str) -> usize {
        self.counts.lock().unwrap().get(op).copied().unwrap_or(0)
    }
}

#[derive(Debug)]
struct TapInterceptor(Arc<Tap>);

impl Intercept for TapInterceptor {
    fn name(&self) -> &'static str {
        "Tap"
    }

    fn read_before_execution(
        &self,
        context: &BeforeSerializationInterceptorContextRef<'_>,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let input = context.input();
        let op = if input
            .downcast_ref::<ChangeResourceRecordSetsInput>()
            .is_some()
        {
            "ChangeResourceRecordSets"
        } else if input.downcast_ref::<GetChangeInput>().is_some() {
            "GetChange"
        } else {
            return Ok(());
        };
        let n = {
            let mut counts = self.0.counts.lock().unwrap();
            let n = counts.entry(op).or_default();
            *n += 1;
            *n
        };
        if let Some(hook) = &self.0.hook {
            hook(op, n);
        }
        Ok(())
    }
}

/// Runs `make()` to completion on its own thread and runtime, from sync code (an
/// interceptor): another writer acting while the provider's request waits.
fn on_another_thread<Mk, Fut>(make: Mk) -> Fut::Output
where
    Mk: FnOnce() -> Fut + Send + 'static,
    Fut: Future,
    Fut::Output: Send + 'static,
{
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(make())
    })
    .join()
    .expect("side thread")
}

/// `seoul` as a PRIMARY record with `value`, TTL 300 s and no health check: not what the
/// binding says.
fn foreign_seoul(value: &str) -> ResourceRecordSet {
    ResourceRecordSet::builder()
        .name(NAME)
        .r#type(RrType::A)
        .set_identifier("seoul")
        .failover(ResourceRecordSetFailover::Primary)
        .ttl(300)
        .resource_records(ResourceRecord::builder().value(value).build().unwrap())
        .build()
        .unwrap()
}

async fn write(client: &Client, zone: &str, action: ChangeAction, record: ResourceRecordSet) {
    let change = Change::builder()
        .action(action)
        .resource_record_set(record)
        .build()
        .unwrap();
    let batch = ChangeBatch::builder().changes(change).build().unwrap();
    client
        .change_resource_record_sets()
        .hosted_zone_id(zone)
        .change_batch(batch)
        .send()
        .await
        .expect("write record");
}

/// Provisioning that may replace the foreign records these tests start from.
const ADOPT: ProvisionOptions = ProvisionOptions {
    dry_run: false,
    adopt: true,
};

#[tokio::test]
async fn provision_replaces_a_drifted_record_by_delete_and_create_and_waits_for_insync() {
    let ms = Emulator::start(Kind::Ministack);
    let raw = client(&ms.endpoint(), vec![]);
    let zone = hosted_zone(&raw).await;
    write(
        &raw,
        &zone,
        ChangeAction::Create,
        foreign_seoul("198.51.100.9"),
    )
    .await;

    let tap = Arc::new(Tap::default());
    let watched = client(
        &ms.endpoint(),
        vec![SharedInterceptor::new(TapInterceptor(tap.clone()))],
    );
    let p = Route53Provider::new(watched, settings(), binding(&zone));
    // seoul's record has no gslb check: refused, naming it, nothing written.
    let refused = p.provision().await.unwrap_err().to_string();
    assert!(
        refused.contains("record api.example.com A \"seoul\" has no health check")
            && refused.contains("--adopt api.example.com"),
        "{refused}"
    );
    assert_eq!(tap.count("ChangeResourceRecordSets"), 0);
    assert_eq!(tap.count("CreateHealthCheck"), 0);
    let report = p.provision_with(ADOPT).await.expect("provision --adopt");

    let ProvisionAction::Adopted { reason } = &report.pools[0].action else {
        panic!("{report:?}")
    };
    assert!(
        reason.contains("values") && reason.contains("TTL") && reason.contains("no health check"),
        "{reason}"
    );
    assert_eq!(report.pools[1].action, ProvisionAction::Created);
    assert_eq!(
        tap.count("ChangeResourceRecordSets"),
        1,
        "both pools in one atomic batch"
    );
    assert_eq!(
        tap.count("GetChange"),
        2,
        "polled past PENDING until INSYNC"
    );

    let now = records(&raw, &zone).await;
    assert_eq!(now.len(), 2, "{now:?}");
    assert_eq!(values_of(&now, "seoul"), Some(vec!["192.0.2.1".to_owned()]));
    assert_eq!(values_of(&now, "tokyo"), Some(vec!["192.0.2.2".to_owned()]));
    assert_eq!(now[0].ttl, Some(60));
    assert_eq!(
        now[0].health_check_id.as_deref(),
        Some(report.pools[0].health_check_id.as_str())
    );

    let again = p.provision().await.expect("second provision");
    assert!(again.is_noop(), "{again:?}");
    assert_eq!(
        tap.count("ChangeResourceRecordSets"),
        1,
        "no write the second time"
    );
    assert_eq!(records(&raw, &zone).await, now);
}

#[tokio::test]
async fn a_stale_delete_fails_atomically_and_provision_relists() {
    let ms = Emulator::start(Kind::Ministack);
    let raw = client(&ms.endpoint(), vec![]);
    let zone = hosted_zone(&raw).await;
    write(
        &raw,
        &zone,
        ChangeAction::Create,
        foreign_seoul("198.51.100.9"),
    )
    .await;

    // Another writer changes seoul after provision listed it and before its first batch
    // arrives; just before the second batch, record what the refused first batch left.
    let after_refusal: Arc<Mutex<Option<Vec<ResourceRecordSet>>>> = Arc::default();
    let (endpoint, zone_for_hook, seen) = (ms.endpoint(), zone.clone(), after_refusal.clone());
    let hook = move |op: &'static str, n: usize| {
        let (endpoint, zone) = (endpoint.clone(), zone_for_hook.clone());
        match (op, n) {
            ("ChangeResourceRecordSets", 1) => on_another_thread(move || async move {
                let other = client(&endpoint, vec![]);
                write(
                    &other,
                    &zone,
                    ChangeAction::Upsert,
                    foreign_seoul("203.0.113.7"),
                )
                .await;
            }),
            ("ChangeResourceRecordSets", 2) => {
                let listed = on_another_thread(move || async move {
                    records(&client(&endpoint, vec![]), &zone).await
                });
                *seen.lock().unwrap() = Some(listed);
            }
            _ => {}
        }
    };
    let tap = Arc::new(Tap {
        hook: Some(Box::new(hook)),
        ..Tap::default()
    });
    let watched = client(
        &ms.endpoint(),
        vec![SharedInterceptor::new(TapInterceptor(tap.clone()))],
    );
    let p = Route53Provider::new(watched, settings(), binding(&zone));
    let report = p
        .provision_with(ADOPT)
        .await
        .expect("provision succeeds after re-listing");

    assert_eq!(
        tap.count("ChangeResourceRecordSets"),
        2,
        "one refused batch, one accepted"
    );
    let left = after_refusal
        .lock()
        .unwrap()
        .take()
        .expect("snapshot taken before the second batch");
    assert_eq!(
        values_of(&left, "seoul"),
        Some(vec!["203.0.113.7".to_owned()]),
        "the other writer's record stood"
    );
    assert_eq!(
        values_of(&left, "tokyo"),
        None,
        "the refused batch's CREATE did not land either"
    );

    assert!(
        matches!(report.pools[0].action, ProvisionAction::Adopted { .. }),
        "{report:?}"
    );
    assert_eq!(report.pools[1].action, ProvisionAction::Created);
    let now = records(&raw, &zone).await;
    assert_eq!(values_of(&now, "seoul"), Some(vec!["192.0.2.1".to_owned()]));
    assert_eq!(values_of(&now, "tokyo"), Some(vec!["192.0.2.2".to_owned()]));
    let checks = raw.list_health_checks().send().await.unwrap().health_checks;
    assert_eq!(
        checks.len(),
        2,
        "the second batch reused the checks the first attempt made"
    );
}

#[tokio::test]
async fn the_emulator_helper_resets_ministack_state() {
    let ms = Emulator::start(Kind::Ministack);
    let raw = client(&ms.endpoint(), vec![]);
    let zone = hosted_zone(&raw).await;
    ms.reset();
    let err = raw
        .list_resource_record_sets()
        .hosted_zone_id(&zone)
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        aws_sdk_route53::error::ProvideErrorMetadata::code(&err),
        Some("NoSuchHostedZone")
    );
}

/// `set_id` as an Alias failover record to `dns_name` (EvaluateTargetHealth on), with no
/// health check: an Alias pair as Terraform writes it.
fn foreign_alias(
    set_id: &str,
    role: ResourceRecordSetFailover,
    dns_name: &str,
) -> ResourceRecordSet {
    ResourceRecordSet::builder()
        .name(NAME)
        .r#type(RrType::A)
        .set_identifier(set_id)
        .failover(role)
        .alias_target(
            AliasTarget::builder()
                .dns_name(dns_name)
                .hosted_zone_id("ZELB")
                .evaluate_target_health(true)
                .build()
                .unwrap(),
        )
        .build()
        .unwrap()
}

#[tokio::test]
async fn adopting_an_alias_pair_is_a_compare_and_swap() {
    let ms = Emulator::start(Kind::Ministack);
    let raw = client(&ms.endpoint(), vec![]);
    let zone = hosted_zone(&raw).await;
    let primary = ResourceRecordSetFailover::Primary;
    let secondary = ResourceRecordSetFailover::Secondary;
    write(
        &raw,
        &zone,
        ChangeAction::Create,
        foreign_alias("seoul", primary.clone(), "old-seoul.elb.example.net"),
    )
    .await;
    write(
        &raw,
        &zone,
        ChangeAction::Create,
        foreign_alias("tokyo", secondary, "tokyo.elb.example.net"),
    )
    .await;

    // Another writer moves seoul's Alias after provisioning listed it: the first batch's
    // DELETE no longer matches and the whole batch is refused.
    let (endpoint, zone_for_hook) = (ms.endpoint(), zone.clone());
    let hook = move |op: &'static str, n: usize| {
        if (op, n) == ("ChangeResourceRecordSets", 1) {
            let (endpoint, zone) = (endpoint.clone(), zone_for_hook.clone());
            on_another_thread(move || async move {
                let moved = foreign_alias(
                    "seoul",
                    ResourceRecordSetFailover::Primary,
                    "moved-seoul.elb.example.net",
                );
                write(
                    &client(&endpoint, vec![]),
                    &zone,
                    ChangeAction::Upsert,
                    moved,
                )
                .await;
            });
        }
    };
    let tap = Arc::new(Tap {
        hook: Some(Box::new(hook)),
        ..Tap::default()
    });
    let watched = client(
        &ms.endpoint(),
        vec![SharedInterceptor::new(TapInterceptor(tap.clone()))],
    );
    let mut b = binding(&zone);
    for (pool, name) in b
        .pools
        .iter_mut()
        .zip(["seoul-alb.elb.example.net", "tokyo-alb.elb.example.net"])
    {
        pool.values.clear();
        pool.alias = Some(Route53Alias {
            dns_name: name.into(),
            hosted_zone_id: "ZELB".into(),
            evaluate_target_health: false,
        });
    }
    let p = Route53Provider::new(watched, settings(), b);
    let report = p
        .provision_with(ADOPT)
        .await
        .expect("adopted after re-listing");

    assert_eq!(
        tap.count("ChangeResourceRecordSets"),
        2,
        "one refused batch, one accepted"
    );
    let ProvisionAction::Adopted { reason } = &report.pools[0].action else {
        panic!("{report:?}")
    };
    assert!(
        reason.contains("Alias to moved-seoul.elb.example.net"),
        "planned from the second listing: {reason}"
    );
    let now = records(&raw, &zone).await;
    assert_eq!(now.len(), 2, "{now:?}");
    for (record, pool) in now.iter().zip(&report.pools) {
        let alias = record.alias_target.as_ref().expect("an Alias record");
        assert!(
            alias
                .dns_name
                .starts_with(&format!("{}-alb.", pool.set_identifier)),
            "{alias:?}"
        );
        assert_eq!(
            record.health_check_id.as_deref(),
            Some(pool.health_check_id.as_str())
        );
        assert_eq!(record.ttl, None);
    }
    let again = p.provision().await.expect("second provision");
    assert!(
        again.is_noop(),
        "an Alias pair as the binding says is no drift: {again:?}"
    );
}
