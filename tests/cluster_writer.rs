//! One fenced writer per binding, end to end: three real `gslb run` processes (vantage points
//! a, b, c on 127.0.21.1-3), a real three-member etcd (127.0.20.1-3), two loopback origins
//! and the Cloudflare fake, whose write log records every applied write in order with the
//! epoch stamped in the load balancer's description.

mod support;

use std::time::{Duration, Instant};

use gslb_cloudflare::epoch;
use gslb_cloudflare::fake::{Fake, ids};
use support::cluster::{GslbCluster, Layout, TAKEOVER, TTL, head};
use support::eventually;

fn to_gcp() -> Option<Vec<String>> {
    Some(vec![ids::GCP.to_owned(), ids::NCP.to_owned()])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_the_writer_before_its_write_hands_over_and_writes_once() {
    let fake = Fake::start().await;
    let Some((mut c, old, old_epoch)) =
        GslbCluster::settled(&fake, &head(), Layout::default()).await
    else {
        return;
    };
    // The writer's write is held at the fake: decided, sent, not landed.
    fake.hold_writes();
    c.ncp.stop().await;
    eventually(Duration::from_secs(10), || async {
        (fake.held_writes() >= 1).then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("the writer never wrote:\n{}", c.logs()));
    c.instances[old].kill();
    let killed = Instant::now();
    // The killed writer's request never lands.
    fake.drop_held_writes();
    let landed = eventually(TTL + TAKEOVER + Duration::from_secs(10), || async {
        let log = fake.write_log();
        (!log.is_empty()).then_some(log)
    })
    .await
    .unwrap_or_else(|| panic!("nobody took over:\n{}", c.logs()));
    let took = killed.elapsed();
    println!("takeover write {took:?} after kill -9 (TTL {TTL:?} + takeover delay {TAKEOVER:?})");
    let (new, new_epoch) = c
        .writer(Duration::from_secs(10), Some(old))
        .await
        .expect("a new agreed writer");
    assert_ne!(new, old);
    assert!(new_epoch > old_epoch, "epoch {new_epoch} after {old_epoch}");
    assert_eq!(landed.len(), 1, "{landed:?}");
    assert_eq!(landed[0].default_pools, to_gcp());
    assert_eq!(
        landed[0].epoch,
        Some(new_epoch),
        "written by the new writer"
    );
    // Both survivors read it back applied; still exactly one write (no double write).
    assert!(
        c.applied_on("gcp", Some(old), Duration::from_secs(10))
            .await,
        "{}",
        c.logs()
    );
    assert_eq!(fake.write_log().len(), 1, "{:?}", fake.write_log());
    // The switch is counted once, by the decision that caused it: the new writer wrote the
    // failover it had decided, not one decided again after taking over (burst 2: one spent).
    for i in (0..c.instances.len()).filter(|i| *i != old) {
        let s = c.instances[i].status().await.expect("status");
        assert_eq!(
            s["velocity_available"], 1,
            "{}: {s}",
            c.instances[i].vantage
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigstop_of_the_writer_past_its_lease_lands_no_old_write_and_a_late_one_is_corrected() {
    let fake = Fake::start().await;
    let Some((mut c, old, old_epoch)) =
        GslbCluster::settled(&fake, &head(), Layout::default()).await
    else {
        return;
    };
    // The writer decides and sends; its write is held, then the writer is paused and the
    // request is lost on the way.
    fake.hold_writes();
    c.ncp.stop().await;
    eventually(Duration::from_secs(10), || async {
        (fake.held_writes() >= 1).then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("the writer never wrote:\n{}", c.logs()));
    c.instances[old].signal("STOP");
    fake.drop_held_writes();
    let first = eventually(TTL + TAKEOVER + Duration::from_secs(10), || async {
        fake.write_log().first().cloned()
    })
    .await
    .unwrap_or_else(|| panic!("nobody took over:\n{}", c.logs()));
    let new_epoch = first.epoch.expect("stamped");
    assert!(new_epoch > old_epoch, "epoch {new_epoch} after {old_epoch}");
    // A late write of the old writer lands after the new writer's (what Cloudflare, without
    // compare-and-set, cannot refuse): NCP first again, stamped with the old epoch. When the
    // old writer wakes it wants to write too (its retry after the lost request), with a lease
    // it has not kept.
    let description = fake.load_balancer()["description"]
        .as_str()
        .map(str::to_owned);
    fake.edit_load_balancer(serde_json::json!({
        "default_pools": [ids::NCP, ids::GCP],
        "description": epoch::stamp(description.as_deref(), old_epoch),
    }));
    c.instances[old].signal("CONT");
    let paused = &c.instances[old];
    eventually(Duration::from_secs(15), || async {
        let (role, epoch) = paused.role().await?;
        (role == "follower" && epoch == Some(new_epoch)).then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("the old writer did not step down:\n{}", c.logs()));
    // The current writer corrects the edit; the old one never lands a write.
    assert!(
        c.applied_on("gcp", None, Duration::from_secs(15)).await,
        "{}",
        c.logs()
    );
    // The current writer detected the late write, counted it once and corrected it.
    let (new, _) = c
        .writer(Duration::from_secs(10), None)
        .await
        .expect("an agreed writer");
    let metrics = c.instances[new].metrics().await;
    assert!(
        metrics.contains("gslb_cluster_late_writes_total{binding=\"web\"} 1"),
        "{metrics}"
    );
    assert_eq!(
        epoch::read(fake.load_balancer()["description"].as_str()),
        Some(new_epoch)
    );
    let log = fake.write_log();
    assert!(log.len() >= 2, "the late write was corrected: {log:?}");
    assert!(
        log.iter().all(|w| w.epoch == Some(new_epoch)),
        "only the new writer's epoch after its first write: {log:?}"
    );
}

/// Lands a late write of `epoch` at the fake: `order` first, the description's stamp `epoch`.
fn land_late_write(fake: &Fake, order: [&str; 2], epoch: u64) {
    let description = fake.load_balancer()["description"]
        .as_str()
        .map(str::to_owned);
    fake.edit_load_balancer(serde_json::json!({
        "default_pools": order,
        "description": epoch::stamp(description.as_deref(), epoch),
    }));
}

/// The epoch stamped at the fake once it is `want`, within 15 s (the writer's late-write checks
/// every 5 s, on reads at most 5 s old; the resync is 60 s).
async fn stamped(fake: &Fake, want: u64) -> Option<()> {
    eventually(Duration::from_secs(15), || async {
        let lb = fake.load_balancer();
        (epoch::read(lb["description"].as_str()) == Some(want)).then_some(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_write_of_an_older_epoch_is_written_over_at_once_also_in_the_same_order() {
    let fake = Fake::start().await;
    // gslb's default resync: without the late-write checks a late write would stay 60 s.
    let layout = Layout {
        resync: Some("60s"),
        ..Layout::default()
    };
    let Some((mut c, writer, epoch)) = GslbCluster::settled(&fake, &head(), layout).await else {
        return;
    };
    c.ncp.stop().await;
    // The writer writes the failover (followers may show it only at their resync, 60 s).
    let failed_over = eventually(Duration::from_secs(20), || async {
        (fake.load_balancer()["default_pools"][0] == ids::GCP).then_some(())
    })
    .await;
    assert!(failed_over.is_some(), "{}", c.logs());
    assert_eq!(fake.write_log().last().and_then(|w| w.epoch), Some(epoch));
    // The same order as the writer's, stamped by an older writer: stamped again, and logged
    // once the write's read-back confirms it (the next late write waits for that: landed
    // before the read-back, it makes the write's outcome unknown, and nothing is logged).
    let x = &c.instances[writer];
    let logged = |n: usize| async move {
        eventually(Duration::from_secs(5), || async {
            (x.log().matches("wrote over the late write").count() == n).then_some(())
        })
        .await
        .unwrap_or_else(|| {
            let log = x.log();
            let lines: Vec<&str> = log.lines().filter(|l| l.contains("late write")).collect();
            panic!("not logged {n} time(s): {lines:#?}")
        });
    };
    let writes = fake.write_log().len();
    land_late_write(&fake, [ids::GCP, ids::NCP], epoch - 1);
    stamped(&fake, epoch)
        .await
        .unwrap_or_else(|| panic!("the old stamp stayed:\n{}", c.logs()));
    assert_eq!(fake.write_log().len(), writes + 1, "{:?}", fake.write_log());
    logged(1).await;
    // Another order: written over as quickly.
    land_late_write(&fake, [ids::NCP, ids::GCP], epoch - 2);
    stamped(&fake, epoch)
        .await
        .unwrap_or_else(|| panic!("the late write stayed:\n{}", c.logs()));
    assert_eq!(fake.load_balancer()["default_pools"][0], ids::GCP);
    let metrics = c.instances[writer].metrics().await;
    assert!(
        metrics.contains("gslb_cluster_late_writes_total{binding=\"web\"} 2"),
        "{metrics}"
    );
    // Logged once per write over a late write, never without a write.
    logged(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_of_three_etcd_members_down_no_write_fail_static() {
    let fake = Fake::start().await;
    let Some((mut c, writer, _)) = GslbCluster::settled(&fake, &head(), Layout::default()).await
    else {
        return;
    };
    c.etcd.kill(1);
    c.etcd.kill(2);
    c.ncp.stop().await;
    // Every instance loses coordination (its lease is not renewed, etcd does not answer) and
    // fails static: the desired state does not change on partial evidence, nothing is
    // written, and status and metrics say so (the coordination alert's expression is true).
    let _ = writer;
    for x in &c.instances {
        let lost = eventually(Duration::from_secs(20), || async {
            let m = x.metrics().await;
            m.lines()
                .any(|l| l == "gslb_cluster_coordinated 0")
                .then_some(())
        })
        .await;
        assert!(
            lost.is_some(),
            "{} still coordinated:\n{}",
            x.vantage,
            c.logs()
        );
    }
    // Each instance's own probes see NCP down for twice `fall`: alone it would have failed
    // over by now.
    for x in &c.instances {
        let down = eventually(Duration::from_secs(20), || async {
            let s = x.status().await?;
            let fails = s["pools"][0]["endpoints"][0]["consecutive_fail"].as_u64()?;
            (fails >= 6).then_some(())
        })
        .await;
        assert!(
            down.is_some(),
            "{} never saw NCP down:\n{}",
            x.vantage,
            c.logs()
        );
    }
    for x in &c.instances {
        let all = support::daemon::status_all(x.admin).await.expect("status");
        assert_eq!(all["cluster"]["coordinated"], false, "{}", x.vantage);
        let s = &all["services"]["web"];
        assert_eq!(s["active"], "ncp", "{} failed static", x.vantage);
        let ncp = &s["pools"][0]["state"];
        assert_eq!(ncp["verdict"], "unknown", "{}: {ncp}", x.vantage);
    }
    // A drill is refused while coordination is lost: etcd, the only drill store, cannot hold
    // it, and the other instances would not see it.
    let (status, body) = c.instances[0]
        .drain("ncp", "while uncoordinated", "5m")
        .await;
    assert_eq!(status, 500, "{body}");
    let refusal = body.to_string();
    assert!(
        refusal.contains("coordination through etcd is lost"),
        "{refusal}"
    );
    assert_eq!(c.instances[0].drill_ids().await, Some(vec![]));
    assert!(fake.write_log().is_empty(), "{:?}", fake.write_log());
}

/// Restarts every instance, one by one, each back and applied on `pool` before the next.
async fn rolling_restart(c: &mut GslbCluster, pool: &str) {
    for i in 0..c.instances.len() {
        c.instances[i].kill();
        c.instances[i].restart();
        assert!(
            c.applied_on(pool, None, Duration::from_secs(30)).await,
            "never applied after restarting {}:\n{}",
            c.instances[i].vantage,
            c.logs()
        );
    }
}

/// Every instance shares its safety state, also one started when etcd already held one: after
/// a rolling restart (etcd holds the state the first instances put), two automatic switches
/// reach etcd, and after another rolling restart the velocity budget (burst 2) is still spent,
/// so a third outage is held (`velocity_limited`) and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_instance_shares_its_safety_state_across_rolling_restarts() {
    let fake = Fake::start().await;
    let Some((mut c, _, _)) = GslbCluster::settled(&fake, &head(), Layout::default()).await else {
        return;
    };
    rolling_restart(&mut c, "ncp").await;
    c.ncp.stop().await;
    assert!(
        c.applied_on("gcp", None, Duration::from_secs(20)).await,
        "{}",
        c.logs()
    );
    c.ncp.start_again().await.expect("ncp again");
    c.gcp.stop().await;
    assert!(
        c.applied_on("ncp", None, Duration::from_secs(20)).await,
        "{}",
        c.logs()
    );
    assert_eq!(fake.write_log().len(), 2, "two switches, two writes");
    let spent = eventually(Duration::from_secs(10), || async {
        let s = c.instances[0].status().await?;
        (s["velocity_available"] == 0).then_some(())
    })
    .await;
    assert!(spent.is_some(), "the budget is spent before the restart");
    c.gcp.start_again().await.expect("gcp again");
    // Give the instances time to put the spent state: wait until etcd holds it, under every
    // instance's key.
    let client = c.etcd.client("root").await;
    eventually(Duration::from_secs(10), || async {
        for v in ["a", "b", "c"] {
            let key = format!("/gslb/safety/{v}/web");
            let got = client.kv_client().get(key, None).await.ok()?;
            let state: gslb_core::engine::SafetyState =
                serde_json::from_slice(got.kvs().first()?.value()).ok()?;
            spent_in(&state)?;
        }
        Some(())
    })
    .await
    .expect("the safety state is in etcd");
    rolling_restart(&mut c, "ncp").await;
    for x in &c.instances {
        let s = x.status().await.expect("status");
        assert_eq!(
            s["velocity_available"], 0,
            "{} continues the spent budget",
            x.vantage
        );
    }
    c.ncp.stop().await;
    let held = eventually(Duration::from_secs(15), || async {
        let s = c.instances[0].status().await?;
        (s["last_decision"]["rule"] == "velocity_limited").then_some(())
    })
    .await;
    assert!(held.is_some(), "the third outage is held:\n{}", c.logs());
    assert_eq!(
        fake.write_log().len(),
        2,
        "no third write: {:?}",
        fake.write_log()
    );
}

/// A drill started on instance a (admin API) is listed on b and c, and expires once: one
/// `drill.expire` audit record across the three instances' audit logs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drill_started_on_one_instance_is_listed_on_the_others_and_expires_once() {
    let fake = Fake::start().await;
    let Some(c) = GslbCluster::start(&fake, &head()).await else {
        return;
    };
    assert!(
        c.applied_on("ncp", None, Duration::from_secs(30)).await,
        "never applied:\n{}",
        c.logs()
    );
    let (status, body) = c.instances[0]
        .drain("ncp", "cluster drill test", "5s")
        .await;
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_str().expect("drill id").to_owned();
    for x in &c.instances {
        let listed = eventually(Duration::from_secs(10), || async {
            x.drill_ids().await.filter(|ids| ids.contains(&id))
        })
        .await;
        assert!(listed.is_some(), "{} lists {id}:\n{}", x.vantage, c.logs());
    }
    // The others audit the drill they loaded, with its actor and the vantage point whose key
    // holds it (etcd's auth vouches for that one).
    for x in &c.instances[1..] {
        let loaded = eventually(Duration::from_secs(10), || async {
            x.audit()
                .into_iter()
                .find(|e| e["action"] == "drill.load" && e["detail"]["id"] == id.as_str())
        })
        .await
        .unwrap_or_else(|| panic!("{} audits the drill it loaded", x.vantage));
        assert_eq!(loaded["actor"], "api", "{loaded}");
        assert_eq!(loaded["detail"]["stored_by"], "a", "{loaded}");
    }
    // Every engine drains ncp: the writer moves traffic once.
    assert!(
        c.applied_on("gcp", None, Duration::from_secs(15)).await,
        "{}",
        c.logs()
    );
    for x in &c.instances {
        let gone = eventually(Duration::from_secs(15), || async {
            x.drill_ids().await.filter(|ids| !ids.contains(&id))
        })
        .await;
        assert!(gone.is_some(), "{} still lists {id}", x.vantage);
    }
    // Audit lines are written in the background: wait for the first, then for a while
    // longer for any second one.
    let expiries = || {
        c.instances
            .iter()
            .flat_map(|x| x.audit())
            .filter(|e| e["action"] == "drill.expire" && e["detail"]["id"] == id.as_str())
            .count()
    };
    eventually(Duration::from_secs(10), || async {
        (expiries() >= 1).then_some(())
    })
    .await
    .expect("the expiry is audited");
    let starts = c
        .instances
        .iter()
        .flat_map(|x| x.audit())
        .filter(|e| e["action"] == "drill.drain")
        .count();
    assert_eq!(starts, 1, "started once, on a");
    // Each journal audits a step's changes in order: once every instance has audited the
    // revert that follows the expiry, no journal can still add an expiry record of its own.
    for x in &c.instances {
        let reverted = eventually(Duration::from_secs(15), || async {
            x.audit()
                .iter()
                .any(|e| e["action"] == "drill.complete" && e["detail"]["id"] != id.as_str())
                .then_some(())
        })
        .await;
        assert!(
            reverted.is_some(),
            "{} audited the revert:\n{:?}",
            x.vantage,
            x.audit()
        );
    }
    assert_eq!(expiries(), 1, "expired once in the cluster");
}

/// An instance whose engine missed a switch (paused while the writer failed over; the old pool
/// then recovered, so with `failback = "manual"` every other engine holds on the new one)
/// adopts the pool the provider serves once it runs again, and, left as the only writer, never
/// writes the old pool back: that would be a switch nobody decided. (`min_voters = 1`, so the
/// instance left alone still has verdicts and would write.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_that_missed_a_switch_adopts_the_serving_pool_and_never_writes_it_back() {
    let fake = Fake::start().await;
    let layout = Layout {
        etcd: 22,
        admin: 23,
        min_voters: Some(1),
        ..Layout::default()
    };
    let Some((mut c, w, _)) = GslbCluster::settled(&fake, &head(), layout).await else {
        return;
    };
    let (missed, other) = ((w + 1) % 3, (w + 2) % 3);
    c.instances[missed].signal("STOP");
    c.ncp.stop().await;
    eventually(Duration::from_secs(20), || async {
        (fake.write_log().len() == 1).then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("no failover:\n{}", c.logs()));
    assert_eq!(fake.write_log()[0].default_pools, to_gcp());
    c.ncp.start_again().await.expect("ncp back");
    for i in [w, other] {
        eventually(Duration::from_secs(20), || async {
            let s = c.instances[i].status().await?;
            (s["last_decision"]["rule"] == "failback_manual").then_some(())
        })
        .await
        .unwrap_or_else(|| panic!("{i} does not hold on gcp:\n{}", c.logs()));
    }
    c.instances[missed].signal("CONT");
    // It adopts what the provider serves: its engine holds on gcp too, nothing pending.
    eventually(Duration::from_secs(20), || async {
        let s = c.instances[missed].status().await?;
        (s["active"] == "gcp" && s["apply"]["state"] == "applied").then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("the paused instance did not adopt gcp:\n{}", c.logs()));
    c.instances[w].kill();
    c.instances[other].kill();
    // Left alone, it becomes the writer and judges its decision as the writer: applied on
    // gcp, and the failover is still the only write.
    eventually(TTL + TAKEOVER + Duration::from_secs(20), || async {
        let s = c.instances[missed].status().await?;
        (s["apply"]["cluster"]["role"] == "writer"
            && s["active"] == "gcp"
            && s["apply"]["state"] == "applied")
            .then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("never the writer on gcp:\n{}", c.logs()));
    let log = fake.write_log();
    assert_eq!(log.len(), 1, "a switch nobody decided: {log:?}");
}

/// A drill lasts its duration on every instance whatever their wall clocks say: with b's
/// clock 20 s ahead, a 30 s drill started on a is listed everywhere until about 30 s, not
/// ended for everyone when b's clock reads its end (after 10 s). Each instance counts the time
/// left from the drill's etcd lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drill_lasts_its_duration_on_every_instance_whatever_their_clocks() {
    let fake = Fake::start().await;
    let Some(mut c) = GslbCluster::start(&fake, &head()).await else {
        return;
    };
    if !c.instances[1].restart_with_clock("+20s") {
        return;
    }
    assert!(
        c.applied_on("ncp", None, Duration::from_secs(30)).await,
        "never applied:\n{}",
        c.logs()
    );
    let started_at = Instant::now();
    let (status, body) = c.instances[0].drain("ncp", "skewed clocks", "30s").await;
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_str().expect("drill id").to_owned();
    for x in &c.instances {
        let listed = eventually(Duration::from_secs(10), || async {
            x.drill_ids().await.filter(|ids| ids.contains(&id))
        })
        .await;
        assert!(listed.is_some(), "{} lists {id}:\n{}", x.vantage, c.logs());
    }
    for x in &c.instances {
        eventually(Duration::from_secs(60), || async {
            x.drill_ids().await.filter(|ids| !ids.contains(&id))
        })
        .await
        .unwrap_or_else(|| panic!("{} never ended {id}", x.vantage));
        let lasted = started_at.elapsed();
        assert!(
            lasted >= Duration::from_secs(28),
            "{} ended the 30 s drill after {lasted:?}:\n{}",
            x.vantage,
            c.logs()
        );
    }
}

/// Whether `x` comes to list drill `id` (`listed`) or not, within 15 s.
async fn listed_by(x: &support::cluster::Instance, id: &str, listed: bool) -> bool {
    eventually(Duration::from_secs(15), || async {
        x.drill_ids()
            .await
            .filter(|ids| ids.iter().any(|i| i == id) == listed)
    })
    .await
    .is_some()
}

/// A drill ended while an instance was down stays ended: etcd is the cluster's one drill
/// store, so the instance's state file does not bring it back when it restarts, nor does the
/// instance share it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drill_ended_while_an_instance_was_down_stays_ended() {
    let fake = Fake::start().await;
    let Some(mut c) = GslbCluster::start(&fake, &head()).await else {
        return;
    };
    assert!(
        c.applied_on("ncp", None, Duration::from_secs(30)).await,
        "never applied:\n{}",
        c.logs()
    );
    let http = reqwest::Client::new();
    let (status, body) = c.instances[0]
        .drain("ncp", "ended while c is down", "10m")
        .await;
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_str().expect("drill id").to_owned();
    for i in 0..3 {
        assert!(
            listed_by(&c.instances[i], &id, true).await,
            "{} lists {id}; its audit log: {:#?}",
            c.instances[i].vantage,
            c.instances[i].audit()
        );
    }
    // c goes down, and the drill, started on a, is ended
    // on b: b records the end under its own name (it may not delete a's record).
    c.instances[2].kill();
    let ended = http
        .delete(format!("http://{}/v1/drills/{id}", c.instances[1].admin))
        .header("content-type", "application/json")
        .body(serde_json::json!({"reason": "drill over"}).to_string())
        .send()
        .await
        .expect("DELETE /v1/drills");
    assert!(ended.status().is_success(), "{:?}", ended.text().await);
    for i in 0..2 {
        assert!(
            listed_by(&c.instances[i], &id, false).await,
            "{} still lists {id}",
            c.instances[i].vantage
        );
    }
    let etcd = c.etcd.client("root").await;
    let end = etcd
        .kv_client()
        .get(format!("/gslb/drills/b/{id}"), None)
        .await
        .expect("read");
    assert_eq!(
        end.kvs().first().map(|kv| kv.value()),
        Some(&b"\"ended\""[..]),
        "b's end record"
    );
    c.instances[2].restart();
    assert!(
        listed_by(&c.instances[2], &id, false).await,
        "c brought {id} back from its state file:\n{}",
        c.logs()
    );
    // c has synced with the cluster: it reports the serving pool applied.
    let synced = eventually(Duration::from_secs(30), || async {
        let s = c.instances[2].status().await?;
        (s["apply"]["state"] == "applied").then_some(())
    })
    .await;
    assert!(synced.is_some(), "{}", c.logs());
    for i in 0..3 {
        let ids = c.instances[i].drill_ids().await.expect("drill list");
        assert!(
            !ids.contains(&id),
            "{} lists {id} again",
            c.instances[i].vantage
        );
    }
}

/// `Some` when `state` holds a spent velocity budget now (a failover recorded, no token left).
fn spent_in(state: &gslb_core::engine::SafetyState) -> Option<()> {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    let now = gslb_core::model::Millis(since_epoch.as_millis().try_into().ok()?);
    (state.consecutive_failovers >= 1
        && state.last_failover.is_some()
        && state.bucket.available(now) == 0)
        .then_some(())
}
