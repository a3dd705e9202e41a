//! A real three-member etcd cluster (Debian `etcd-server` 3.4, `etcd` on PATH) on three given
//! loopback addresses with free ports, data in a temporary folder. Members can be killed,
//! paused (SIGSTOP), resumed (SIGCONT) and restarted; every member is killed when the cluster
//! is dropped. Waits poll `/health` with a deadline, never a fixed sleep.
//!
//! [`EtcdCluster::start_secure`] serves clients over TLS with client-certificate auth (the
//! production set-up, see docs/cluster.md "Access control"): a throwaway CA
//! (`gslb::cli::demo::pki`) with client certificates for users `a`, `b`, `c` and `root`;
//! health is then read from each member's plain metrics listener.
//!
//! Without `etcd`, [`EtcdCluster::start`] returns `None` (the test skips, saying why), unless
//! `GSLB_REQUIRE_TOOLS=1`, where it fails (see [`super::emulators::tool`]).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gslb::cli::demo::pki::Pki;
use gslb::io::coordination::{Clients, Connect, ErrorCounter};

use super::emulators;

/// The etcd users [`EtcdCluster::start_secure`] issues client certificates for.
pub const USERS: [&str; 4] = ["a", "b", "c", "root"];

/// How long a member may take to report healthy (the cluster forms in under 4 s on the 2-core
/// machine; the margin is for a loaded one: 30 s was once too short with five builds running).
pub const HEALTHY_WITHIN: Duration = Duration::from_secs(60);

/// One member's addresses and process.
struct Member {
    name: String,
    ip: Ipv4Addr,
    client: u16,
    peer: u16,
    /// The plain listener of `/health` and `/metrics` (secure clusters only).
    metrics: Option<u16>,
    child: Option<Child>,
}

impl Member {
    fn client_url(&self) -> String {
        let scheme = if self.metrics.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}:{}", self.ip, self.client)
    }
    fn peer_url(&self) -> String {
        format!("http://{}:{}", self.ip, self.peer)
    }
}

/// A running three-member etcd cluster.
pub struct EtcdCluster {
    exe: PathBuf,
    dir: tempfile::TempDir,
    members: Vec<Member>,
    pki: Option<Pki>,
}

/// Two distinct ports of `ip` that were free a moment ago (the client's and the peer's): both
/// listeners are held until both ports are known, so the kernel cannot hand the second bind
/// the port the first just released (etcd then fails with "address already in use").
fn free_ports(ip: Ipv4Addr) -> (u16, u16) {
    let bind = || TcpListener::bind((ip, 0)).expect("free port");
    let (a, b) = (bind(), bind());
    let port = |l: &TcpListener| l.local_addr().expect("bound").port();
    (port(&a), port(&b))
}

impl EtcdCluster {
    /// Starts one member on each of `ips` (e.g. 127.0.10.1-3) and waits until all three are
    /// healthy. `None` when `etcd` is not installed (skip), see the module docs.
    ///
    /// # Panics
    /// A member does not start or the cluster does not become healthy within
    /// [`HEALTHY_WITHIN`] (with the members' log tails).
    pub fn start(ips: [Ipv4Addr; 3]) -> Option<Self> {
        Self::start_with(ips, false)
    }

    /// [`EtcdCluster::start`] with clients on TLS and client-certificate auth (see the module
    /// docs); auth itself is off until someone turns it on (`gslb etcd-auth`).
    pub fn start_secure(ips: [Ipv4Addr; 3]) -> Option<Self> {
        Self::start_with(ips, true)
    }

    fn start_with(ips: [Ipv4Addr; 3], secure: bool) -> Option<Self> {
        let exe = emulators::tool("etcd")?;
        let members = ips
            .iter()
            .enumerate()
            .map(|(i, &ip)| {
                let (client, peer) = free_ports(ip);
                Member {
                    name: format!("m{i}"),
                    ip,
                    client,
                    peer,
                    metrics: secure.then(|| free_ports(ip).0),
                    child: None,
                }
            })
            .collect();
        let dir = tempfile::tempdir().expect("tempdir");
        let pki = secure.then(|| {
            let servers = ips.map(std::net::IpAddr::V4);
            Pki::issue(&dir.path().join("pki"), &servers, &USERS).expect("certificates")
        });
        let mut cluster = Self {
            exe,
            dir,
            members,
            pki,
        };
        for i in 0..3 {
            cluster.spawn(i, "new");
        }
        for i in 0..3 {
            cluster.wait_healthy(i);
        }
        Some(cluster)
    }

    fn spawn(&mut self, i: usize, state: &str) {
        let initial: Vec<String> = self
            .members
            .iter()
            .map(|m| format!("{}={}", m.name, m.peer_url()))
            .collect();
        let m = &self.members[i];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("{}.log", m.name)))
            .expect("log file");
        let mut etcd = Command::new(&self.exe);
        if let (Some(pki), Some(metrics)) = (&self.pki, m.metrics) {
            let (cert, key) = pki.pair("server");
            etcd.arg("--client-cert-auth")
                .arg("--trusted-ca-file")
                .arg(pki.ca())
                .arg("--cert-file")
                .arg(cert)
                .arg("--key-file")
                .arg(key)
                .args([
                    "--listen-metrics-urls",
                    &format!("http://{}:{metrics}", m.ip),
                ]);
        }
        let child = etcd
            .args(["--name", &m.name])
            .arg("--data-dir")
            .arg(self.dir.path().join(&m.name))
            .args(["--listen-client-urls", &m.client_url()])
            .args(["--advertise-client-urls", &m.client_url()])
            .args(["--listen-peer-urls", &m.peer_url()])
            .args(["--initial-advertise-peer-urls", &m.peer_url()])
            .args(["--initial-cluster", &initial.join(",")])
            .args(["--initial-cluster-state", state])
            .args(["--initial-cluster-token", "gslb-test"])
            // Loopback round trips: a fast heartbeat and election, as the tuning guide says
            // (election timeout about 10x the heartbeat).
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("etcd starts");
        self.members[i].child = Some(child);
    }

    /// The client URLs of every member, e.g. `http://127.0.10.1:40123`.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(Member::client_url).collect()
    }

    /// The client address of member `i`.
    pub fn client_addr(&self, i: usize) -> SocketAddr {
        let m = &self.members[i];
        SocketAddr::from((m.ip, m.client))
    }

    /// The throwaway CA of a secure cluster.
    pub fn pki(&self) -> Option<&Pki> {
        self.pki.as_ref()
    }

    /// A client of every member (gslb's own, [`Clients`]), as `user` (one of [`USERS`]) on a
    /// secure cluster.
    pub async fn client(&self, user: &str) -> etcd_client::Client {
        let tls = self.pki.as_ref().map(|pki| pki.client(user));
        let endpoints = self.endpoints();
        let to = Connect {
            endpoints: &endpoints,
            tls: tls.as_ref(),
            lease_ttl: Duration::from_secs(10),
            prefix: "/gslb",
        };
        Clients::connect(to, ErrorCounter::detached())
            .await
            .expect("etcd client")
            .kv
    }

    /// Whether member `i` answers `/health` with `"health":"true"` (it has a leader).
    pub fn healthy(&self, i: usize) -> bool {
        let m = &self.members[i];
        let addr = SocketAddr::from((m.ip, m.metrics.unwrap_or(m.client)));
        let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        let req = "GET /health HTTP/1.0\r\nHost: etcd\r\n\r\n";
        let mut body = String::new();
        s.write_all(req.as_bytes()).is_ok()
            && s.read_to_string(&mut body).is_ok()
            && body.contains("\"health\":\"true\"")
    }

    /// Waits until member `i` is healthy.
    ///
    /// # Panics
    /// Not within [`HEALTHY_WITHIN`], with the member's log tail.
    pub fn wait_healthy(&self, i: usize) {
        let deadline = Instant::now() + HEALTHY_WITHIN;
        while !self.healthy(i) {
            assert!(
                Instant::now() < deadline,
                "etcd member {i} not healthy within {HEALTHY_WITHIN:?}; log:\n{}",
                self.log_tail(i)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills member `i` (SIGKILL) and reaps it; its data stays for [`EtcdCluster::restart`].
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Pauses member `i` (SIGSTOP).
    pub fn pause(&self, i: usize) {
        self.signal(i, "STOP");
    }

    /// Resumes member `i` (SIGCONT).
    pub fn resume(&self, i: usize) {
        self.signal(i, "CONT");
    }

    fn signal(&self, i: usize, sig: &str) {
        let pid = self.members[i].child.as_ref().expect("member running").id();
        let ok = Command::new("kill")
            .args([format!("-{sig}"), pid.to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -{sig} {pid}");
    }

    /// Starts killed member `i` again on its data (it rejoins the cluster); does not wait.
    pub fn restart(&mut self, i: usize) {
        self.kill(i);
        self.spawn(i, "existing");
    }

    /// The last 2,000 bytes of member `i`'s log.
    pub fn log_tail(&self, i: usize) -> String {
        let log =
            std::fs::read_to_string(self.dir.path().join(format!("m{i}.log"))).unwrap_or_default();
        let start = log.len().saturating_sub(2_000);
        log.get(start..).unwrap_or(&log).to_owned()
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for m in &mut self.members {
            if let Some(mut c) = m.child.take() {
                let _ = Command::new("kill")
                    .args(["-CONT", &c.id().to_string()])
                    .status();
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}
