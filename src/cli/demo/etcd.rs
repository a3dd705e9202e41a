//! A throwaway three-member etcd on loopback for `gslb demo --cluster`: members on
//! 127.0.29.1-3 with free ports, data in a temporary folder, killed when dropped.
//!
//! Must not: be used outside the demo (no TLS, no persistence, loopback only).

use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
    dir: PathBuf,
}

impl Etcd {
    /// Starts three members of `exe` on 127.0.29.1-3 and waits until each answers
    /// `/health` as healthy.
    ///
    /// # Errors
    /// A member cannot be started, or the cluster did not form within 30 s.
    pub async fn start(exe: &Path) -> std::io::Result<Self> {
        let dir = std::env::temp_dir().join(format!("gslb-demo-etcd-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let ips = [1, 2, 3].map(|i| Ipv4Addr::new(127, 0, 29, i));
        let ports: Vec<(u16, u16)> = ips
            .iter()
            .map(|ip| Ok((free_port(*ip)?, free_port(*ip)?)))
            .collect::<std::io::Result<_>>()?;
        let peers: Vec<String> = ips
            .iter()
            .zip(&ports)
            .enumerate()
            .map(|(i, (ip, (_, peer)))| format!("m{i}=http://{ip}:{peer}"))
            .collect();
        let mut members = Vec::new();
        let mut endpoints = Vec::new();
        for (i, (ip, (client, peer))) in ips.iter().zip(&ports).enumerate() {
            let client_url = format!("http://{ip}:{client}");
            let peer_url = format!("http://{ip}:{peer}");
            let child = Command::new(exe)
                .args(["--name", &format!("m{i}")])
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
        }
        let etcd = Self {
            members,
            endpoints,
            dir,
        };
        etcd.formed().await?;
        Ok(etcd)
    }

    /// The client URLs.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    async fn formed(&self) -> std::io::Result<()> {
        let deadline = Instant::now() + FORMED_WITHIN;
        for url in &self.endpoints {
            loop {
                let healthy = match reqwest::get(format!("{url}/health")).await {
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
