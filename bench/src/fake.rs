//! The provider: `gslb-bench serve-fake --services N` runs the Cloudflare fake
//! (`gslb_cloudflare::fake`, feature `test-util`) in its own process with its fixture plus one
//! load balancer and two pools per generated service ([`lb_id`], [`pool_id`]), response checks
//! off (the schema check of a 10,000-pool list costs more than the answer; request bodies are
//! still checked). It prints its API base, then `ready`, then one line per request answered
//! (`call <unix µs> <method> <class> <status>`, class: `pools`, `pool`, `lbs`, `lb`), and exits
//! when its standard input closes. The parent ([`Provider`]) keeps every call with its time.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gslb_cloudflare::fake::{Fake, ids, managed_load_balancer, pool};

/// Load balancer id of generated service `i` (32 hex digits, as Cloudflare's).
pub fn lb_id(i: usize) -> String {
    format!("be{i:030x}")
}

/// Pool id of pool `j` (0 or 1) of generated service `i`.
pub fn pool_id(i: usize, j: usize) -> String {
    format!("bf{:030x}", 2 * i + j)
}

/// The child's side.
pub fn serve(services: usize) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let fake = Fake::start().await;
        fake.check_responses(false);
        for i in 0..services {
            let ids = [pool_id(i, 0), pool_id(i, 1)];
            for (j, id) in ids.iter().enumerate() {
                fake.put_pool(id, pool(id, &format!("svc-{i}-{j}"), "192.0.2.10", true));
            }
            let name = format!("{}.bench.test", service_name(i));
            let refs = [ids[0].as_str(), ids[1].as_str()];
            fake.put_load_balancer(
                &lb_id(i),
                managed_load_balancer(&lb_id(i), &name, "bench", &refs),
            );
        }
        println!("{}", fake.base_url());
        println!("ready");
        let mut rx = crate::child::stdin_closed();
        let mut seen = 0;
        let mut tick = tokio::time::interval(Duration::from_millis(2));
        loop {
            tokio::select! {
                _ = &mut rx => return Ok(()),
                _ = tick.tick() => {}
            }
            let new = fake.requests_from(seen);
            seen += new.len();
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_micros();
            let mut out = std::io::stdout().lock();
            for r in new {
                writeln!(
                    out,
                    "call {now} {} {} {}",
                    r.method,
                    class(&r.path),
                    r.status
                )?;
            }
            out.flush()?;
        }
    })
}

/// Service `i`'s name: `svc-00042`.
pub fn service_name(i: usize) -> String {
    format!("svc-{i:05}")
}

/// What kind of object a path names: `pools`, `pool`, `lbs`, `lb`, else `other`.
fn class(path: &str) -> &'static str {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match parts.as_slice() {
        ["accounts", _, "load_balancers", "pools"] => "pools",
        ["accounts", _, "load_balancers", "pools", _] => "pool",
        ["zones", _, "load_balancers"] => "lbs",
        ["zones", _, "load_balancers", _] => "lb",
        _ => "other",
    }
}

/// One call the fake answered.
#[derive(Debug, Clone)]
pub struct Call {
    /// When the fake's poller saw it (within 2 ms of the answer).
    pub at: SystemTime,
    /// `GET pools`, `PATCH lb`, ...
    pub what: String,
    /// HTTP status answered.
    pub status: u16,
}

/// The parent's side: the fake's process and every call it answered.
pub struct Provider {
    child: Child,
    _stdin: ChildStdin,
    /// The API base for `[cloudflare] api_base`.
    pub base_url: String,
    calls: Arc<Mutex<Vec<Call>>>,
}

/// The token the fake accepts, for `CLOUDFLARE_API_TOKEN`.
pub const TOKEN: &str = ids::TOKEN;

impl Provider {
    /// Starts the fake with `services` generated load balancers and waits until it listens.
    pub async fn start(services: usize) -> anyhow::Result<Provider> {
        let args = ["serve-fake", "--services", &services.to_string()].map(String::from);
        let (child, stdin, stdout) = crate::child::spawn_self(&args)?;
        let calls = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let shared = calls.clone();
        std::thread::spawn(move || read_child(stdout, tx, &shared));
        let base_url = tokio::time::timeout(Duration::from_secs(120), rx)
            .await
            .map_err(|_| anyhow::anyhow!("the Cloudflare fake was not ready within 120 s"))?
            .map_err(|_| anyhow::anyhow!("the Cloudflare fake ended before it was ready"))?;
        Ok(Provider {
            child,
            _stdin: stdin,
            base_url,
            calls,
        })
    }

    /// The fake's process id, for `/proc`.
    pub fn pid(&self) -> String {
        self.child.id().to_string()
    }

    /// Calls answered in `[from, to)`, counted by `METHOD class`.
    pub fn counts(&self, from: SystemTime, to: SystemTime) -> BTreeMap<String, u64> {
        let mut counts = BTreeMap::new();
        for c in self.lock().iter().filter(|c| c.at >= from && c.at < to) {
            *counts.entry(c.what.clone()).or_default() += 1;
        }
        counts
    }

    /// The first write (PATCH answered 200) seen at or after `from`.
    pub fn first_write_after(&self, from: SystemTime) -> Option<SystemTime> {
        self.lock()
            .iter()
            .find(|c| c.at >= from && c.what.starts_with("PATCH") && c.status == 200)
            .map(|c| c.at)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Call>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stops the child.
    pub fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads the API base (sent on `tx` at `ready`), then every call into `calls`.
fn read_child(
    stdout: BufReader<std::process::ChildStdout>,
    tx: tokio::sync::oneshot::Sender<String>,
    calls: &Mutex<Vec<Call>>,
) {
    let mut base = String::new();
    let mut tx = Some(tx);
    for line in stdout.lines() {
        let Ok(line) = line else { return };
        if line == "ready" {
            if let Some(tx) = tx.take() {
                let _ = tx.send(std::mem::take(&mut base));
            }
        } else if let Some(rest) = line.strip_prefix("call ") {
            let f: Vec<&str> = rest.split(' ').collect();
            let [micros, method, class, status] = f.as_slice() else {
                continue;
            };
            let at = UNIX_EPOCH + Duration::from_micros(micros.parse().unwrap_or(0));
            let call = Call {
                at,
                what: format!("{method} {class}"),
                status: status.parse().unwrap_or(0),
            };
            calls
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(call);
        } else if tx.is_some() {
            base = line;
        }
    }
}
