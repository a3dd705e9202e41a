//! Issue 15, item 4: one rate limiter per AWS account, shared by every service bound to it.
//! Six Route 53 services of one account, run by the real `gslb` binary against moto through a
//! counting proxy, never send more than 5 requests in any second (Route 53 allows five API
//! requests per second per AWS account: Route 53 Developer Guide, "Quotas"): not at start-up,
//! when the six adoption reads come at once, nor when all six fail over together. With one
//! limiter per service (the old way) the start-up alone sent about 12 in its first second.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use gslb::io::origin::Origin;
use support::daemon::{free_port, read_log, status};
use support::emulators::{Emulator, Kind};
use support::eventually;
use support::proxy::CountingProxy;
use support::route53::{create_zone, provision_and_run, sdk, verdict_check};

const SERVICES: usize = 6;
/// Route 53's API limit per AWS account.
const ACCOUNT_LIMIT: usize = 5;

fn policy(i: usize, seoul: SocketAddr, tokyo: SocketAddr, zone: &str) -> String {
    format!(
        r#"service = "svc{i}"
hostname = "svc{i}.example.test"
failback = "manual"
[probe]
interval = "200ms"
timeout = "150ms"
body_contains = "ok"
[health]
fall = 3
rise = 2
{pools}"#,
        pools = support::policy::seoul_tokyo_route53(
            &format!("http://{seoul}/api/v1/health"),
            &format!("http://{tokyo}/api/v1/health"),
            zone,
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_route53_services_on_one_account_never_exceed_five_requests_a_second() {
    let moto = Emulator::start(Kind::Moto);
    let client = sdk(&moto.endpoint());
    let zone_id = create_zone(&client, "example.test.").await;
    let proxy = CountingProxy::start(&moto.endpoint()).await;
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut seoul = Origin::start(loopback, "seoul").await.expect("seoul");
    let tokyo = Origin::start(loopback, "tokyo").await.expect("tokyo");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut names = Vec::new();
    for i in 1..=SERVICES {
        let name = format!("svc{i}.toml");
        let text = policy(i, seoul.addr(), tokyo.addr(), &zone_id);
        std::fs::write(dir.path().join(&name), text).expect("policy");
        names.push(format!("{name:?}"));
    }
    let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
    // `[route53] requests_per_second` at its default, for the whole account; a short resync
    // so the reconcilers keep reading.
    let settings = format!(
        "vantage = \"e2e\"\npolicies = [{}]\n[admin]\nlisten = \"{admin}\"\n[route53]\nendpoint_url = \"{}\"\n[reconcile]\nresync = \"10s\"\n",
        names.join(", "),
        proxy.url
    );
    std::fs::write(dir.path().join("gslb.toml"), settings).expect("settings");
    let _daemon = provision_and_run(dir.path(), "run.log");
    let all = |active: &'static str| async move {
        for i in 1..=SERVICES {
            let s = status(admin, &format!("svc{i}")).await?;
            (s["apply"]["state"] == "applied" && s["active"] == active).then_some(())?;
        }
        Some(())
    };
    let applied = eventually(Duration::from_secs(60), || all("seoul")).await;
    assert!(
        applied.is_some(),
        "not all applied:\n{}",
        read_log(dir.path(), "run.log")
    );

    // All six fail over at once: six reads, six writes, six read-backs through one limiter.
    seoul.stop().await;
    let failed_over = eventually(Duration::from_secs(120), || all("tokyo")).await;
    assert!(
        failed_over.is_some(),
        "not all failed over:\n{}",
        read_log(dir.path(), "run.log")
    );
    let (_, inverted) = verdict_check(&client, &zone_id, "seoul").await;
    assert!(inverted, "the primary's verdict check is inverted");
    let (reads, writes) = proxy.counts.get();
    assert!(writes >= SERVICES as u64, "{writes} writes");
    let most = proxy.counts.most_within(Duration::from_secs(1));
    assert!(
        most <= ACCOUNT_LIMIT,
        "{most} requests within one second ({reads} reads, {writes} writes in all)"
    );
}
