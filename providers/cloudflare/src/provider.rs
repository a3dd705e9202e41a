//! [`CloudflareProvider`]: the [`Provider`] for one Cloudflare load balancer.
//!
//! `observe` reads the zone's load balancers and the account's pools, each list shared by every
//! binding on the token ([`CloudflareAccount`]). `apply` PATCHes the load balancer's
//! `default_pools` (with `steering_policy: "off"`) or one pool's `enabled`, and reads the
//! object back: Cloudflare has no ETag or If-Match, so
//! a read-back that does not show the write is the only fence and is reported as
//! [`ProviderError::Conflict`]. Nothing else is ever written: no origins, no monitors, no other
//! field of the load balancer.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use gslb_provider::{
    Change, FailoverStyle, ObservedPool, ObservedState, Plan, PoolRef, Provider, ProviderError,
    Stamp,
};
use reqwest::Method;
use serde::de::IgnoredAny;
use serde_json::json;

use crate::account::CloudflareAccount;
use crate::client::Api;
use crate::mirror::{LoadBalancerSeen, ZoneLoadBalancers, managed};
use crate::models::{LoadBalancer, Pool};
use crate::{CloudflareBinding, CloudflareSettings, LoadBalancerRef, MANAGED_TAG, epoch};

/// Steers one Cloudflare load balancer through its `default_pools` order.
///
/// Pool references are Cloudflare pool ids. Every call is paced by the token's one rate limiter
/// ([`CloudflareSettings::requests_per_window`], in its [`CloudflareAccount`]); see [`crate`]
/// for what is written.
#[derive(Debug)]
pub struct CloudflareProvider {
    account: Arc<CloudflareAccount>,
    binding: CloudflareBinding,
    /// The load balancer's id once resolved from its name. This and the next two share
    /// their text with the zone's kept list (`mirror`) they were read from.
    lb_id: Mutex<Option<Arc<str>>>,
    /// The fallback pool seen by the last successful observe.
    fallback: Mutex<Option<Arc<str>>>,
    /// The load balancer's `description` seen by the last successful observe or read-back,
    /// which a stamped write keeps (see [`epoch`]).
    description: Mutex<Option<Arc<str>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means a panic elsewhere; the value itself is always whole.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl CloudflareProvider {
    /// A provider for `binding` with its own client and rate limiter. Nothing is sent yet: a
    /// bad token surfaces as [`ProviderError::Auth`] on the first call. Bindings on one token
    /// should share one [`CloudflareAccount`] instead ([`CloudflareProvider::with_account`]).
    ///
    /// # Errors
    /// [`ProviderError::Invalid`] when the binding is malformed or the HTTP client cannot be
    /// built.
    pub fn new(
        settings: CloudflareSettings,
        binding: CloudflareBinding,
    ) -> Result<Self, ProviderError> {
        Self::with_account(Arc::new(CloudflareAccount::new(settings)?), binding)
    }

    /// A provider for `binding` sharing `account`'s client, rate limiter and reads with every
    /// other binding on the same token.
    ///
    /// # Errors
    /// [`ProviderError::Invalid`] when the binding is malformed.
    pub fn with_account(
        account: Arc<CloudflareAccount>,
        binding: CloudflareBinding,
    ) -> Result<Self, ProviderError> {
        binding.validate()?;
        let lb_id = match &binding.load_balancer {
            LoadBalancerRef::Id(id) => Some(Arc::from(id.as_str())),
            LoadBalancerRef::Name(_) => None,
        };
        Ok(Self {
            account,
            binding,
            lb_id: Mutex::new(lb_id),
            fallback: Mutex::new(None),
            description: Mutex::new(None),
        })
    }

    /// The binding this provider steers.
    pub fn binding(&self) -> &CloudflareBinding {
        &self.binding
    }

    fn api(&self) -> &Api {
        &self.account.api
    }

    fn pools_path(&self) -> String {
        format!("/accounts/{}/load_balancers/pools", self.binding.account_id)
    }

    /// The binding's load balancer in `listed` (by id, or by name when named so).
    fn find_lb<'a>(&self, listed: &'a ZoneLoadBalancers) -> Option<&'a LoadBalancerSeen> {
        let known = lock(&self.lb_id).clone();
        match (&known, &self.binding.load_balancer) {
            (Some(id), _) => listed.get(id),
            (None, LoadBalancerRef::Name(name)) => listed.items.iter().find(|lb| {
                lb.name
                    .as_deref()
                    .is_some_and(|n| n.trim_end_matches('.').eq_ignore_ascii_case(name))
            }),
            (None, LoadBalancerRef::Id(_)) => None,
        }
    }

    fn not_found(&self) -> ProviderError {
        let zone = &self.binding.zone_id;
        match &self.binding.load_balancer {
            LoadBalancerRef::Name(name) => {
                // A renamed or recreated load balancer: resolve the name again next time.
                *lock(&self.lb_id) = None;
                ProviderError::NotFound(format!("no load balancer named {name} in zone {zone}"))
            }
            LoadBalancerRef::Id(id) => {
                ProviderError::NotFound(format!("no load balancer {id} in zone {zone}"))
            }
        }
    }

    async fn lb_path(&self) -> Result<String, ProviderError> {
        let zone = &self.binding.zone_id;
        let known = lock(&self.lb_id).clone();
        let id = match known {
            Some(id) => id,
            None => {
                // Any kept list will do to learn an id; a stale one shows as NotFound later.
                let listed = self.account.load_balancers(zone, Duration::MAX).await?;
                let id = self
                    .find_lb(&listed)
                    .and_then(|lb| lb.id.clone())
                    .ok_or_else(|| self.not_found())?;
                *lock(&self.lb_id) = Some(id.clone());
                id
            }
        };
        Ok(format!("/zones/{zone}/load_balancers/{id}"))
    }

    /// Keeps the load balancer's `description` (for a stamped write) and refuses it unless
    /// gslb manages it; `name` is its name, for the error.
    fn owned(
        &self,
        description: Option<Arc<str>>,
        name: Option<&str>,
        path: &str,
    ) -> Result<(), ProviderError> {
        let is_managed = managed(description.as_deref());
        *lock(&self.description) = description;
        if !is_managed {
            return Err(ProviderError::Unowned(format!(
                "load balancer {} ({path}): its description has no {MANAGED_TAG:?} tag",
                name.unwrap_or("?")
            )));
        }
        Ok(())
    }

    /// GET the load balancer (a write's read-back).
    async fn get_lb(&self) -> Result<LoadBalancer, ProviderError> {
        let path = self.lb_path().await?;
        let lb: LoadBalancer = self
            .api()
            .call("get load balancer", Method::GET, &path, None)
            .await
            .inspect_err(|e| {
                if matches!(e, ProviderError::NotFound(_)) {
                    let _ = self.not_found();
                }
            })?;
        let description = lb.description.as_deref().map(Arc::from);
        self.owned(description, lb.name.as_deref(), &path)?;
        Ok(lb)
    }

    /// The binding's load balancer from the zone's shared list (at most `max_age` old).
    async fn read_lb(&self, max_age: Duration) -> Result<LoadBalancerSeen, ProviderError> {
        let zone = &self.binding.zone_id;
        let listed = self.account.load_balancers(zone, max_age).await?;
        let lb = self
            .find_lb(&listed)
            .cloned()
            .ok_or_else(|| self.not_found())?;
        let id = lb.id.clone().unwrap_or_else(|| Arc::from(""));
        let path = format!("/zones/{zone}/load_balancers/{id}");
        *lock(&self.lb_id) = Some(id);
        self.owned(lb.description.clone(), lb.name.as_deref(), &path)?;
        Ok(lb)
    }

    /// The binding's pools from the account's shared list (at most `max_age` old), as
    /// observed: `version` is `modified_on`.
    async fn list_pools(
        &self,
        max_age: Duration,
    ) -> Result<BTreeMap<String, ObservedPool>, ProviderError> {
        let account = &self.binding.account_id;
        let listed = self.account.pools(account, max_age).await?;
        let mut out = BTreeMap::new();
        for id in self.binding.pool_ids() {
            if let Some((_, why)) = listed
                .skipped
                .iter()
                .find(|(s, _)| s.as_deref() == Some(&id))
            {
                return Err(ProviderError::Invalid(format!(
                    "pool {id} is listed but cannot be read: {why}"
                )));
            }
            let pool = listed.get(&id).ok_or_else(|| {
                ProviderError::NotFound(format!("pool {id} is not in account {account}"))
            })?;
            if !pool.managed {
                return Err(ProviderError::Unowned(format!(
                    "pool {id} ({}): its description has no {MANAGED_TAG:?} tag",
                    pool.name.as_deref().unwrap_or("?")
                )));
            }
            let seen = ObservedPool {
                enabled: pool.enabled,
                version: pool.modified_on.as_deref().map(str::to_owned),
                healthy: pool.healthy,
            };
            out.insert(id, seen);
        }
        Ok(out)
    }

    /// PATCHes `default_pools` (and, for a cluster writer, the `description` stamped with
    /// its epoch), then reads it back.
    async fn set_order(&self, to: &[PoolRef], stamp: Option<Stamp>) -> Result<(), ProviderError> {
        let path = self.lb_path().await?;
        let mut body = json!({ "default_pools": to, "steering_policy": "off" });
        if let Some(s) = stamp {
            let description = lock(&self.description).clone();
            body["description"] = json!(epoch::stamp(description.as_deref(), s.epoch));
            before_deadline(s)?;
        }
        self.api()
            .call::<IgnoredAny>("patch load balancer", Method::PATCH, &path, Some(&body))
            .await?;
        let back = self.get_lb().await?;
        let seen = back.serving_order();
        if seen != to {
            return Err(ProviderError::Conflict(format!(
                "read-back of load balancer {path}: default_pools {seen:?} (steering {}) \
                 instead of {to:?} written just before: another writer changed it",
                back.steering_policy.map_or_else(
                    || "not set".to_owned(),
                    |s| format!("{:?}", String::from(s))
                )
            )));
        }
        let seen = epoch::read(back.description.as_deref());
        if let Some(s) = stamp
            && seen != Some(s.epoch)
        {
            return Err(ProviderError::Conflict(format!(
                "read-back of load balancer {path}: writer epoch {} instead of {} written just \
                 before: another gslb writer changed it",
                seen.map_or_else(|| "none".to_owned(), |e| e.to_string()),
                s.epoch
            )));
        }
        Ok(())
    }

    async fn set_enabled(
        &self,
        pool: &str,
        enabled: bool,
        stamp: Option<Stamp>,
    ) -> Result<(), ProviderError> {
        // Last-line defence: gslb's write planner never plans this (the one rule, in
        // `gslb_core::planner::fallback`); an adapter must refuse it for any other caller.
        if !enabled && lock(&self.fallback).as_deref() == Some(pool) {
            return Err(ProviderError::Invalid(format!(
                "refusing to disable pool {pool}: it is the load balancer's fallback pool"
            )));
        }
        if !self.binding.pool_ids().iter().any(|p| p == pool) {
            return Err(ProviderError::Unowned(format!(
                "pool {pool} is not named by this binding"
            )));
        }
        let path = format!("{}/{pool}", self.pools_path());
        let body = json!({ "enabled": enabled });
        if let Some(s) = stamp {
            before_deadline(s)?;
        }
        self.api()
            .call::<IgnoredAny>("patch pool", Method::PATCH, &path, Some(&body))
            .await?;
        let back: Pool = self
            .api()
            .call("get pool", Method::GET, &path, None)
            .await?;
        if back.is_enabled() != enabled {
            return Err(ProviderError::Conflict(format!(
                "read-back of pool {pool}: enabled {} instead of {enabled} written just \
                 before: another writer changed it",
                back.is_enabled()
            )));
        }
        Ok(())
    }
}

impl Provider for CloudflareProvider {
    fn name(&self) -> &'static str {
        "cloudflare"
    }

    fn style(&self) -> FailoverStyle {
        FailoverStyle::Order
    }

    /// `false`: the Load Balancing API has no conditional write (no ETag, no If-Match).
    fn fences_writes(&self) -> bool {
        false
    }

    /// A fresh read: [`Provider::observe_within`] with `Duration::ZERO`.
    ///
    /// # Errors
    /// As [`Provider::observe_within`].
    async fn observe(&self) -> Result<ObservedState, ProviderError> {
        self.observe_within(Duration::ZERO).await
    }

    /// The binding's load balancer from one List Load Balancers of its zone and its pools
    /// from one List Pools of its account, both shared with every binding on the token's
    /// [`CloudflareAccount`] and at most `max_age` old. `order` is `default_pools` (empty when
    /// `steering_policy` is not `off`), `fallback` the `fallback_pool`, each pool's `version`
    /// its `modified_on`.
    ///
    /// # Errors
    /// [`ProviderError::Unowned`] when the load balancer or a named pool lacks the
    /// [`MANAGED_TAG`], or `default_pools` lists a pool the binding does not name;
    /// [`ProviderError::NotFound`] when one is missing; [`ProviderError::Invalid`] when a
    /// named pool cannot be read; transport classes otherwise.
    async fn observe_within(&self, max_age: Duration) -> Result<ObservedState, ProviderError> {
        let lb = self.read_lb(max_age).await?;
        let pools = self.list_pools(max_age).await?;
        let order: Vec<PoolRef> = lb.order.iter().map(|p| p.to_string()).collect();
        if let Some(foreign) = order.iter().find(|p| !pools.contains_key(*p)) {
            return Err(ProviderError::Unowned(format!(
                "load balancer {}: default_pools lists pool {foreign}, which the policy does \
                 not name; gslb only reorders pools it manages",
                lb.name.as_deref().unwrap_or("?")
            )));
        }
        let fallback = lb.fallback_pool.as_deref().map(str::to_owned);
        *lock(&self.fallback) = lb.fallback_pool;
        Ok(ObservedState {
            order: Some(order),
            pools,
            fallback,
            writer_epoch: epoch::read(lb.description.as_deref()),
            served: None,
        })
    }

    /// In plan order: [`Change::SetOrder`] → PATCH the load balancer with only
    /// `default_pools` and `steering_policy: "off"`; [`Change::SetEnabled`] → PATCH the pool
    /// with only `enabled`. Each write is read back.
    ///
    /// # Errors
    /// [`ProviderError::Conflict`] when a read-back does not show the write;
    /// [`ProviderError::Invalid`] for a plan that disables the fallback pool;
    /// [`ProviderError::Unowned`] for a pool the binding does not name; transport classes.
    async fn apply(&self, plan: &Plan) -> Result<(), ProviderError> {
        self.write(plan, None).await
    }

    /// As [`CloudflareProvider::apply`], and the load balancer PATCH also writes the
    /// `description` stamped with `stamp.epoch` ([`epoch::stamp`], the human text kept), which
    /// the read-back checks. No PATCH is sent at or after `stamp.deadline`. Pool PATCHes
    /// (drains) carry no stamp: pools may be shared by several load balancers.
    ///
    /// # Errors
    /// As `apply`; [`ProviderError::Conflict`] when the read-back shows another epoch;
    /// [`ProviderError::Transient`] when the deadline passed before a PATCH was sent.
    async fn apply_as(&self, plan: &Plan, stamp: Stamp) -> Result<(), ProviderError> {
        self.write(plan, Some(stamp)).await
    }
}

impl CloudflareProvider {
    async fn write(&self, plan: &Plan, stamp: Option<Stamp>) -> Result<(), ProviderError> {
        let mut written = Ok(());
        for change in plan {
            written = match change {
                Change::SetOrder { to, .. } => self.set_order(to, stamp).await,
                Change::SetEnabled { pool, enabled, .. } => {
                    self.set_enabled(pool, *enabled, stamp).await
                }
            };
            if written.is_err() {
                break;
            }
        }
        if !plan.is_empty() {
            // Whatever happened, the shared reads of the zone and account may be stale now.
            let b = &self.binding;
            self.account.wrote(&b.zone_id, &b.account_id);
        }
        written
    }
}

/// Refuses to send a write once the writer's deadline has passed (checked on the monotonic
/// clock right before each PATCH): a paused writer that wakes past its deadline sends nothing.
fn before_deadline(stamp: Stamp) -> Result<(), ProviderError> {
    if std::time::Instant::now() >= stamp.deadline {
        return Err(ProviderError::Transient(format!(
            "the write deadline of epoch {} passed before the request was sent",
            stamp.epoch
        )));
    }
    Ok(())
}
