//! Provider reads independent of the number of services (issue 14, item 5): every binding on
//! one token shares a [`CloudflareAccount`], so its reads are one List Load Balancers per zone
//! and one List Pools per account per resync, counted at the fake.

use std::sync::Arc;
use std::time::Duration;

use gslb_cloudflare::fake::{Fake, binding, ids, paused_settings, priority};
use gslb_cloudflare::{CloudflareAccount, CloudflareProvider};
use gslb_provider::{DesiredState, FailoverStyle, Provider, diff};

const SERVICES: usize = 1000;
/// The daemon's default resync period (`[reconcile] resync`).
const RESYNC: Duration = Duration::from_secs(60);
/// How old a shared read the reconciler's resync accepts: half the period.
const RESYNC_MAX_AGE: Duration = Duration::from_secs(30);

async fn thousand(fake: &Fake) -> Vec<Arc<CloudflareProvider>> {
    let account = Arc::new(CloudflareAccount::new(paused_settings(fake)).expect("account"));
    fake.add_load_balancers(SERVICES)
        .into_iter()
        .map(|id| {
            let p = CloudflareProvider::with_account(account.clone(), binding(&id));
            Arc::new(p.expect("binding"))
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_thousand_services_on_one_token_make_at_most_24_calls_a_minute() {
    let fake = Fake::start().await;
    let providers = thousand(&fake).await;
    // Start-up: every binding's adoption read at once. Fresh reads share a list that started
    // after they asked, so a few rounds of the two lists serve all 1,000 (2,000 calls before
    // the shared reads), within the rate limiter's burst of 10.
    let mut reads = tokio::task::JoinSet::new();
    for p in &providers {
        let p = p.clone();
        reads.spawn(async move { p.observe().await });
    }
    let adopted = reads.join_all().await;
    assert!(
        adopted
            .iter()
            .all(|o| o.as_ref().is_ok_and(|o| o.order == Some(priority())))
    );
    let at_start = fake.requests().len();
    assert!(
        at_start <= 10,
        "start-up made {at_start} calls for {SERVICES} services"
    );
    // Steady state: each binding resyncs once a minute at its own phase, for five minutes.
    let step = RESYNC / SERVICES as u32;
    for minute in 1..=5 {
        let before = fake.requests().len();
        for p in &providers {
            tokio::time::advance(step).await;
            let o = p.observe_within(RESYNC_MAX_AGE).await.expect("resync read");
            assert_eq!(o.order, Some(priority()));
        }
        let calls = fake.requests().len() - before;
        assert!(
            calls <= 24,
            "minute {minute}: {calls} calls for {SERVICES} services"
        );
    }
    // Yet the lists are still read every half resync: about two pairs a minute.
    let steady = fake.requests().len() - at_start;
    assert!(
        steady >= 8,
        "5 minutes of resyncs read the lists only {steady} times"
    );
    assert!(fake.violations().is_empty(), "{:#?}", fake.violations());
}

#[tokio::test(start_paused = true)]
async fn a_write_through_one_binding_is_seen_by_the_next_read_of_every_binding() {
    let fake = Fake::start().await;
    let providers = thousand(&fake).await;
    let (first, second) = (&providers[0], &providers[1]);
    for p in [first, second] {
        assert_eq!(
            p.observe_within(RESYNC).await.expect("read").order,
            Some(priority())
        );
    }
    let desired = DesiredState::for_active(
        FailoverStyle::Order,
        &priority(),
        ids::GCP,
        &Default::default(),
    );
    let plan = diff(&desired, &first.observe().await.expect("read")).expect("plan");
    first.apply(&plan).await.expect("write");
    // The write dropped the shared lists: even a resync read of the first binding sees it.
    let seen = first
        .observe_within(RESYNC)
        .await
        .expect("read after write");
    assert_eq!(
        seen.order.as_deref(),
        Some(&[ids::GCP.to_owned(), ids::NCP.to_owned()][..])
    );
    // The other binding's load balancer is untouched.
    let other = second.observe_within(RESYNC).await.expect("read");
    assert_eq!(other.order, Some(priority()));
}
