//! The origins: `gslb-bench serve-origins --endpoints N` runs in its own process (so the
//! daemon's CPU is measured alone) on a single-threaded runtime, binds N origins on loopback,
//! spread over 127.1.x.y addresses (250 per /24, one port shared by all when free), or on the
//! addresses given with `--at`; prints one `ip:port` per line, then `ready`, then every 100 ms
//! `hits <requests answered> <origins never asked>`; exits when its standard input closes (so
//! it never outlives the benchmark) or when killed (detection kills it on purpose).

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Child, ChildStdin};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gslb::io::origin::Origin;

/// The loopback address of endpoint `i`: 127.1.(1 + i / 250).(1 + i % 250).
pub fn address(i: usize) -> Ipv4Addr {
    let third = u8::try_from(1 + i / 250).unwrap_or(u8::MAX);
    let fourth = u8::try_from(1 + i % 250).unwrap_or(u8::MAX);
    Ipv4Addr::new(127, 1, third, fourth)
}

/// The child's side: bind (`at`, else `endpoints` addresses from [`address`]), then serve and
/// report hits until standard input closes.
pub fn serve(endpoints: usize, at: &[SocketAddr]) -> anyhow::Result<()> {
    let _ = gslb::io::probe::raise_open_file_limit();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let origins = bind(endpoints, at).await?;
        println!("ready");
        let mut rx = crate::child::stdin_closed();
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            tokio::select! {
                _ = &mut rx => break,
                _ = tick.tick() => {
                    let total: u64 = origins.iter().map(Origin::requests).sum();
                    let untouched = origins.iter().filter(|o| o.requests() == 0).count();
                    let mut out = std::io::stdout().lock();
                    if writeln!(out, "hits {total} {untouched}").and_then(|()| out.flush()).is_err() {
                        break;
                    }
                }
            }
        }
        drop(origins);
        Ok(())
    })
}

/// Binds the origins, printing each address.
async fn bind(endpoints: usize, at: &[SocketAddr]) -> anyhow::Result<Vec<Origin>> {
    let mut origins = Vec::new();
    if !at.is_empty() {
        for a in at {
            let o = Origin::start(*a, "bench").await?;
            println!("{}", o.addr());
            origins.push(o);
        }
        return Ok(origins);
    }
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
    Ok(origins)
}

/// Requests the origins answered, as last reported by the child.
#[derive(Debug, Clone, Copy, Default)]
pub struct Hits {
    /// Requests answered so far, all origins.
    pub total: u64,
    /// Origins not asked yet (0: every origin was probed at least once).
    pub untouched: u64,
    /// When the child reported it.
    pub at: Option<Instant>,
}

/// The parent's side: the running origins process.
pub struct Origins {
    child: Child,
    // Held open: the child exits when it closes.
    _stdin: ChildStdin,
    /// The origins' addresses, endpoint order.
    pub addrs: Vec<SocketAddr>,
    hits: Arc<Mutex<Hits>>,
}

impl Origins {
    /// Starts `endpoints` origins (or one on each of `at`) in a child process and waits until
    /// they listen.
    pub async fn start(endpoints: usize, at: &[SocketAddr]) -> anyhow::Result<Origins> {
        let mut args = vec![
            "serve-origins".to_owned(),
            "--endpoints".into(),
            endpoints.to_string(),
        ];
        for a in at {
            args.extend(["--at".to_owned(), a.to_string()]);
        }
        let (child, stdin, stdout) = crate::child::spawn_self(&args)?;
        let hits = Arc::new(Mutex::new(Hits::default()));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let shared = hits.clone();
        std::thread::spawn(move || read_child(stdout, tx, &shared));
        let addrs = tokio::time::timeout(Duration::from_secs(120), rx)
            .await
            .map_err(|_| anyhow::anyhow!("the origins process was not ready within 120 s"))?
            .map_err(|_| anyhow::anyhow!("the origins reader stopped"))??;
        Ok(Origins {
            child,
            _stdin: stdin,
            addrs,
            hits,
        })
    }

    /// The child's process id, for `/proc`.
    pub fn pid(&self) -> String {
        self.child.id().to_string()
    }

    /// The latest hit counts.
    pub fn hits(&self) -> Hits {
        *self
            .hits
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Waits for the next hit report (at most 1 s), then returns it.
    pub async fn fresh_hits(&self) -> Hits {
        let before = self.hits().at;
        let deadline = Instant::now() + Duration::from_secs(1);
        while self.hits().at == before && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.hits()
    }

    /// Kills the child (SIGKILL: its listeners close at once) and reaps it.
    pub fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads the child's addresses until `ready` (sent on `tx`), then its hit reports into `hits`.
fn read_child(
    stdout: BufReader<std::process::ChildStdout>,
    tx: tokio::sync::oneshot::Sender<anyhow::Result<Vec<SocketAddr>>>,
    hits: &Mutex<Hits>,
) {
    let mut addrs = Vec::new();
    let mut tx = Some(tx);
    for line in stdout.lines() {
        let Ok(line) = line else { break };
        if line == "ready" {
            if let Some(tx) = tx.take() {
                let _ = tx.send(Ok(std::mem::take(&mut addrs)));
            }
        } else if let Some(rest) = line.strip_prefix("hits ") {
            let mut n = rest.split(' ').filter_map(|f| f.parse::<u64>().ok());
            let (Some(total), Some(untouched)) = (n.next(), n.next()) else {
                continue;
            };
            let mut h = hits
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            *h = Hits {
                total,
                untouched,
                at: Some(Instant::now()),
            };
        } else if tx.is_some() {
            match line.parse::<SocketAddr>() {
                Ok(a) => addrs.push(a),
                Err(e) => {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(Err(anyhow::anyhow!("origins process said {line:?}: {e}")));
                    }
                    return;
                }
            }
        }
    }
    if let Some(tx) = tx.take() {
        let _ = tx.send(Err(anyhow::anyhow!(
            "the origins process ended before it was ready"
        )));
    }
}
