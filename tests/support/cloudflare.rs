//! The real `gslb run` steering the Cloudflare fake for service `web`: two loopback origins,
//! NCP (priority 1) and GCP (priority 2), each mapped to the fake's pool of that name. The
//! adapter-level harness (settings, binding, provider for the same fixture) is
//! `gslb_cloudflare::fake`'s; this file writes the same fixture as a policy and settings.

use std::net::SocketAddr;
use std::process::Command;

use gslb_cloudflare::fake::{Fake, REQUESTS_PER_WINDOW, ids};
use tempfile::TempDir;

use super::daemon::{Daemon, free_port, log_file, read_log};

/// A running daemon with its folder (policy, settings, `run.log`, `state/`) and admin address.
pub struct WebDaemon {
    /// The daemon's folder.
    pub dir: TempDir,
    /// The admin API.
    pub admin: SocketAddr,
    _daemon: Daemon,
}

/// The health endpoint URLs of origins at `ncp` and `gcp`.
pub fn health_urls(ncp: SocketAddr, gcp: SocketAddr) -> [String; 2] {
    [
        format!("http://{ncp}/api/v1/health"),
        format!("http://{gcp}/api/v1/health"),
    ]
}

/// A new folder with `web.toml` and `gslb.toml` (admin API on a free port, returned).
/// `[ncp, gcp]` are the pools' endpoint URLs (e.g. an `https://` one); `head` is inserted after
/// `hostname` (top-level keys, `[probe]`, `[health]`); `target` after the `[target.cloudflare]`
/// ids (e.g. `ttl = "1s"`); `settings` (TOML tables) is appended to `gslb.toml`.
pub fn web_files(
    fake: &Fake,
    [ncp, gcp]: [&str; 2],
    head: &str,
    target: &str,
    settings: &str,
) -> (TempDir, SocketAddr) {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = format!(
        r#"service = "web"
hostname = "{lb}"
{head}
[[pools]]
name = "ncp"
priority = 1
endpoints = ["{ncp}"]
[[pools]]
name = "gcp"
priority = 2
endpoints = ["{gcp}"]
[target.cloudflare]
account_id = "{account}"
zone_id = "{zone}"
{target}
[target.cloudflare.pools.ncp]
pool_id = "{ncp_id}"
[target.cloudflare.pools.gcp]
pool_id = "{gcp_id}"
"#,
        lb = ids::LB_NAME,
        account = ids::ACCOUNT,
        zone = ids::ZONE,
        ncp_id = ids::NCP,
        gcp_id = ids::GCP,
    );
    std::fs::write(dir.path().join("web.toml"), policy).expect("policy");
    let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let settings = format!(
        "vantage = \"e2e\"\npolicies = [\"web.toml\"]\n[admin]\nlisten = \"{admin}\"\n[cloudflare]\napi_base = \"{}\"\nrequests_per_window = {REQUESTS_PER_WINDOW}\n[reconcile]\nresync = \"1s\"\n{settings}",
        fake.base_url()
    );
    std::fs::write(dir.path().join("gslb.toml"), settings).expect("settings");
    (dir, admin)
}

/// `gslb` run in `dir` with the fake's token.
pub fn gslb(dir: &std::path::Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gslb"));
    cmd.args(args)
        .current_dir(dir)
        .env("CLOUDFLARE_API_TOKEN", ids::TOKEN);
    cmd
}

impl WebDaemon {
    /// Writes the files ([`web_files`]) for origins at `ncp` and `gcp`, then starts `gslb run`
    /// with the fake's token.
    pub fn start(fake: &Fake, ncp: SocketAddr, gcp: SocketAddr, head: &str, target: &str) -> Self {
        let [n, g] = health_urls(ncp, gcp);
        Self::start_with(fake, [&n, &g], head, target, "", &[])
    }

    /// [`WebDaemon::start`] with the endpoint URLs given whole, `settings` appended to
    /// `gslb.toml`, and extra environment variables for the daemon (set last, so they win).
    pub fn start_with(
        fake: &Fake,
        urls: [&str; 2],
        head: &str,
        target: &str,
        settings: &str,
        env: &[(&str, &str)],
    ) -> Self {
        let (dir, admin) = web_files(fake, urls, head, target, settings);
        let daemon = Daemon(
            gslb(dir.path(), &["run", "--config", "gslb.toml"])
                .env("GSLB_LOG", "debug")
                .envs(env.iter().copied())
                .stderr(log_file(dir.path(), "run.log"))
                .spawn()
                .expect("gslb run"),
        );
        Self {
            dir,
            admin,
            _daemon: daemon,
        }
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        read_log(self.dir.path(), "run.log")
    }

    /// Kills the daemon (as a crash would) and starts it again in the same folder (its state
    /// and audit log kept), logging to `log` in the folder.
    pub fn restart(&mut self, log: &str) {
        let _ = self._daemon.0.kill();
        let _ = self._daemon.0.wait();
        self._daemon = Daemon(
            gslb(self.dir.path(), &["run", "--config", "gslb.toml"])
                .env("GSLB_LOG", "debug")
                .stderr(log_file(self.dir.path(), log))
                .spawn()
                .expect("gslb run again"),
        );
    }
}
