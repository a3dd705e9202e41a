//! Tolerant models of what the Cloudflare Load Balancing API returns.
//!
//! Cloudflare adds fields and enum values over time and returns fields its schema does not
//! list (`healthy` on pools and origins). So: every field is optional, unknown fields are kept
//! in `extra` and written back unchanged on round-trip, unknown enum values are kept as
//! [`SteeringPolicy::Other`], origins are compared as a map keyed by name (the API returns them
//! sorted by name), and one malformed object in a list is skipped, never failing the call.
//! A list kept between resyncs keeps only what gslb reads of each object (`mirror`). No I/O
//! here.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{DeserializeOwned, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// An account-level pool (`/accounts/{account_id}/load_balancers/pools/{id}`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Pool {
    /// The pool id (32 hex digits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Short name, unique in the account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Free text; gslb looks for [`crate::MANAGED_TAG`] in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether the pool may take traffic. Cloudflare's default is `true`; a disabled pool is
    /// not health-checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Cloudflare's own verdict (undocumented; present in List Pools answers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy: Option<bool>,
    /// The monitor id; absent when the pool is not monitored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor: Option<String>,
    /// The origins, in the order the API sent them (sorted by name); compare with
    /// [`Pool::origins_by_name`].
    #[serde(
        default,
        deserialize_with = "exact",
        skip_serializing_if = "Option::is_none"
    )]
    pub origins: Option<Vec<Origin>>,
    /// Last modification, RFC 3339 (read-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified_on: Option<String>,
    /// Every other field, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Reads an optional list without spare room: read from text, a list's length is unknown until
/// its end, so the vector grows by doubling (one origin kept room for four: about 290 bytes
/// per pool, for as long as the account's pool list is held).
fn exact<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Vec<T>>, D::Error> {
    let mut list = Option::<Vec<T>>::deserialize(d)?;
    if let Some(l) = &mut list {
        l.shrink_to_fit();
    }
    Ok(list)
}

impl Pool {
    /// Whether the pool is enabled, Cloudflare's default (`true`) when the field is absent.
    pub fn is_enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }

    /// The origins keyed by name (origins without a name are keyed by address).
    pub fn origins_by_name(&self) -> BTreeMap<String, &Origin> {
        self.origins
            .iter()
            .flatten()
            .map(|o| {
                let key = o
                    .name
                    .clone()
                    .or_else(|| o.address.clone())
                    .unwrap_or_default();
                (key, o)
            })
            .collect()
    }
}

/// One origin of a pool.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Origin {
    /// Name, unique in the pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// IP address or hostname.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Whether the origin may take traffic (default `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Weight, 0 to 1 (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
    /// Cloudflare's verdict (undocumented).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy: Option<bool>,
    /// Every other field, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A zone-level load balancer (`/zones/{zone_id}/load_balancers/{id}`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LoadBalancer {
    /// The load balancer id (32 hex digits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The DNS hostname it answers for, e.g. `web.example.com`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Free text; gslb looks for [`crate::MANAGED_TAG`] in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether the load balancer answers at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Proxied (orange cloud) or DNS-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxied: Option<bool>,
    /// DNS TTL in seconds, DNS-only load balancers only (Cloudflare's default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<f64>,
    /// Pool ids in failover order.
    #[serde(
        default,
        deserialize_with = "exact",
        skip_serializing_if = "Option::is_none"
    )]
    pub default_pools: Option<Vec<String>>,
    /// The pool used when every other pool is down or disabled. Cloudflare never considers
    /// its health.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_pool: Option<String>,
    /// How pools are chosen; gslb needs `off`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steering_policy: Option<SteeringPolicy>,
    /// Last modification, RFC 3339 (read-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified_on: Option<String>,
    /// Every other field, kept as sent (session affinity, rules, region pools, ...).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl LoadBalancer {
    /// The order the load balancer serves in, as gslb judges it: `default_pools` when
    /// steering is failover, otherwise an empty order (so any plan rewrites it and sends
    /// `off`).
    ///
    /// Steering is failover when `steering_policy` is `"off"`, or is `""` or missing (the
    /// default) while the load balancer has no `region_pools`, `country_pools` or `pop_pools`:
    /// the API schema says `""` "will map to `geo` if you use
    /// `region_pools`/`country_pools`/`pop_pools` otherwise `off`".
    pub fn serving_order(&self) -> Vec<String> {
        let geo_pools = ["region_pools", "country_pools", "pop_pools"]
            .iter()
            .any(|k| match self.extra.get(*k) {
                None | Some(Value::Null) => false,
                Some(Value::Object(m)) => !m.is_empty(),
                Some(_) => true,
            });
        match self.steering_policy {
            Some(SteeringPolicy::Off) => self.default_pools.clone().unwrap_or_default(),
            None | Some(SteeringPolicy::Empty) if !geo_pools => {
                self.default_pools.clone().unwrap_or_default()
            }
            _ => Vec::new(),
        }
    }
}

/// A load balancer's `steering_policy`. Values Cloudflare adds later are kept as
/// [`SteeringPolicy::Other`] and written back unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum SteeringPolicy {
    /// `"off"`: failover in `default_pools` order (what gslb writes).
    Off,
    /// `""`: Cloudflare's default, which turns into geo steering when region pools exist.
    Empty,
    /// `"geo"`.
    Geo,
    /// `"random"`.
    Random,
    /// `"dynamic_latency"`.
    DynamicLatency,
    /// `"proximity"`.
    Proximity,
    /// `"least_outstanding_requests"`.
    LeastOutstandingRequests,
    /// `"least_connections"`.
    LeastConnections,
    /// Anything else, as sent.
    Other(String),
}

impl From<String> for SteeringPolicy {
    fn from(s: String) -> Self {
        match s.as_str() {
            "off" => Self::Off,
            "" => Self::Empty,
            "geo" => Self::Geo,
            "random" => Self::Random,
            "dynamic_latency" => Self::DynamicLatency,
            "proximity" => Self::Proximity,
            "least_outstanding_requests" => Self::LeastOutstandingRequests,
            "least_connections" => Self::LeastConnections,
            _ => Self::Other(s),
        }
    }
}

impl From<SteeringPolicy> for String {
    fn from(s: SteeringPolicy) -> Self {
        match s {
            SteeringPolicy::Off => "off".into(),
            SteeringPolicy::Empty => String::new(),
            SteeringPolicy::Geo => "geo".into(),
            SteeringPolicy::Random => "random".into(),
            SteeringPolicy::DynamicLatency => "dynamic_latency".into(),
            SteeringPolicy::Proximity => "proximity".into(),
            SteeringPolicy::LeastOutstandingRequests => "least_outstanding_requests".into(),
            SteeringPolicy::LeastConnections => "least_connections".into(),
            SteeringPolicy::Other(s) => s,
        }
    }
}

/// Cloudflare's response envelope: `{"success", "errors", "messages", "result"}`, read from
/// the response body without parsing `result`: it stays the body's own text until the caller
/// reads it as its type.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Envelope<'a> {
    #[serde(default)]
    pub success: bool,
    #[serde(default)]
    pub errors: Vec<ApiMessage>,
    /// The text of `result`; `None` when absent or `null`.
    #[serde(default, borrow)]
    pub result: Option<&'a RawValue>,
}

/// One entry of `errors`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ApiMessage {
    #[serde(default)]
    pub code: Option<i64>,
    #[serde(default)]
    pub message: Option<String>,
}

impl Envelope<'_> {
    /// `code: message; ...` for logs and errors.
    pub fn describe(&self) -> String {
        self.errors
            .iter()
            .map(|e| {
                format!(
                    "{}: {}",
                    e.code.map_or("?".into(), |c| c.to_string()),
                    e.message.as_deref().unwrap_or("")
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// A list answer (List Pools, List Load Balancers) read one item at a time, never as one JSON
/// tree: the items that parse, in listed order, and for each one that does not, its id (when
/// it has a string `id`) and why. A malformed item is skipped, never failing the list; a
/// `result` that is not a list fails as `expected a sequence`.
///
/// Reads only from borrowed text (`serde_json::from_str`/`from_slice`): each item is taken as
/// a [`RawValue`] slice of that text and parsed on its own.
#[derive(Debug)]
pub(crate) struct Listed<T> {
    pub items: Vec<T>,
    pub skipped: Vec<(Option<String>, String)>,
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Listed<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_seq(ListedVisitor(PhantomData))
    }
}

struct ListedVisitor<T>(PhantomData<T>);

impl<'de, T: DeserializeOwned> Visitor<'de> for ListedVisitor<T> {
    type Value = Listed<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a sequence")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Listed<T>, A::Error> {
        let mut listed = Listed {
            items: Vec::with_capacity(seq.size_hint().unwrap_or(0)),
            skipped: Vec::new(),
        };
        while let Some(item) = seq.next_element::<&'de RawValue>()? {
            match serde_json::from_str::<T>(item.get()) {
                Ok(t) => listed.items.push(t),
                Err(e) => listed.skipped.push((id_of(item), e.to_string())),
            }
        }
        Ok(listed)
    }
}

/// The string `id` of a listed item that did not parse, when it has one.
fn id_of(item: &RawValue) -> Option<String> {
    #[derive(Deserialize)]
    struct Id {
        #[serde(default)]
        id: Option<String>,
    }
    serde_json::from_str::<Id>(item.get()).ok()?.id
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_and_enum_values_survive_a_round_trip() {
        let raw = json!({
            "id": "lb1", "name": "web.example.com", "default_pools": ["a", "b"],
            "fallback_pool": "b", "steering_policy": "quantum_steering",
            "session_affinity": "brand_new_mode", "adaptive_routing": {"failover_across_pools": true},
            "networks": ["x"]
        });
        let lb: LoadBalancer = serde_json::from_value(raw.clone()).unwrap();
        assert_eq!(
            lb.steering_policy,
            Some(SteeringPolicy::Other("quantum_steering".into()))
        );
        assert_eq!(serde_json::to_value(&lb).unwrap(), raw);
    }

    fn order(lb: Value) -> Vec<String> {
        let lb: LoadBalancer = serde_json::from_value(lb).expect("load balancer");
        lb.serving_order()
    }

    #[test]
    fn the_default_steering_policy_is_failover_in_default_pools_order() {
        let ab = vec!["a".to_owned(), "b".to_owned()];
        for steering in [json!("off"), json!(""), Value::Null] {
            let mut lb = json!({"id": "lb1", "default_pools": ["a", "b"], "fallback_pool": "b",
                "region_pools": {}, "country_pools": {}, "pop_pools": {}});
            if !steering.is_null() {
                lb["steering_policy"] = steering.clone();
            }
            assert_eq!(order(lb), ab, "steering_policy {steering}");
        }
        // Missing altogether, as an older load balancer may be returned.
        assert_eq!(order(json!({"id": "lb1", "default_pools": ["a", "b"]})), ab);
    }

    #[test]
    fn the_default_steering_policy_with_region_pools_is_geo() {
        let lb = json!({"id": "lb1", "default_pools": ["a", "b"], "steering_policy": "",
            "region_pools": {"WNAM": ["b"]}});
        assert_eq!(order(lb), Vec::<String>::new());
        let lb = json!({"id": "lb1", "default_pools": ["a", "b"], "steering_policy": "random"});
        assert_eq!(order(lb), Vec::<String>::new());
        let lb = json!({"id": "lb1", "default_pools": ["a", "b"], "country_pools": {"US": ["a"]}});
        assert_eq!(order(lb), Vec::<String>::new());
    }

    #[test]
    fn origins_compare_as_a_map_by_name() {
        let a: Pool = serde_json::from_value(json!({"origins": [
            {"name": "o1", "address": "192.0.2.1"}, {"name": "o2", "address": "host.example.com", "port": 0}
        ]}))
        .unwrap();
        let b: Pool = serde_json::from_value(json!({"origins": [
            {"name": "o2", "address": "host.example.com", "port": 0}, {"name": "o1", "address": "192.0.2.1"}
        ]}))
        .unwrap();
        assert_ne!(a.origins, b.origins);
        assert_eq!(a.origins_by_name(), b.origins_by_name());
    }

    #[test]
    fn a_malformed_pool_is_skipped_not_fatal() {
        let text = r#"[
            {"id": "good", "enabled": true, "health_sources": ["regional", "global"]},
            {"id": "bad", "enabled": "sometimes"},
            {"id": "nomonitor", "origins": [{"name": "h", "address": "h.example.com", "flatten_cname": true}]},
            {"name": "no id", "origins": "not-a-list"},
            {"id": 7, "enabled": "numeric id"},
            "not an object"
        ]"#;
        let listed: Listed<Pool> = serde_json::from_str(text).unwrap();
        let ids: Vec<_> = listed.items.iter().map(|p| p.id.as_deref()).collect();
        assert_eq!(ids, [Some("good"), Some("nomonitor")]);
        assert!(listed.items[0].extra.contains_key("health_sources"));
        assert!(listed.items[1].origins.as_ref().unwrap()[0].extra["flatten_cname"] == true);
        let skipped: Vec<_> = listed.skipped.iter().map(|(id, _)| id.as_deref()).collect();
        assert_eq!(skipped, [Some("bad"), None, None, None]);
        assert!(
            listed.skipped[0].1.contains("expected a boolean"),
            "{:?}",
            listed.skipped
        );
    }

    #[test]
    fn a_malformed_load_balancer_is_skipped_and_the_rest_round_trip() {
        let good = json!({"id": "lb1", "default_pools": ["a"], "region_pools": {"WNAM": ["a"]}});
        let text = format!(
            r#"[{good}, {{"id": "lb2", "default_pools": "a"}}, {{"id": "lb3", "ttl": 30}}]"#
        );
        let listed: Listed<LoadBalancer> = serde_json::from_str(&text).unwrap();
        assert_eq!(listed.items.len(), 2);
        assert_eq!(serde_json::to_value(&listed.items[0]).unwrap(), good);
        assert_eq!(listed.items[1].ttl, Some(30.0));
        assert_eq!(listed.skipped.len(), 1);
        assert_eq!(listed.skipped[0].0.as_deref(), Some("lb2"));
    }

    #[test]
    fn lists_read_from_text_keep_no_spare_room() {
        let text = r#"[{"id": "p", "origins": [{"name": "o", "address": "192.0.2.1"}]},
                       {"id": "q", "origins": null}]"#;
        let listed: Listed<Pool> = serde_json::from_str(text).unwrap();
        let origins = listed.items[0].origins.as_ref().unwrap();
        assert_eq!((origins.len(), origins.capacity()), (1, 1));
        assert_eq!(listed.items[1].origins, None);
        let lb: LoadBalancer =
            serde_json::from_str(r#"{"default_pools": ["a", "b", "c"]}"#).unwrap();
        let pools = lb.default_pools.unwrap();
        assert_eq!((pools.len(), pools.capacity()), (3, 3));
    }

    #[test]
    fn a_result_that_is_not_a_list_fails_the_read() {
        for text in ["null", "{}", "\"pools\""] {
            let err = serde_json::from_str::<Listed<Pool>>(text).unwrap_err();
            assert!(
                err.to_string().contains("expected a sequence"),
                "{text}: {err}"
            );
        }
    }
}
