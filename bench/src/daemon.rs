//! The product: `gslb run --config gslb.toml` in the generated folder, a separate process with
//! the fake's token in `CLOUDFLARE_API_TOKEN`, its log in `run.log`; killed when dropped. Its
//! admin API answers `/readyz`, `/metrics` and `/v1/status` (gzip when asked).

use std::io::Read as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::fake::TOKEN;
use crate::generate::Folder;
use crate::quota::Quota;

/// glibc's `MALLOC_ARENA_MAX` the daemon runs with unless the caller's environment sets one:
/// `1`, as the image sets it (`Dockerfile`), so the benchmark measures the daemon as it ships.
/// At 5,000 services x 2 endpoints glibc's default (eight arenas per core) held about 60 MB
/// more of freed memory across the threads' arenas (docs/benchmarks.md, "Allocator").
pub const MALLOC_ARENA_MAX: &str = "1";

/// The `MALLOC_ARENA_MAX` the daemon gets: the caller's, else [`MALLOC_ARENA_MAX`].
pub fn malloc_arena_max() -> String {
    std::env::var("MALLOC_ARENA_MAX").unwrap_or_else(|_| MALLOC_ARENA_MAX.to_owned())
}

/// An answer asked for with `Accept-Encoding: gzip` ([`Daemon::get_gzip`]).
pub struct Gzipped {
    /// The body, decoded.
    pub text: String,
    /// Bytes on the wire.
    pub wire: usize,
    /// Time from the request to the whole answer.
    pub took: Duration,
}

/// The running daemon.
pub struct Daemon {
    child: Child,
    /// The admin API.
    pub admin: SocketAddr,
    /// When it was spawned.
    pub spawned: Instant,
    log: PathBuf,
    client: reqwest::Client,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `gslb` binary: `explicit`, else `gslb` next to this program (same target folder and
/// profile).
pub fn find(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    let path = match explicit {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe()?.with_file_name("gslb"),
    };
    if !path.is_file() {
        anyhow::bail!(
            "{} not found: build it first (cargo build --release --bin gslb, or --gslb PATH)",
            path.display()
        );
    }
    Ok(path)
}

impl Daemon {
    /// Spawns `gslb` in `folder`, under `quota` when given.
    pub fn spawn(
        gslb: &Path,
        folder: &Folder,
        quota: Option<&mut Quota>,
    ) -> anyhow::Result<Daemon> {
        let log = folder.dir.path().join("run.log");
        let mut cmd = match &quota {
            Some(q) => q.command(gslb),
            None => std::process::Command::new(gslb),
        };
        let spawned = Instant::now();
        let child = cmd
            .args(["run", "--config", "gslb.toml"])
            .current_dir(folder.dir.path())
            .env("CLOUDFLARE_API_TOKEN", TOKEN)
            .env("MALLOC_ARENA_MAX", malloc_arena_max())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()?;
        let daemon = Daemon {
            child,
            admin: folder.admin,
            spawned,
            log,
            client: reqwest::Client::builder().no_proxy().build()?,
        };
        if let Some(q) = quota {
            q.apply(daemon.child.id())?;
        }
        Ok(daemon)
    }

    /// The process id, for `/proc` (under `taskset` or `systemd-run --scope` the wrapper
    /// execs the daemon, so it is the same process).
    pub fn pid(&self) -> String {
        self.child.id().to_string()
    }

    /// The daemon's audit log (`state/audit.jsonl` in its folder).
    pub fn audit_log(&self) -> PathBuf {
        self.log.with_file_name("state").join("audit.jsonl")
    }

    /// The last lines of the daemon's log, for an error message.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    /// An error saying `what` and showing the log's end; also when the daemon exited.
    pub fn fail(&mut self, what: &str) -> anyhow::Error {
        let exited = self.child.try_wait().ok().flatten();
        let exit = exited.map_or(String::new(), |s| format!(" (the daemon exited: {s})"));
        anyhow::anyhow!("{what}{exit}; its log ends:\n{}", self.log_tail())
    }

    /// Waits until `/readyz` answers 200, within `limit`.
    pub async fn ready(&mut self, limit: Duration) -> anyhow::Result<Instant> {
        let deadline = Instant::now() + limit;
        let url = format!("http://{}/readyz", self.admin);
        while Instant::now() < deadline {
            if self.child.try_wait().ok().flatten().is_some() {
                return Err(self.fail("gslb run stopped before it was ready"));
            }
            if let Ok(r) = self.client.get(&url).send().await
                && r.status().is_success()
            {
                return Ok(Instant::now());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err(self.fail(&format!("/readyz did not answer 200 within {limit:?}")))
    }

    /// `GET path` on the admin API as Prometheus asks (`Accept-Encoding: gzip`): the body,
    /// decoded; its bytes on the wire (compressed, or the body's own length when the daemon
    /// answered it plain); and how long the whole answer took to arrive (decoding not
    /// included).
    pub async fn get_gzip(&self, path: &str) -> anyhow::Result<Gzipped> {
        let started = Instant::now();
        let r = self
            .client
            .get(format!("http://{}{path}", self.admin))
            .header("accept-encoding", "gzip")
            .timeout(Duration::from_secs(120))
            .send()
            .await?
            .error_for_status()?;
        let gzip = r
            .headers()
            .get("content-encoding")
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"gzip"));
        let wire = r.bytes().await?;
        let took = started.elapsed();
        let text = if gzip {
            let mut text = String::new();
            flate2::read::GzDecoder::new(&wire[..]).read_to_string(&mut text)?;
            text
        } else {
            String::from_utf8(wire.to_vec())?
        };
        Ok(Gzipped {
            text,
            wire: wire.len(),
            took,
        })
    }

    /// `GET path` on the admin API: the body and how long the whole answer took.
    pub async fn get(&self, path: &str) -> anyhow::Result<(String, Duration)> {
        let started = Instant::now();
        let r = self
            .client
            .get(format!("http://{}{path}", self.admin))
            .timeout(Duration::from_secs(120))
            .send()
            .await?
            .error_for_status()?;
        let body = r.text().await?;
        Ok((body, started.elapsed()))
    }
}
