//! A cluster writer's epoch on the Cloudflare load balancer (`Provider::apply_as`): stamped in
//! the `description` with the human text kept, read back by `observe`, recorded in order by the
//! fake's write log; a write past its deadline is never sent; a late write from an older epoch
//! is seen on the next read.

use std::time::{Duration, Instant};

use gslb_cloudflare::fake::{Fake, ids};
use gslb_cloudflare::{MANAGED_TAG, epoch};
use gslb_provider::{Change, Provider, ProviderError, Stamp};

fn to_gcp() -> Vec<Change> {
    vec![Change::SetOrder {
        from: vec![ids::NCP.into(), ids::GCP.into()],
        to: vec![ids::GCP.into(), ids::NCP.into()],
    }]
}

fn stamp(epoch: u64) -> Stamp {
    Stamp {
        epoch,
        deadline: Instant::now() + Duration::from_secs(5),
    }
}

#[tokio::test]
async fn a_stamped_write_carries_the_epoch_keeps_the_text_and_is_read_back() {
    let fake = Fake::start().await;
    let provider = gslb_cloudflare::fake::provider(&fake);
    assert_eq!(provider.observe().await.expect("reads").writer_epoch, None);
    provider
        .apply_as(&to_gcp(), stamp(15))
        .await
        .expect("writes");
    let description = fake.load_balancer()["description"]
        .as_str()
        .map(str::to_owned);
    assert_eq!(
        description.as_deref(),
        Some(format!("web LB [{MANAGED_TAG}] [gslb-epoch=15]").as_str())
    );
    assert_eq!(
        provider.observe().await.expect("reads").writer_epoch,
        Some(15)
    );
    assert_eq!(
        fake.patch_bodies(),
        [serde_json::json!({
            "default_pools": [ids::GCP, ids::NCP], "steering_policy": "off",
            "description": format!("web LB [{MANAGED_TAG}] [gslb-epoch=15]")
        })]
    );
    let log = fake.write_log();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].epoch, Some(15));
    assert_eq!(
        log[0].default_pools,
        Some(vec![ids::GCP.to_owned(), ids::NCP.to_owned()])
    );
}

#[tokio::test]
async fn a_late_write_of_an_older_epoch_shows_on_the_next_read() {
    let fake = Fake::start().await;
    let new_writer = gslb_cloudflare::fake::provider(&fake);
    new_writer.observe().await.expect("reads");
    new_writer
        .apply_as(&to_gcp(), stamp(20))
        .await
        .expect("writes");
    // The old writer's request lands afterwards (Cloudflare has no compare-and-set).
    let description = fake.load_balancer()["description"]
        .as_str()
        .map(str::to_owned);
    fake.edit_load_balancer(serde_json::json!({
        "default_pools": [ids::NCP, ids::GCP],
        "description": epoch::stamp(description.as_deref(), 12),
    }));
    let seen = new_writer.observe().await.expect("reads");
    assert_eq!(seen.writer_epoch, Some(12), "the late write is visible");
    let back = new_writer.apply_as(&to_gcp(), stamp(20)).await;
    assert!(back.is_ok(), "the current writer corrects it: {back:?}");
    assert_eq!(
        epoch::read(fake.load_balancer()["description"].as_str()),
        Some(20)
    );
}

#[tokio::test]
async fn no_request_is_sent_past_the_deadline() {
    let fake = Fake::start().await;
    let provider = gslb_cloudflare::fake::provider(&fake);
    provider.observe().await.expect("reads");
    let late = Stamp {
        epoch: 3,
        deadline: Instant::now(),
    };
    let refused = provider.apply_as(&to_gcp(), late).await;
    assert!(
        matches!(refused, Err(ProviderError::Transient(_))),
        "{refused:?}"
    );
    assert!(fake.write_log().is_empty(), "nothing was sent");
}

#[tokio::test]
async fn a_dropped_held_write_never_lands() {
    let fake = Fake::start().await;
    let provider = std::sync::Arc::new(gslb_cloudflare::fake::provider(&fake));
    provider.observe().await.expect("reads");
    fake.hold_writes();
    let p = provider.clone();
    let write = tokio::spawn(async move { p.apply_as(&to_gcp(), stamp(7)).await });
    let deadline = Instant::now() + Duration::from_secs(5);
    while fake.held_writes() == 0 {
        assert!(
            Instant::now() < deadline,
            "the write never reached the fake"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(fake.write_log().is_empty(), "a held write has not landed");
    fake.drop_held_writes();
    let _ = write.await;
    let lost = fake
        .requests()
        .iter()
        .filter(|r| r.method == "PATCH" && r.status == 502)
        .count();
    assert_eq!(lost, 1, "the held write was answered 502");
    assert_eq!(
        fake.write_log().len(),
        1,
        "only the adapter's retry landed, not the dropped write"
    );
    assert_eq!(fake.held_writes(), 0);
}
