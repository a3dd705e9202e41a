//! This instance's etcd lease against a real three-member etcd: keepalives keep a key bound to
//! it alive past its TTL; once the keepalives stop (the task is gone, as when the process is
//! killed), etcd deletes the key.

mod support;

use std::net::Ipv4Addr;
use std::time::Duration;

use gslb::config::ClusterSettings;
use gslb::io::coordination::{Clients, ErrorCounter, LeaseTask};
use gslb_core::model::VantageId;
use support::etcd::EtcdCluster;

/// The shortest lease TTL the settings accept (a writer needs room for a write).
const TTL: Duration = Duration::from_secs(4);

fn settings(endpoints: Vec<String>) -> ClusterSettings {
    let text = format!(
        "endpoints = {endpoints:?}\nvantages = [\"a\"]\nlease_ttl = \"4s\"\nheartbeat = \"500ms\"\n"
    );
    toml::from_str(&text).expect("settings")
}

async fn exists(clients: &Clients, key: &str) -> bool {
    let mut kv = clients.kv.clone();
    kv.get(key, None).await.is_ok_and(|r| !r.kvs().is_empty())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalives_keep_a_key_alive_and_stopping_them_lets_it_go() {
    let ips = [1, 2, 3].map(|i| Ipv4Addr::new(127, 0, 10, i));
    let Some(etcd) = EtcdCluster::start(ips) else {
        return;
    };
    let cluster = settings(etcd.endpoints());
    cluster.check(&VantageId("a".into())).expect("valid");
    let clients = Clients::connect(cluster.connect(), ErrorCounter::detached())
        .await
        .expect("connect");
    let (task, mut state) = LeaseTask::new(clients.clone(), TTL);
    let keeper = tokio::spawn(task.run());
    let granted = state
        .wait_for(|s| s.id.is_some())
        .await
        .map(|s| *s)
        .expect("granted");
    let id = granted.id.expect("id");
    let key = "/gslb-test/bound";
    let mut kv = clients.kv.clone();
    let put = etcd_client::PutOptions::new().with_lease(id);
    kv.put(key, "x", Some(put)).await.expect("put");

    // Keepalives confirmed for longer than the TTL: without them the key would be gone.
    let asked = granted.last_keepalive.expect("grant time");
    tokio::time::timeout(
        3 * TTL,
        state.wait_for(|s| s.last_keepalive.is_some_and(|t| t > asked + TTL)),
    )
    .await
    .expect("keepalives confirmed past the TTL")
    .expect("task running");
    assert!(exists(&clients, key).await, "kept alive past its TTL");
    assert_eq!(state.borrow().generation, 1, "the same lease all along");
    assert_eq!(state.borrow().id, Some(id));

    // The keepalives stop: etcd lets the key go within the TTL (plus its own tick).
    keeper.abort();
    let gone = support::eventually(TTL * 3, || async {
        (!exists(&clients, key).await).then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "the key outlived its lease without keepalives"
    );
}

/// A lease etcd ends (revoked here; expired after a partition alike) is granted anew, and the
/// publisher puts every vote again under the new lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_is_granted_anew_and_the_votes_are_put_again() {
    use gslb::io::coordination::{LocalVerdicts, Publisher};
    use gslb_core::model::{EndpointId, ServiceId, Verdict};

    let ips = [4, 5, 6].map(|i| Ipv4Addr::new(127, 0, 10, i));
    let Some(etcd) = EtcdCluster::start(ips) else {
        return;
    };
    let cluster = settings(etcd.endpoints());
    let clients = Clients::connect(cluster.connect(), ErrorCounter::detached())
        .await
        .expect("connect");
    let (task, mut state) = LeaseTask::new(clients.clone(), TTL);
    let keeper = tokio::spawn(task.run());
    let verdicts: LocalVerdicts = [(
        (
            ServiceId("web".into()),
            EndpointId("http://192.0.2.1/health".into()),
        ),
        Verdict::Unhealthy,
    )]
    .into();
    let (_tx, rx) = tokio::sync::watch::channel(verdicts);
    let vantage = VantageId("a".into());
    let publisher = Publisher::new(
        clients.clone(),
        vantage,
        cluster.heartbeat,
        state.clone(),
        rx,
    );
    let publishing = tokio::spawn(publisher.run());
    let key = "/gslb/votes/a/web/http://192.0.2.1/health";
    let value = |clients: Clients| async move {
        let mut kv = clients.kv.clone();
        let r = kv.get(key, None).await.ok()?;
        let kv = r.kvs().first()?;
        Some((kv.value().to_vec(), kv.lease()))
    };
    let first = support::eventually(TTL * 3, || value(clients.clone()))
        .await
        .expect("the vote is put");
    assert_eq!(first.0, b"unhealthy");
    let old = state.borrow().id.expect("granted");
    assert_eq!(first.1, old, "bound to the lease");

    let mut kv = clients.kv.clone();
    kv.lease_revoke(old).await.expect("revoke");
    let regranted = tokio::time::timeout(
        TTL * 3,
        state.wait_for(|s| s.generation == 2 && s.id.is_some()),
    )
    .await
    .expect("granted anew within the TTL")
    .map(|s| *s)
    .expect("task running");
    let new = regranted.id.expect("id");
    assert_ne!(new, old);
    let again = support::eventually(TTL * 3, || async {
        value(clients.clone())
            .await
            .filter(|(_, lease)| *lease == new)
    })
    .await;
    assert!(
        again.is_some(),
        "the vote was not put again under the new lease"
    );
    publishing.abort();
    keeper.abort();
}

/// A lease given up while etcd had no quorum is revoked once a new one is granted (issue 27,
/// defect 8): etcd extends every lease when its own leader changes, so without the revoke the
/// old lease, and every key bound to it (an old leader key first in line in its elections),
/// would live a TTL more after quorum returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_lost_without_quorum_is_revoked_once_a_new_one_is_granted() {
    let ips = [1, 2, 3].map(|i| Ipv4Addr::new(127, 0, 27, i));
    let Some(mut etcd) = EtcdCluster::start(ips) else {
        return;
    };
    let clients = Clients::connect(
        settings(etcd.endpoints()).connect(),
        ErrorCounter::detached(),
    )
    .await
    .expect("connect");
    let (task, mut state) = LeaseTask::new(clients.clone(), TTL);
    let _keeper = tokio::spawn(task.run());
    let old = tokio::time::timeout(TTL * 3, state.wait_for(|s| s.id.is_some()))
        .await
        .expect("granted")
        .map(|s| s.id.expect("id"))
        .expect("task running");
    // Quorum lost past the TTL: this instance gives the lease up; etcd cannot expire it.
    etcd.kill(1);
    etcd.kill(2);
    tokio::time::timeout(TTL * 3, state.wait_for(|s| s.id.is_none()))
        .await
        .expect("given up within its TTL")
        .expect("task running");
    etcd.restart(1);
    etcd.restart(2);
    let new = tokio::time::timeout(TTL * 10, state.wait_for(|s| s.id.is_some()))
        .await
        .expect("granted anew once quorum is back")
        .map(|s| s.id.expect("id"))
        .expect("task running");
    assert_ne!(new, old);
    // The old lease is gone at once, not a TTL after etcd's new leader extended it.
    let gone = support::eventually(TTL / 2, || async {
        let mut kv = clients.kv.clone();
        let ttl = kv.lease_time_to_live(old, None).await.ok()?.ttl();
        (ttl <= 0).then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "lease {old:x} still alive after the new grant"
    );
}
