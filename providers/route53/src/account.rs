//! [`Route53Account`]: what every binding on one AWS account shares: the SDK client, one
//! rate limiter, and the shared resync reads ([`SharedRead`]): one listing of each hosted
//! zone's records and one `ListHealthChecks` of the account per resync, whatever the number
//! of services. Route 53 allows five API requests per second per AWS account (Route 53
//! Developer Guide, "Quotas", "Number of requests to the Route 53 API: five requests per
//! second per AWS account"), so a limiter per binding lets six services exceed it; one per
//! account, at [`Route53Settings::requests_per_second`], cannot.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use aws_sdk_route53::Client;
use aws_sdk_route53::types::{HealthCheck, ResourceRecordSet};
use gslb_provider::{ProviderError, SharedRead};

use crate::api::Api;
use crate::records::normalize_name;
use crate::{Route53Binding, Route53Settings};

/// The shared reads of one account.
#[derive(Debug, Default)]
struct Reads {
    /// Every record of a hosted zone, by zone id.
    zones: Mutex<BTreeMap<String, Arc<SharedRead<Vec<ResourceRecordSet>>>>>,
    /// Every health check of the account, by id.
    checks: SharedRead<BTreeMap<String, HealthCheck>>,
}

/// The client and rate limiter of one AWS account; make one per account (per credential
/// chain) and hand it to each [`crate::Route53Provider::with_account`].
#[derive(Debug, Clone)]
pub struct Route53Account {
    pub(crate) api: Arc<Api>,
    reads: Arc<Reads>,
}

impl Route53Account {
    /// The account of the standard AWS credential chain (environment, shared config and
    /// credentials files, web identity, ECS and EC2 instance metadata) through `aws-config`,
    /// signing for `settings.region` and sending to `settings.endpoint_url` when set, paced at
    /// `settings.requests_per_second` for every binding together.
    pub async fn from_env(settings: &Route53Settings) -> Self {
        Self::new(
            &crate::Route53Provider::client_from_env(settings).await,
            settings,
        )
    }

    /// The account `client` signs for, paced as `settings` says (see
    /// [`crate::Route53Provider::new`] for what is kept of the client's configuration).
    pub fn new(client: &Client, settings: &Route53Settings) -> Self {
        Self {
            api: Arc::new(Api::new(client, settings)),
            reads: Arc::default(),
        }
    }

    /// `binding`'s records, per pool in binding order (`None` when missing), from a listing of
    /// its whole hosted zone started at most `max_age` ago, shared by the zone's bindings.
    ///
    /// # Errors
    /// As `Api::call`; `NoSuchHostedZone` is [`ProviderError::NotFound`].
    pub(crate) async fn pair(
        &self,
        binding: &Route53Binding,
        max_age: Duration,
    ) -> Result<Vec<Option<ResourceRecordSet>>, ProviderError> {
        let zone = &binding.hosted_zone_id;
        let read = {
            let mut zones = self
                .reads
                .zones
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            zones.entry(zone.clone()).or_default().clone()
        };
        let all = read.get(max_age, || self.list_zone(zone)).await?;
        let name = normalize_name(&binding.record_name);
        Ok(binding
            .pools
            .iter()
            .map(|pool| {
                all.iter()
                    .find(|r| {
                        r.set_identifier.as_deref() == Some(pool.set_identifier.as_str())
                            && r.r#type.as_str() == binding.record_type
                            && normalize_name(&r.name) == name
                    })
                    .cloned()
            })
            .collect())
    }

    /// Every health check of the account from a `ListHealthChecks` started at most `max_age`
    /// ago, shared by every binding.
    ///
    /// # Errors
    /// As `Api::call`.
    pub(crate) async fn health_checks(
        &self,
        max_age: Duration,
    ) -> Result<Arc<BTreeMap<String, HealthCheck>>, ProviderError> {
        self.reads.checks.get(max_age, || self.list_checks()).await
    }

    /// Drops the shared reads after a write through any binding.
    pub(crate) fn wrote(&self, zone: &str) {
        self.reads.checks.invalidate();
        let read = self
            .reads
            .zones
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(zone)
            .cloned();
        if let Some(r) = read {
            r.invalidate();
        }
    }

    async fn list_zone(&self, zone: &str) -> Result<Vec<ResourceRecordSet>, ProviderError> {
        let mut all = Vec::new();
        let mut start = None;
        loop {
            let from = start.clone();
            let out = self
                .api
                .call("ListResourceRecordSets", |c| {
                    let (name, ty, id) = match from.clone() {
                        Some((n, t, i)) => (Some(n), Some(t), i),
                        None => (None, None, None),
                    };
                    c.list_resource_record_sets()
                        .hosted_zone_id(zone)
                        .set_start_record_name(name)
                        .set_start_record_type(ty)
                        .set_start_record_identifier(id)
                        .send()
                })
                .await?;
            all.extend(out.resource_record_sets);
            match (out.is_truncated, out.next_record_name, out.next_record_type) {
                (true, Some(name), Some(ty)) => {
                    start = Some((name, ty, out.next_record_identifier));
                }
                _ => return Ok(all),
            }
        }
    }

    async fn list_checks(&self) -> Result<BTreeMap<String, HealthCheck>, ProviderError> {
        let mut all = BTreeMap::new();
        let mut marker: Option<String> = None;
        loop {
            let from = marker.clone();
            let out = self
                .api
                .call("ListHealthChecks", |c| {
                    c.list_health_checks().set_marker(from.clone()).send()
                })
                .await?;
            all.extend(out.health_checks.into_iter().map(|hc| (hc.id.clone(), hc)));
            match (out.is_truncated, out.next_marker) {
                (true, Some(next)) => marker = Some(next),
                _ => return Ok(all),
            }
        }
    }
}
