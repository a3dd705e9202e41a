//! The OpenAPI subset every body is checked against: the published fixture, compiled once per
//! fake into one validator per schema the fake uses.

use std::collections::BTreeMap;

use serde_json::{Value, json};

const OPENAPI: &str = include_str!("../../tests/fixtures/cloudflare-lb-openapi.json");
const POOL_ITEM: &str = "/accounts/{account_id}/load_balancers/pools/{pool_id}";
const LB_ITEM: &str = "/zones/{zone_id}/load_balancers/{load_balancer_id}";

/// Which schema a body is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Schema {
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

/// One compiled validator per [`Schema`].
pub(super) struct Validators(BTreeMap<Schema, jsonschema::Validator>);

impl Validators {
    /// Compiles the fixture.
    ///
    /// # Panics
    /// When the fixture is not JSON or the subset does not compile.
    pub(super) fn load() -> Self {
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

    /// Every mismatch of `body` against `schema`, each prefixed with `what`.
    pub(super) fn check(&self, schema: Schema, what: &str, body: &Value) -> Vec<String> {
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
