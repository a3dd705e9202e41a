//! An HTTP origin on loopback whose health depends on who asks: requests from the source
//! addresses set with [`SourceOrigin::fail_for`] get `503`, every other one `200 ok`. With each
//! gslb instance's probes bound to its own address (`[probing] source_address`), this makes
//! one vantage point see the origin down while the others see it up.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// A running origin; stops when dropped.
pub struct SourceOrigin {
    addr: SocketAddr,
    failing: Arc<Mutex<BTreeSet<IpAddr>>>,
    task: JoinHandle<()>,
}

impl SourceOrigin {
    /// Listens on a free port of `ip`.
    pub async fn start(ip: IpAddr) -> Self {
        let listener = TcpListener::bind((ip, 0)).await.expect("bind origin");
        let addr = listener.local_addr().expect("addr");
        let failing: Arc<Mutex<BTreeSet<IpAddr>>> = Arc::default();
        let shared = failing.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut s, peer)) = listener.accept().await {
                let fail = shared.lock().expect("lock").contains(&peer.ip());
                tokio::spawn(async move {
                    let mut buf = [0u8; 2048];
                    let mut got = Vec::new();
                    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => got.extend_from_slice(&buf[..n]),
                        }
                    }
                    let (status, body) = if fail {
                        ("503 Service Unavailable", "down")
                    } else {
                        ("200 OK", "ok")
                    };
                    let reply = format!(
                        "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = s.write_all(reply.as_bytes()).await;
                });
            }
        });
        Self {
            addr,
            failing,
            task,
        }
    }

    /// `http://<addr>/api/v1/health`.
    pub fn url(&self) -> String {
        format!("http://{}/api/v1/health", self.addr)
    }

    /// From now on, requests from `sources` fail (503); others pass.
    pub fn fail_for(&self, sources: &[IpAddr]) {
        *self.failing.lock().expect("lock") = sources.iter().copied().collect();
    }
}

impl Drop for SourceOrigin {
    fn drop(&mut self) {
        self.task.abort();
    }
}
