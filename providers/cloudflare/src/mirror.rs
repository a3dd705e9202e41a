//! What gslb keeps of a List Load Balancers and a List Pools between resyncs: per item only
//! the fields the provider reads, never the parsed model with its unknown fields.
//!
//! At 5,000 services on one token the account's pool list holds 10,000 pools and the zone's
//! list 5,000 load balancers, for as long as the shared read lives. Kept as the models
//! ([`Pool`], [`LoadBalancer`], whose `extra` map holds every unknown field as a JSON tree),
//! that was 13.0 MB for the pools and 6.8 MB for the load balancers (1,297 and 1,367 bytes
//! each, counted with a counting allocator on `gslb-bench`'s fixture); kept as [`PoolSeen`]
//! and [`LoadBalancerSeen`], 1.2 MB and 1.7 MB (117 and 336 bytes each). gslb never writes a
//! listed object back (a write PATCHes only `default_pools`, `steering_policy`,
//! `description` or `enabled`, built from scratch), so nothing else of it is needed.
//!
//! Each item is still parsed as its full model first (`#[serde(from)]`), so an item the
//! models refuse is skipped exactly as before ([`crate::models::Listed`]).

use std::sync::Arc;

use serde::Deserialize;

use crate::MANAGED_TAG;
use crate::models::{Listed, LoadBalancer, Pool};

/// Whether a `description` carries [`MANAGED_TAG`].
pub(crate) fn managed(description: Option<&str>) -> bool {
    description.is_some_and(|d| d.contains(MANAGED_TAG))
}

/// What the provider reads of a listed load balancer: 336 bytes for the benchmark's (two
/// pools, a one-line description).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "LoadBalancer")]
pub(crate) struct LoadBalancerSeen {
    /// `id` (shared with a binding that learns it from here).
    pub(crate) id: Option<Arc<str>>,
    /// `name`.
    pub(crate) name: Option<Box<str>>,
    /// `description` (shared with the binding that keeps it for a stamped write).
    pub(crate) description: Option<Arc<str>>,
    /// The order it serves in as gslb judges it ([`LoadBalancer::serving_order`]).
    pub(crate) order: Box<[Box<str>]>,
    /// `fallback_pool` (shared with the binding that keeps it).
    pub(crate) fallback_pool: Option<Arc<str>>,
}

impl From<LoadBalancer> for LoadBalancerSeen {
    fn from(lb: LoadBalancer) -> Self {
        Self {
            order: lb.serving_order().into_iter().map(Box::from).collect(),
            id: lb.id.map(Arc::from),
            name: lb.name.map(Box::from),
            description: lb.description.map(Arc::from),
            fallback_pool: lb.fallback_pool.map(Arc::from),
        }
    }
}

/// What the provider reads of a listed pool: 117 bytes for the benchmark's.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "Pool")]
pub(crate) struct PoolSeen {
    /// `id`.
    pub(crate) id: Option<Box<str>>,
    /// `name`.
    pub(crate) name: Option<Box<str>>,
    /// Whether its `description` carries [`MANAGED_TAG`].
    pub(crate) managed: bool,
    /// [`Pool::is_enabled`].
    pub(crate) enabled: bool,
    /// `healthy`.
    pub(crate) healthy: Option<bool>,
    /// `modified_on`.
    pub(crate) modified_on: Option<Box<str>>,
}

impl From<Pool> for PoolSeen {
    fn from(p: Pool) -> Self {
        Self {
            managed: managed(p.description.as_deref()),
            enabled: p.is_enabled(),
            id: p.id.map(Box::from),
            name: p.name.map(Box::from),
            healthy: p.healthy,
            modified_on: p.modified_on.map(Box::from),
        }
    }
}

/// A zone's load balancers, as one List Load Balancers returned them.
#[derive(Debug)]
pub(crate) struct ZoneLoadBalancers {
    /// Every load balancer that parsed, in listed order.
    pub(crate) items: Box<[LoadBalancerSeen]>,
    /// Positions in `items` of those with an id, sorted by id (listed order among equal
    /// ids): every binding of the zone looks its own up in the one shared list, so a scan
    /// each would cost bindings x load balancers per round of reads (issue 14: 25 million at
    /// 5,000 services).
    by_id: Box<[u32]>,
}

impl ZoneLoadBalancers {
    /// The list kept from `listed`.
    pub(crate) fn new(listed: Listed<LoadBalancerSeen>) -> Self {
        let items = listed.items.into_boxed_slice();
        let mut by_id: Vec<u32> = (0..items.len())
            .filter_map(|i| items[i].id.as_ref().and(u32::try_from(i).ok()))
            .collect();
        by_id.sort_by(|&a, &b| items[a as usize].id.cmp(&items[b as usize].id));
        Self {
            items,
            by_id: by_id.into_boxed_slice(),
        }
    }

    /// The first listed load balancer with id `id`.
    pub(crate) fn get(&self, id: &str) -> Option<&LoadBalancerSeen> {
        let id_at = |i: u32| self.items[i as usize].id.as_deref();
        let at = self.by_id.partition_point(|&i| id_at(i) < Some(id));
        let &i = self.by_id.get(at)?;
        (id_at(i) == Some(id)).then(|| &self.items[i as usize])
    }
}

/// An account's pools, as one List Pools returned them.
#[derive(Debug)]
pub(crate) struct AccountPools {
    /// Pools that parsed and have an id, sorted by id; of pools listed with the same id, the
    /// last.
    by_id: Box<[PoolSeen]>,
    /// Listed pools that did not parse: their id (when readable) and why.
    pub(crate) skipped: Vec<(Option<String>, String)>,
}

impl AccountPools {
    /// The list kept from `listed`.
    pub(crate) fn new(listed: Listed<PoolSeen>) -> Self {
        let mut by_id = listed.items;
        by_id.retain(|p| p.id.is_some());
        by_id.sort_by(|a, b| a.id.cmp(&b.id));
        by_id.dedup_by(|next, kept| {
            let same = next.id == kept.id;
            if same {
                std::mem::swap(next, kept);
            }
            same
        });
        let mut skipped = listed.skipped;
        skipped.shrink_to_fit();
        Self {
            by_id: by_id.into_boxed_slice(),
            skipped,
        }
    }

    /// Pool `id`.
    pub(crate) fn get(&self, id: &str) -> Option<&PoolSeen> {
        let i = self
            .by_id
            .binary_search_by(|p| p.id.as_deref().cmp(&Some(id)))
            .ok()?;
        Some(&self.by_id[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_id_finds_the_first_load_balancer_and_the_last_pool() {
        let lbs: Listed<LoadBalancerSeen> = serde_json::from_str(
            r#"[{"id": "b", "name": "first"}, {"name": "no id"}, {"id": "a"},
                {"id": "b", "name": "second"}, {"id": "c", "default_pools": "bad"}]"#,
        )
        .unwrap();
        let lbs = ZoneLoadBalancers::new(lbs);
        assert_eq!(lbs.items.len(), 4);
        assert_eq!(lbs.get("b").unwrap().name.as_deref(), Some("first"));
        assert_eq!(lbs.get("a").unwrap().id.as_deref(), Some("a"));
        assert_eq!(lbs.get("c"), None);
        assert_eq!(lbs.get(""), None);
        let pools: Listed<PoolSeen> = serde_json::from_str(
            r#"[{"id": "q", "name": "first"}, {"name": "no id"}, {"id": "p"},
                {"id": "q", "name": "second"}, {"id": "r", "enabled": "bad"}]"#,
        )
        .unwrap();
        let pools = AccountPools::new(pools);
        assert_eq!(pools.get("q").unwrap().name.as_deref(), Some("second"));
        assert!(pools.get("p").is_some());
        assert_eq!(pools.get("r"), None);
        assert_eq!(pools.skipped.len(), 1);
    }

    #[test]
    fn a_listed_item_keeps_what_the_provider_reads() {
        let lb: LoadBalancerSeen = serde_json::from_str(
            r#"{"id": "lb", "name": "web.example.com", "description": "web [x]",
                "default_pools": ["a", "b"], "fallback_pool": "b", "steering_policy": "off",
                "session_affinity": "none"}"#,
        )
        .unwrap();
        assert_eq!(&*lb.order, [Box::from("a"), Box::from("b")]);
        assert_eq!(lb.fallback_pool.as_deref(), Some("b"));
        assert_eq!(lb.description.as_deref(), Some("web [x]"));
        let geo: LoadBalancerSeen =
            serde_json::from_str(r#"{"default_pools": ["a"], "region_pools": {"WNAM": ["a"]}}"#)
                .unwrap();
        assert!(geo.order.is_empty());
        let pool: PoolSeen = serde_json::from_str(&format!(
            r#"{{"id": "p", "description": "x [{MANAGED_TAG}]", "healthy": false,
                "modified_on": "2026-01-01T00:00:00Z", "origins": []}}"#
        ))
        .unwrap();
        assert!(pool.managed && pool.enabled);
        assert_eq!(pool.healthy, Some(false));
        assert_eq!(pool.modified_on.as_deref(), Some("2026-01-01T00:00:00Z"));
        let pool: PoolSeen = serde_json::from_str(r#"{"enabled": false}"#).unwrap();
        assert!(!pool.managed && !pool.enabled);
    }
}
