//! The fake's HTTP side: routing, the injected faults, the four reads and two writes the
//! adapter uses, Cloudflare's envelopes, and the schema check of every body answered.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::schema::Schema;
use super::{Hold, Inner, Request, Shared, Write, lock, merge};

/// An answer: status, body, the schema the body must match, and `Retry-After` in seconds.
type Answer = (StatusCode, Value, Schema, Option<u64>);

fn envelope_ok(result: Value) -> Value {
    json!({"success": true, "errors": [], "messages": [], "result": result})
}

fn envelope_err(code: u32, message: &str) -> Value {
    json!({"success": false, "errors": [{"code": code, "message": message}], "messages": [], "result": null})
}

/// An error answer in Cloudflare's envelope.
fn fail(status: StatusCode, code: u32, message: &str) -> Answer {
    (status, envelope_err(code, message), Schema::Failure, None)
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

/// Every request: waits out the injected delay, answers, checks the answer's body against
/// its schema and records the request.
pub(super) async fn handle(
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
    let sent = String::from_utf8_lossy(&body).into_owned();
    let lost = method == Method::PATCH && held(&shared).await;
    let mut inner = lock(&shared);
    let (status, body, schema, retry_after) = if lost {
        fail(StatusCode::BAD_GATEWAY, 1000, "Bad gateway")
    } else {
        answer(&shared, &mut inner, &method, &path, &headers, &body)
    };
    if inner.check_responses {
        let what = format!("response to {method} {path}");
        let found = shared.validators.check(schema, &what, &body);
        inner.violations.extend(found);
    }
    inner.requests.push(Request {
        method: method.to_string(),
        path,
        status: status.as_u16(),
        body: sent,
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

/// Waits while writes are held ([`super::Fake::hold_writes`]); `true` when this write is to
/// be lost ([`super::Fake::drop_held_writes`]).
async fn held(shared: &Shared) -> bool {
    let mut hold = shared.hold.subscribe();
    if *hold.borrow_and_update() != Hold::On {
        return false;
    }
    lock(shared).held += 1;
    let outcome = hold.wait_for(|h| *h != Hold::On).await.map(|h| *h).ok();
    let mut inner = lock(shared);
    inner.held -= 1;
    if inner.held == 0 && outcome == Some(Hold::Drop) {
        shared.hold.send_replace(Hold::Off);
    }
    outcome == Some(Hold::Drop)
}

/// In order: an injected fault or a wrong token, an unknown path, a malformed PATCH body, then
/// the route's read or write; any other method is 405.
fn answer(
    shared: &Shared,
    inner: &mut Inner,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> Answer {
    if let Some(refused) = injected_fault(inner, headers) {
        return refused;
    }
    let Some(route) = route(inner, path) else {
        return fail(
            StatusCode::NOT_FOUND,
            7003,
            "Could not route to the path, perhaps your object identifier is invalid?",
        );
    };
    let not_allowed = || fail(StatusCode::METHOD_NOT_ALLOWED, 10405, "Method not allowed");
    match method.as_str() {
        "GET" => get(inner, route),
        "PATCH" => {
            let Ok(request) = serde_json::from_slice::<Value>(body) else {
                return fail(
                    StatusCode::BAD_REQUEST,
                    1002,
                    "Malformed JSON in request body",
                );
            };
            match route {
                Route::Pool(id) => patch_pool(shared, inner, &id, &request),
                Route::Lb(id) => patch_load_balancer(shared, inner, &id, &request),
                Route::Pools | Route::Lbs => not_allowed(),
            }
        }
        _ => not_allowed(),
    }
}

/// The 429 storm (with `Retry-After`, the seconds left rounded up), a pending 502, the
/// authentication failure, or a missing or wrong bearer token; `None` when none applies.
fn injected_fault(inner: &mut Inner, headers: &HeaderMap) -> Option<Answer> {
    if let Some(until) = inner.faults.storm_until {
        let now = Instant::now();
        if until > now {
            let left = (until - now).as_secs_f64().ceil() as u64;
            let (s, b, sc, _) = fail(
                StatusCode::TOO_MANY_REQUESTS,
                1015,
                "You are being rate limited",
            );
            return Some((s, b, sc, Some(left.max(1))));
        }
    }
    if inner.faults.server_errors > 0 {
        inner.faults.server_errors -= 1;
        return Some(fail(StatusCode::BAD_GATEWAY, 1000, "Bad gateway"));
    }
    let bearer = format!("Bearer {}", inner.token);
    if inner.faults.auth_failure
        || headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(bearer.as_str())
    {
        return Some(fail(StatusCode::FORBIDDEN, 10000, "Authentication error"));
    }
    None
}

fn get(inner: &Inner, route: Route) -> Answer {
    match route {
        Route::Pools => {
            let all: Vec<Value> = inner.pools.values().cloned().collect();
            (StatusCode::OK, list(all), Schema::PoolList, None)
        }
        Route::Lbs => {
            let all: Vec<Value> = inner.lbs.values().cloned().collect();
            (StatusCode::OK, list(all), Schema::LbList, None)
        }
        Route::Pool(id) => match inner.pools.get(&id) {
            Some(p) => (
                StatusCode::OK,
                envelope_ok(p.clone()),
                Schema::PoolSingle,
                None,
            ),
            None => fail(StatusCode::NOT_FOUND, 1001, "Pool not found"),
        },
        Route::Lb(id) => match inner.lbs.get(&id) {
            Some(l) => (
                StatusCode::OK,
                envelope_ok(l.clone()),
                Schema::LbSingle,
                None,
            ),
            None => fail(StatusCode::NOT_FOUND, 1001, "Load Balancer not found"),
        },
    }
}

/// A request body that does not match `schema`: recorded as violations and refused with 400/1002.
fn refuse_invalid(
    shared: &Shared,
    inner: &mut Inner,
    schema: Schema,
    what: &str,
    request: &Value,
) -> Option<Answer> {
    let errors = shared.validators.check(schema, what, request);
    if errors.is_empty() {
        return None;
    }
    inner.violations.extend(errors.clone());
    Some(fail(StatusCode::BAD_REQUEST, 1002, &errors.join("; ")))
}

fn patch_pool(shared: &Shared, inner: &mut Inner, id: &str, request: &Value) -> Answer {
    let what = format!("PATCH pool {id} body");
    if let Some(refused) = refuse_invalid(shared, inner, Schema::PatchPool, &what, request) {
        return refused;
    }
    let ts = tick(inner);
    let reverter = inner.faults.reverter;
    let Some(p) = inner.pools.get_mut(id) else {
        return fail(StatusCode::NOT_FOUND, 1001, "Pool not found");
    };
    let after = write(p, request, ts, reverter);
    inner.reverts += u32::from(reverter);
    log(
        inner,
        format!("/accounts/{}/load_balancers/pools/{id}", inner.account),
        request,
    );
    (StatusCode::OK, envelope_ok(after), Schema::PoolSingle, None)
}

/// Also refuses a `default_pools` entry naming no pool (400/1002).
fn patch_load_balancer(shared: &Shared, inner: &mut Inner, id: &str, request: &Value) -> Answer {
    let what = format!("PATCH load balancer {id} body");
    if let Some(refused) = refuse_invalid(shared, inner, Schema::PatchLb, &what, request) {
        return refused;
    }
    let missing = request
        .get("default_pools")
        .and_then(Value::as_array)
        .and_then(|pools| {
            pools
                .iter()
                .find(|p| p.as_str().is_none_or(|s| !inner.pools.contains_key(s)))
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
    let Some(l) = inner.lbs.get_mut(id) else {
        return fail(StatusCode::NOT_FOUND, 1001, "Load Balancer not found");
    };
    let after = write(l, request, ts, reverter);
    inner.reverts += u32::from(reverter);
    log(
        inner,
        format!("/zones/{}/load_balancers/{id}", inner.zone),
        request,
    );
    (StatusCode::OK, envelope_ok(after), Schema::LbSingle, None)
}

/// Appends an applied write to the ordered write log, with the epoch its description carries.
fn log(inner: &mut Inner, path: String, request: &Value) {
    inner.writes.push(Write {
        path,
        default_pools: request
            .get("default_pools")
            .and_then(|v| serde_json::from_value(v.clone()).ok()),
        enabled: request.get("enabled").and_then(Value::as_bool),
        epoch: crate::epoch::read(request.get("description").and_then(Value::as_str)),
    });
}

/// Merges `request` into `object` with `modified_on` = `ts` and returns the result; with the
/// `reverter` on, `object` is then put back as it was (another writer undoing the write).
fn write(object: &mut Value, request: &Value, ts: String, reverter: bool) -> Value {
    let before = object.clone();
    merge(object, request);
    object["modified_on"] = json!(ts);
    let after = object.clone();
    if reverter {
        *object = before;
    }
    after
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
