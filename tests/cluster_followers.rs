//! What followers show after the writer's write (issue 27, defect 8): three real `gslb run`
//! (vantage points a, b, c; admin APIs on 127.0.33.1-3) on a real three-member etcd
//! (127.0.32.1-3), with gslb's default resync (60 s). A failover decided while etcd had no
//! quorum is written once quorum returns, by the writer alone; every follower decided it at
//! the same moment, was refused the write and reports it applied within seconds (it reads
//! again every 5 s while its recent decision is not what the provider shows), not at its next
//! resync (before: up to 60 s).

mod support;

use std::time::Duration;

use gslb_cloudflare::fake::Fake;
use support::cluster::{GslbCluster, Layout, head};
use support::eventually;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_show_the_writers_failover_within_seconds_not_at_the_resync() {
    let fake = Fake::start().await;
    let layout = Layout {
        etcd: 32,
        admin: 33,
        resync: Some("60s"),
        ..Layout::default()
    };
    let Some((mut c, _, _)) = GslbCluster::settled(&fake, &head(), layout).await else {
        return;
    };
    // No quorum: every instance fails static while the primary goes down.
    c.etcd.kill(1);
    c.etcd.kill(2);
    c.ncp.stop().await;
    for x in &c.instances {
        let lost = eventually(Duration::from_secs(20), || async {
            let s = support::daemon::status_all(x.admin).await?;
            (s["cluster"]["coordinated"] == false).then_some(())
        })
        .await;
        assert!(lost.is_some(), "{} still coordinated", x.vantage);
    }
    c.etcd.restart(1);
    c.etcd.restart(2);
    // Quorum back: the writer writes the failover; the followers' next resync is up to 60 s
    // away.
    assert!(
        c.applied_on("gcp", None, Duration::from_secs(25)).await,
        "the followers still show the old serving pool:\n{}",
        c.logs()
    );
    assert_eq!(fake.write_log().len(), 1, "{:?}", fake.write_log());
}
