//! Part of the `gslb` binary, not of the library: the one module that turns a policy's target
//! into a concrete provider, and so the only code outside `providers/` and the tests that names
//! `gslb_route53` and `gslb_cloudflare` (`tests/layout.rs` checks it). Also `gslb provision`,
//! which is Route 53's alone.

use std::sync::Arc;

use anyhow::Context as _;
use gslb::cli::run::{Bind, BoxError};
use gslb::config::Settings;
use gslb::config::dataplane::{DataPlaneSettings, PoolVotes, health_threshold};
use gslb_cloudflare::{
    ApiToken, CloudflareBinding, CloudflarePool, CloudflareProvider, CloudflareSettings,
    LoadBalancerRef,
};
use gslb_core::policy::{CloudflareTarget, Policy, Route53Target, Target};
use gslb_provider::AnyProvider;
use gslb_route53::{
    DataPlaneBinding, DataPlaneReport, ProvisionAction, ProvisionOptions, ProvisionReport,
    Route53Alias, Route53Binding, Route53Pool, Route53Provider, Route53Settings, VotePool, Voter,
};

/// Binds policies to the adapters, with the daemon settings' `[route53]` and `[cloudflare]`
/// tables. Every Route 53 binding shares one SDK client, built at the first.
pub struct Adapters<'a> {
    /// The daemon settings.
    settings: &'a Settings,
    /// The Route 53 client of `[route53]`, loaded once (a load per binding cost about 5 ms of
    /// CPU and 300 kB each: 34 s and 1.4 GB at 5,000 services, issue 14).
    route53: tokio::sync::OnceCell<gslb_route53::Client>,
}

impl<'a> Adapters<'a> {
    /// Adapters for `settings`.
    pub fn new(settings: &'a Settings) -> Self {
        Self {
            settings,
            route53: tokio::sync::OnceCell::new(),
        }
    }
}

impl Bind for Adapters<'_> {
    async fn bind(&self, policy: &Policy) -> Result<AnyProvider, BoxError> {
        Ok(match &policy.target {
            Target::Route53(t) => AnyProvider::new(Arc::new(self.route53(t).await)),
            Target::Cloudflare(t) => AnyProvider::new(Arc::new(self.cloudflare(t)?)),
        })
    }

    async fn data_plane(&self, policy: &Policy) -> Result<Option<(Vec<String>, bool)>, BoxError> {
        let (Target::Route53(t), Some(dp)) = (
            &policy.target,
            self.settings.route53.data_plane_of(&policy.service.0),
        ) else {
            return Ok(None);
        };
        let options = ProvisionOptions {
            dry_run: true,
            adopt: false,
        };
        let report = self.data_plane_report(policy, t, dp, options).await?;
        let want = health_threshold(dp.instances.len());
        let lines = report
            .tallies
            .iter()
            .zip(&report.records.pools)
            .map(|(tally, rec)| {
                let record = match &rec.action {
                    ProvisionAction::Unchanged => "carries it".to_owned(),
                    ProvisionAction::Created => "missing: provision creates it".to_owned(),
                    ProvisionAction::Replaced { reason } | ProvisionAction::Adopted { reason } => {
                        format!("to be corrected by provision ({reason})")
                    }
                };
                format!(
                    "record {}: tally check {} threshold {} (wanted {want} of {} vote checks), vote checks {} missing, {} to correct; record {record}",
                    tally.set_identifier,
                    tally.tally_check_id,
                    tally.health_threshold,
                    dp.instances.len(),
                    tally.created,
                    tally.updated,
                )
            })
            .collect();
        let pending = report.tallies.iter().any(|t| t.changed) || !report.records.is_noop();
        Ok(Some((lines, pending)))
    }
}

impl Adapters<'_> {
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
                    alias: p.alias_target.as_ref().map(|a| Route53Alias {
                        dns_name: a.dns_name.clone(),
                        hosted_zone_id: a.hosted_zone_id.clone(),
                        evaluate_target_health: a.evaluate_target_health,
                    }),
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
        let client = self
            .route53
            .get_or_init(|| Route53Provider::client_from_env(&r53))
            .await;
        Route53Provider::new(client.clone(), r53, binding)
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
        let cf = CloudflareSettings::configured(s.api_base.clone(), s.requests_per_window, token);
        Ok(CloudflareProvider::new(cf, binding)?)
    }

    /// `gslb provision`: creates or corrects each Route 53 policy's failover records and
    /// verdict checks and waits for INSYNC, printing what it did (with `dry_run`, what it would
    /// do and the exact change batch, writing nothing); Cloudflare objects are made by their
    /// owners. Records gslb does not own are replaced only for a policy whose record name or
    /// service is in `adopt`. Returns whether anything was (or, in a dry run, would be) changed.
    ///
    /// # Errors
    /// An `adopt` name that is no Route 53 policy's record name or service (before any call);
    /// a Route 53 call failed or provisioning refused a foreign record (the service is named).
    pub async fn provision(
        &self,
        policies: &[Policy],
        dry_run: bool,
        adopt: &[String],
    ) -> anyhow::Result<bool> {
        let names = |t: &Route53Target, p: &Policy| {
            [t.record_name.to_ascii_lowercase(), p.service.0.clone()]
        };
        for name in adopt {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            let known = policies.iter().any(|p| match &p.target {
                Target::Route53(t) => names(t, p).contains(&name),
                Target::Cloudflare(_) => false,
            });
            anyhow::ensure!(
                known,
                "--adopt {name}: no Route 53 policy has that record name or service"
            );
        }
        let mut pending = false;
        for p in policies {
            let Target::Route53(t) = &p.target else {
                println!(
                    "provisioned {}: nothing to do (Cloudflare pools and load balancers are made by their owners; gslb needs the gslb-managed tag in their descriptions)",
                    p.service
                );
                continue;
            };
            let options = ProvisionOptions {
                dry_run,
                adopt: adopt
                    .iter()
                    .any(|a| names(t, p).contains(&a.trim_end_matches('.').to_ascii_lowercase())),
            };
            if let Some(dp) = self.settings.route53.data_plane_of(&p.service.0) {
                pending |= self.provision_votes(p, t, dp, options).await?;
                continue;
            }
            let report = self
                .route53(t)
                .await
                .provision_with(options)
                .await
                .with_context(|| format!("provisioning service {}", p.service))?;
            pending |= !report.is_noop();
            print_report(&p.service.0, t, &report, dry_run);
        }
        Ok(pending)
    }
}

/// Prints what provisioning did, or in a dry run would do, for `service`: one line per pool,
/// the change batch in a dry run, and what a real run would refuse without `--adopt`.
fn print_report(service: &str, t: &Route53Target, report: &ProvisionReport, dry_run: bool) {
    let verb = if dry_run {
        "would provision"
    } else {
        "provisioned"
    };
    if report.is_noop() {
        println!("{verb} {service}: nothing to change");
        return;
    }
    for pool in &report.pools {
        let action = match &pool.action {
            ProvisionAction::Unchanged => "unchanged".to_owned(),
            ProvisionAction::Created => "record created".to_owned(),
            ProvisionAction::Replaced { reason } => format!("record replaced ({reason})"),
            ProvisionAction::Adopted { reason } => format!("record adopted ({reason})"),
        };
        let check = if pool.created_health_check {
            "new verdict check"
        } else {
            "verdict check"
        };
        println!(
            "{verb} {service} {}: {action}; {check} {}",
            pool.set_identifier, pool.health_check_id
        );
    }
    print_batch_and_refusals(service, t, report, (verb, dry_run));
}

/// The tail of a provisioning report: records deleted by adoption, the change batch in a dry
/// run, and what a real run would refuse without `--adopt`.
fn print_batch_and_refusals(
    service: &str,
    t: &Route53Target,
    report: &ProvisionReport,
    (verb, dry_run): (&str, bool),
) {
    for removed in &report.removed {
        println!("{verb} {service}: {removed} deleted (adopted: it was no pool's record)");
    }
    if let Some(batch) = report.batch.as_ref().filter(|_| dry_run) {
        println!(
            "change batch for hosted zone {}:\n{batch}",
            t.hosted_zone_id
        );
    }
    if !report.needs_adopt.is_empty() {
        println!("provision would refuse without --adopt {}:", t.record_name);
        for why in &report.needs_adopt {
            println!("  {why}");
        }
    }
}

impl Adapters<'_> {
    /// What data-plane provisioning of `p` did, or with `options.dry_run` would do.
    ///
    /// # Errors
    /// A vote secret cannot be read, or a Route 53 call failed.
    async fn data_plane_report(
        &self,
        p: &Policy,
        t: &Route53Target,
        dp: &DataPlaneSettings,
        options: ProvisionOptions,
    ) -> anyhow::Result<DataPlaneReport> {
        let names: Vec<(String, String)> = t
            .pools
            .iter()
            .map(|x| (x.pool.0.clone(), x.set_identifier.clone()))
            .collect();
        let votes = dp
            .pool_votes(&p.service.0, &names)
            .map_err(anyhow::Error::msg)?;
        let binding = DataPlaneBinding {
            pools: votes.into_iter().map(vote_pool).collect(),
            request_interval: i32::try_from(dp.request_interval.as_secs()).unwrap_or(30),
            failure_threshold: i32::try_from(dp.failure_threshold).unwrap_or(3),
            health_threshold: i32::try_from(health_threshold(dp.instances.len()))
                .unwrap_or(i32::MAX),
        };
        self.route53(t)
            .await
            .provision_data_plane(&binding, options)
            .await
            .with_context(|| format!("provisioning service {} (data-plane mode)", p.service))
    }

    /// `gslb provision` of a service in Route 53 data-plane mode: its vote and tally checks,
    /// then its records pointing at the tally checks (with `options.dry_run`: what it would
    /// create or correct and the record batch, writing nothing). Returns whether anything was
    /// (or would be) changed.
    ///
    /// # Errors
    /// A vote secret cannot be read, or a Route 53 call failed.
    async fn provision_votes(
        &self,
        p: &Policy,
        t: &Route53Target,
        dp: &DataPlaneSettings,
        options: ProvisionOptions,
    ) -> anyhow::Result<bool> {
        let report = self.data_plane_report(p, t, dp, options).await?;
        let verb = if options.dry_run {
            "would provision"
        } else {
            "provisioned"
        };
        let (created, corrected) = if options.dry_run {
            ("to create", "to correct")
        } else {
            ("created", "corrected")
        };
        for (tally, rec) in report.tallies.iter().zip(&report.records.pools) {
            let threshold = match tally.health_threshold {
                0 => {
                    "0 (permissive until every vote check has data: run provision again)".to_owned()
                }
                n => n.to_string(),
            };
            println!(
                "{verb} {} {}: record {}; tally check {} threshold {threshold}; vote checks {} {created}, {} {corrected}",
                p.service,
                tally.set_identifier,
                match &rec.action {
                    ProvisionAction::Unchanged => "unchanged".to_owned(),
                    ProvisionAction::Created => "created".to_owned(),
                    ProvisionAction::Replaced { reason } => format!("replaced ({reason})"),
                    ProvisionAction::Adopted { reason } => format!("adopted ({reason})"),
                },
                tally.tally_check_id,
                tally.created,
                tally.updated,
            );
        }
        let dry = (verb, options.dry_run);
        print_batch_and_refusals(&p.service.0, t, &report.records, dry);
        for (set_id, id) in &report.unused {
            println!(
                "{verb} {} {set_id}: gslb's health check {id} is no longer carried by the record (a verdict check from verdict_check mode?); left in place: delete it once no other record uses it",
                p.service
            );
        }
        let changed = report.tallies.iter().any(|t| t.changed) || !report.records.is_noop();
        Ok(changed)
    }
}

/// The adapter's form of one pool's votes.
fn vote_pool(v: PoolVotes) -> VotePool {
    VotePool {
        set_identifier: v.set_identifier,
        search_string: v.search_string,
        voters: v
            .targets
            .into_iter()
            .map(|t| Voter {
                instance: t.instance,
                https: t.https,
                host: t.host,
                port: t.port,
                path: t.path,
            })
            .collect(),
    }
}
