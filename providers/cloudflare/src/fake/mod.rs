//! A stateful fake of the Cloudflare Load Balancing API on 127.0.0.1 (feature `test-util`,
//! tests only).
//!
//! It serves the calls the adapter makes (list/get/PATCH pools, list/get/PATCH load
//! balancers) under `/client/v4`, keeps objects as raw JSON (unknown fields survive), and
//! validates every request body and every response body it sends against the official OpenAPI
//! subset (`tests/fixtures/cloudflare-lb-openapi.json`, compiled in): a mismatch is recorded
//! in [`Fake::violations`], and a request body that does not match is refused with
//! Cloudflare's 400/1002 envelope. Errors use Cloudflare's envelope. Faults can be injected: a
//! 429 storm with `Retry-After`, 5xx answers, slow answers, an authentication failure, and a
//! concurrent writer that reverts each gslb write right after answering it.
//!
//! Time is tokio's: in a test with paused time, the storm window and the slow answers follow
//! the simulated clock when the fake runs on the test's runtime.
//!
//! Two schema notes, both about the subset as published: OpenAPI 3.0 `nullable` is rewritten
//! to a JSON Schema type union before compiling; and error answers are checked against
//! `load-balancing_api-response-common-failure` alone, because the subset's `4XX` schemas
//! combine it (`result: null`) with a success schema whose `result` must be an object, which
//! no body can satisfy.
//!
//! Layout: this module holds the state and the fault switches; `api` answers requests,
//! `schema` compiles the OpenAPI subset, and `harness` builds the adapter's settings, binding
//! and provider for the fixture ([`settings`], [`binding`], [`provider`], [`priority`]), the
//! one harness every Cloudflare test uses.

mod api;
mod harness;
mod schema;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::MANAGED_TAG;

pub use harness::{REQUESTS_PER_WINDOW, binding, paused_settings, priority, provider, settings};

/// One write the fake accepted and applied, in the order applied ([`Fake::write_log`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// The path after `/client/v4`.
    pub path: String,
    /// The `default_pools` written (a load balancer PATCH), if any.
    pub default_pools: Option<Vec<String>>,
    /// The `enabled` written (a pool PATCH), if any.
    pub enabled: Option<bool>,
    /// The writer's epoch stamped in the `description` written (see [`crate::epoch`]); `None`
    /// for an unstamped write (a single instance, or a pool PATCH).
    pub epoch: Option<u64>,
}

/// What happens to PATCH requests ([`Fake::hold_writes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Hold {
    /// Answered at once.
    Off,
    /// Wait, unanswered.
    On,
    /// Held ones are answered 502 and never applied (lost on the way).
    Drop,
}

/// One request the fake answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `PATCH`, ...
    pub method: String,
    /// The path after `/client/v4`.
    pub path: String,
    /// The HTTP status answered.
    pub status: u16,
    /// The request body as sent (lossy UTF-8; empty when none, as for a GET).
    pub body: String,
}

#[derive(Default)]
struct Faults {
    /// Answer 429 until then.
    storm_until: Option<Instant>,
    /// Answer 502 to this many next requests.
    server_errors: u32,
    /// Wait this long before answering.
    delay: Option<Duration>,
    /// Answer 403/10000 to everything.
    auth_failure: bool,
    /// Revert every PATCH right after answering it (another writer).
    reverter: bool,
}

struct Inner {
    token: String,
    account: String,
    zone: String,
    pools: BTreeMap<String, Value>,
    lbs: BTreeMap<String, Value>,
    faults: Faults,
    requests: Vec<Request>,
    violations: Vec<String>,
    reverts: u32,
    clock: u64,
    writes: Vec<Write>,
    held: u32,
    /// Whether response bodies are checked against the schema ([`Fake::check_responses`]).
    check_responses: bool,
}

struct Shared {
    inner: Mutex<Inner>,
    validators: schema::Validators,
    hold: tokio::sync::watch::Sender<Hold>,
}

/// The fake API. Dropping it does not stop the server task; it ends with the runtime.
#[derive(Clone)]
pub struct Fake {
    shared: Arc<Shared>,
    addr: SocketAddr,
}

impl std::fmt::Debug for Fake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fake").field("addr", &self.addr).finish()
    }
}

/// The ids the default [`Fake::start`] fixture uses.
pub mod ids {
    /// Account id.
    pub const ACCOUNT: &str = "023e105f4ecef8ad9ca31a8372d0c353";
    /// Zone id.
    pub const ZONE: &str = "023e105f4ecef8ad9ca31a8372d0c354";
    /// The load balancer's id.
    pub const LB: &str = "699d98642c564d2e855e9661899b7252";
    /// The load balancer's name.
    pub const LB_NAME: &str = "web.example.com";
    /// The NCP pool (priority 1).
    pub const NCP: &str = "17b5962d775c646f3f9725cbc7a53df4";
    /// The GCP pool (priority 2; also the fallback pool).
    pub const GCP: &str = "9290f38c5d07c2e2f4df57b1f61d4196";
    /// A pool gslb does not manage.
    pub const OTHER: &str = "00920f38ce07c2e2f4df50b1f61d4194";
    /// The token the fake accepts.
    pub const TOKEN: &str = "fake-token-for-tests";
}

impl Fake {
    /// Starts the fake on a free port of 127.0.0.1 with the fixture in [`ids`]: pools NCP and
    /// GCP (managed, enabled, each with one origin), a foreign pool OTHER, and the load
    /// balancer `web.example.com` (managed, DNS-only, TTL 30, `default_pools` `[NCP, GCP]`,
    /// fallback GCP, steering `off`).
    ///
    /// # Panics
    /// When no port can be bound or the OpenAPI fixture does not compile.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local addr");
        let mut inner = Inner {
            token: ids::TOKEN.into(),
            account: ids::ACCOUNT.into(),
            zone: ids::ZONE.into(),
            pools: BTreeMap::new(),
            lbs: BTreeMap::new(),
            faults: Faults::default(),
            requests: Vec::new(),
            violations: Vec::new(),
            reverts: 0,
            clock: 0,
            writes: Vec::new(),
            held: 0,
            check_responses: true,
        };
        for (id, name, addr) in [
            (ids::NCP, "ncp", "192.0.2.10"),
            (ids::GCP, "gcp", "192.0.2.20"),
        ] {
            inner.pools.insert(id.into(), pool(id, name, addr, true));
        }
        let mut other = pool(ids::OTHER, "other", "192.0.2.30", false);
        other["description"] = json!("owned by another team");
        inner.pools.insert(ids::OTHER.into(), other);
        inner.lbs.insert(
            ids::LB.into(),
            managed_load_balancer(ids::LB, ids::LB_NAME, "web LB", &[ids::NCP, ids::GCP]),
        );
        let shared = Arc::new(Shared {
            inner: Mutex::new(inner),
            validators: schema::Validators::load(),
            hold: tokio::sync::watch::Sender::new(Hold::Off),
        });
        let app = axum::Router::new()
            .fallback(api::handle)
            .with_state(shared.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { shared, addr }
    }

    /// The API base to give the adapter: `http://127.0.0.1:<port>/client/v4`.
    pub fn base_url(&self) -> String {
        format!("http://{}/client/v4", self.addr)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        lock(&self.shared)
    }

    /// Every request answered so far, oldest first.
    pub fn requests(&self) -> Vec<Request> {
        self.lock().requests.clone()
    }

    /// The bodies of the PATCHes answered so far, oldest first, each parsed as JSON (`null`
    /// for one that is not JSON).
    pub fn patch_bodies(&self) -> Vec<Value> {
        self.lock()
            .requests
            .iter()
            .filter(|r| r.method == "PATCH")
            .map(|r| serde_json::from_str(&r.body).unwrap_or(Value::Null))
            .collect()
    }

    /// The requests answered after the first `from`, oldest first (what a poller that has
    /// seen `from` of them has not seen yet).
    pub fn requests_from(&self, from: usize) -> Vec<Request> {
        self.lock()
            .requests
            .get(from..)
            .unwrap_or_default()
            .to_vec()
    }

    /// Whether every response body is checked against the schema (on by default). A
    /// benchmark serving thousands of objects turns it off: the check of one pool list of
    /// 10,000 pools costs more than the answer. Request bodies are always checked.
    pub fn check_responses(&self, on: bool) {
        self.lock().check_responses = on;
    }

    /// Replaces or adds load balancer `id` with `value` verbatim (a benchmark's thousands of
    /// services, each with its own load balancer).
    pub fn put_load_balancer(&self, id: &str, value: Value) {
        self.lock().lbs.insert(id.into(), value);
    }

    /// PATCH requests accepted (status 200) so far.
    pub fn writes(&self) -> usize {
        self.lock()
            .requests
            .iter()
            .filter(|r| r.method == "PATCH" && r.status == 200)
            .count()
    }

    /// Every write applied so far (status 200, reverted ones included), oldest first, with the
    /// epoch each carried: what a test of fenced writers asserts the order of.
    pub fn write_log(&self) -> Vec<Write> {
        self.lock().writes.clone()
    }

    /// From now on, every PATCH waits unanswered (and unapplied) until [`Fake::release_writes`]
    /// or [`Fake::drop_held_writes`]: a write held between its sending and its landing.
    pub fn hold_writes(&self) {
        self.shared.hold.send_replace(Hold::On);
    }

    /// How many PATCH requests are waiting now ([`Fake::hold_writes`]).
    pub fn held_writes(&self) -> u32 {
        self.lock().held
    }

    /// Answers every held PATCH as usual (they land now, in arrival order) and stops holding.
    pub fn release_writes(&self) {
        self.shared.hold.send_replace(Hold::Off);
    }

    /// Answers every held PATCH with 502 without applying it (lost on the way) and stops
    /// holding; later PATCHes are answered as usual.
    pub fn drop_held_writes(&self) {
        self.shared.hold.send_replace(Hold::Drop);
    }

    /// Every schema mismatch seen, in a request or a response body.
    pub fn violations(&self) -> Vec<String> {
        self.lock().violations.clone()
    }

    /// How many gslb writes the concurrent writer reverted.
    pub fn reverts(&self) -> u32 {
        self.lock().reverts
    }

    /// The load balancer's `default_pools`.
    pub fn default_pools(&self) -> Vec<String> {
        serde_json::from_value(self.lock().lbs[ids::LB]["default_pools"].clone())
            .unwrap_or_default()
    }

    /// Pool `id` as stored.
    pub fn pool(&self, id: &str) -> Value {
        self.lock().pools[id].clone()
    }

    /// The load balancer as stored.
    pub fn load_balancer(&self) -> Value {
        self.lock().lbs[ids::LB].clone()
    }

    /// Replaces or adds pool `id` with `value` verbatim (e.g. one with fields or enum values
    /// the schema does not know, or a malformed one).
    pub fn put_pool(&self, id: &str, value: Value) {
        self.lock().pools.insert(id.into(), value);
    }

    /// Adds `n` copies of the fixture's load balancer to the zone (one per service of a
    /// large deployment), named `svc<i>.example.com`; returns their ids (32 hex digits).
    pub fn add_load_balancers(&self, n: usize) -> Vec<String> {
        let mut inner = self.lock();
        let template = inner.lbs[ids::LB].clone();
        (1..=n)
            .map(|i| {
                let id = format!("{i:032x}");
                let mut lb = template.clone();
                lb["id"] = json!(id);
                lb["name"] = json!(format!("svc{i}.example.com"));
                inner.lbs.insert(id.clone(), lb);
                id
            })
            .collect()
    }

    /// Changes the load balancer as another writer would (e.g. `{"default_pools": [...]}`);
    /// fields in `patch` replace the stored ones.
    pub fn edit_load_balancer(&self, patch: Value) {
        let mut inner = self.lock();
        merge(inner.lbs.get_mut(ids::LB).expect("lb"), &patch);
    }

    /// Changes pool `id` as another writer would.
    pub fn edit_pool(&self, id: &str, patch: Value) {
        let mut inner = self.lock();
        merge(inner.pools.get_mut(id).expect("pool"), &patch);
    }

    /// Answers 429 with `Retry-After` (the seconds left, rounded up) to every request for
    /// `period` from now, like Cloudflare's 5-minute block.
    pub fn rate_limit_for(&self, period: Duration) {
        self.lock().faults.storm_until = Some(Instant::now() + period);
    }

    /// Answers 502 with Cloudflare's envelope to the next `n` requests.
    pub fn fail_next(&self, n: u32) {
        self.lock().faults.server_errors = n;
    }

    /// Waits `delay` before answering each request (`None`: answer at once).
    pub fn slow(&self, delay: Option<Duration>) {
        self.lock().faults.delay = delay;
    }

    /// Answers 403 with code 10000 ("Authentication error") to everything while `on`.
    pub fn auth_failure(&self, on: bool) {
        self.lock().faults.auth_failure = on;
    }

    /// While `on`, every accepted PATCH is answered with the patched object and then undone
    /// at once, as if another writer restored the previous state right after gslb's write.
    pub fn reverter(&self, on: bool) {
        self.lock().faults.reverter = on;
    }
}

fn lock(shared: &Shared) -> MutexGuard<'_, Inner> {
    shared.inner.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A managed DNS-only load balancer `id` named `name` as the fixture's: description `label`
/// and the [`MANAGED_TAG`], TTL 30, `default_pools` `pools` in that order, the last one the
/// fallback pool, steering `off`.
pub fn managed_load_balancer(id: &str, name: &str, label: &str, pools: &[&str]) -> Value {
    json!({
        "id": id, "name": name,
        "description": format!("{label} [{MANAGED_TAG}]"),
        "enabled": true, "proxied": false, "ttl": 30,
        "default_pools": pools, "fallback_pool": pools.last(),
        "steering_policy": "off", "session_affinity": "none",
        "created_on": "2026-01-01T00:00:00Z", "modified_on": "2026-01-01T00:00:00Z"
    })
}

/// Pool `id` named `name` as the fixture's: enabled, one origin at `address`, tagged
/// [`MANAGED_TAG`] when `managed`.
pub fn pool(id: &str, name: &str, address: &str, managed: bool) -> Value {
    let description = if managed {
        format!("{name} [{MANAGED_TAG}]")
    } else {
        name.to_owned()
    };
    json!({
        "id": id, "name": name, "description": description, "enabled": true,
        "minimum_origins": 1, "monitor": "f1aba936b94213e5b8dca0c0dbf1f9cc",
        "check_regions": ["WNAM", "NEAS"], "healthy": true,
        "origins": [{"name": format!("{name}-1"), "address": address, "enabled": true, "weight": 1, "healthy": true}],
        "created_on": "2026-01-01T00:00:00Z", "modified_on": "2026-01-01T00:00:00Z"
    })
}

fn merge(target: &mut Value, patch: &Value) {
    if let (Some(t), Some(p)) = (target.as_object_mut(), patch.as_object()) {
        for (k, v) in p {
            t.insert(k.clone(), v.clone());
        }
    }
}
