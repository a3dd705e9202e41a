//! Route 53 data-plane mode end to end: three real `gslb run` instances, moto for the
//! provisioned records and checks, and the data-plane model (`support::r53_model`) standing in
//! for Route 53's health checkers and failover answers.
//!
//! Covers: provisioning makes per pool and instance an HTTPS string-match serve check and an
//! inverted drain check, and a CALCULATED tally check over the six, permissive first and
//! raised to 3 by the next run; with the Route 53 API unreachable (a proxy refuses every
//! call), one instance alone voting drain changes nothing (and its status, events and `gslb
//! drill` say so), a dead instance changes nothing, stopping the primary's origin makes the
//! modelled data plane serve the secondary within the bound `gslb check` prints, with no API
//! call attempted, and once failed over the data plane keeps the secondary while one instance
//! is left, and answers the primary only when none is. The same with `[cluster]` on a real
//! etcd that is then killed. Route 53's answer for every count of live instances, before and
//! after a failover, as `docs/route53-data-plane.md` tabulates it. And the read-only
//! commands: `provision --dry-run` and `plan` of a data-plane service, and the verdict checks
//! a switch from `verdict_check` mode leaves unused.

mod support;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant};

use gslb::cli::check::{data_plane_detection, data_plane_line};
use gslb::config::Settings;
use gslb::io::origin::Origin;
use support::daemon::{Daemon, log_file, read_log, status, status_all};
use support::emulators::{Emulator, Kind};
use support::etcd::EtcdCluster;
use support::eventually;
use support::proxy::CountingProxy;
use support::r53_model::{
    CHECKER_REGIONS, CheckerView, DataPlaneModel, calculated_healthy, endpoint_healthy,
    failover_answer, probe_succeeds,
};
use support::route53::{create_zone, gslb, sdk, snapshot};

const INTERVAL_MS: u64 = 200;
const FALL: u64 = 3;
const SEOUL_SECRET: &str = "s3oul-vote-secret-0123456789";
const TOKYO_SECRET: &str = "t0kyo-vote-secret-0123456789";
const NAMES: [&str; 3] = ["a", "b", "c"];

/// A free port on `ip` (an address of a test's 127.0.90.0/24 or 127.0.91.0/24).
fn free_port_on(ip: Ipv4Addr) -> u16 {
    std::net::TcpListener::bind((ip, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

struct Instance {
    name: &'static str,
    admin: SocketAddr,
    vote: SocketAddr,
}

/// Instances a, b, c on 127.0.`net`.1-3.
fn instances(net: u8) -> Vec<Instance> {
    NAMES
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let ip = Ipv4Addr::new(127, 0, net, 1 + u8::try_from(i).expect("small"));
            Instance {
                name,
                admin: SocketAddr::new(IpAddr::V4(ip), free_port_on(ip)),
                vote: SocketAddr::new(IpAddr::V4(ip), free_port_on(ip)),
            }
        })
        .collect()
}

/// Writes the policy, secrets, TLS files and one settings file per instance into `dir`;
/// `extra` ends each settings file (e.g. a `[cluster]` table).
fn write_files(
    dir: &Path,
    (seoul, tokyo): (&Origin, &Origin),
    zone: &str,
    api: &str,
    all: &[Instance],
    extra: &str,
) {
    let policy = format!(
        "service = \"api\"\nhostname = \"api.example.test\"\nfailback = \"manual\"\n[probe]\ninterval = \"{INTERVAL_MS}ms\"\ntimeout = \"150ms\"\nbody_contains = \"ok\"\n[health]\nfall = {FALL}\nrise = 2\n{}",
        support::policy::seoul_tokyo_route53(
            &format!("http://{}/api/v1/health", seoul.addr()),
            &format!("http://{}/api/v1/health", tokyo.addr()),
            zone,
        )
    );
    std::fs::write(dir.join("api.toml"), policy).expect("policy");
    std::fs::create_dir_all(dir.join("secrets")).expect("secrets dir");
    std::fs::write(dir.join("secrets/api.seoul"), format!("{SEOUL_SECRET}\n")).expect("secret");
    std::fs::write(dir.join("secrets/api.tokyo"), TOKYO_SECRET).expect("secret");
    std::fs::write(dir.join("vote.pem"), support::tls::CERT_PEM).expect("cert");
    std::fs::write(dir.join("vote.key"), support::tls::KEY_PEM).expect("key");
    let list: String = all
        .iter()
        .map(|i| {
            format!(
                "[[route53.data_plane.instances]]\nname = \"{}\"\nurl = \"https://{}\"\n",
                i.name, i.vote
            )
        })
        .collect();
    for i in all {
        let settings = format!(
            "vantage = \"dp-{name}\"\npolicies = [\"api.toml\"]\n[admin]\nlisten = \"{admin}\"\n[reconcile]\nresync = \"300ms\"\n\
             [route53]\nendpoint_url = \"{api}\"\nrequests_per_second = 50\n[route53.modes]\napi = \"data_plane\"\n\
             [route53.data_plane]\ninstance = \"{name}\"\nlisten = \"{vote}\"\ntls_cert_file = \"vote.pem\"\ntls_key_file = \"vote.key\"\n\
             secrets_dir = \"secrets\"\nrequest_interval = \"10s\"\nfailure_threshold = 3\n{list}{extra}",
            name = i.name,
            admin = i.admin,
            vote = i.vote,
        );
        std::fs::write(dir.join(format!("{}.toml", i.name)), settings).expect("settings");
    }
}

fn provision(dir: &Path) -> String {
    let out = gslb(dir, &["provision", "--config", "a.toml"])
        .output()
        .expect("provision");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "provision failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// What `instance`'s seoul vote URL answers (TLS not validated, like Route 53's checkers),
/// asked with `Accept-Encoding: gzip`: never compressed (Route 53 reads the raw string).
async fn vote(instance: &Instance, pool: &str) -> Option<String> {
    let http = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .ok()?;
    let r = http
        .get(format!("https://{}/v1/vote/api/{pool}", instance.vote))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .ok()?;
    assert_eq!(
        r.headers().get("content-encoding"),
        None,
        "a vote is never compressed"
    );
    r.text().await.ok()
}

/// The JSON `url` answers.
async fn get_json(url: &str) -> serde_json::Value {
    let body = reqwest::get(url)
        .await
        .and_then(reqwest::Response::error_for_status)
        .expect(url)
        .bytes()
        .await
        .expect(url);
    serde_json::from_slice(&body).expect(url)
}

/// What a vote URL answers while its instance votes seoul serve.
fn serve_seoul() -> String {
    format!("gslb-serve {SEOUL_SECRET}")
}

/// Starts `gslb run` for every instance and waits until each serves seoul and votes serve.
async fn run_all(dir: &Path, all: &[Instance]) -> Vec<Daemon> {
    let daemons = all
        .iter()
        .map(|i| {
            let d = gslb(dir, &["run", "--config", &format!("{}.toml", i.name)])
                .stderr(log_file(dir, &format!("{}.log", i.name)))
                .spawn()
                .expect("run");
            Daemon(d)
        })
        .collect();
    for i in all {
        let up = eventually(Duration::from_secs(20), || async {
            let s = status(i.admin, "api").await?;
            let serving = vote(i, "seoul").await.filter(|v| *v == serve_seoul())?;
            (s["active"] == "seoul").then_some(serving)
        })
        .await;
        assert!(
            up.is_some(),
            "{} never voted: {}",
            i.name,
            read_log(dir, &format!("{}.log", i.name))
        );
    }
    daemons
}

/// The model of the provisioned zone, run until every vote check has data; it serves seoul.
async fn settled_model(client: &aws_sdk_route53::Client, zone: &str) -> DataPlaneModel {
    let mut model = DataPlaneModel::load(client, zone, "api.example.test").await;
    let settled = model
        .run_until(10, |m| {
            m.records().iter().all(|r| {
                m.tally(r.health_check.as_deref().unwrap_or_default())
                    .is_some_and(|(children, _, _)| {
                        // Every serve check healthy, every drain check healthy (inverted).
                        children.iter().all(|c| m.healthy(c))
                    })
            })
        })
        .await;
    assert!(settled.is_some(), "vote checks never got data");
    assert_eq!(model.answer(), "seoul");
    model
}

#[test]
fn the_model_follows_route53_rules() {
    // More than 18% of checkers: 2 of 8 (25%) is healthy, 1 of 8 (12.5%) is not.
    let mut views = vec![
        CheckerView {
            healthy: false,
            streak: 0
        };
        CHECKER_REGIONS.len()
    ];
    assert!(!endpoint_healthy(&views[..]));
    views[0].healthy = true;
    assert!(!endpoint_healthy(&views));
    views[1].healthy = true;
    assert!(endpoint_healthy(&views));
    // FailureThreshold consecutive results flip a checker's view; a success resets the count.
    let mut v = CheckerView::default();
    v.observe(false, 3);
    v.observe(false, 3);
    v.observe(true, 3);
    v.observe(false, 3);
    v.observe(false, 3);
    assert!(v.healthy, "no 3 consecutive failures yet");
    v.observe(false, 3);
    assert!(!v.healthy);
    // The string must be in the first 5,120 bytes of a 2xx/3xx answer.
    assert!(probe_succeeds(200, b"gslb-drain x", "gslb-drain x"));
    assert!(!probe_succeeds(503, b"gslb-drain x", "gslb-drain x"));
    let late = [vec![b' '; 5120], b"gslb-drain x".to_vec()].concat();
    assert!(!probe_succeeds(200, &late, "gslb-drain x"));
    // CALCULATED and failover.
    assert!(calculated_healthy(&[true, true, false], 2));
    assert!(!calculated_healthy(&[true, false, false], 2));
    assert!(calculated_healthy(&[false, false, false], 0));
    assert!(failover_answer(true, false) && failover_answer(false, false));
    assert!(!failover_answer(false, true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_plane_failover_needs_no_route53_api_and_outlives_its_instances() {
    let moto = Emulator::start(Kind::Moto);
    let client = sdk(&moto.endpoint());
    let zone = create_zone(&client, "example.test.").await;
    let proxy = CountingProxy::start(&moto.endpoint()).await;
    let loopback = SocketAddr::from(([127, 0, 90, 10], 0));
    let mut seoul = Origin::start(loopback, "seoul").await.expect("seoul");
    let tokyo = Origin::start(loopback, "tokyo").await.expect("tokyo");
    let dir = tempfile::tempdir().expect("tempdir");
    let all = instances(90);
    write_files(dir.path(), (&seoul, &tokyo), &zone, &proxy.url, &all, "");

    // `gslb check` prints the mode's worst-case failover and monthly cost.
    let out = gslb(dir.path(), &["check", "--config", "a.toml"])
        .output()
        .expect("check");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let settings = Settings::load(&dir.path().join("a.toml")).expect("settings");
    let dp = settings
        .route53
        .data_plane_of("api")
        .expect("data plane")
        .clone();
    let policy = gslb_core::policy::load_each(&[dir.path().join("api.toml")])
        .pop()
        .and_then(|(_, p)| p.ok())
        .expect("policy");
    let line = data_plane_line(&policy, &dp);
    assert!(text.contains(&line), "{text}\nlacks\n{line}");
    assert!(
        line.contains("14 health checks") && line.contains("USD/month"),
        "{line}"
    );
    let detection = data_plane_detection(&policy);
    let ttl = policy.target.ttl();
    let bound = dp.worst_case_failover(detection, ttl);

    // Provision: permissive tally checks first, raised to 3 (of 6) by the next run.
    let first = provision(dir.path());
    assert!(first.contains("threshold 0 (permissive"), "{first}");
    let second = provision(dir.path());
    assert!(second.contains("threshold 3;"), "{second}");
    let third = provision(dir.path());
    assert_eq!(
        third
            .matches("record unchanged; tally check")
            .zip(third.matches("threshold 3; vote checks 0 created, 0 corrected"))
            .count(),
        2,
        "a third run changes nothing:\n{third}"
    );
    let model = DataPlaneModel::load(&client, &zone, "api.example.test").await;
    for r in model.records() {
        let tally = r.health_check.as_deref().expect("record carries a tally");
        let (children, threshold, inverted) = model.tally(tally).expect("CALCULATED");
        assert_eq!((children.len(), threshold, inverted), (6, 3, 3));
        for c in &children {
            let url = model.url_of(c).expect("string match");
            assert!(url.starts_with("https://127.0.90."), "{url}");
        }
    }
    drop(model);

    // From now on the Route 53 API is unreachable.
    proxy.refuse_all();
    let mut daemons: Vec<Option<Daemon>> = run_all(dir.path(), &all)
        .await
        .into_iter()
        .map(Some)
        .collect();
    let mut model = settled_model(&client, &zone).await;

    // One instance alone voting drain changes nothing, and nothing says it moved traffic:
    // `gslb drill` exits 3 naming the vote, the status stays pending with what Route 53's
    // tally serves, and no failover timeline reaches "provider in sync".
    let admin = format!("http://{}", all[0].admin);
    let out = gslb(
        dir.path(),
        &[
            "drill",
            "--admin",
            &admin,
            "drain",
            "--service",
            "api",
            "--pool",
            "seoul",
            "--reason",
            "one vote",
            "--actor",
            "test",
        ],
    )
    .output()
    .expect("gslb drill");
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(3), "{said}");
    assert!(
        said.contains("not in effect by itself") && said.contains("this instance's vote only"),
        "{said}"
    );
    let drain_seoul = format!("gslb-drain {SEOUL_SECRET}");
    let voted = eventually(Duration::from_secs(10), || async {
        vote(&all[0], "seoul").await.filter(|v| *v == drain_seoul)
    })
    .await;
    assert!(voted.is_some(), "instance a does not vote drain");
    let seen = model
        .run_until(10, |m| {
            let tally = m.records()[0].health_check.clone().unwrap_or_default();
            m.tally(&tally).is_some_and(|(children, _, _)| {
                // a's serve check and its drain check.
                children.iter().filter(|c| !m.healthy(c)).count() == 2
            })
        })
        .await;
    assert!(seen.is_some(), "Route 53 never saw instance a's vote");
    model.run_until(4, |_| false).await;
    assert_eq!(model.answer(), "seoul", "one vote of three must not drain");
    // The status says what Route 53's tally serves, and why the drill is not applied.
    let shown = eventually(Duration::from_secs(15), || async {
        let s = status(all[0].admin, "api").await?;
        let apply = &s["apply"];
        let why = apply["awaiting"].as_str()?;
        (apply["route53_tally"]["pools"][0]["votes"]["a"] == "drain"
            && why.starts_with("Route 53's tally serves seoul (seoul: 2 serve, 1 drain"))
        .then(|| apply.clone())
    })
    .await
    .expect("instance a's status never showed its drain vote in the tally");
    assert_eq!(shown["state"], "pending", "{shown}");
    assert_eq!(shown["observed_active"], "seoul", "{shown}");
    assert_eq!(shown["route53_tally"]["serves"], "seoul", "{shown}");
    let events = get_json(&format!("{admin}/v1/events")).await;
    let timelines = events["timelines"].as_array().expect("timelines");
    assert!(!timelines.is_empty(), "{events}");
    assert!(
        timelines
            .iter()
            .all(|t| t["phases"]["provider_in_sync"].is_null()),
        "a timeline says in sync: {events}"
    );
    let listed = get_json(&format!("{admin}/v1/drills")).await;
    let id = listed["overrides"][0]["id"]
        .as_str()
        .expect("a drill id")
        .to_owned();
    let ended = gslb(
        dir.path(),
        &["drill", "--admin", &admin, "end", &id, "--reason", "done"],
    )
    .output()
    .expect("gslb drill end");
    assert!(ended.status.success(), "{ended:?}");
    let back = eventually(Duration::from_secs(10), || async {
        vote(&all[0], "seoul").await.filter(|v| *v == serve_seoul())
    })
    .await;
    assert!(back.is_some(), "instance a keeps voting drain");

    // A dead instance changes nothing.
    daemons[2] = None;
    model.run_until(5, |_| false).await;
    assert_eq!(model.answer(), "seoul", "a dead instance is no vote");

    // The primary's origin stops: a and b vote drain, the data plane serves tokyo.
    let stopped = Instant::now();
    seoul.stop().await;
    let drained = eventually(Duration::from_secs(15), || async {
        let a = vote(&all[0], "seoul").await.filter(|v| *v == drain_seoul)?;
        vote(&all[1], "seoul")
            .await
            .filter(|v| *v == drain_seoul)
            .map(|_| a)
    })
    .await;
    let measured = stopped.elapsed();
    assert!(drained.is_some(), "instances a and b never voted drain");
    let rounds = model
        .run_until(20, |m| m.answer() == "tokyo")
        .await
        .expect("the modelled data plane never served tokyo");
    // The dead instance gives no vote: its serve check is unhealthy and its drain check
    // (inverted) healthy; a and b drain, so both of their checks are unhealthy.
    let tally = model.records()[0].health_check.clone().expect("tally");
    let (children, _, _) = model.tally(&tally).expect("tally check");
    let dead_url = format!("https://{}/", all[2].vote);
    for c in &children {
        let dead = model.url_of(c).is_some_and(|u| u.starts_with(&dead_url));
        assert_eq!(
            model.healthy(c),
            dead && model.inverted(c),
            "vote check {c}"
        );
    }
    assert!(!model.healthy(&tally));
    let checkers = dp.request_interval * rounds;
    let (ri_x_ft, aggregation) = dp.checker_delay();
    assert!(checkers <= ri_x_ft + aggregation, "{rounds} rounds");
    // The real detection ran on a loaded 2-core machine: 2 s of scheduling slack, as the
    // verdict-check end-to-end test allows.
    let total = measured + checkers + ttl;
    assert!(
        total <= bound + Duration::from_secs(2),
        "failover took {total:?} (detection {measured:?}, checkers {checkers:?}), bound {bound:?}"
    );

    // Failed over, the instances die one by one: while one votes, Route 53 keeps tokyo (fail
    // static); with none left it answers the PRIMARY, as with no votes at all. The last one
    // shows it: one voter of three, and the tally still serves tokyo.
    daemons[1] = None;
    model.run_until(5, |_| false).await;
    assert_eq!(
        model.answer(),
        "tokyo",
        "one instance left keeps the failover"
    );
    let alone = eventually(Duration::from_secs(15), || async {
        let s = status(all[0].admin, "api").await?;
        let tally = &s["apply"]["route53_tally"];
        (tally["voters"] == 1 && tally["serves"] == "tokyo").then_some(())
    })
    .await;
    assert!(
        alone.is_some(),
        "instance a's status never showed one voter left"
    );
    let metrics = reqwest::get(format!("{admin}/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    for line in [
        "gslb_dataplane_voters{service=\"api\"} 1",
        "gslb_dataplane_instances{service=\"api\"} 3",
    ] {
        assert!(metrics.contains(line), "no {line} in\n{metrics}");
    }
    daemons[0] = None;
    model.run_until(5, |m| m.answer() == "seoul").await;
    assert_eq!(model.answer(), "seoul", "no instance left: the PRIMARY");
    assert_eq!(
        proxy
            .counts
            .refused
            .load(std::sync::atomic::Ordering::SeqCst),
        0,
        "data-plane mode made a Route 53 API call after provisioning"
    );
    drop(daemons);
}

/// Sends `sig` (`STOP`, `CONT`) to a running instance.
fn signal(d: &Daemon, sig: &str) {
    let pid = d.0.id().to_string();
    let ok = std::process::Command::new("kill")
        .args([format!("-{sig}"), pid.clone()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill -{sig} {pid}");
}

/// Whether `instance`'s vote for seoul is drain.
async fn votes_drain(instance: &Instance) -> Option<()> {
    let drain = format!("gslb-drain {SEOUL_SECRET}");
    vote(instance, "seoul").await.filter(|v| *v == drain)?;
    Some(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_plane_votes_fail_over_with_cluster_while_etcd_is_down() {
    let Some(mut etcd) = EtcdCluster::start([21, 22, 23].map(|i| Ipv4Addr::new(127, 0, 91, i)))
    else {
        return;
    };
    let moto = Emulator::start(Kind::Moto);
    let client = sdk(&moto.endpoint());
    let zone = create_zone(&client, "example.test.").await;
    let proxy = CountingProxy::start(&moto.endpoint()).await;
    let loopback = SocketAddr::from(([127, 0, 91, 10], 0));
    let mut seoul = Origin::start(loopback, "seoul").await.expect("seoul");
    let tokyo = Origin::start(loopback, "tokyo").await.expect("tokyo");
    let dir = tempfile::tempdir().expect("tempdir");
    let all = instances(91);
    let cluster = format!(
        "[cluster]\nendpoints = {:?}\nvantages = [\"dp-a\", \"dp-b\", \"dp-c\"]\nlease_ttl = \"4s\"\nheartbeat = \"1s\"\n",
        etcd.endpoints()
    );
    write_files(
        dir.path(),
        (&seoul, &tokyo),
        &zone,
        &proxy.url,
        &all,
        &cluster,
    );
    let out = gslb(dir.path(), &["check", "--config", "a.toml"])
        .output()
        .expect("check");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && !text.contains("warning"), "{text}");
    provision(dir.path());
    let second = provision(dir.path());
    assert!(second.contains("threshold 3;"), "{second}");

    // The Route 53 API is unreachable, then etcd too.
    proxy.refuse_all();
    let daemons = run_all(dir.path(), &all).await;
    let coordinated = |want: bool| {
        let all = &all;
        async move {
            for i in all {
                let s = status_all(i.admin).await?;
                (s["cluster"]["coordinated"] == want).then_some(())?;
            }
            Some(())
        }
    };
    let joined = eventually(Duration::from_secs(30), || coordinated(true)).await;
    assert!(joined.is_some(), "the instances never coordinated");
    for i in 0..3 {
        etcd.kill(i);
    }
    let lost = eventually(Duration::from_secs(30), || coordinated(false)).await;
    assert!(lost.is_some(), "the instances never lost coordination");
    let mut model = settled_model(&client, &zone).await;

    // b and c paused (no answer: no vote), the primary's origin stops: instance a, without
    // etcd, votes drain from its own probes, and as the one instance voting it decides.
    signal(&daemons[1], "STOP");
    signal(&daemons[2], "STOP");
    seoul.stop().await;
    let alone = eventually(Duration::from_secs(15), || votes_drain(&all[0])).await;
    let log = read_log(dir.path(), "a.log");
    assert!(
        alone.is_some(),
        "instance a without etcd never voted drain: {log}"
    );
    let served = model.run_until(20, |m| m.answer() == "tokyo").await;
    assert!(
        served.is_some(),
        "one voting instance never moved the data plane"
    );

    // b and c resume, still without etcd: they vote drain too, and tokyo stays.
    signal(&daemons[1], "CONT");
    signal(&daemons[2], "CONT");
    let majority = eventually(Duration::from_secs(15), || async {
        votes_drain(&all[1]).await?;
        votes_drain(&all[2]).await
    })
    .await;
    assert!(majority.is_some(), "b and c without etcd never voted drain");
    model.run_until(5, |_| false).await;
    assert_eq!(model.answer(), "tokyo");
    assert_eq!(
        proxy
            .counts
            .refused
            .load(std::sync::atomic::Ordering::SeqCst),
        0,
        "data-plane mode made a Route 53 API call after provisioning"
    );
    drop(daemons);
}

/// `gslb <args> --config a.toml` in `dir`: its exit code and output (stdout, then stderr).
fn gslb_a(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let mut all = args.to_vec();
    all.extend(["--config", "a.toml"]);
    let out = gslb(dir, &all).output().expect("gslb");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

/// `gslb provision --dry-run --config a.toml`: its exit code and output.
fn dry_run(dir: &Path) -> (Option<i32>, String) {
    gslb_a(dir, &["provision", "--dry-run"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_plane_provision_dry_run_shows_checks_and_batch_and_writes_nothing() {
    let moto = Emulator::start(Kind::Moto);
    let client = sdk(&moto.endpoint());
    let zone = create_zone(&client, "example.test.").await;
    let loopback = SocketAddr::from(([127, 0, 91, 11], 0));
    let seoul = Origin::start(loopback, "seoul").await.expect("seoul");
    let tokyo = Origin::start(loopback, "tokyo").await.expect("tokyo");
    let dir = tempfile::tempdir().expect("tempdir");
    let all = instances(91);
    write_files(
        dir.path(),
        (&seoul, &tokyo),
        &zone,
        &moto.endpoint(),
        &all,
        "",
    );

    // Nothing exists: everything would be created, and nothing is.
    let (code, text) = dry_run(dir.path());
    assert_eq!(code, Some(2), "{text}");
    for pool in ["seoul", "tokyo"] {
        let line = format!(
            "would provision api {pool}: record created; tally check (new tally check) threshold 0 (permissive"
        );
        assert!(text.contains(&line), "{text}\nlacks {line}");
    }
    assert!(
        text.contains("vote checks 6 to create, 0 to correct"),
        "{text}"
    );
    assert!(
        text.contains("change batch for hosted zone") && text.contains("(new tally check)"),
        "{text}"
    );
    let (records, checks) = snapshot(&client, &zone).await;
    assert!(checks.is_empty(), "a dry run created {checks:?}");
    assert!(
        records.iter().all(|r| r.set_identifier.is_none()),
        "a dry run wrote {records:?}"
    );

    // Provisioned once: the permissive thresholds would be raised.
    provision(dir.path());
    let (before, _) = snapshot(&client, &zone).await;
    let (code, text) = dry_run(dir.path());
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("threshold 3;"), "{text}");
    assert!(
        text.contains("vote checks 0 to create, 0 to correct"),
        "{text}"
    );
    let (after, checks) = snapshot(&client, &zone).await;
    assert_eq!(before, after, "a dry run changed the records");
    let permissive = checks.iter().filter(|c| {
        c.health_check_config()
            .is_some_and(|c| c.health_threshold() == Some(0))
    });
    assert_eq!(permissive.count(), 2, "a dry run raised a threshold");

    // Provisioned twice: nothing to do.
    provision(dir.path());
    let (code, text) = dry_run(dir.path());
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(
        text.matches("record unchanged; tally check").count(),
        2,
        "{text}"
    );
}

/// `gslb plan --config a.toml`: its exit code and output.
/// `gslb plan --config a.toml`: its exit code and output.
fn plan(dir: &Path) -> (Option<i32>, String) {
    gslb_a(dir, &["plan"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_plane_plan_shows_votes_tally_checks_and_records() {
    let moto = Emulator::start(Kind::Moto);
    let client = sdk(&moto.endpoint());
    let zone = create_zone(&client, "example.test.").await;
    let loopback = SocketAddr::from(([127, 0, 91, 12], 0));
    let mut seoul = Origin::start(loopback, "seoul").await.expect("seoul");
    let tokyo = Origin::start(loopback, "tokyo").await.expect("tokyo");
    let dir = tempfile::tempdir().expect("tempdir");
    let all = instances(91);
    write_files(
        dir.path(),
        (&seoul, &tokyo),
        &zone,
        &moto.endpoint(),
        &all,
        "",
    );

    // Not provisioned: provision has work, so the plan is pending.
    let (code, text) = plan(dir.path());
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("record seoul: tally check (new tally check) threshold 0"),
        "{text}"
    );
    assert!(!text.contains("not a gslb verdict check"), "{text}");

    // Provisioned (twice: thresholds raised): both pools serve, nothing to do.
    provision(dir.path());
    provision(dir.path());
    let (code, text) = plan(dir.path());
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("    seoul: serve\n    tokyo: serve\n"),
        "{text}"
    );
    let (_, checks) = snapshot(&client, &zone).await;
    let record = support::route53::record(&client, &zone, "seoul").await;
    let tally = record.health_check_id().expect("tally check");
    assert!(checks.iter().any(|c| c.id == tally));
    let line = format!(
        "record seoul: tally check {tally} threshold 3 (wanted 3 of 6 vote checks), vote checks 0 missing, 0 to correct; record carries it"
    );
    assert!(text.contains(&line), "{text}\nlacks {line}");

    // The primary's origin is down: this instance would vote to drain it.
    seoul.stop().await;
    let (code, text) = plan(dir.path());
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("    seoul: drain\n    tokyo: serve\n"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_plane_provision_reports_verdict_checks_left_unused() {
    let moto = Emulator::start(Kind::Moto);
    let client = sdk(&moto.endpoint());
    let zone = create_zone(&client, "example.test.").await;
    let loopback = SocketAddr::from(([127, 0, 91, 13], 0));
    let seoul = Origin::start(loopback, "seoul").await.expect("seoul");
    let tokyo = Origin::start(loopback, "tokyo").await.expect("tokyo");
    let dir = tempfile::tempdir().expect("tempdir");
    let all = instances(91);
    write_files(
        dir.path(),
        (&seoul, &tokyo),
        &zone,
        &moto.endpoint(),
        &all,
        "",
    );
    // The same service in verdict_check mode first.
    let a = std::fs::read_to_string(dir.path().join("a.toml")).expect("a.toml");
    let verdict = a.replace("api = \"data_plane\"", "api = \"verdict_check\"");
    std::fs::write(dir.path().join("v.toml"), verdict).expect("v.toml");
    let out = gslb(dir.path(), &["provision", "--config", "v.toml"])
        .output()
        .expect("provision");
    assert!(out.status.success(), "{out:?}");
    let mut old = Vec::new();
    for pool in ["seoul", "tokyo"] {
        let r = support::route53::record(&client, &zone, pool).await;
        old.push(r.health_check_id().expect("verdict check").to_owned());
    }

    let (code, text) = dry_run(dir.path());
    assert_eq!(code, Some(2), "{text}");
    let first = provision(dir.path());
    for (pool, id) in ["seoul", "tokyo"].iter().zip(&old) {
        let line =
            format!("api {pool}: gslb's health check {id} is no longer carried by the record");
        assert!(
            text.contains(&format!("would provision {line}")),
            "{text}\nlacks {line}"
        );
        assert!(
            first.contains(&format!("provisioned {line}")),
            "{first}\nlacks {line}"
        );
    }
    let (_, checks) = snapshot(&client, &zone).await;
    for id in &old {
        assert!(checks.iter().any(|c| &c.id == id), "{id} was deleted");
    }
    let again = provision(dir.path());
    assert!(
        !again.contains("no longer carried"),
        "reported once: {again}"
    );
}
