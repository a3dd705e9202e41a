//! Three real `gslb run` processes (vantage points `a`, `b`, `c`, admin APIs on 127.0.21.1-3)
//! in one cluster: a real three-member etcd on 127.0.20.1-3 ([`super::etcd`]) set up as in
//! production (TLS, each instance's client certificate its etcd user, auth on through
//! `gslb etcd-auth`: each may write only its own keys), the Cloudflare fake, two loopback
//! origins (NCP, GCP). Each instance can be killed (SIGKILL), paused
//! (SIGSTOP), resumed and restarted; its status says its role, the writer and the epoch.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::Child;
use std::time::Duration;

use gslb::io::origin::Origin;
use gslb_cloudflare::fake::Fake;
use serde_json::Value;
use tempfile::TempDir;

use super::cloudflare::{gslb, health_urls, web_files};
use super::daemon::{log_file, read_log, status};
use super::etcd::EtcdCluster;

/// The instances' lease TTL: 4 s, the shortest with room for a write (write deadline and
/// takeover delay 1 s each, see `gslb::io::coordination::fence::Timing`).
pub const TTL: Duration = Duration::from_secs(4);
/// The takeover delay with [`TTL`].
pub const TAKEOVER: Duration = Duration::from_secs(1);
/// The probe interval.
pub const INTERVAL_MS: u64 = 200;

/// The policy lines after `hostname` of the cluster tests: manual failback, probes every
/// [`INTERVAL_MS`] (timeout 150 ms, body `ok`), fall 3, rise 2.
pub fn head() -> String {
    format!(
        "failback = \"manual\"\n[probe]\ninterval = \"{INTERVAL_MS}ms\"\ntimeout = \"150ms\"\nbody_contains = \"ok\"\n[health]\nfall = 3\nrise = 2"
    )
}

/// One `gslb run` of the cluster.
pub struct Instance {
    /// Its vantage point.
    pub vantage: String,
    /// Its admin API.
    pub admin: SocketAddr,
    dir: TempDir,
    child: Option<Child>,
}

impl Instance {
    fn spawn(&mut self) {
        self.spawn_with(gslb(self.dir.path(), &["run", "--config", "gslb.toml"]));
    }

    /// Spawns `run` in a process group of its own, so that signals reach `gslb run` also
    /// behind a wrapper that forks (Debian's `faketime` waits for its child).
    fn spawn_with(&mut self, mut run: std::process::Command) {
        use std::os::unix::process::CommandExt;
        let child = run
            .process_group(0)
            .env("GSLB_LOG", "debug")
            .stderr(log_file(
                self.dir.path(),
                &format!("run-{}.log", self.vantage),
            ))
            .spawn()
            .expect("gslb run");
        self.child = Some(child);
    }

    /// Kills it and starts it again with its wall clock `offset` off (libfaketime's
    /// `faketime -f`, e.g. `+90s`; the monotonic clock stays true). `false` when faketime is
    /// not installed (the caller skips).
    pub fn restart_with_clock(&mut self, offset: &str) -> bool {
        let Some(faketime) = super::emulators::tool("faketime") else {
            return false;
        };
        self.kill();
        let gslb_run = gslb(self.dir.path(), &[]);
        let mut run = std::process::Command::new(faketime);
        run.args(["-f", offset])
            .arg(gslb_run.get_program())
            .args(["run", "--config", "gslb.toml"])
            .current_dir(self.dir.path())
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
            .envs(
                gslb_run
                    .get_envs()
                    .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))),
            );
        self.spawn_with(run);
        true
    }

    /// Its service `web` in `/v1/status`, once it answers.
    pub async fn status(&self) -> Option<Value> {
        status(self.admin, "web").await
    }

    /// Its role (`writer`, `follower`, `unknown`) and the writer's epoch, once it says.
    pub async fn role(&self) -> Option<(String, Option<u64>)> {
        let s = self.status().await?;
        let c = &s["apply"]["cluster"];
        Some((c["role"].as_str()?.to_owned(), c["epoch"].as_u64()))
    }

    /// Its Prometheus metrics text.
    pub async fn metrics(&self) -> String {
        match reqwest::get(format!("http://{}/metrics", self.admin)).await {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// SIGKILL to its process group, reaped.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = group_signal(c.id(), "KILL");
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends `sig` (`STOP`, `CONT`) to its process group.
    pub fn signal(&self, sig: &str) {
        let pid = self.child.as_ref().expect("running").id();
        assert!(group_signal(pid, sig), "kill -{sig} -- -{pid}");
    }

    /// Kills and starts it again on the same files.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// Its audit log entries so far (`state/audit.jsonl`, relative to its folder).
    pub fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.path().join("state/audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Starts a drill draining `pool` of `web` for `duration` (`POST /v1/drills`): the answer's
    /// status and body.
    pub async fn drain(&self, pool: &str, reason: &str, duration: &str) -> (u16, Value) {
        let body = serde_json::json!({
            "service": "web", "action": "drain", "pool": pool,
            "reason": reason, "duration": duration
        });
        let answer = reqwest::Client::new()
            .post(format!("http://{}/v1/drills", self.admin))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .expect("POST /v1/drills");
        let status = answer.status().as_u16();
        let bytes = answer.bytes().await.expect("body");
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    /// Its drill list (`GET /v1/drills`): the drills' ids.
    pub async fn drill_ids(&self) -> Option<Vec<String>> {
        let r = reqwest::get(format!("http://{}/v1/drills", self.admin))
            .await
            .ok()?;
        let v: Value = serde_json::from_slice(&r.bytes().await.ok()?).ok()?;
        let list = v["overrides"].as_array()?;
        Some(
            list.iter()
                .filter_map(|d| d["id"].as_str().map(str::to_owned))
                .collect(),
        )
    }

    /// Its folder (policy `web.toml`, settings, recording `obs.jsonl`, `state/`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        read_log(self.dir.path(), &format!("run-{}.log", self.vantage))
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Some(c) = &self.child {
            group_signal(c.id(), "CONT");
        }
        self.kill();
    }
}

/// Sends `sig` to the process group led by `pid`; whether `kill` succeeded.
fn group_signal(pid: u32, sig: &str) -> bool {
    std::process::Command::new("kill")
        .args([format!("-{sig}"), "--".to_owned(), format!("-{pid}")])
        .status()
        .is_ok_and(|s| s.success())
}

/// The whole set-up.
pub struct GslbCluster {
    /// The three instances.
    pub instances: Vec<Instance>,
    /// The etcd members.
    pub etcd: EtcdCluster,
    /// The primary origin (NCP).
    pub ncp: Origin,
    /// The secondary origin (GCP).
    pub gcp: Origin,
}

/// Where a [`GslbCluster`] runs: the third octet of 127.0.x.1-3 for the etcd members, for
/// the instances' admin APIs, and (when set) for the instances' probe source addresses; the
/// primary pool's endpoint URL when not the NCP origin's.
#[derive(Debug, Clone)]
pub struct Layout {
    /// etcd members on 127.0.`etcd`.1-3.
    pub etcd: u8,
    /// Admin APIs on 127.0.`admin`.1-3.
    pub admin: u8,
    /// Probes of instance i from 127.0.`probe_from`.i (`[probing] source_address`).
    pub probe_from: Option<u8>,
    /// The primary pool's endpoint URL instead of the NCP origin's.
    pub primary_url: Option<String>,
    /// `[cluster] min_voters` instead of its default (a majority: 2).
    pub min_voters: Option<u8>,
    /// `[reconcile] resync` instead of the tests' 1 s (e.g. `60s`, gslb's default).
    pub resync: Option<&'static str>,
}

/// Runs `gslb etcd-auth` as root with settings file `config` in `dir` (instance `a`'s): users
/// and roles per vantage point, auth on. Its output.
fn etcd_auth(dir: &Path, config: &str, etcd: &EtcdCluster) -> String {
    let pki = etcd.pki().expect("a secure etcd");
    let (cert, key) = pki.pair("root");
    let out = gslb(dir, &["etcd-auth", "--config", config])
        .arg("--cert")
        .arg(cert)
        .arg("--key")
        .arg(key)
        .output()
        .expect("gslb etcd-auth");
    assert!(
        out.status.success(),
        "gslb etcd-auth: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Default for Layout {
    fn default() -> Self {
        Self {
            etcd: 20,
            admin: 21,
            probe_from: None,
            primary_url: None,
            min_voters: None,
            resync: None,
        }
    }
}

impl GslbCluster {
    /// Starts etcd, the origins and three instances steering `fake` (`head`: policy lines
    /// after `hostname`). `None` when etcd is not installed (skip).
    pub async fn start(fake: &Fake, head: &str) -> Option<Self> {
        Self::start_with(fake, head, Layout::default()).await
    }

    /// [`GslbCluster::start`] on `layout`'s addresses.
    pub async fn start_with(fake: &Fake, head: &str, layout: Layout) -> Option<Self> {
        let ips = [1, 2, 3].map(|i| Ipv4Addr::new(127, 0, layout.etcd, i));
        let etcd = EtcdCluster::start_secure(ips)?;
        let pki = etcd.pki().expect("a secure etcd");
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        let ncp = Origin::start(loopback, "ncp").await.expect("ncp origin");
        let gcp = Origin::start(loopback, "gcp").await.expect("gcp origin");
        let [mut n, g] = health_urls(ncp.addr(), gcp.addr());
        if let Some(url) = &layout.primary_url {
            n.clone_from(url);
        }
        let mut instances = Vec::new();
        for (i, vantage) in ["a", "b", "c"].into_iter().enumerate() {
            let host = u8::try_from(i + 1).unwrap_or(1);
            let mut cluster = format!(
                "[cluster]\nendpoints = {:?}\nvantages = [\"a\", \"b\", \"c\"]\nlease_ttl = \"4s\"\nheartbeat = \"1s\"\n",
                etcd.endpoints()
            );
            if let Some(m) = layout.min_voters {
                cluster.push_str(&format!("min_voters = {m}\n"));
            }
            let tls = pki.client(vantage);
            cluster.push_str(&format!(
                "[cluster.tls]\nca = {:?}\ncert = {:?}\nkey = {:?}\n",
                tls.ca, tls.cert, tls.key
            ));
            // Every input is recorded, for `gslb replay` (obs.jsonl in the instance's folder).
            cluster.push_str("[record]\nobservations = \"obs.jsonl\"\n");
            if let Some(net) = layout.probe_from {
                let from = Ipv4Addr::new(127, 0, net, host);
                cluster.push_str(&format!("[probing]\nsource_address = \"{from}\"\n"));
            }
            let (dir, _) = web_files(fake, [&n, &g], head, "", &cluster);
            let ip = Ipv4Addr::new(127, 0, layout.admin, host);
            let admin = SocketAddr::from((ip, free_port(ip)));
            rewrite_settings(dir.path(), vantage, admin, layout.resync);
            instances.push(Instance {
                vantage: vantage.to_owned(),
                admin,
                dir,
                child: None,
            });
        }
        etcd_auth(instances[0].dir(), "gslb.toml", &etcd);
        for instance in &mut instances {
            instance.spawn();
        }
        Some(Self {
            instances,
            etcd,
            ncp,
            gcp,
        })
    }

    /// [`GslbCluster::start_with`], then waits until every instance reports `web` applied on
    /// ncp and all agree on a writer: the cluster, the writer's index and its epoch. `None`
    /// when etcd is not installed (skip).
    ///
    /// # Panics
    /// Not applied within 30 s, or no agreed writer within 20 s (with the logs).
    pub async fn settled(fake: &Fake, head: &str, layout: Layout) -> Option<(Self, usize, u64)> {
        let c = Self::start_with(fake, head, layout).await?;
        assert!(
            c.applied_on("ncp", None, Duration::from_secs(30)).await,
            "never applied:\n{}",
            c.logs()
        );
        let (writer, epoch) = c
            .writer(Duration::from_secs(20), None)
            .await
            .unwrap_or_else(|| panic!("no agreed writer:\n{}", c.logs()));
        Some((c, writer, epoch))
    }

    /// Waits until every running instance (all but `skip`) names the same writer, one of
    /// them, and returns its index and epoch.
    pub async fn writer(&self, within: Duration, skip: Option<usize>) -> Option<(usize, u64)> {
        super::eventually(within, || async {
            let mut writer = None;
            let mut epochs = Vec::new();
            for (i, x) in self.instances.iter().enumerate() {
                if Some(i) == skip {
                    continue;
                }
                let (role, epoch) = x.role().await?;
                if role == "writer" {
                    writer = Some(i);
                }
                epochs.push(epoch?);
            }
            let first = *epochs.first()?;
            let agreed = epochs.iter().all(|e| *e == first);
            agreed.then_some(())?;
            Some((writer?, first))
        })
        .await
    }

    /// Whether every running instance (all but `skip`) reports `web` applied on `pool` within
    /// `within`.
    pub async fn applied_on(&self, pool: &str, skip: Option<usize>, within: Duration) -> bool {
        super::eventually(within, || async {
            for (i, x) in self.instances.iter().enumerate() {
                if Some(i) == skip {
                    continue;
                }
                let s = x.status().await?;
                (s["apply"]["state"] == "applied" && s["active"] == pool).then_some(())?;
            }
            Some(())
        })
        .await
        .is_some()
    }

    /// Runs `gslb etcd-auth` again (as at the start); its output.
    pub fn etcd_auth(&self) -> String {
        etcd_auth(self.instances[0].dir(), "gslb.toml", &self.etcd)
    }

    /// Runs `gslb etcd-auth` with instance `a`'s settings listing only `vantages`; its output.
    pub fn etcd_auth_for(&self, vantages: &[&str]) -> String {
        let dir = self.instances[0].dir();
        let text = std::fs::read_to_string(dir.join("gslb.toml")).expect("settings");
        let listed = format!("vantages = {vantages:?}");
        let text = text.replacen("vantages = [\"a\", \"b\", \"c\"]", &listed, 1);
        std::fs::write(dir.join("gslb-fewer.toml"), text).expect("settings");
        etcd_auth(dir, "gslb-fewer.toml", &self.etcd)
    }

    /// Every log, for a failure message.
    pub fn logs(&self) -> String {
        self.instances
            .iter()
            .map(|x| format!("--- {} ---\n{}", x.vantage, tail(&x.log())))
            .collect()
    }
}

fn tail(log: &str) -> &str {
    let start = log.len().saturating_sub(3_000);
    log.get(start..).unwrap_or(log)
}

fn free_port(ip: Ipv4Addr) -> u16 {
    std::net::TcpListener::bind((ip, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// Gives `gslb.toml` in `dir` this instance's vantage point and admin address.
fn rewrite_settings(dir: &Path, vantage: &str, admin: SocketAddr, resync: Option<&str>) {
    let path = dir.join("gslb.toml");
    let text = std::fs::read_to_string(&path).expect("settings");
    let start = text.find("listen = \"").expect("admin listen") + "listen = \"".len();
    let end = start + text[start..].find('"').expect("quoted");
    let mut text = format!("{}{admin}{}", &text[..start], &text[end..]).replacen(
        "vantage = \"e2e\"",
        &format!("vantage = \"{vantage}\""),
        1,
    );
    if let Some(resync) = resync {
        text = text.replacen("resync = \"1s\"", &format!("resync = \"{resync}\""), 1);
    }
    std::fs::write(path, text).expect("settings");
}
