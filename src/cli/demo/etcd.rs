//! A throwaway three-member etcd on loopback for `gslb demo --cluster`: members on
//! 127.0.29.1-3 with free ports, clients on TLS with client-certificate auth as in production
//! (a throwaway CA, [`super::pki`], with a certificate per user), health on a plain metrics
//! listener, data in a temporary folder, killed when dropped.
//!
//! Must not: be used outside the demo (throwaway CA, no persistence, loopback only).

use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::pki::Pki;
use crate::io::coordination::TlsFiles;

/// How long the members may take to elect a leader (under 4 s on a 2-core machine).
const FORMED_WITHIN: Duration = Duration::from_secs(30);

/// The `etcd` executable on `PATH`, if any.
pub fn find() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("etcd"))
        .find(|p| p.is_file())
}

/// Three running members.
#[derive(Debug)]
pub struct Etcd {
    members: Vec<Child>,
    endpoints: Vec<String>,
    health: Vec<String>,
    pki: Pki,
    dir: PathBuf,
}

impl Etcd {
    /// Starts three members of `exe` on 127.0.29.1-3, with client certificates for `users`,
    /// and waits until each answers `/health` as healthy.
    ///
    /// # Errors
    /// The certificates cannot be made, a member cannot be started, or the cluster did not
    /// form within 30 s.
    pub async fn start(exe: &Path, users: &[&str]) -> std::io::Result<Self> {
        let dir = std::env::temp_dir().join(format!("gslb-demo-etcd-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let ips = [1, 2, 3].map(|i| Ipv4Addr::new(127, 0, 29, i));
        let pki = Pki::issue(&dir.join("pki"), &ips.map(IpAddr::V4), users)
            .map_err(std::io::Error::other)?;
        let (cert, key) = pki.pair("server");
        let ports: Vec<(u16, u16, u16)> = ips
            .iter()
            .map(|ip| Ok((free_port(*ip)?, free_port(*ip)?, free_port(*ip)?)))
            .collect::<std::io::Result<_>>()?;
        let peers: Vec<String> = ips
            .iter()
            .zip(&ports)
            .enumerate()
            .map(|(i, (ip, (_, peer, _)))| format!("m{i}=http://{ip}:{peer}"))
            .collect();
        let mut members = Vec::new();
        let mut endpoints = Vec::new();
        let mut health = Vec::new();
        for (i, (ip, (client, peer, metrics))) in ips.iter().zip(&ports).enumerate() {
            let client_url = format!("https://{ip}:{client}");
            let peer_url = format!("http://{ip}:{peer}");
            let metrics_url = format!("http://{ip}:{metrics}");
            let child = Command::new(exe)
                .args(["--name", &format!("m{i}")])
                .arg("--client-cert-auth")
                .arg("--trusted-ca-file")
                .arg(pki.ca())
                .arg("--cert-file")
                .arg(&cert)
                .arg("--key-file")
                .arg(&key)
                .args(["--listen-metrics-urls", &metrics_url])
                .arg("--data-dir")
                .arg(dir.join(format!("m{i}")))
                .args(["--listen-client-urls", &client_url])
                .args(["--advertise-client-urls", &client_url])
                .args(["--listen-peer-urls", &peer_url])
                .args(["--initial-advertise-peer-urls", &peer_url])
                .args(["--initial-cluster", &peers.join(",")])
                .args(["--initial-cluster-state", "new"])
                .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?;
            members.push(child);
            endpoints.push(client_url);
            health.push(format!("{metrics_url}/health"));
        }
        let etcd = Self {
            members,
            endpoints,
            health,
            pki,
            dir,
        };
        etcd.formed().await?;
        Ok(etcd)
    }

    /// The client URLs.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// `[cluster.tls]` of etcd user `user`.
    pub fn tls(&self, user: &str) -> TlsFiles {
        self.pki.client(user)
    }

    async fn formed(&self) -> std::io::Result<()> {
        let deadline = Instant::now() + FORMED_WITHIN;
        for url in &self.health {
            loop {
                let healthy = match reqwest::get(url).await {
                    Ok(r) => r.text().await.is_ok_and(|b| b.contains("\"true\"")),
                    Err(_) => false,
                };
                if healthy {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(std::io::Error::other(format!(
                        "etcd member {url} not healthy within {}",
                        humantime::format_duration(FORMED_WITHIN)
                    )));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Ok(())
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        for m in &mut self.members {
            let _ = m.kill();
            let _ = m.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port(ip: Ipv4Addr) -> std::io::Result<u16> {
    Ok(TcpListener::bind((ip, 0))?.local_addr()?.port())
}
