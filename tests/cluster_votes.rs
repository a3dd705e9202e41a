//! Votes across vantage points, end to end: three real `gslb run` processes (vantage points
//! a, b, c; admin APIs on 127.0.14.1-3, probes from 127.0.15.1-3), a real three-member etcd
//! (127.0.13.1-3), the Cloudflare fake, and a primary origin that fails only for the probes of
//! chosen source addresses.
//!
//! One vantage point alone seeing the primary down: no failover, no write, and every
//! instance's `/v1/status` shows the disagreement (each vantage point's vote on the pool).
//! Two of three seeing it: exactly one failover write (the fake's write log), by the writer.

mod support;

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use gslb::io::origin::Origin;
use gslb_cloudflare::fake::{Fake, ids};
use serde_json::Value;
use support::cluster::{GslbCluster, INTERVAL_MS, Layout};
use support::daemon::status_all;
use support::eventually;

const FALL: u64 = 3;

fn head() -> String {
    format!(
        "failback = \"manual\"\n[probe]\ninterval = \"{INTERVAL_MS}ms\"\ntimeout = \"150ms\"\nbody_contains = \"ok\"\n[health]\nfall = {FALL}\nrise = 2"
    )
}

/// Instance `i`'s probe source address.
fn source(i: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 15, i + 1))
}

/// The votes on the primary pool in one instance's status: vantage -> (verdict, counted).
fn primary_votes(status: &Value) -> Vec<(String, String, bool)> {
    let votes = &status["services"]["web"]["pools"][0]["state"]["by_vantage"];
    votes
        .as_object()
        .into_iter()
        .flatten()
        .map(|(v, vote)| {
            let verdict = vote["verdict"].as_str().unwrap_or("").to_owned();
            (v.clone(), verdict, vote["counted"] == true)
        })
        .collect()
}

/// Waits until every instance's status shows `want` as the votes on the primary pool.
async fn every_instance_shows(c: &GslbCluster, want: &[(&str, &str)]) -> bool {
    let want: Vec<(String, String, bool)> = want
        .iter()
        .map(|(v, verdict)| ((*v).to_owned(), (*verdict).to_owned(), true))
        .collect();
    eventually(Duration::from_secs(30), || async {
        for x in &c.instances {
            let s = status_all(x.admin).await?;
            (primary_votes(&s) == want).then_some(())?;
        }
        Some(())
    })
    .await
    .is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_vantage_point_seeing_the_primary_down_is_outvoted_two_fail_over_once() {
    let fake = Fake::start().await;
    let at = std::net::SocketAddr::from((Ipv4Addr::new(127, 0, 16, 1), 0));
    let origin = Origin::start(at, "ncp").await.expect("origin");
    let layout = Layout {
        etcd: 13,
        admin: 14,
        probe_from: Some(15),
        primary_url: Some(format!("{}/api/v1/health", origin.base_url())),
        ..Layout::default()
    };
    let Some(c) = GslbCluster::start_with(&fake, &head(), layout).await else {
        return;
    };
    let healthy = [("a", "healthy"), ("b", "healthy"), ("c", "healthy")];
    assert!(
        every_instance_shows(&c, &healthy).await,
        "never agreed healthy:\n{}",
        c.logs()
    );
    c.writer(Duration::from_secs(20), None)
        .await
        .unwrap_or_else(|| panic!("no agreed writer:\n{}", c.logs()));

    // Only a's probes fail: a votes the primary down, b and c outvote it.
    origin.fail_for([source(0)]);
    let disagree = [("a", "unhealthy"), ("b", "healthy"), ("c", "healthy")];
    assert!(
        every_instance_shows(&c, &disagree).await,
        "the disagreement is not visible everywhere:\n{}",
        c.logs()
    );
    // a has seen the primary fail for twice `fall`: alone it would have failed over.
    let a = &c.instances[0];
    let seen = eventually(Duration::from_secs(10), || async {
        let s = a.status().await?;
        let fails = s["pools"][0]["endpoints"][0]["consecutive_fail"].as_u64()?;
        (fails >= 2 * FALL).then_some(())
    })
    .await;
    assert!(
        seen.is_some(),
        "a never saw the primary fail:\n{}",
        c.logs()
    );
    for x in &c.instances {
        let s = status_all(x.admin).await.expect("status");
        let web = &s["services"]["web"];
        assert_eq!(web["active"], "ncp", "{}: no failover", x.vantage);
        assert_eq!(
            web["pools"][0]["state"]["verdict"], "healthy",
            "{}",
            x.vantage
        );
        assert_eq!(s["cluster"]["coordinated"], true, "{}", x.vantage);
    }
    assert!(fake.write_log().is_empty(), "{:?}", fake.write_log());
    for x in &c.instances {
        let m = x.metrics().await;
        for line in [
            "gslb_cluster_coordinated 1",
            "gslb_cluster_vantage_fresh{vantage=\"a\"} 1",
            "gslb_cluster_vantage_fresh{vantage=\"b\"} 1",
            "gslb_cluster_vantage_fresh{vantage=\"c\"} 1",
            "gslb_cluster_fresh_voters{pool=\"ncp\",service=\"web\"} 3",
            "gslb_cluster_etcd_errors_total{op=\"watch\"} 0",
        ] {
            assert!(
                m.lines().any(|l| l == line),
                "{}: no {line}:\n{m}",
                x.vantage
            );
        }
    }

    // a and b see it: exactly one failover write.
    origin.fail_for([source(0), source(1)]);
    let two = [("a", "unhealthy"), ("b", "unhealthy"), ("c", "healthy")];
    assert!(
        every_instance_shows(&c, &two).await,
        "two down votes not visible everywhere:\n{}",
        c.logs()
    );
    let applied = eventually(Duration::from_secs(20), || async {
        for x in &c.instances {
            let s = x.status().await?;
            (s["apply"]["state"] == "applied" && s["active"] == "gcp").then_some(())?;
        }
        Some(())
    })
    .await;
    assert!(applied.is_some(), "no failover applied:\n{}", c.logs());
    let log = fake.write_log();
    assert_eq!(log.len(), 1, "exactly one failover write: {log:?}");
    assert_eq!(
        log[0].default_pools,
        Some(vec![ids::GCP.to_owned(), ids::NCP.to_owned()])
    );

    // Any instance's recording reproduces its decisions with `gslb replay`: one switch, the
    // failover to GCP on a's and b's votes, at the time the instance decided it.
    for x in &c.instances {
        let out = support::cloudflare::gslb(
            x.dir(),
            &[
                "replay",
                "--policy",
                "web.toml",
                "--observations",
                "obs.jsonl",
            ],
        )
        .output()
        .expect("gslb replay");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains(" 1 switch(es) "), "{}: {text}", x.vantage);
        let failover = text
            .lines()
            .position(|l| l.ends_with(" web failover -> gcp"))
            .unwrap_or_else(|| panic!("{}: no failover in the replay: {text}", x.vantage));
        let reasons: Vec<&str> = text
            .lines()
            .skip(failover + 1)
            .take_while(|l| l.starts_with("    - "))
            .collect();
        assert!(
            reasons
                .iter()
                .any(|r| r.contains("votes: a unhealthy, b unhealthy, c healthy")),
            "{}: {reasons:?}",
            x.vantage
        );
        let live: Vec<Value> = x
            .audit()
            .into_iter()
            .filter(|e| e["action"] == "decision" && e["result"] == "failover ncp -> gcp")
            .collect();
        assert_eq!(live.len(), 1, "{}: {live:?}", x.vantage);
        let at = live[0]["time"]
            .as_str()
            .expect("time (RFC 3339)")
            .to_owned();
        let line = text.lines().nth(failover).unwrap_or_default();
        assert!(
            line.starts_with(&at),
            "{}: replayed {line}, live at {at}",
            x.vantage
        );
    }
}
