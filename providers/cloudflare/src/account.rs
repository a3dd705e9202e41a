//! [`CloudflareAccount`]: what every binding on one API token shares: the HTTP client with its
//! one rate limiter (Cloudflare counts 1,200 requests per 5 minutes per token, Cloudflare API
//! docs, "Rate limits"), and one shared read of each zone's load balancers and of each
//! account's pools ([`SharedRead`]). With it, a resync of every binding on the token costs one
//! List Load Balancers per zone and one List Pools per account, whatever the number of
//! services, and the adoption reads at start-up are one such pair too.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use gslb_provider::{ProviderError, SharedRead};
use reqwest::Method;

use crate::CloudflareSettings;
use crate::client::Api;
use crate::mirror::{AccountPools, ZoneLoadBalancers};
use crate::models::Listed;

/// Shared reads by zone or account id.
type Reads<T> = Mutex<BTreeMap<String, Arc<SharedRead<T>>>>;

/// Everything the bindings on one API token share; make one per token and hand it to each
/// [`crate::CloudflareProvider::with_account`].
#[derive(Debug)]
pub struct CloudflareAccount {
    pub(crate) api: Api,
    zones: Reads<ZoneLoadBalancers>,
    accounts: Reads<AccountPools>,
}

fn read_of<T>(reads: &Reads<T>, key: &str) -> Arc<SharedRead<T>> {
    // A poisoned lock only means a panic elsewhere; the map itself is always whole.
    let mut map = reads.lock().unwrap_or_else(PoisonError::into_inner);
    map.entry(key.to_owned()).or_default().clone()
}

impl CloudflareAccount {
    /// The client (and rate limiter) for `settings`' token. Nothing is sent yet.
    ///
    /// # Errors
    /// [`ProviderError::Invalid`] when the HTTP client cannot be built.
    pub fn new(settings: CloudflareSettings) -> Result<Self, ProviderError> {
        Ok(Self {
            api: Api::new(settings)?,
            zones: Mutex::default(),
            accounts: Mutex::default(),
        })
    }

    /// `zone`'s load balancers from a List Load Balancers started at most `max_age` ago (or
    /// after this call, for `Duration::ZERO`).
    pub(crate) async fn load_balancers(
        &self,
        zone: &str,
        max_age: Duration,
    ) -> Result<Arc<ZoneLoadBalancers>, ProviderError> {
        let path = format!("/zones/{zone}/load_balancers");
        read_of(&self.zones, zone)
            .get(max_age, || async {
                let listed = self
                    .api
                    .call("list load balancers", Method::GET, &path, None)
                    .await?;
                Ok(ZoneLoadBalancers::new(listed))
            })
            .await
    }

    /// `account`'s pools from a List Pools started at most `max_age` ago (or after this
    /// call, for `Duration::ZERO`).
    pub(crate) async fn pools(
        &self,
        account: &str,
        max_age: Duration,
    ) -> Result<Arc<AccountPools>, ProviderError> {
        let path = format!("/accounts/{account}/load_balancers/pools");
        read_of(&self.accounts, account)
            .get(max_age, || async {
                let listed: Listed<_> = self
                    .api
                    .call("list pools", Method::GET, &path, None)
                    .await?;
                for (id, why) in &listed.skipped {
                    tracing::warn!(pool = id.as_deref(), error = %why, "skipping a pool Cloudflare listed that gslb cannot read");
                }
                Ok(AccountPools::new(listed))
            })
            .await
    }

    /// Drops the shared reads of `zone` and `account` after a write there.
    pub(crate) fn wrote(&self, zone: &str, account: &str) {
        read_of(&self.zones, zone).invalidate();
        read_of(&self.accounts, account).invalidate();
    }
}
