//! [`Route53Provider`]: the [`Provider`] for one Route 53 failover pair.
//!
//! `observe` reads the pair's records and their verdict checks; `apply` inverts or un-inverts a
//! verdict check, fenced by its `HealthCheckVersion`. Neither ever writes a record: records
//! are made ahead of time by [`Route53Provider::provision`] (see [`crate::provision`]), so a
//! failover needs only health-check updates, which Route 53's data plane acts on.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use aws_sdk_route53::Client;
use gslb_provider::{
    Change, FailoverStyle, ObservedPool, ObservedState, Plan, PoolRef, Provider, ProviderError,
};

use crate::account::Route53Account;
use crate::api::Api;
use crate::records::{list_pair, role};
use crate::{Route53Binding, Route53Settings, checks};

/// Steers one Route 53 failover pair through gslb verdict checks.
///
/// Every API call is paced by its [`Route53Account`]'s one rate limiter and retried with
/// jittered backoff as [`Route53Settings`] says. Pool references are the records' set identifiers.
#[derive(Debug)]
pub struct Route53Provider {
    pub(crate) api: Arc<Api>,
    account: Route53Account,
    pub(crate) settings: Route53Settings,
    pub(crate) binding: Route53Binding,
    /// Verdict check id per pool, as learned by the last successful `observe`.
    check_ids: Mutex<BTreeMap<PoolRef, String>>,
}

impl Route53Provider {
    /// A provider using the standard AWS credential chain (see [`Route53Account::from_env`])
    /// with its own rate limiter. Bindings on one AWS account should share one
    /// [`Route53Account`] instead ([`Route53Provider::with_account`]).
    ///
    /// Credentials are not checked here: a missing or bad credential surfaces as
    /// [`ProviderError::Auth`] on the first call.
    pub async fn from_env(settings: Route53Settings, binding: Route53Binding) -> Self {
        let account = Route53Account::from_env(&settings).await;
        Self::with_account(&account, settings, binding)
    }

    /// The client [`Route53Provider::from_env`] builds: the standard credential chain,
    /// signing for `settings.region`, sending to `settings.endpoint_url` when set. Loading it
    /// costs milliseconds of CPU and a few hundred kB (an HTTPS client with its root
    /// certificates, a credentials cache): build one per process and share it between bindings
    /// with [`Route53Provider::new`] (a clone is cheap), not one per binding.
    ///
    /// The client carries its HTTP client explicitly (the SDK's default HTTPS client: rustls
    /// with aws-lc, the proxy from the environment): left to the SDK's default, every
    /// [`Route53Provider::new`] would build its own, each with its own copy of the root
    /// certificates (about 130 kB per binding).
    pub async fn client_from_env(settings: &Route53Settings) -> Client {
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .http_client(shared_https_client())
            .region(aws_sdk_route53::config::Region::new(
                settings.region.clone(),
            ));
        if let Some(url) = &settings.endpoint_url {
            loader = loader.endpoint_url(url);
        }
        Client::new(&loader.load().await)
    }

    /// A provider around an existing client (tests pass one with static credentials and an
    /// emulator's endpoint, or an `aws-smithy-mocks` client), with its own rate limiter.
    ///
    /// The client's configuration is kept except that its own retries are turned off (every
    /// attempt must pass this provider's rate limiter) and each attempt gets
    /// `settings.attempt_timeout`. `settings.endpoint_url` and `settings.region` are not
    /// applied: they are the client's business.
    pub fn new(client: Client, settings: Route53Settings, binding: Route53Binding) -> Self {
        let account = Route53Account::new(&client, &settings);
        Self::with_account(&account, settings, binding)
    }

    /// A provider for `binding` whose every call goes through `account`'s client and its one
    /// rate limiter, shared with every other binding on the account. `settings` gives the
    /// provisioning waits; its pacing and retry fields are the account's.
    pub fn with_account(
        account: &Route53Account,
        settings: Route53Settings,
        binding: Route53Binding,
    ) -> Self {
        Self {
            api: account.api.clone(),
            account: account.clone(),
            settings,
            binding,
            check_ids: Mutex::new(BTreeMap::new()),
        }
    }

    /// The binding this provider steers.
    pub fn binding(&self) -> &Route53Binding {
        &self.binding
    }

    fn ids(&self) -> MutexGuard<'_, BTreeMap<PoolRef, String>> {
        // A poisoned lock only means a panic elsewhere; the map itself is always whole.
        self.check_ids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads the pair: afresh (`max_age` zero: one `ListResourceRecordSets` from the pair's
    /// name and one `GetHealthCheck` per pool), or from the account's shared listings of the
    /// zone and the health checks, at most `max_age` old.
    async fn read(
        &self,
        max_age: Duration,
    ) -> Result<(ObservedState, BTreeMap<PoolRef, String>), ProviderError> {
        self.binding.validate()?;
        let b = &self.binding;
        let (listed, shared) = if max_age.is_zero() {
            (list_pair(&self.api, b).await?, None)
        } else {
            let listed = self.account.pair(b, max_age).await?;
            (listed, Some(self.account.health_checks(max_age).await?))
        };
        let mut state = ObservedState::default();
        let mut ids = BTreeMap::new();
        for (index, (pool, record)) in b.pools.iter().zip(listed).enumerate() {
            let want = role(index);
            let what = format!(
                "{} failover record {} {} with set identifier {:?} in hosted zone {}",
                want.as_str(),
                b.record_name,
                b.record_type,
                pool.set_identifier,
                b.hosted_zone_id
            );
            let record = record.ok_or_else(|| {
                ProviderError::NotFound(format!("no {what}; run `gslb provision`"))
            })?;
            if record.failover.as_ref() != Some(&want) {
                let got = record
                    .failover
                    .as_ref()
                    .map_or("not a failover record", |f| f.as_str());
                return Err(ProviderError::NotFound(format!(
                    "no {what} (found: {got}); run `gslb provision`"
                )));
            }
            let adopt = format!("run `gslb provision --adopt {}`", b.record_name);
            let id = record.health_check_id.ok_or_else(|| {
                ProviderError::Unowned(format!(
                    "{what} has no health check, so it is not gslb's; {adopt}"
                ))
            })?;
            let check = match &shared {
                None => checks::get(&self.api, &id).await,
                Some(all) => all.get(&id).map_or_else(
                    || {
                        Err(ProviderError::NotFound(format!(
                            "health check {id} does not exist"
                        )))
                    },
                    checks::verdict,
                ),
            };
            let check = check.map_err(|e| match e {
                ProviderError::NotFound(m) => {
                    ProviderError::NotFound(format!("{m} (used by {what}); {adopt}"))
                }
                ProviderError::Unowned(m) => {
                    ProviderError::Unowned(format!("{what}: {m}; {adopt}"))
                }
                other => other,
            })?;
            if let Some((other, _)) = ids.iter().find(|(_, used)| **used == check.id) {
                return Err(ProviderError::Invalid(format!(
                    "the {what} and pool {other}'s record share verdict check {}, so gslb cannot \
                     move one pool without the other; run `gslb provision` to give each pool its own",
                    check.id
                )));
            }
            state.pools.insert(
                pool.set_identifier.clone(),
                ObservedPool {
                    enabled: !check.inverted,
                    version: Some(check.version.to_string()),
                    healthy: None,
                },
            );
            ids.insert(pool.set_identifier.clone(), check.id);
        }
        Ok((state, ids))
    }
}

/// The SDK's default HTTPS client (as `aws-smithy-runtime` builds it for the current behavior
/// version: rustls with aws-lc, the proxy from the environment), built once here so that every
/// client made from one configuration shares it and its connectors.
fn shared_https_client() -> aws_sdk_route53::config::SharedHttpClient {
    use aws_smithy_http_client::proxy::ProxyConfig;
    use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
    use aws_smithy_http_client::{Builder, ConnectorBuilder};
    Builder::new().build_with_connector_fn(|settings, components| {
        let mut connector =
            ConnectorBuilder::default().tls_provider(Provider::Rustls(CryptoMode::AwsLc));
        connector.set_connector_settings(settings.cloned());
        if let Some(components) = components {
            connector.set_sleep_impl(components.sleep_impl());
        }
        connector.set_proxy_config(Some(ProxyConfig::from_env()));
        connector.build()
    })
}

impl Provider for Route53Provider {
    fn name(&self) -> &'static str {
        "route53"
    }

    fn style(&self) -> FailoverStyle {
        FailoverStyle::Enablement
    }

    /// One `ListResourceRecordSets` (more pages only if the pair straddles a page) and one
    /// `GetHealthCheck` per pool. `order` is `None`: the order is fixed by PRIMARY/SECONDARY.
    ///
    /// # Errors
    /// [`ProviderError::NotFound`] when a record is missing or has the wrong role (run `gslb
    /// provision`), or its check is gone; [`ProviderError::Unowned`] when a record has no
    /// health check or one that is not gslb's (run `gslb provision --adopt <record name>`);
    /// [`ProviderError::Invalid`] when the binding is malformed, a verdict check is
    /// `Disabled`, or two pools' records share one verdict check (naming both); transport
    /// classes otherwise.
    async fn observe(&self) -> Result<ObservedState, ProviderError> {
        self.observe_within(Duration::ZERO).await
    }

    /// As `observe` for `max_age` zero; otherwise from the account's shared listings (one
    /// `ListResourceRecordSets` of the whole zone, all pages, and one `ListHealthChecks`,
    /// shared by every binding of the [`Route53Account`]) at most `max_age` old.
    ///
    /// # Errors
    /// As `observe`.
    async fn observe_within(&self, max_age: Duration) -> Result<ObservedState, ProviderError> {
        match self.read(max_age).await {
            Ok((state, ids)) => {
                *self.ids() = ids;
                Ok(state)
            }
            Err(e) => {
                self.ids().clear();
                Err(e)
            }
        }
    }

    /// One `UpdateHealthCheck` per [`Change::SetEnabled`], in plan order: `Inverted =
    /// !enabled`, fenced by `HealthCheckVersion = expected_version`.
    ///
    /// # Errors
    /// [`ProviderError::Invalid`] for a [`Change::SetOrder`] (checked before any write: the
    /// order is fixed at Route 53) or a version that is not a number;
    /// [`ProviderError::NotFound`] for a pool not in the binding; [`ProviderError::Conflict`]
    /// when the version moved, when the change has no version, or when no observe has yet
    /// learned the pool's check id (re-observe and re-plan). Changes before the failing one
    /// stay applied.
    async fn apply(&self, plan: &Plan) -> Result<(), ProviderError> {
        if plan.iter().any(|c| matches!(c, Change::SetOrder { .. })) {
            return Err(ProviderError::Invalid(
                "Route 53 serves in the fixed PRIMARY/SECONDARY order; SetOrder cannot be applied"
                    .to_owned(),
            ));
        }
        for change in plan {
            let Change::SetEnabled {
                pool,
                enabled,
                expected_version,
            } = change
            else {
                continue;
            };
            if !self.binding.pools.iter().any(|p| &p.set_identifier == pool) {
                return Err(ProviderError::NotFound(format!(
                    "pool {pool} is not in the route53 binding"
                )));
            }
            let id = self.ids().get(pool).cloned().ok_or_else(|| {
                ProviderError::Conflict(format!(
                    "verdict check of pool {pool} not known; observe first"
                ))
            })?;
            let version = expected_version.as_deref().ok_or_else(|| {
                ProviderError::Conflict(format!("change to pool {pool} carries no version"))
            })?;
            let version = version.parse::<i64>().map_err(|_| {
                ProviderError::Invalid(format!(
                    "pool {pool}: {version:?} is not a HealthCheckVersion"
                ))
            })?;
            let set = checks::set_inverted(&self.api, &id, version, !enabled).await;
            self.account.wrote(&self.binding.hosted_zone_id);
            set?;
            tracing::info!(pool, enabled, check = %id, version, "route53 verdict check updated");
        }
        Ok(())
    }
}
