//! End to end with the real `gslb` binary, two loopback origins and the moto Route 53
//! emulator behind a counting proxy:
//!
//! - reload: a bad policy on SIGHUP keeps the last good set running
//!   (`gslb_policy_reload_success 0`); a fixed, changed policy on SIGHUP applies without moving
//!   traffic; a policy file added or removed without any signal is picked up by polling.
//! - reload during `run --provision`: a policy edit and a SIGHUP while provisioning waits on
//!   the provider are reloaded once the controller runs (the SIGHUP does not end the process).
//! - plan: with the primary origin down, `gslb plan` prints the switch to the secondary with its
//!   reasons and the exact write, writes nothing and exits 2; with all origins healthy, "no
//!   change" and 0; an unreadable provider or a bad policy, 1.

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use gslb::io::origin::Origin;
use support::daemon::{Daemon, free_port, log_file, read_log, status};
use support::emulators::{Emulator, Kind};
use support::eventually;
use support::proxy::CountingProxy;
use support::route53::{gslb, sdk, verdict_check};

/// moto, a hosted zone, two origins and a settings file in a temp dir, provisioned.
struct Setup {
    _moto: Emulator,
    client: aws_sdk_route53::Client,
    proxy: CountingProxy,
    zone: String,
    seoul: Origin,
    tokyo: Origin,
    dir: tempfile::TempDir,
    admin: SocketAddr,
}

impl Setup {
    async fn start() -> Self {
        let moto = Emulator::start(Kind::Moto);
        let client = sdk(&moto.endpoint());
        let zone = client
            .create_hosted_zone()
            .name("example.test.")
            .caller_reference(format!("reload-{}", std::process::id()))
            .send()
            .await
            .expect("create zone");
        let zone = zone
            .hosted_zone()
            .expect("zone")
            .id()
            .trim_start_matches("/hostedzone/")
            .to_owned();
        let proxy = CountingProxy::start(&moto.endpoint()).await;
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        let seoul = Origin::start(loopback, "seoul").await.expect("seoul");
        let tokyo = Origin::start(loopback, "tokyo").await.expect("tokyo");
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("policies")).expect("policies dir");
        let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let settings = format!(
            "vantage = \"e2e\"\npolicies = [\"policies\"]\n[admin]\nlisten = \"{admin}\"\n[route53]\nendpoint_url = \"{}\"\nrequests_per_second = 50\n[reconcile]\nresync = \"300ms\"\n",
            proxy.url
        );
        std::fs::write(dir.path().join("gslb.toml"), settings).expect("settings");
        let s = Self {
            _moto: moto,
            client,
            proxy,
            zone,
            seoul,
            tokyo,
            dir,
            admin,
        };
        s.write_policy("api", "api", 3);
        let out = gslb(s.dir(), &["provision", "--config", "gslb.toml"])
            .output()
            .expect("provision");
        assert!(
            out.status.success(),
            "provision failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        s
    }

    fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `policies/<file>.toml` for `service` (record `<service>.example.test`).
    fn write_policy(&self, file: &str, service: &str, fall: u32) {
        let text = format!(
            r#"service = "{service}"
hostname = "{service}.example.test"
failback = "manual"
[probe]
interval = "200ms"
timeout = "150ms"
body_contains = "ok"
[health]
fall = {fall}
rise = 2
{pools}"#,
            pools = support::policy::seoul_tokyo_route53(
                &format!("http://{}/api/v1/health", self.seoul.addr()),
                &format!("http://{}/api/v1/health", self.tokyo.addr()),
                &self.zone,
            ),
        );
        self.write_file(file, &text);
    }

    /// Replaces `policies/<file>.toml` at once (write and rename, as a ConfigMap update does).
    fn write_file(&self, file: &str, text: &str) {
        let tmp = self.dir().join(format!(".{file}.tmp"));
        std::fs::write(&tmp, text).expect("write policy");
        std::fs::rename(
            &tmp,
            self.dir().join("policies").join(format!("{file}.toml")),
        )
        .expect("rename policy");
    }

    async fn metrics(&self) -> String {
        let r = reqwest::get(format!("http://{}/metrics", self.admin)).await;
        match r {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// Waits until `/metrics` has a line starting with `line`.
    async fn metric(&self, line: &str, log: &str) {
        let found = eventually(Duration::from_secs(15), || async {
            self.metrics()
                .await
                .lines()
                .any(|l| l.starts_with(line))
                .then_some(())
        })
        .await;
        assert!(
            found.is_some(),
            "no metric line {line:?}:\n{}\nlog:\n{}",
            self.metrics().await,
            read_log(self.dir(), log)
        );
    }
}

fn hangup(daemon: &Daemon) {
    let status = std::process::Command::new("kill")
        .args(["-HUP", &daemon.0.id().to_string()])
        .status()
        .expect("kill -HUP");
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_keeps_the_last_good_set_and_applies_changes() {
    let s = Setup::start().await;
    let mut daemon = Daemon(
        gslb(s.dir(), &["run", "--config", "gslb.toml"])
            .stderr(log_file(s.dir(), "run.log"))
            .spawn()
            .expect("run"),
    );
    let applied = eventually(Duration::from_secs(15), || async {
        status(s.admin, "api")
            .await
            .filter(|st| st["apply"]["state"] == "applied" && st["active"] == "seoul")
    })
    .await;
    assert!(
        applied.is_some(),
        "never applied:\n{}",
        read_log(s.dir(), "run.log")
    );
    s.metric("gslb_policy_reload_success 1", "run.log").await;
    s.metric("gslb_policy_reloads_total{result=\"error\"} 0", "run.log")
        .await;
    // The load at start counts as the first good one.
    s.metric("gslb_policy_reloads_total{result=\"ok\"} 1", "run.log")
        .await;

    // A bad policy on SIGHUP: refused with file, key and reason; the old set keeps running.
    s.write_policy("api", "api", 0);
    hangup(&daemon);
    s.metric("gslb_policy_reload_success 0", "run.log").await;
    assert!(
        daemon.0.try_wait().expect("wait").is_none(),
        "still running"
    );
    let log = read_log(s.dir(), "run.log");
    assert!(
        log.contains("policy reload failed")
            && log.contains("api.toml")
            && log.contains("health.fall"),
        "{log}"
    );
    let still = status(s.admin, "api").await.expect("api still served");
    assert_eq!(still["active"], "seoul");
    let (_, writes0) = s.proxy.counts.get();

    // Fixed with a changed threshold on SIGHUP: applied, the service re-adopts seoul and
    // writes nothing (a reload never moves traffic by itself).
    s.write_policy("api", "api", 4);
    hangup(&daemon);
    s.metric("gslb_policy_reload_success 1", "run.log").await;
    s.metric("gslb_policy_reloads_total{result=\"ok\"} 2", "run.log")
        .await;
    let reapplied = eventually(Duration::from_secs(15), || async {
        status(s.admin, "api")
            .await
            .filter(|st| st["apply"]["state"] == "applied" && st["active"] == "seoul")
    })
    .await;
    assert!(reapplied.is_some(), "{}", read_log(s.dir(), "run.log"));
    assert!(
        read_log(s.dir(), "run.log").contains("policies reloaded"),
        "{}",
        read_log(s.dir(), "run.log")
    );
    assert_eq!(s.proxy.counts.get().1, writes0, "a reload writes nothing");

    // A new service file, no signal: polling picks it up and the status shows it.
    s.write_policy("web", "web", 3);
    let web = eventually(Duration::from_secs(15), || async {
        status(s.admin, "web").await
    })
    .await;
    assert!(
        web.is_some(),
        "web never appeared:\n{}",
        read_log(s.dir(), "run.log")
    );
    s.metric("gslb_policy_reloads_total{result=\"ok\"} 3", "run.log")
        .await;

    // Removed again, no signal: gone from the status; api unaffected.
    std::fs::remove_file(s.dir().join("policies/web.toml")).expect("remove web");
    let gone = eventually(Duration::from_secs(15), || async {
        status(s.admin, "web").await.is_none().then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "web still listed:\n{}",
        read_log(s.dir(), "run.log")
    );
    assert_eq!(
        status(s.admin, "api").await.expect("api")["active"],
        "seoul"
    );
    assert!(
        daemon.0.try_wait().expect("wait").is_none(),
        "still running"
    );
    assert!(
        !verdict_check(&s.client, &s.zone, "seoul").await.1,
        "seoul still serves"
    );
}

/// Runs `gslb plan` in `dir`, expecting exit code `code` (0 no change, 2 changes pending);
/// its output.
fn plan_exits(dir: &Path, code: i32) -> String {
    let out = gslb(dir, &["plan", "--config", "gslb.toml"])
        .output()
        .expect("plan");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(code),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// A TCP gate on 127.0.0.1 in front of `upstream` (`host:port`): it holds the first
/// connection until `release` is sent, then pipes it and every later one through. `held`
/// fires when the first connection arrives.
async fn gate(
    upstream: String,
) -> (
    String,
    tokio::sync::oneshot::Receiver<()>,
    tokio::sync::oneshot::Sender<()>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind gate");
    let url = format!("http://{}", listener.local_addr().expect("gate addr"));
    let (held_tx, held) = tokio::sync::oneshot::channel();
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let mut gate = Some((held_tx, released));
        while let Ok((mut inbound, _)) = listener.accept().await {
            let first = gate.take();
            let upstream = upstream.clone();
            tokio::spawn(async move {
                if let Some((held_tx, released)) = first {
                    let _ = held_tx.send(());
                    let _ = released.await;
                }
                if let Ok(mut out) = tokio::net::TcpStream::connect(&upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                }
            });
        }
    });
    (url, held, release)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_edit_and_sighup_during_provisioning_are_reloaded() {
    let s = Setup::start().await;
    // Provisioning's first call to Route 53 waits at the gate.
    let upstream = s.proxy.url.trim_start_matches("http://").to_owned();
    let (url, held, release) = gate(upstream).await;
    let settings = std::fs::read_to_string(s.dir().join("gslb.toml")).expect("settings");
    std::fs::write(
        s.dir().join("gslb.toml"),
        settings.replace(&s.proxy.url, &url),
    )
    .expect("settings");
    let mut daemon = Daemon(
        gslb(s.dir(), &["run", "--provision", "--config", "gslb.toml"])
            .stderr(log_file(s.dir(), "provision-run.log"))
            .spawn()
            .expect("run"),
    );
    tokio::time::timeout(Duration::from_secs(15), held)
        .await
        .expect("provisioning reaches Route 53")
        .expect("gate alive");
    // While provisioning waits: the policy changes and an operator sends SIGHUP.
    s.write_policy("api", "api", 4);
    hangup(&daemon);
    let _ = release.send(());
    // The load at start, then the edit, reloaded (not taken as already in force).
    s.metric(
        "gslb_policy_reloads_total{result=\"ok\"} 2",
        "provision-run.log",
    )
    .await;
    s.metric("gslb_policy_reload_success 1", "provision-run.log")
        .await;
    assert!(
        daemon.0.try_wait().expect("wait").is_none(),
        "the SIGHUP ended the process:\n{}",
        read_log(s.dir(), "provision-run.log")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_prints_the_switch_and_writes_nothing() {
    let mut s = Setup::start().await;
    let (seoul_check, _) = verdict_check(&s.client, &s.zone, "seoul").await;

    let text = plan_exits(s.dir(), 0);
    assert!(text.contains("provider serves: seoul"), "{text}");
    assert!(text.contains("would change: no change"), "{text}");

    s.seoul.stop().await;
    let (_, writes0) = s.proxy.counts.get();
    let text = plan_exits(s.dir(), 2);
    assert!(text.contains("provider serves: seoul"), "{text}");
    assert!(text.contains("decision: failover -> tokyo"), "{text}");
    assert!(
        text.contains("failed 3 consecutive probes (fall=3), last: connection_refused"),
        "{text}"
    );
    assert!(
        text.contains(
            "invert the verdict check of failover record seoul (pool seoul stops serving)"
        ),
        "{text}"
    );
    assert_eq!(s.proxy.counts.get().1, writes0, "plan writes nothing");
    assert_eq!(
        verdict_check(&s.client, &s.zone, "seoul").await,
        (seoul_check, false),
        "the record's verdict check is unchanged"
    );

    // A provider that cannot be read: exit 1, naming the service.
    let settings = std::fs::read_to_string(s.dir().join("gslb.toml")).expect("settings");
    let dead = format!("http://127.0.0.1:{}", free_port());
    std::fs::write(
        s.dir().join("gslb.toml"),
        settings.replace(&s.proxy.url, &dead),
    )
    .expect("settings");
    let out = gslb(s.dir(), &["plan", "--config", "gslb.toml"])
        .output()
        .expect("plan");
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("cannot plan: reading the provider of service api"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // A bad policy: exit 1 (2 would say "changes pending").
    s.write_file("api", "service = \"api\"\n");
    let out = gslb(s.dir(), &["plan", "--config", "gslb.toml"])
        .output()
        .expect("plan");
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `--rounds` is bounded: the plan feeds the engine every round of every endpoint in memory, so
/// a huge count must be refused as a bad argument, not exhaust the machine's memory. Exit 1,
/// not clap's 2, which `plan` uses for "changes pending"; other commands keep clap's 2.
#[test]
fn plan_refuses_more_rounds_than_it_can_simulate() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = gslb(
        dir.path(),
        &["plan", "--config", "gslb.toml", "--rounds", "100000000"],
    )
    .output()
    .expect("gslb plan");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--rounds"), "{stderr}");
    let out = gslb(
        dir.path(),
        &[
            "--log-format",
            "json",
            "plan",
            "--config",
            "gslb.toml",
            "--rounds",
            "x",
        ],
    )
    .output()
    .expect("gslb plan");
    assert_eq!(out.status.code(), Some(1), "after a global option too");
    let out = gslb(dir.path(), &["check", "--rounds", "1"])
        .output()
        .expect("gslb check");
    assert_eq!(
        out.status.code(),
        Some(2),
        "other commands keep clap's code"
    );
}
