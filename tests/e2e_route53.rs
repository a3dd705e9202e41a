//! End to end: the real `gslb` binary (`provision`, then `run`) against two loopback origins
//! and the moto Route 53 emulator, with a counting proxy between gslb and moto.
//!
//! Covers: stopping the primary origin inverts the primary's verdict check within
//! fall × interval + 2 s and leaves the secondary's alone; zero writes while both origins are
//! healthy; all pools down -> no write and a status that says it holds and why; a controller
//! restarted mid-failover makes no write at start and does not flip back. An Alias failover
//! pair (to two load-balancer names) provisioned, failed over and failed back. A zone with a
//! foreign health check and a Terraform-made Alias pair: `provision --dry-run` exits 2 with
//! the batch, `provision` refuses and changes nothing, `provision --adopt NAME` replaces
//! exactly those records; Alias to values only with `--adopt`.

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use aws_sdk_route53::types::{
    AliasTarget, Change, ChangeAction, ChangeBatch, HealthCheckConfig, HealthCheckType,
    ResourceRecord, ResourceRecordSet, ResourceRecordSetFailover, RrType,
};
use gslb::io::origin::Mode;
use gslb::io::origin::Origin;
use support::daemon::{Daemon, free_port, log_file, read_log, status};
use support::emulators::{Emulator, Kind};
use support::eventually;
use support::proxy::CountingProxy;
use support::route53::{
    alias_table, caller_reference, create_zone, gslb, record, sdk, snapshot, verdict_check,
};

const INTERVAL_MS: u64 = 200;
const FALL: u64 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_through_route53_verdict_checks() {
    let moto = Emulator::start(Kind::Moto);
    let client = sdk(&moto.endpoint());
    let zone_id = create_zone(&client, "example.test.").await;
    let proxy = CountingProxy::start(&moto.endpoint()).await;

    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut seoul = Origin::start(loopback, "seoul")
        .await
        .expect("seoul origin");
    let mut tokyo = Origin::start(loopback, "tokyo")
        .await
        .expect("tokyo origin");
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = format!(
        r#"service = "api"
hostname = "api.example.test"
failback = "manual"
[probe]
interval = "{INTERVAL_MS}ms"
timeout = "150ms"
body_contains = "ok"
[health]
fall = {FALL}
rise = 2
{pools}"#,
        pools = support::policy::seoul_tokyo_route53(
            &format!("http://{}/api/v1/health", seoul.addr()),
            &format!("http://{}/api/v1/health", tokyo.addr()),
            &zone_id,
        ),
    );
    std::fs::write(dir.path().join("api.toml"), policy).expect("policy");
    let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let settings = format!(
        "vantage = \"e2e\"\npolicies = [\"api.toml\"]\n[admin]\nlisten = \"{admin}\"\n[route53]\nendpoint_url = \"{}\"\nrequests_per_second = 50\n[reconcile]\nresync = \"300ms\"\n",
        proxy.url
    );
    std::fs::write(dir.path().join("gslb.toml"), settings).expect("settings");

    let out = gslb(dir.path(), &["provision", "--config", "gslb.toml"])
        .output()
        .expect("provision");
    assert!(
        out.status.success(),
        "provision failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (seoul_check, inverted) = verdict_check(&client, &zone_id, "seoul").await;
    assert!(!inverted);

    // Steady state: both healthy, the controller applied (nothing to change) and then keeps
    // reading on every resync without writing.
    let daemon = Daemon(
        gslb(dir.path(), &["run", "--config", "gslb.toml"])
            .stderr(log_file(dir.path(), "run1.log"))
            .spawn()
            .expect("run"),
    );
    let applied = eventually(Duration::from_secs(15), || async {
        status(admin, "api")
            .await
            .filter(|s| s["apply"]["state"] == "applied" && s["active"] == "seoul")
    })
    .await;
    assert!(
        applied.is_some(),
        "controller never reached applied state:\n{}",
        read_log(dir.path(), "run1.log")
    );
    let (reads0, writes0) = proxy.counts.get();
    eventually(Duration::from_secs(15), || async {
        (proxy.counts.get().0 >= reads0 + 10).then_some(())
    })
    .await
    .expect("resync passes keep reading");
    assert_eq!(
        proxy.counts.get().1,
        writes0,
        "steady state must make zero writes"
    );

    // Stop the primary: its verdict check is inverted within fall × interval + 2 s.
    let stopped = Instant::now();
    seoul.stop().await;
    let deadline = Duration::from_millis(FALL * INTERVAL_MS + 2_000);
    let flipped = eventually(deadline, || async {
        verdict_check(&client, &zone_id, "seoul")
            .await
            .1
            .then_some(())
    })
    .await;
    let took = stopped.elapsed();
    assert!(
        flipped.is_some(),
        "seoul's verdict check was not inverted within {deadline:?}"
    );
    assert!(took <= deadline, "took {took:?}");
    let (_, tokyo_inverted) = verdict_check(&client, &zone_id, "tokyo").await;
    assert!(!tokyo_inverted, "the secondary's check must be left alone");
    let (_, writes1) = proxy.counts.get();
    assert_eq!(
        writes1 - writes0,
        1,
        "exactly one write: invert seoul's verdict check"
    );
    assert_eq!(
        verdict_check(&client, &zone_id, "seoul").await.0,
        seoul_check,
        "same check, not a new one"
    );

    // Every pool down: hold, say why, write nothing.
    tokyo.stop().await;
    let holding = eventually(Duration::from_secs(10), || async {
        status(admin, "api").await.filter(|s| {
            s["holding"]
                .as_str()
                .is_some_and(|h| h.starts_with("fail_static"))
        })
    })
    .await
    .expect("status says it is holding");
    assert!(
        holding["holding"]
            .as_str()
            .unwrap_or("")
            .contains("no pool is healthy"),
        "{holding}"
    );
    let (reads2, _) = proxy.counts.get();
    eventually(Duration::from_secs(10), || async {
        (proxy.counts.get().0 >= reads2 + 5).then_some(())
    })
    .await
    .expect("still reading");
    assert_eq!(proxy.counts.get().1, writes1, "fail static writes nothing");

    // Restart mid-failover with seoul healthy again: adopt tokyo, no write, no flip back.
    drop(daemon);
    seoul.start_again().await.expect("restart seoul");
    tokyo.start_again().await.expect("restart tokyo");
    let (reads3, writes3) = proxy.counts.get();
    let _daemon = Daemon(
        gslb(dir.path(), &["run", "--config", "gslb.toml"])
            .stderr(log_file(dir.path(), "run2.log"))
            .spawn()
            .expect("run again"),
    );
    let held = eventually(Duration::from_secs(15), || async {
        status(admin, "api").await.filter(|s| {
            s["last_decision"]["rule"] == "failback_manual" && s["apply"]["state"] == "applied"
        })
    })
    .await
    .expect("restarted controller holds on tokyo under manual failback");
    assert_eq!(held["active"], "tokyo");
    eventually(Duration::from_secs(10), || async {
        (proxy.counts.get().0 >= reads3 + 10).then_some(())
    })
    .await
    .expect("restarted controller reads");
    assert_eq!(
        proxy.counts.get().1,
        writes3,
        "a restarted controller writes nothing"
    );
    assert!(
        verdict_check(&client, &zone_id, "seoul").await.1,
        "seoul stays failed over"
    );
}

/// The policy of the Alias tests: `seoul` and `tokyo` origins at `seoul`/`tokyo` (endpoint
/// URLs), each pool an Alias record ([`alias_table`]), automatic failback after 1 s.
fn alias_policy(seoul: &str, tokyo: &str, zone: &str) -> String {
    let pools = support::policy::seoul_tokyo_route53(seoul, tokyo, zone)
        .replace(
            "[target.route53.pools.seoul]\nvalues = [\"192.0.2.1\"]\n",
            &alias_table("seoul", false),
        )
        .replace(
            "[target.route53.pools.tokyo]\nvalues = [\"192.0.2.2\"]\n",
            &alias_table("tokyo", true),
        );
    format!(
        "service = \"api\"\nhostname = \"api.example.test\"\nfailback = \"auto\"\nmin_dwell = \"1s\"\nfailback_hold = \"1s\"\n\
         [probe]\ninterval = \"{INTERVAL_MS}ms\"\ntimeout = \"150ms\"\nbody_contains = \"ok\"\n[health]\nfall = {FALL}\nrise = 2\n{pools}"
    )
}

/// Daemon settings for `policies = ["api.toml"]` against Route 53 at `endpoint`.
fn settings(admin: SocketAddr, endpoint: &str) -> String {
    format!(
        "vantage = \"e2e\"\npolicies = [\"api.toml\"]\n[admin]\nlisten = \"{admin}\"\n[route53]\nendpoint_url = \"{endpoint}\"\nrequests_per_second = 50\n[reconcile]\nresync = \"300ms\"\n"
    )
}

/// Writes `api.toml` (`policy`) and `gslb.toml` (Route 53 at `endpoint`, an admin address on a
/// free port) into `dir`; returns the admin address.
fn write_config(dir: &std::path::Path, policy: &str, endpoint: &str) -> SocketAddr {
    std::fs::write(dir.join("api.toml"), policy).expect("policy");
    let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
    std::fs::write(dir.join("gslb.toml"), settings(admin, endpoint)).expect("settings");
    admin
}

/// `gslb provision` in `dir` with `extra` arguments: (exit code, stdout, stderr).
fn provision(dir: &std::path::Path, extra: &[&str]) -> (Option<i32>, String, String) {
    let mut args = vec!["provision", "--config", "gslb.toml"];
    args.extend_from_slice(extra);
    let out = gslb(dir, &args).output().expect("provision");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The Alias target of `set_id`'s record: (DNS name without the trailing dot, zone).
async fn alias_of(client: &aws_sdk_route53::Client, zone: &str, set_id: &str) -> (String, String) {
    let r = record(client, zone, set_id).await;
    assert_eq!(r.ttl, None, "an Alias record has no TTL: {r:?}");
    let a = r
        .alias_target
        .unwrap_or_else(|| panic!("{set_id} is not an Alias record"));
    (
        a.dns_name.trim_end_matches('.').to_owned(),
        a.hosted_zone_id,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alias_failover_pair_is_provisioned_failed_over_and_failed_back() {
    let moto = Emulator::start(Kind::Moto);
    let client = sdk(&moto.endpoint());
    let zone_id = create_zone(&client, "example.test.").await;
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let seoul = Origin::start(loopback, "seoul").await.expect("seoul");
    let tokyo = Origin::start(loopback, "tokyo").await.expect("tokyo");
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = alias_policy(
        &format!("http://{}/api/v1/health", seoul.addr()),
        &format!("http://{}/api/v1/health", tokyo.addr()),
        &zone_id,
    );
    let admin = write_config(dir.path(), &policy, &moto.endpoint());

    let (code, stdout, stderr) = provision(dir.path(), &[]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert_eq!(
        alias_of(&client, &zone_id, "seoul").await,
        (
            "seoul-alb.elb.example.net".to_owned(),
            "ZELBSEOUL".to_owned()
        )
    );
    assert_eq!(
        alias_of(&client, &zone_id, "tokyo").await,
        (
            "tokyo-alb.elb.example.net".to_owned(),
            "ZELBTOKYO".to_owned()
        )
    );
    let tokyo_record = record(&client, &zone_id, "tokyo").await;
    assert!(
        tokyo_record
            .alias_target
            .as_ref()
            .is_some_and(|a| a.evaluate_target_health)
    );
    assert_eq!(
        tokyo_record.failover,
        Some(ResourceRecordSetFailover::Secondary)
    );
    // Read back, an Alias target that matches the policy is no drift.
    let (code, stdout, _) = provision(dir.path(), &["--dry-run"]);
    assert_eq!(
        (code, stdout.trim()),
        (Some(0), "would provision api: nothing to change")
    );

    let daemon = Daemon(
        gslb(dir.path(), &["run", "--config", "gslb.toml"])
            .stderr(log_file(dir.path(), "run.log"))
            .spawn()
            .expect("run"),
    );
    let applied = eventually(Duration::from_secs(15), || async {
        status(admin, "api")
            .await
            .filter(|s| s["apply"]["state"] == "applied" && s["active"] == "seoul")
    })
    .await;
    assert!(
        applied.is_some(),
        "never applied:\n{}",
        read_log(dir.path(), "run.log")
    );

    seoul.set_mode(Mode::Status(503));
    let over = eventually(Duration::from_secs(15), || async {
        verdict_check(&client, &zone_id, "seoul")
            .await
            .1
            .then_some(())
    })
    .await;
    assert!(
        over.is_some(),
        "seoul's verdict check never inverted:\n{}",
        read_log(dir.path(), "run.log")
    );
    assert!(!verdict_check(&client, &zone_id, "tokyo").await.1);

    seoul.set_mode(Mode::Healthy);
    let back = eventually(Duration::from_secs(20), || async {
        (!verdict_check(&client, &zone_id, "seoul").await.1).then_some(())
    })
    .await;
    assert!(
        back.is_some(),
        "never failed back:\n{}",
        read_log(dir.path(), "run.log")
    );
    drop(daemon);
    // The failover touched only the checks: the Alias records are as provisioned.
    assert_eq!(record(&client, &zone_id, "tokyo").await, tokyo_record);
    assert_eq!(
        alias_of(&client, &zone_id, "seoul").await.0,
        "seoul-alb.elb.example.net"
    );
}

/// A failover record as Terraform writes it: an Alias to `<set_id>-alb.elb.example.net`
/// (zone `ZELB<SET_ID>`, EvaluateTargetHealth on), with `check` when given.
fn terraform_alias(
    set_id: &str,
    role: ResourceRecordSetFailover,
    check: Option<&str>,
) -> ResourceRecordSet {
    ResourceRecordSet::builder()
        .name("api.example.test")
        .r#type(RrType::A)
        .set_identifier(set_id)
        .failover(role)
        .alias_target(
            AliasTarget::builder()
                .dns_name(format!("{set_id}-alb.elb.example.net"))
                .hosted_zone_id(format!("ZELB{}", set_id.to_ascii_uppercase()))
                .evaluate_target_health(true)
                .build()
                .expect("alias"),
        )
        .set_health_check_id(check.map(str::to_owned))
        .build()
        .expect("record")
}

/// Writes `records` with CREATE in one batch, as another tool would.
async fn create_records(
    client: &aws_sdk_route53::Client,
    zone: &str,
    records: Vec<ResourceRecordSet>,
) {
    let changes = records
        .into_iter()
        .map(|r| {
            Change::builder()
                .action(ChangeAction::Create)
                .resource_record_set(r)
                .build()
                .expect("change")
        })
        .collect();
    client
        .change_resource_record_sets()
        .hosted_zone_id(zone)
        .change_batch(
            ChangeBatch::builder()
                .set_changes(Some(changes))
                .build()
                .expect("batch"),
        )
        .send()
        .await
        .expect("create records");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provision_refuses_foreign_records_until_adopted_and_dry_run_shows_the_batch() {
    let moto = Emulator::start(Kind::Moto);
    let client = sdk(&moto.endpoint());
    let zone_id = create_zone(&client, "example.test.").await;
    // Terraform's pair: seoul uses Terraform's own HTTPS health check, tokyo none; and an
    // unrelated record gslb must never touch.
    let foreign = client
        .create_health_check()
        .caller_reference("terraform-20261201000000")
        .health_check_config(
            HealthCheckConfig::builder()
                .r#type(HealthCheckType::Https)
                .fully_qualified_domain_name("seoul.example.test")
                .resource_path("/health")
                .build()
                .expect("config"),
        )
        .send()
        .await
        .expect("foreign check")
        .health_check
        .expect("a check")
        .id;
    let www = ResourceRecordSet::builder()
        .name("www.example.test")
        .r#type(RrType::A)
        .ttl(300)
        .resource_records(
            ResourceRecord::builder()
                .value("192.0.2.80")
                .build()
                .expect("value"),
        )
        .build()
        .expect("www");
    create_records(
        &client,
        &zone_id,
        vec![
            terraform_alias("seoul", ResourceRecordSetFailover::Primary, Some(&foreign)),
            terraform_alias("tokyo", ResourceRecordSetFailover::Secondary, None),
            www,
        ],
    )
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = alias_policy("http://127.0.80.1:9/h", "http://127.0.80.2:9/h", &zone_id);
    write_config(dir.path(), &policy, &moto.endpoint());
    let before = snapshot(&client, &zone_id).await;

    // Dry run: the exact batch and what a real run would refuse, exit 2 (changes pending, as
    // `terraform plan -detailed-exitcode`), nothing written.
    let (code, stdout, stderr) = provision(dir.path(), &["--dry-run"]);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    assert!(!stdout.contains("record adopted"), "{stdout}");
    assert!(
        stdout.contains("would provision api seoul: would refuse without --adopt"),
        "{stdout}"
    );
    let json = &stdout
        [stdout.find("{\n").expect("a change batch")..stdout.rfind("\n}").expect("its end") + 2];
    let batch: serde_json::Value = serde_json::from_str(json).expect("the batch is JSON");
    let actions: Vec<(&str, &str)> = batch["Changes"]
        .as_array()
        .expect("changes")
        .iter()
        .map(|c| {
            (
                c["Action"].as_str().unwrap_or(""),
                c["ResourceRecordSet"]["SetIdentifier"]
                    .as_str()
                    .unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        actions,
        [
            ("DELETE", "seoul"),
            ("CREATE", "seoul"),
            ("DELETE", "tokyo"),
            ("CREATE", "tokyo")
        ]
    );
    assert_eq!(
        batch["Changes"][0]["ResourceRecordSet"]["HealthCheckId"],
        foreign.as_str()
    );
    assert_eq!(
        batch["Changes"][1]["ResourceRecordSet"]["HealthCheckId"],
        gslb_route53::NEW_CHECK
    );
    assert!(
        stderr.contains("service api: provision refuses")
            && stderr.contains("run `gslb provision --adopt api.example.test`")
            && stderr.contains("nothing was written (dry run)"),
        "{stderr}"
    );
    assert_eq!(
        snapshot(&client, &zone_id).await,
        before,
        "a dry run writes nothing"
    );

    // Without --adopt: refused, every foreign record and check named, nothing changed.
    let (code, stdout, stderr) = provision(dir.path(), &[]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    for needle in [
        format!("record api.example.test A \"seoul\": health check {foreign} is not gslb's"),
        "record api.example.test A \"tokyo\" has no health check".to_owned(),
        "nothing was changed".to_owned(),
        "--adopt api.example.test".to_owned(),
    ] {
        assert!(stderr.contains(&needle), "{needle} in {stderr}");
    }
    assert_eq!(
        snapshot(&client, &zone_id).await,
        before,
        "a refusal writes nothing"
    );

    // --adopt: exactly the pair is replaced, each reported; the foreign check and www stay.
    let (code, stdout, stderr) = provision(dir.path(), &["--adopt", "api.example.test"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    for pool in ["seoul", "tokyo"] {
        assert!(
            stdout.contains(&format!("provisioned api {pool}: record adopted")),
            "{stdout}"
        );
        let r = record(&client, &zone_id, pool).await;
        let check = r.health_check_id.expect("a gslb check");
        assert!(caller_reference(&client, &check).await.starts_with("gslb-"));
    }
    let after = snapshot(&client, &zone_id).await;
    assert_eq!(after.0.len(), before.0.len(), "{:?}", after.0);
    assert!(
        after
            .0
            .iter()
            .any(|r| r.name == "www.example.test." || r.name == "www.example.test")
    );
    assert!(
        after.1.iter().any(|c| c.id == foreign),
        "the foreign check is left in place"
    );
    assert_eq!(
        alias_of(&client, &zone_id, "seoul").await.0,
        "seoul-alb.elb.example.net"
    );
    let (code, stdout, _) = provision(dir.path(), &["--dry-run"]);
    assert_eq!(
        (code, stdout.trim()),
        (Some(0), "would provision api: nothing to change")
    );

    // gslb's own Alias record becomes one with values only with --adopt.
    let values = policy.replace(
        &alias_table("tokyo", true),
        "[target.route53.pools.tokyo]\nvalues = [\"192.0.2.2\"]\n",
    );
    std::fs::write(dir.path().join("api.toml"), values).expect("policy");
    let owned = snapshot(&client, &zone_id).await;
    let (code, _, stderr) = provision(dir.path(), &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("record api.example.test A \"tokyo\" is an Alias record to tokyo-alb.elb.example.net, the policy asks for a record with values; converting needs --adopt"), "{stderr}");
    assert!(
        !stderr.contains("does not manage"),
        "gslb's own record: {stderr}"
    );
    assert_eq!(snapshot(&client, &zone_id).await, owned);
    let (code, stdout, stderr) = provision(dir.path(), &["--adopt", "api"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("provisioned api tokyo: record adopted (an Alias record"),
        "{stdout}"
    );
    let tokyo = record(&client, &zone_id, "tokyo").await;
    assert!(
        tokyo.alias_target.is_none() && tokyo.resource_records().len() == 1,
        "{tokyo:?}"
    );
    assert_eq!(
        provision(dir.path(), &[]).0,
        Some(0),
        "now gslb's and as the policy says"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provision_dry_run_errors_exit_1_never_2() {
    let moto = Emulator::start(Kind::Moto);
    let client = sdk(&moto.endpoint());
    let zone_id = create_zone(&client, "example.test.").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = alias_policy("http://127.0.80.1:9/h", "http://127.0.80.2:9/h", &zone_id);
    let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
    std::fs::write(
        dir.path().join("gslb.toml"),
        settings(admin, &moto.endpoint()),
    )
    .expect("settings");
    let before = snapshot(&client, &zone_id).await;

    // A hosted zone that does not exist: a Route 53 error, exit 1.
    std::fs::write(
        dir.path().join("api.toml"),
        policy.replace(&zone_id, "ZNOSUCHZONE"),
    )
    .expect("policy");
    let (code, _, stderr) = provision(dir.path(), &["--dry-run"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("provisioning service api"), "{stderr}");

    // A bad policy is 1 in a dry run (2 would read as "changes pending").
    std::fs::write(
        dir.path().join("api.toml"),
        policy.replace("fall = 3", "fall = 0"),
    )
    .expect("policy");
    let (code, _, stderr) = provision(dir.path(), &["--dry-run"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("health.fall"), "{stderr}");

    // So is a usage error.
    std::fs::write(dir.path().join("api.toml"), &policy).expect("policy");
    let (code, _, stderr) = provision(dir.path(), &["--dry-run", "--adopt"]);
    assert_eq!(code, Some(1), "{stderr}");

    // An --adopt name no policy has is refused before any call.
    let (code, _, stderr) = provision(dir.path(), &["--adopt", "www.example.test"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "--adopt www.example.test: no Route 53 policy has that record name or service"
        ),
        "{stderr}"
    );
    assert_eq!(snapshot(&client, &zone_id).await, before, "nothing written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provision_checks_every_service_before_writing_any_and_plan_names_the_adopt() {
    let moto = Emulator::start(Kind::Moto);
    let client = sdk(&moto.endpoint());
    let zone_id = create_zone(&client, "example.test.").await;
    // Service zz's pair was made by Terraform without health checks; api's is not there yet.
    let zz_record = |set_id, role| {
        let mut r = terraform_alias(set_id, role, None);
        r.name = "zz.example.test".into();
        r
    };
    create_records(
        &client,
        &zone_id,
        vec![
            zz_record("seoul", ResourceRecordSetFailover::Primary),
            zz_record("tokyo", ResourceRecordSetFailover::Secondary),
        ],
    )
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = alias_policy("http://127.0.80.1:9/h", "http://127.0.80.2:9/h", &zone_id);
    std::fs::write(dir.path().join("api.toml"), &policy).expect("policy");
    let zz = policy
        .replace("service = \"api\"", "service = \"zz\"")
        .replace("api.example.test", "zz.example.test");
    std::fs::write(dir.path().join("zz.toml"), zz).expect("policy");
    let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
    std::fs::write(
        dir.path().join("gslb.toml"),
        settings(admin, &moto.endpoint()).replace(
            "policies = [\"api.toml\"]",
            "policies = [\"api.toml\", \"zz.toml\"]",
        ),
    )
    .expect("settings");
    let before = snapshot(&client, &zone_id).await;

    // api comes first and could be written, but zz is refused: nothing is written for either.
    let (code, stdout, stderr) = provision(dir.path(), &[]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(!stdout.contains("provisioned api"), "{stdout}");
    for needle in [
        "service zz: provision refuses",
        "record zz.example.test A \"seoul\" has no health check",
        "run `gslb provision --adopt zz.example.test`",
        "nothing was changed, for any service",
    ] {
        assert!(stderr.contains(needle), "{needle} in {stderr}");
    }
    assert!(!stderr.contains("service api:"), "{stderr}");
    assert_eq!(snapshot(&client, &zone_id).await, before, "nothing written");

    // Once api is provisioned, plan says which command makes zz gslb's: --adopt, naming it.
    let (code, stdout, stderr) = provision(dir.path(), &["--adopt", "zz"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    // (Another target than before: moto refuses a CREATE it has journalled as existing.)
    let mut tf = zz_record("tokyo", ResourceRecordSetFailover::Secondary);
    if let Some(a) = tf.alias_target.as_mut() {
        a.dns_name = "tokyo-alb-2.elb.example.net".into();
    }
    // Terraform takes zz's tokyo record back without a health check.
    let listed = client
        .list_resource_record_sets()
        .hosted_zone_id(&zone_id)
        .send()
        .await
        .expect("list")
        .resource_record_sets;
    let zz_tokyo = listed
        .into_iter()
        .find(|r| r.name.starts_with("zz.") && r.set_identifier() == Some("tokyo"))
        .expect("zz tokyo");
    client
        .change_resource_record_sets()
        .hosted_zone_id(&zone_id)
        .change_batch(
            ChangeBatch::builder()
                .changes(
                    Change::builder()
                        .action(ChangeAction::Delete)
                        .resource_record_set(zz_tokyo)
                        .build()
                        .expect("delete"),
                )
                .changes(
                    Change::builder()
                        .action(ChangeAction::Create)
                        .resource_record_set(tf)
                        .build()
                        .expect("create"),
                )
                .build()
                .expect("batch"),
        )
        .send()
        .await
        .expect("terraform writes zz's tokyo record back");
    let out = gslb(dir.path(), &["plan", "--config", "gslb.toml"])
        .output()
        .expect("plan");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("record zz.example.test A with set identifier \"tokyo\"")
            && text.contains("has no health check")
            && text.contains("gslb provision --adopt zz.example.test"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provision_without_credentials_says_where_it_looked_in_plain_words() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = alias_policy("http://127.0.80.1:9/h", "http://127.0.80.2:9/h", "ZTEST");
    std::fs::write(dir.path().join("api.toml"), policy).expect("policy");
    let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
    // No emulator: the credential chain fails before any request.
    std::fs::write(
        dir.path().join("gslb.toml"),
        settings(admin, "http://127.0.0.1:9"),
    )
    .expect("settings");
    // The instance-metadata provider is tried against a closed loopback port, so the chain
    // fails fast and logs what each provider said.
    let closed = format!("http://127.0.0.1:{}", free_port());
    let out = gslb(
        dir.path(),
        &["provision", "--config", "gslb.toml", "--dry-run"],
    )
    .env_remove("AWS_ACCESS_KEY_ID")
    .env_remove("AWS_SECRET_ACCESS_KEY")
    .env_remove("AWS_EC2_METADATA_DISABLED")
    .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", closed)
    .output()
    .expect("provision");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("no usable AWS credentials")
            && stderr.contains("AWS_ACCESS_KEY_ID")
            && stderr.contains("AWS_PROFILE"),
        "{stderr}"
    );
    for debug in ["ProviderError(", "Some(", "{ source"] {
        assert!(!stderr.contains(debug), "Rust debug text {debug}: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_reports_a_record_that_drifted_from_the_policy_and_says_to_provision() {
    let moto = Emulator::start(Kind::Moto);
    let client = sdk(&moto.endpoint());
    let zone_id = create_zone(&client, "example.test.").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = alias_policy("http://127.0.80.1:9/h", "http://127.0.80.2:9/h", &zone_id);
    write_config(dir.path(), &policy, &moto.endpoint());
    let (code, stdout, stderr) = provision(dir.path(), &[]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let plan = || {
        let out = gslb(dir.path(), &["plan", "--config", "gslb.toml"])
            .output()
            .expect("plan");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(!plan().contains("record drift"), "{}", plan());

    // Someone moves seoul's Alias to another load balancer, keeping gslb's check.
    let seoul = record(&client, &zone_id, "seoul").await;
    let mut moved = seoul.clone();
    if let Some(a) = moved.alias_target.as_mut() {
        a.dns_name = "other-alb.elb.example.net".into();
    }
    let change = |action, r| {
        Change::builder()
            .action(action)
            .resource_record_set(r)
            .build()
            .expect("change")
    };
    client
        .change_resource_record_sets()
        .hosted_zone_id(&zone_id)
        .change_batch(
            ChangeBatch::builder()
                .changes(change(ChangeAction::Delete, seoul))
                .changes(change(ChangeAction::Create, moved.clone()))
                .build()
                .expect("batch"),
        )
        .send()
        .await
        .expect("move seoul");
    let text = plan();
    assert!(
        text.contains("record drift (gslb run does not rewrite records; run `gslb provision`):")
            && text.contains("pool seoul's record:")
            && text.contains("other-alb.elb.example.net"),
        "{text}"
    );
    assert_eq!(
        record(&client, &zone_id, "seoul").await,
        moved,
        "plan writes nothing"
    );
}
