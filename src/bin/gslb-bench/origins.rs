//! The origins: `gslb-bench serve-origins --endpoints N` runs in its own process (so the
//! prober's CPU is measured alone) on a single-threaded runtime, binds N origins on loopback,
//! spread over 127.0.x.y addresses (250 per /24, one port shared by all when free), prints one
//! `ip:port` per line and then `ready`, and exits when its standard input closes (so it never
//! outlives the benchmark).

use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use std::io::{BufRead, BufReader, Read};

use gslb::io::origin::Origin;

/// The loopback address of endpoint `i`: 127.0.(1 + i / 250).(1 + i % 250).
pub fn address(i: usize) -> Ipv4Addr {
    let third = u8::try_from(1 + i / 250).unwrap_or(u8::MAX);
    let fourth = u8::try_from(1 + i % 250).unwrap_or(u8::MAX);
    Ipv4Addr::new(127, 0, third, fourth)
}

/// The child's side: serve until standard input closes.
pub fn serve(endpoints: usize) -> anyhow::Result<()> {
    let _ = gslb::io::probe::raise_open_file_limit();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut origins = Vec::with_capacity(endpoints);
        let mut port = 0;
        for i in 0..endpoints {
            let ip = address(i);
            let origin = match Origin::start(SocketAddr::from((ip, port)), "bench").await {
                Ok(o) => o,
                // The shared port is taken on this address: any free one will do.
                Err(_) if port != 0 => Origin::start(SocketAddr::from((ip, 0)), "bench").await?,
                Err(e) => return Err(e.into()),
            };
            if i == 0 {
                port = origin.addr().port();
            }
            println!("{}", origin.addr());
            origins.push(origin);
        }
        println!("ready");
        // Serve until the parent goes away (its end of our standard input closes).
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            let mut stdin = std::io::stdin();
            while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
            let _ = tx.send(());
        });
        let _ = rx.await;
        drop(origins);
        Ok(())
    })
}

/// The parent's side: the running origins process.
pub struct Origins {
    child: Child,
    // Held open: the child exits when it closes.
    _stdin: ChildStdin,
    /// The origins' addresses, endpoint order.
    pub addrs: Vec<SocketAddr>,
}

impl Origins {
    /// Starts `endpoints` origins in a child process and waits until they listen.
    pub async fn start(endpoints: usize) -> anyhow::Result<Origins> {
        let mut child = Command::new(std::env::current_exe()?)
            .args(["serve-origins", "--endpoints", &endpoints.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stdin"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let mut addrs = Vec::with_capacity(endpoints);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line == "ready" {
                    let _ = tx.send(Ok(addrs));
                    return;
                }
                match line.parse::<SocketAddr>() {
                    Ok(a) => addrs.push(a),
                    Err(e) => {
                        let _ = tx.send(Err(anyhow::anyhow!("origins process said {line:?}: {e}")));
                        return;
                    }
                }
            }
            let _ = tx.send(Err(anyhow::anyhow!(
                "the origins process ended before it was ready"
            )));
        });
        let addrs = tokio::time::timeout(Duration::from_secs(120), rx)
            .await
            .map_err(|_| anyhow::anyhow!("the origins process was not ready within 120 s"))?
            .map_err(|_| anyhow::anyhow!("the origins reader stopped"))??;
        Ok(Origins {
            child,
            _stdin: stdin,
            addrs,
        })
    }

    /// The child's process id, for `/proc`.
    pub fn pid(&self) -> String {
        self.child.id().to_string()
    }

    /// Stops the child.
    pub fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
