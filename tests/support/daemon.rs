//! Running the real `gslb` binary in end-to-end tests: a child process killed on drop, its log,
//! free loopback ports, and the admin API's status.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Stdio};

use serde_json::Value;

/// A free TCP port on 127.0.0.1 (for the daemon's admin API).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A running `gslb` process, killed and reaped when dropped.
pub struct Daemon(pub Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A new log file `name` in `dir`, to give a child as its stderr.
pub fn log_file(dir: &Path, name: &str) -> Stdio {
    Stdio::from(std::fs::File::create(dir.join(name)).expect("log file"))
}

/// The log file `name` in `dir` so far (empty when missing).
pub fn read_log(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_default()
}

/// The whole `/v1/status` (services, and `cluster` in a cluster) of the daemon at `admin`,
/// once it answers.
pub async fn status_all(admin: SocketAddr) -> Option<Value> {
    let r = reqwest::get(format!("http://{admin}/v1/status"))
        .await
        .ok()?;
    serde_json::from_slice(&r.bytes().await.ok()?).ok()
}

/// `service`'s entry in `GET /v1/status`, once the daemon answers and knows the service.
pub async fn status(admin: SocketAddr, service: &str) -> Option<Value> {
    let r = reqwest::get(format!("http://{admin}/v1/status"))
        .await
        .ok()?;
    let v: Value = serde_json::from_slice(&r.bytes().await.ok()?).ok()?;
    Some(v["services"][service].clone()).filter(Value::is_object)
}
