//! Part of the `gslb` binary, not of the library: the one module that turns a policy's target
//! into a concrete provider, and so the only code outside `providers/` and the tests that names
//! `gslb_route53` and `gslb_cloudflare` (`tests/layout.rs` checks it). Also `gslb provision`,
//! which is Route 53's alone.

use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context as _;
use gslb::cli::run::{Bind, BoxError};
use gslb::config::Settings;
use gslb_cloudflare::{
    ApiToken, CloudflareAccount, CloudflareBinding, CloudflarePool, CloudflareProvider,
    CloudflareSettings, LoadBalancerRef,
};
use gslb_core::policy::{CloudflareTarget, Policy, Route53Target, Target};
use gslb_provider::AnyProvider;
use gslb_route53::{
    ProvisionAction, Route53Account, Route53Binding, Route53Pool, Route53Provider, Route53Settings,
};

/// Binds policies to the adapters, with the daemon settings' `[route53]` and `[cloudflare]`
/// tables. Every binding shares one client and rate limiter per AWS account (the credential
/// chain's) and per Cloudflare token, and with it the shared reads (issue 14, item 5).
pub struct Adapters<'a> {
    /// The daemon settings.
    pub settings: &'a Settings,
    /// The Route 53 account of the credential chain, made on first use.
    route53: tokio::sync::OnceCell<Route53Account>,
    /// Cloudflare accounts by API base and token, made on first use (a rotated token file
    /// read at a reload gets its own).
    cloudflare: Mutex<Vec<CloudflareShared>>,
}

/// One Cloudflare account shared by the bindings on its API base and token.
struct CloudflareShared {
    api_base: String,
    token: ApiToken,
    account: Arc<CloudflareAccount>,
}

impl Bind for Adapters<'_> {
    async fn bind(&self, policy: &Policy) -> Result<AnyProvider, BoxError> {
        Ok(match &policy.target {
            Target::Route53(t) => AnyProvider::new(Arc::new(self.route53(t).await)),
            Target::Cloudflare(t) => AnyProvider::new(Arc::new(self.cloudflare(t)?)),
        })
    }
}

impl<'a> Adapters<'a> {
    /// Adapters for `settings`; no client is made yet.
    pub fn new(settings: &'a Settings) -> Self {
        Self {
            settings,
            route53: tokio::sync::OnceCell::new(),
            cloudflare: Mutex::new(Vec::new()),
        }
    }

    async fn route53(&self, t: &Route53Target) -> Route53Provider {
        let binding = Route53Binding {
            hosted_zone_id: t.hosted_zone_id.clone(),
            record_name: t.record_name.clone(),
            record_type: t.record_type.clone(),
            ttl: t.ttl,
            pools: t
                .pools
                .iter()
                .map(|p| Route53Pool {
                    set_identifier: p.set_identifier.clone(),
                    values: p.values.clone(),
                })
                .collect(),
        };
        let s = &self.settings.route53;
        let r53 = Route53Settings::configured(
            s.endpoint_url.clone(),
            s.region.clone(),
            s.requests_per_second,
            s.change_timeout,
        );
        let account = self
            .route53
            .get_or_init(|| Route53Account::from_env(&r53))
            .await;
        Route53Provider::with_account(account, r53, binding)
    }

    fn cloudflare(&self, t: &CloudflareTarget) -> Result<CloudflareProvider, BoxError> {
        let s = &self.settings.cloudflare;
        let token = ApiToken::from_file_or_env(s.token_file.as_deref(), &s.token_env)
            .context("no Cloudflare API token")?;
        let binding = CloudflareBinding {
            account_id: t.account_id.clone(),
            zone_id: t.zone_id.clone(),
            load_balancer: LoadBalancerRef::parse(&t.load_balancer),
            pools: t
                .pools
                .iter()
                .map(|p| CloudflarePool {
                    pool_id: p.pool_id.clone(),
                })
                .collect(),
        };
        let account = {
            let mut accounts = self
                .cloudflare
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let known = accounts
                .iter()
                .find(|a| a.api_base == s.api_base && a.token == token);
            match known {
                Some(a) => a.account.clone(),
                None => {
                    let cf = CloudflareSettings::configured(
                        s.api_base.clone(),
                        s.requests_per_window,
                        token.clone(),
                    );
                    let account = Arc::new(CloudflareAccount::new(cf)?);
                    accounts.push(CloudflareShared {
                        api_base: s.api_base.clone(),
                        token,
                        account: account.clone(),
                    });
                    account
                }
            }
        };
        Ok(CloudflareProvider::with_account(account, binding)?)
    }

    /// `gslb provision`: creates or corrects each Route 53 policy's failover records and
    /// verdict checks and waits for INSYNC, printing what it did; Cloudflare objects are made
    /// by their owners.
    ///
    /// # Errors
    /// A Route 53 call failed (the service is named).
    pub async fn provision(&self, policies: &[Policy]) -> anyhow::Result<()> {
        for p in policies {
            let Target::Route53(t) = &p.target else {
                println!(
                    "provisioned {}: nothing to do (Cloudflare pools and load balancers are made by their owners; gslb needs the gslb-managed tag in their descriptions)",
                    p.service
                );
                continue;
            };
            let report = self
                .route53(t)
                .await
                .provision()
                .await
                .with_context(|| format!("provisioning service {}", p.service))?;
            if report.is_noop() {
                println!("provisioned {}: nothing to change", p.service);
            }
            for pool in report.pools.iter().filter(|_| !report.is_noop()) {
                let action = match &pool.action {
                    ProvisionAction::Unchanged => "unchanged".to_owned(),
                    ProvisionAction::Created => "record created".to_owned(),
                    ProvisionAction::Replaced { reason } => format!("record replaced ({reason})"),
                };
                let check = if pool.created_health_check {
                    "new verdict check"
                } else {
                    "verdict check"
                };
                println!(
                    "provisioned {} {}: {action}; {check} {}",
                    p.service, pool.set_identifier, pool.health_check_id
                );
            }
        }
        Ok(())
    }
}
