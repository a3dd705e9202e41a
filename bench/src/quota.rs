//! Overload: the daemon under a CPU quota, by the first means this machine allows: a cgroup
//! v2 `cpu.max` or a cgroup v1 `cpu.cfs_quota_us` (both need a writable cgroup folder, i.e.
//! root), `systemd-run --scope -p CPUQuota=` (a running systemd), else a competing busy process
//! pinned with the daemon to one core with `taskset` (the quota is then about half that core
//! whatever was asked).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// How the quota is applied.
pub enum Quota {
    /// A cgroup folder whose quota file is written; the daemon is moved in after it starts.
    Cgroup {
        /// The folder (removed at the end).
        dir: PathBuf,
        /// What was written, for the report.
        what: String,
    },
    /// `systemd-run --scope -p CPUQuota=<percent>%` wraps the daemon.
    Systemd(u32),
    /// `taskset -c 0` wraps the daemon; a busy process pinned to core 0 competes.
    Taskset(Option<Child>),
}

/// The first means that works here for `percent` % of one core.
pub fn detect(percent: u32) -> anyhow::Result<Quota> {
    let tag = format!("gslb-bench-{}", std::process::id());
    let period = 100_000u64;
    let quota = period * u64::from(percent) / 100;
    let v2 = Path::new("/sys/fs/cgroup");
    let controllers = std::fs::read_to_string(v2.join("cgroup.controllers")).unwrap_or_default();
    if controllers.split_whitespace().any(|c| c == "cpu") {
        let _ = std::fs::write(v2.join("cgroup.subtree_control"), "+cpu");
        if let Some(q) = cgroup(&v2.join(&tag), "cpu.max", &format!("{quota} {period}")) {
            return Ok(q);
        }
    }
    let v1 = Path::new("/sys/fs/cgroup/cpu");
    if v1.join("cpu.cfs_quota_us").exists() {
        let dir = v1.join(&tag);
        if std::fs::create_dir_all(&dir).is_ok()
            && std::fs::write(dir.join("cpu.cfs_period_us"), period.to_string()).is_ok()
            && let Some(q) = cgroup(&dir, "cpu.cfs_quota_us", &quota.to_string())
        {
            return Ok(q);
        }
    }
    if Path::new("/run/systemd/system").is_dir() && on_path("systemd-run") {
        return Ok(Quota::Systemd(percent));
    }
    if on_path("taskset") {
        return Ok(Quota::Taskset(None));
    }
    anyhow::bail!(
        "no way to limit the daemon's CPU here: no writable cgroup (v2 cpu.max or v1 cpu.cfs_quota_us; run as root), no running systemd for systemd-run, no taskset"
    )
}

/// A cgroup at `dir` with `value` written to `file`, or `None` (folder removed) when refused.
fn cgroup(dir: &Path, file: &str, value: &str) -> Option<Quota> {
    std::fs::create_dir_all(dir).ok()?;
    if std::fs::write(dir.join(file), value).is_err() {
        let _ = std::fs::remove_dir(dir);
        return None;
    }
    Some(Quota::Cgroup {
        dir: dir.to_path_buf(),
        what: format!("{file} = {value} in {}", dir.display()),
    })
}

fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
}

impl Quota {
    /// The command that starts `program` under the quota.
    pub fn command(&self, program: &Path) -> Command {
        match self {
            Quota::Cgroup { .. } => Command::new(program),
            Quota::Systemd(p) => {
                let mut c = Command::new("systemd-run");
                c.args(["--scope", "--quiet", "-p", &format!("CPUQuota={p}%"), "--"])
                    .arg(program);
                c
            }
            Quota::Taskset(_) => {
                let mut c = Command::new("taskset");
                c.args(["-c", "0"]).arg(program);
                c
            }
        }
    }

    /// Once the daemon runs as `pid`: moves it into the cgroup, or starts the busy process.
    pub fn apply(&mut self, pid: u32) -> anyhow::Result<()> {
        match self {
            Quota::Cgroup { dir, .. } => std::fs::write(dir.join("cgroup.procs"), pid.to_string())
                .map_err(|e| anyhow::anyhow!("cannot move the daemon into {}: {e}", dir.display())),
            Quota::Systemd(_) => Ok(()),
            Quota::Taskset(busy) => {
                let child = Command::new("taskset")
                    .args(["-c", "0"])
                    .arg(std::env::current_exe()?)
                    .arg("busy")
                    .stdin(Stdio::piped())
                    .spawn()?;
                *busy = Some(child);
                Ok(())
            }
        }
    }

    /// What was used, for the report.
    pub fn describe(&self, percent: u32) -> String {
        match self {
            Quota::Cgroup { what, .. } => format!("cgroup, {what} ({percent}% of one core)"),
            Quota::Systemd(p) => format!("systemd-run --scope -p CPUQuota={p}%"),
            Quota::Taskset(_) => "taskset -c 0 with a busy process pinned to the same core (about 50% of one core; the asked percentage cannot be applied this way)".into(),
        }
    }

    /// Stops the busy process, removes the cgroup (after the daemon exited).
    pub fn release(&mut self) {
        match self {
            Quota::Cgroup { dir, .. } => {
                let _ = std::fs::remove_dir(dir);
            }
            Quota::Systemd(_) => {}
            Quota::Taskset(busy) => {
                if let Some(mut c) = busy.take() {
                    let _ = c.kill();
                    let _ = c.wait();
                }
            }
        }
    }
}

/// `gslb-bench busy`: spins until standard input closes.
pub fn busy() {
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = done.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 8];
        while matches!(std::io::Read::read(&mut std::io::stdin(), &mut buf), Ok(n) if n > 0) {}
        flag.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let mut x = 0u64;
    while !done.load(std::sync::atomic::Ordering::Relaxed) {
        x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
    }
}
