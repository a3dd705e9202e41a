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

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use tokio::time::Instant;

use crate::MANAGED_TAG;

const OPENAPI: &str = include_str!("../tests/fixtures/cloudflare-lb-openapi.json");
const POOL_ITEM: &str = "/accounts/{account_id}/load_balancers/pools/{pool_id}";
const LB_ITEM: &str = "/zones/{zone_id}/load_balancers/{load_balancer_id}";

/// One request the fake answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `PATCH`, ...
    pub method: String,
    /// The path after `/client/v4`.
    pub path: String,
    /// The HTTP status answered.
    pub status: u16,
}

/// Which schema a body is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Schema {
    PoolList,
    PoolSingle,
    LbList,
    LbSingle,
    PatchPool,
    PatchLb,
    Failure,
}

impl Schema {
    fn pointer(self) -> &'static str {
        match self {
            Self::PoolList => "load-balancing_schemas-response_collection",
            Self::PoolSingle => "load-balancing_schemas-single_response",
            Self::LbList => "load-balancing_load-balancer_components-schemas-response_collection",
            Self::LbSingle => "load-balancing_load-balancer_components-schemas-single_response",
            Self::PatchPool => "x-gslb-patch-pool-request",
            Self::PatchLb => "x-gslb-patch-load-balancer-request",
            Self::Failure => "load-balancing_api-response-common-failure",
        }
    }
}

struct Validators(BTreeMap<Schema, jsonschema::Validator>);

impl Validators {
    fn load() -> Self {
        let mut doc: Value = serde_json::from_str(OPENAPI).expect("the OpenAPI fixture is JSON");
        nullable_to_union(&mut doc);
        let hoist = |doc: &Value, path: &str| {
            doc["paths"][path]["patch"]["requestBody"]["content"]["application/json"]["schema"]
                .clone()
        };
        let patch_pool = hoist(&doc, POOL_ITEM);
        let patch_lb = hoist(&doc, LB_ITEM);
        let schemas = doc["components"]["schemas"]
            .as_object_mut()
            .expect("components.schemas");
        schemas.insert(Schema::PatchPool.pointer().into(), patch_pool);
        schemas.insert(Schema::PatchLb.pointer().into(), patch_lb);
        let components = doc["components"].clone();
        let all = [
            Schema::PoolList,
            Schema::PoolSingle,
            Schema::LbList,
            Schema::LbSingle,
            Schema::PatchPool,
            Schema::PatchLb,
            Schema::Failure,
        ];
        Self(
            all.into_iter()
                .map(|s| {
                    let root = json!({
                        "$ref": format!("#/components/schemas/{}", s.pointer()),
                        "components": components,
                    });
                    let v = jsonschema::options()
                        .with_draft(jsonschema::Draft::Draft4)
                        .build(&root)
                        .expect("the OpenAPI subset compiles");
                    (s, v)
                })
                .collect(),
        )
    }

    fn check(&self, schema: Schema, what: &str, body: &Value) -> Vec<String> {
        self.0[&schema]
            .iter_errors(body)
            .map(|e| format!("{what}: {e} at {}", e.instance_path()))
            .collect()
    }
}

/// OpenAPI 3.0's `nullable: true` next to `type: T` is JSON Schema's `type: [T, "null"]`.
fn nullable_to_union(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if m.remove("nullable") == Some(Value::Bool(true)) {
                if let Some(Value::String(t)) = m.get("type").cloned() {
                    m.insert("type".into(), json!([t, "null"]));
                }
                if let Some(Value::Array(e)) = m.get_mut("enum")
                    && !e.contains(&Value::Null)
                {
                    e.push(Value::Null);
                }
            }
            m.values_mut().for_each(nullable_to_union);
        }
        Value::Array(a) => a.iter_mut().for_each(nullable_to_union),
        _ => {}
    }
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
}

struct Shared {
    inner: Mutex<Inner>,
    validators: Validators,
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
            json!({
                "id": ids::LB, "name": ids::LB_NAME,
                "description": format!("web LB [{MANAGED_TAG}]"),
                "enabled": true, "proxied": false, "ttl": 30,
                "default_pools": [ids::NCP, ids::GCP], "fallback_pool": ids::GCP,
                "steering_policy": "off", "session_affinity": "none",
                "created_on": "2026-01-01T00:00:00Z", "modified_on": "2026-01-01T00:00:00Z"
            }),
        );
        let shared = Arc::new(Shared {
            inner: Mutex::new(inner),
            validators: Validators::load(),
        });
        let app = axum::Router::new()
            .fallback(handle)
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

    /// PATCH requests accepted (status 200) so far.
    pub fn writes(&self) -> usize {
        self.lock()
            .requests
            .iter()
            .filter(|r| r.method == "PATCH" && r.status == 200)
            .count()
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

fn pool(id: &str, name: &str, address: &str, managed: bool) -> Value {
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

fn envelope_ok(result: Value) -> Value {
    json!({"success": true, "errors": [], "messages": [], "result": result})
}

fn envelope_err(code: u32, message: &str) -> Value {
    json!({"success": false, "errors": [{"code": code, "message": message}], "messages": [], "result": null})
}

/// What a request asks for, once its path is matched.
enum Route {
    Pools,
    Pool(String),
    Lbs,
    Lb(String),
}

fn route(inner: &Inner, path: &str) -> Option<Route> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match parts.as_slice() {
        ["accounts", a, "load_balancers", "pools"] if *a == inner.account => Some(Route::Pools),
        ["accounts", a, "load_balancers", "pools", id] if *a == inner.account => {
            Some(Route::Pool((*id).into()))
        }
        ["zones", z, "load_balancers"] if *z == inner.zone => Some(Route::Lbs),
        ["zones", z, "load_balancers", id] if *z == inner.zone => Some(Route::Lb((*id).into())),
        _ => None,
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let delay = lock(&shared).faults.delay;
    if let Some(d) = delay {
        tokio::time::sleep(d).await;
    }
    let path = uri
        .path()
        .strip_prefix("/client/v4")
        .unwrap_or(uri.path())
        .to_owned();
    let mut inner = lock(&shared);
    let (status, body, schema, retry_after) =
        answer(&shared, &mut inner, &method, &path, &headers, &body);
    let what = format!("response to {method} {path}");
    let found = shared.validators.check(schema, &what, &body);
    inner.violations.extend(found);
    inner.requests.push(Request {
        method: method.to_string(),
        path,
        status: status.as_u16(),
    });
    drop(inner);
    let mut resp = (status, axum::Json(body)).into_response();
    if let Some(secs) = retry_after
        && let Ok(v) = HeaderValue::from_str(&secs.to_string())
    {
        resp.headers_mut().insert("retry-after", v);
    }
    resp
}

type Answer = (StatusCode, Value, Schema, Option<u64>);

fn answer(
    shared: &Shared,
    inner: &mut Inner,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> Answer {
    let fail = |status: StatusCode, code: u32, msg: &str| {
        (status, envelope_err(code, msg), Schema::Failure, None)
    };
    if let Some(until) = inner.faults.storm_until {
        let now = Instant::now();
        if until > now {
            let left = (until - now).as_secs_f64().ceil() as u64;
            let (s, b, sc, _) = fail(
                StatusCode::TOO_MANY_REQUESTS,
                1015,
                "You are being rate limited",
            );
            return (s, b, sc, Some(left.max(1)));
        }
    }
    if inner.faults.server_errors > 0 {
        inner.faults.server_errors -= 1;
        return fail(StatusCode::BAD_GATEWAY, 1000, "Bad gateway");
    }
    let bearer = format!("Bearer {}", inner.token);
    if inner.faults.auth_failure
        || headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(bearer.as_str())
    {
        return fail(StatusCode::FORBIDDEN, 10000, "Authentication error");
    }
    let Some(route) = route(inner, path) else {
        return fail(
            StatusCode::NOT_FOUND,
            7003,
            "Could not route to the path, perhaps your object identifier is invalid?",
        );
    };
    let request: Option<Value> = if *method == Method::PATCH {
        match serde_json::from_slice(body) {
            Ok(v) => Some(v),
            Err(_) => {
                return fail(
                    StatusCode::BAD_REQUEST,
                    1002,
                    "Malformed JSON in request body",
                );
            }
        }
    } else {
        None
    };
    match (method.as_str(), route, request) {
        ("GET", Route::Pools, _) => {
            let all: Vec<Value> = inner.pools.values().cloned().collect();
            (StatusCode::OK, list(all), Schema::PoolList, None)
        }
        ("GET", Route::Lbs, _) => {
            let all: Vec<Value> = inner.lbs.values().cloned().collect();
            (StatusCode::OK, list(all), Schema::LbList, None)
        }
        ("GET", Route::Pool(id), _) => match inner.pools.get(&id) {
            Some(p) => (
                StatusCode::OK,
                envelope_ok(p.clone()),
                Schema::PoolSingle,
                None,
            ),
            None => fail(StatusCode::NOT_FOUND, 1001, "Pool not found"),
        },
        ("GET", Route::Lb(id), _) => match inner.lbs.get(&id) {
            Some(l) => (
                StatusCode::OK,
                envelope_ok(l.clone()),
                Schema::LbSingle,
                None,
            ),
            None => fail(StatusCode::NOT_FOUND, 1001, "Load Balancer not found"),
        },
        ("PATCH", Route::Pool(id), Some(req)) => {
            let errors =
                shared
                    .validators
                    .check(Schema::PatchPool, &format!("PATCH pool {id} body"), &req);
            if !errors.is_empty() {
                inner.violations.extend(errors.clone());
                return fail(StatusCode::BAD_REQUEST, 1002, &errors.join("; "));
            }
            let ts = tick(inner);
            let reverter = inner.faults.reverter;
            let Some(p) = inner.pools.get_mut(&id) else {
                return fail(StatusCode::NOT_FOUND, 1001, "Pool not found");
            };
            let before = p.clone();
            merge(p, &req);
            p["modified_on"] = json!(ts);
            let after = p.clone();
            if reverter {
                *p = before;
                inner.reverts += 1;
            }
            (StatusCode::OK, envelope_ok(after), Schema::PoolSingle, None)
        }
        ("PATCH", Route::Lb(id), Some(req)) => {
            let errors = shared.validators.check(
                Schema::PatchLb,
                &format!("PATCH load balancer {id} body"),
                &req,
            );
            if !errors.is_empty() {
                inner.violations.extend(errors.clone());
                return fail(StatusCode::BAD_REQUEST, 1002, &errors.join("; "));
            }
            let known: Vec<String> = inner.pools.keys().cloned().collect();
            let missing = req
                .get("default_pools")
                .and_then(Value::as_array)
                .and_then(|pools| {
                    pools
                        .iter()
                        .find(|p| p.as_str().is_none_or(|s| !known.iter().any(|k| k == s)))
                });
            if let Some(bad) = missing {
                return fail(
                    StatusCode::BAD_REQUEST,
                    1002,
                    &format!("pool {bad} does not exist"),
                );
            }
            let ts = tick(inner);
            let reverter = inner.faults.reverter;
            let Some(l) = inner.lbs.get_mut(&id) else {
                return fail(StatusCode::NOT_FOUND, 1001, "Load Balancer not found");
            };
            let before = l.clone();
            merge(l, &req);
            l["modified_on"] = json!(ts);
            let after = l.clone();
            if reverter {
                *l = before;
                inner.reverts += 1;
            }
            (StatusCode::OK, envelope_ok(after), Schema::LbSingle, None)
        }
        _ => fail(StatusCode::METHOD_NOT_ALLOWED, 10405, "Method not allowed"),
    }
}

fn list(items: Vec<Value>) -> Value {
    let n = items.len();
    let mut v = envelope_ok(Value::Array(items));
    if let Some(m) = v.as_object_mut() {
        let info: Map<String, Value> = [
            ("page".to_owned(), json!(1)),
            ("per_page".to_owned(), json!(n.max(20))),
            ("count".to_owned(), json!(n)),
            ("total_count".to_owned(), json!(n)),
        ]
        .into_iter()
        .collect();
        m.insert("result_info".into(), Value::Object(info));
    }
    v
}

/// A fresh `modified_on` for each write: seconds counted from 2026-01-01T00:00:00Z.
fn tick(inner: &mut Inner) -> String {
    inner.clock += 1;
    let s = inner.clock;
    format!(
        "2026-01-01T{:02}:{:02}:{:02}Z",
        (s / 3600) % 24,
        (s / 60) % 60,
        s % 60
    )
}
