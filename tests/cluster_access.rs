//! etcd's access control, end to end (issue 27, defect 1): three real `gslb run` (vantage
//! points a, b, c; admin APIs on 127.0.31.1-3) on a real three-member etcd (127.0.30.1-3) with
//! TLS and client-certificate auth, set up by `gslb etcd-auth` (support::cluster).
//!
//! Whoever holds instance `b`'s certificate can no longer write under `a`'s or `c`'s name: etcd
//! refuses a forged vote, heartbeat, safety state or drill record, and the writer does not fail
//! over a healthy primary (before, forged `unhealthy` votes of two vantage points moved traffic
//! 0.1 s later). `gslb etcd-auth` run again changes nothing; run with a vantage point taken off
//! the list, it takes that one's role away.

mod support;

use std::time::Duration;

use gslb::io::coordination::access;
use gslb_cloudflare::fake::Fake;
use support::cloudflare::health_urls;
use support::cluster::{GslbCluster, Layout, head};

fn layout() -> Layout {
    Layout {
        etcd: 30,
        admin: 31,
        ..Layout::default()
    }
}

/// Whether `result` is etcd's refusal for lack of permission.
fn denied<T: std::fmt::Debug>(result: Result<T, etcd_client::Error>) -> bool {
    match result {
        Err(etcd_client::Error::GRpcStatus(s)) => s.code() == tonic::Code::PermissionDenied,
        other => {
            eprintln!("not refused: {other:?}");
            false
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_vote_or_drill_under_another_vantage_point_is_refused_by_etcd() {
    let fake = Fake::start().await;
    let Some(c) = GslbCluster::start_with(&fake, &head(), layout()).await else {
        return;
    };
    assert!(
        c.applied_on("ncp", None, Duration::from_secs(30)).await,
        "the cluster never applied the primary\n{}",
        c.logs()
    );
    let [primary, _] = health_urls(c.ncp.addr(), c.gcp.addr());
    let mut as_b = c.etcd.client("b").await;
    for victim in ["a", "c"] {
        let vote = format!("/gslb/votes/{victim}/web/{primary}");
        assert!(
            denied(as_b.put(vote, "unhealthy", None).await),
            "vote of {victim}"
        );
        let heartbeat = format!("/gslb/heartbeats/{victim}");
        assert!(denied(as_b.put(heartbeat, "9999", None).await));
        let safety = format!("/gslb/safety/{victim}/web");
        assert!(denied(as_b.put(safety, "{}", None).await));
        let drill = format!("/gslb/drills/{victim}/forged");
        assert!(denied(as_b.put(drill, "{}", None).await));
        let wipe = etcd_client::DeleteOptions::new().with_prefix();
        let votes = format!("/gslb/votes/{victim}/");
        assert!(denied(as_b.delete(votes, Some(wipe)).await));
    }
    // Still allowed: its own keys, and reading everything.
    as_b.put("/gslb/votes/b/web/forged-endpoint", "unknown", None)
        .await
        .expect("b's own vote key");
    let got = as_b
        .get("/gslb/", Some(etcd_client::GetOptions::new().with_prefix()))
        .await
        .expect("read");
    assert!(got.count() > 0);
    // Nothing moved: the primary is still applied on every instance, no failover written.
    assert!(
        !c.applied_on("gcp", None, Duration::from_secs(3)).await,
        "{}",
        c.logs()
    );
    assert!(
        fake.write_log().iter().all(|w| w.epoch.is_some()),
        "every write fenced"
    );
    // The roles are exactly as `gslb etcd-auth` made them; running it again changes nothing.
    let mut as_root = c.etcd.client("root").await;
    let keys = gslb::io::coordination::Keys::new("/gslb");
    let b = gslb_core::model::VantageId("b".into());
    let role = as_root
        .role_get(access::role(&keys, &b))
        .await
        .expect("b's role");
    assert_eq!(role.permissions().len(), access::grants(&keys, &b).len());
    let again = c.etcd_auth();
    assert!(
        again.starts_with("etcd auth is on"),
        "a second run added or revoked something: {again}"
    );
    // A vantage point taken off the list loses its role: it can no longer write its own keys.
    let fewer = c.etcd_auth_for(&["a", "b"]);
    assert!(fewer.contains("removed role gslb:/gslb:c"), "{fewer}");
    let mut as_c = c.etcd.client("c").await;
    assert!(denied(
        as_c.put("/gslb/votes/c/web/x", "unhealthy", None).await
    ));
}
