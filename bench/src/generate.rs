//! The daemon's folder, generated in a temporary directory: `gslb.toml` (admin API on a free
//! port of 127.1.0.1, the fake's API base, state in `state/`) and one policy per service in
//! `policies/`, each bound to its load balancer at the Cloudflare fake.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use gslb_cloudflare::fake::ids;
use tempfile::TempDir;

use crate::fake::{lb_id, pool_id, service_name};

/// What the policies probe, and how often.
#[derive(Debug, Clone)]
pub struct Shape {
    /// Services (one policy each).
    pub services: usize,
    /// Endpoints per service, split over two pools (priority 1 and 2).
    pub per_service: usize,
    /// Probe interval of every endpoint.
    pub interval: Duration,
    /// Consecutive failures that mark an endpoint down.
    pub fall: u32,
    /// Lines added to every policy's top level (e.g. `failback = "auto"`).
    pub extra: String,
    /// Lines added to every policy's `[target.cloudflare]` (e.g. `ttl = "1s"`).
    pub target_extra: String,
}

/// The generated folder and the admin API's address.
pub struct Folder {
    /// Removed when dropped.
    pub dir: TempDir,
    /// `[admin] listen`.
    pub admin: SocketAddr,
}

/// Writes the folder: policies over `endpoints` (service `i`'s endpoints are
/// `endpoints[i * per_service ..]`), settings of vantage point `vantage` pointing at
/// `api_base`, with `settings` appended.
pub fn write(
    shape: &Shape,
    endpoints: &[String],
    api_base: &str,
    vantage: &str,
    settings: &str,
) -> anyhow::Result<Folder> {
    let dir = tempfile::Builder::new().prefix("gslb-bench-").tempdir()?;
    let policies = dir.path().join("policies");
    std::fs::create_dir_all(&policies)?;
    for (i, eps) in endpoints
        .chunks(shape.per_service)
        .take(shape.services)
        .enumerate()
    {
        let text = policy(shape, i, eps);
        std::fs::write(policies.join(format!("{}.toml", service_name(i))), text)?;
    }
    let port = std::net::TcpListener::bind("127.1.0.1:0")?
        .local_addr()?
        .port();
    let admin = SocketAddr::from(([127, 1, 0, 1], port));
    let text = format!(
        "vantage = \"{vantage}\"\npolicies = [\"policies\"]\n[state]\ndir = \"state\"\n[admin]\nlisten = \"{admin}\"\n[cloudflare]\napi_base = \"{api_base}\"\n{settings}\n"
    );
    std::fs::write(dir.path().join("gslb.toml"), text)?;
    Ok(Folder { dir, admin })
}

/// Service `i`'s policy: pools `a` (priority 1) and `b` (priority 2) sharing `endpoints`.
fn policy(shape: &Shape, i: usize, endpoints: &[String]) -> String {
    let name = service_name(i);
    let timeout = (shape.interval / 2).min(Duration::from_secs(5));
    let (a, b) = endpoints.split_at(endpoints.len().div_ceil(2));
    let list = |eps: &[String]| {
        eps.iter()
            .map(|e| format!("\"{e}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut s = format!(
        "service = \"{name}\"\nhostname = \"{name}.bench.test\"\n{}\n[probe]\ninterval = \"{}ms\"\ntimeout = \"{}ms\"\n[health]\nfall = {}\nrise = 2\n",
        shape.extra,
        shape.interval.as_millis(),
        timeout.as_millis(),
        shape.fall,
    );
    for (j, (pool, eps)) in [("a", a), ("b", b)].into_iter().enumerate() {
        let _ = write!(
            s,
            "[[pools]]\nname = \"{pool}\"\npriority = {}\nendpoints = [{}]\n",
            j + 1,
            list(eps)
        );
    }
    let _ = write!(
        s,
        "[target.cloudflare]\naccount_id = \"{}\"\nzone_id = \"{}\"\nload_balancer = \"{}\"\n{}\n[target.cloudflare.pools.a]\npool_id = \"{}\"\n[target.cloudflare.pools.b]\npool_id = \"{}\"\n",
        ids::ACCOUNT,
        ids::ZONE,
        lb_id(i),
        shape.target_extra,
        pool_id(i, 0),
        pool_id(i, 1),
    );
    s
}
