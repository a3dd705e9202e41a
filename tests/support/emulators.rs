//! Local AWS emulators for integration tests: start one on a free port of 127.0.0.1, wait until
//! it accepts connections, stop it when the handle is dropped.
//!
//! Shared by the `gslb` crate's integration tests and `gslb-route53`'s; include it with
//! `#[path = ".../tests/support/emulators.rs"] mod emulators;`. It uses only the standard
//! library, so it adds no dependency to any crate that includes it.
//!
//! The executables come from the Python virtualenv at `$GSLB_VENV`, or `<workspace>/.venv`
//! when that is unset, where `.ci/install-emulators.sh` installs them. A missing executable
//! fails the test with that instruction: emulator tests never skip silently.
//!
//! Known emulator gaps are listed in `shared/reference/route53.md`; no test may pass only
//! because of one of them.
#![allow(dead_code)]

use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long an emulator may take to accept connections (moto and ministack take well under
/// a second on the 2-core CI machine; the margin is for a loaded machine).
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Which emulator to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// moto 5.2.5 (`moto_server -H 127.0.0.1 -p PORT`): health checks round-trip `Inverted`
    /// and `Disabled`; records have no compare-and-swap and changes are always `INSYNC`.
    Moto,
    /// ministack 1.5.33 (`BIND_HOST=127.0.0.1 GATEWAY_PORT=PORT ministack`): exact-match
    /// DELETE, atomic batches, `PENDING` then `INSYNC`; health-check booleans read as false.
    Ministack,
}

impl Kind {
    /// The executable's file name in the virtualenv's `bin/`.
    pub fn executable_name(self) -> &'static str {
        match self {
            Kind::Moto => "moto_server",
            Kind::Ministack => "ministack",
        }
    }

    /// The path that resets all state: `POST` to it between tests sharing one emulator.
    pub fn reset_path(self) -> &'static str {
        match self {
            Kind::Moto => "/moto-api/reset",
            Kind::Ministack => "/_ministack/reset",
        }
    }
}

/// A running emulator, stopped (SIGKILL, then reaped) when dropped. Its output goes to
/// `emulator.log` in [`Emulator::dir`], which is removed on drop unless the test is panicking.
#[derive(Debug)]
pub struct Emulator {
    kind: Kind,
    port: u16,
    child: Child,
    dir: PathBuf,
}

impl Emulator {
    /// Starts `kind` on a free port of 127.0.0.1 and returns once the port accepts TCP
    /// connections. Tries up to three ports if the emulator exits at start (e.g. another
    /// process took the port in between).
    ///
    /// # Panics
    /// When the executable is missing (with the command that installs it), or the emulator
    /// exits or does not accept connections within 30 s (with the tail of its log).
    pub fn start(kind: Kind) -> Emulator {
        let exe = executable(kind.executable_name());
        let mut last_failure = String::new();
        for _ in 0..3 {
            match Self::try_start(kind, &exe) {
                Ok(emulator) => return emulator,
                Err(failure) => last_failure = failure,
            }
        }
        panic!("{} did not start: {last_failure}", kind.executable_name());
    }

    fn try_start(kind: Kind, exe: &Path) -> Result<Emulator, String> {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!(
            "gslb-{}-{}-{port}",
            kind.executable_name(),
            std::process::id()
        ));
        fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let log =
            File::create(dir.join("emulator.log")).map_err(|e| format!("creating log: {e}"))?;
        let log_err = log
            .try_clone()
            .map_err(|e| format!("cloning log handle: {e}"))?;
        let mut cmd = Command::new(exe);
        cmd.stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .env("TMPDIR", &dir);
        match kind {
            Kind::Moto => {
                cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()]);
            }
            Kind::Ministack => {
                cmd.env("BIND_HOST", "127.0.0.1")
                    .env("GATEWAY_PORT", port.to_string());
            }
        }
        let child = cmd
            .spawn()
            .map_err(|e| format!("spawning {}: {e}", exe.display()))?;
        let mut emulator = Emulator {
            kind,
            port,
            child,
            dir,
        };
        emulator.wait_until_accepting()?;
        Ok(emulator)
    }

    fn wait_until_accepting(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        let addr = self.addr();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "exited with {status} before accepting on {addr}; log:\n{}",
                    self.log_tail()
                ));
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                // Still ours? A process that lost the port race exits at once.
                return match self.child.try_wait() {
                    Ok(None) => Ok(()),
                    _ => Err(format!(
                        "exited right after {addr} started accepting; log:\n{}",
                        self.log_tail()
                    )),
                };
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "not accepting on {addr} after {START_TIMEOUT:?}; log:\n{}",
                    self.log_tail()
                ));
            }
            // Polling interval while waiting for the port to open (the condition itself).
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Which emulator this is.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The TCP port it listens on, on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// The endpoint URL to give an SDK client: `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The directory holding the log (and, for ministack, its `TMPDIR`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Resets all emulator state (`POST /_ministack/reset`, `POST /moto-api/reset`).
    ///
    /// # Panics
    /// When the request fails or the answer is not HTTP 2xx.
    pub fn reset(&self) {
        let status = self.post(self.kind.reset_path());
        assert!(
            (200..300).contains(&status),
            "reset of {:?} answered HTTP {status}",
            self.kind
        );
    }

    /// Sends `POST <path>` with an empty body and returns the HTTP status code.
    fn post(&self, path: &str) -> u16 {
        let mut stream = TcpStream::connect_timeout(&self.addr(), Duration::from_secs(5))
            .expect("connect to emulator");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("set read timeout");
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.port
        );
        stream
            .write_all(request.as_bytes())
            .expect("send request to emulator");
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response);
        response
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("unreadable answer to POST {path}: {response:?}"))
    }

    /// The last 40 lines of the emulator's log.
    pub fn log_tail(&self) -> String {
        let text = fs::read_to_string(self.dir.join("emulator.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "{:?} emulator log kept in {}",
                self.kind,
                self.dir.display()
            );
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// The virtualenv holding the emulators: `$GSLB_VENV`, else `<workspace root>/.venv`.
pub fn venv_dir() -> PathBuf {
    match std::env::var_os("GSLB_VENV") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => workspace_root().join(".venv"),
    }
}

/// `bin/<name>` in [`venv_dir`].
///
/// # Panics
/// When it does not exist, telling to run `.ci/install-emulators.sh`.
pub fn executable(name: &str) -> PathBuf {
    let path = venv_dir().join("bin").join(name);
    assert!(
        path.is_file(),
        "emulator executable {} not found: run `bash .ci/install-emulators.sh` at the workspace root \
         (or set GSLB_VENV to a virtualenv that has moto[server]==5.2.5 and ministack==1.5.33)",
        path.display()
    );
    path
}

/// The executable `name` of an external tool (promtool, etcd, hadolint, kubectl...): in the
/// virtualenv's `bin/` (the versions `.ci/install-tools.sh` pins), else on PATH. `None` (the
/// test skips, saying why) when it is in neither, unless `GSLB_REQUIRE_TOOLS=1` (set by
/// `.ci/run`), then the test fails: CI cannot skip silently.
pub fn tool(name: &str) -> Option<PathBuf> {
    let venv = venv_dir().join("bin");
    let found = std::iter::once(venv)
        .chain(
            std::env::var_os("PATH")
                .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
                .unwrap_or_default(),
        )
        .map(|dir| dir.join(name))
        .find(|p| p.is_file());
    if found.is_none() {
        let why = format!(
            "{name} not found on PATH or in the virtualenv: run `bash .ci/install-tools.sh`"
        );
        assert!(
            std::env::var("GSLB_REQUIRE_TOOLS").as_deref() != Ok("1"),
            "{why} (GSLB_REQUIRE_TOOLS=1: tools must not be skipped)"
        );
        eprintln!("skipped: {why}");
    }
    found
}

/// The nearest ancestor of the including crate's manifest directory whose `Cargo.toml` has a
/// `[workspace]` table.
pub fn workspace_root() -> PathBuf {
    let start = Path::new(env!("CARGO_MANIFEST_DIR"));
    start
        .ancestors()
        .find(|dir| {
            fs::read_to_string(dir.join("Cargo.toml")).is_ok_and(|t| t.contains("[workspace]"))
        })
        .unwrap_or(start)
        .to_path_buf()
}

/// A port of 127.0.0.1 that was free a moment ago (bound to port 0, then released).
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0")
}
