//! Part of the `gslb` binary, not of the library: the one module that turns a policy's target
//! into a concrete provider, and so the only code outside `providers/` and the tests that names
//! `gslb_route53` and `gslb_cloudflare` (`tests/layout.rs` checks it). Also `gslb provision`,
//! which is Route 53's alone.

use std::io::{self, Write};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context as _;
use gslb::cli::run::{Bind, BoxError};
use gslb::config::Settings;
use gslb::config::dataplane::{DataPlaneSettings, PoolVotes, health_threshold};
use gslb_cloudflare::{
    ApiToken, CloudflareAccount, CloudflareBinding, CloudflarePool, CloudflareProvider,
    CloudflareSettings, LoadBalancerRef,
};
use gslb_core::policy::{CloudflareTarget, Policy, Route53Target, Target};
use gslb_provider::AnyProvider;
use gslb_route53::NEW_CHECK;
use gslb_route53::{
    DataPlaneBinding, DataPlaneReport, ProvisionAction, ProvisionOptions, ProvisionReport,
    Route53Account, Route53Alias, Route53Binding, Route53Pool, Route53Provider, Route53Settings,
    VotePool, Voter,
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
                    2 * dp.instances.len(),
                    tally.created,
                    tally.updated,
                )
            })
            .collect();
        let pending = report.tallies.iter().any(|t| t.changed) || !report.records.is_noop();
        Ok(Some((lines, pending)))
    }

    /// A Route 53 target's records as a dry, adopting provision sees them: one line per pool
    /// whose record it would replace or adopt, with how it differs.
    async fn record_drift(&self, policy: &Policy) -> Vec<String> {
        let Target::Route53(t) = &policy.target else {
            return Vec::new();
        };
        let options = ProvisionOptions {
            dry_run: true,
            adopt: true,
        };
        let Ok(report) = self.route53(t).await.provision_with(options).await else {
            return Vec::new();
        };
        report
            .pools
            .iter()
            .filter_map(|p| match &p.action {
                ProvisionAction::Replaced { reason } | ProvisionAction::Adopted { reason } => {
                    Some(format!("pool {}'s record: {reason}", p.set_identifier))
                }
                ProvisionAction::Unchanged | ProvisionAction::Created => None,
            })
            .chain(
                report
                    .removed
                    .iter()
                    .map(|r| format!("{r} is no pool's record")),
            )
            .collect()
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
    /// verdict checks and waits for INSYNC, printing what it did (with `dry_run`, what it would
    /// do and the exact change batch, writing nothing); Cloudflare objects are made by their
    /// owners. Records gslb does not own are replaced only for a policy whose record name or
    /// service is in `adopt`. Every service is planned (reads only) before any is written, so
    /// a refusal writes nothing for any service. Returns whether anything was (or, in a dry
    /// run, would be) changed.
    ///
    /// # Errors
    /// An `adopt` name that is no Route 53 policy's record name or service (before any call);
    /// a Route 53 call failed (the service is named); some service has records or checks gslb
    /// does not own and `adopt` does not name it (each service, record and why is named, with
    /// the `--adopt` to run; a dry run prints its plan first).
    pub async fn provision(
        &self,
        policies: &[Policy],
        dry_run: bool,
        adopt: &[String],
        out: &mut dyn Write,
    ) -> anyhow::Result<bool> {
        for name in adopt {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            anyhow::ensure!(
                policies.iter().any(|p| adopt_names(p).contains(&name)),
                "--adopt {name}: no Route 53 policy has that record name or service"
            );
        }
        let mut pending = false;
        let mut refused = Vec::new();
        let mut planned = Vec::new();
        let mut voting = Vec::new();
        for p in policies {
            let Target::Route53(t) = &p.target else {
                writeln!(
                    out,
                    "provisioned {}: nothing to do (Cloudflare pools and load balancers are made by their owners; gslb needs the gslb-managed tag in their descriptions)",
                    p.service
                )?;
                continue;
            };
            let adopt = adopt
                .iter()
                .any(|a| adopt_names(p).contains(&a.trim_end_matches('.').to_ascii_lowercase()));
            if let Some(dp) = self.settings.route53.data_plane_of(&p.service.0) {
                voting.push((p, t, dp, adopt));
                continue;
            }
            let provider = self.route53(t).await;
            let plan = provider
                .provision_with(ProvisionOptions {
                    dry_run: true,
                    adopt,
                })
                .await
                .with_context(|| format!("provisioning service {}", p.service))?;
            if !plan.needs_adopt.is_empty() {
                refused.push(refusal(&p.service.0, t, &plan.needs_adopt));
            }
            if dry_run {
                pending |= !plan.is_noop();
                print_report(out, &p.service.0, t, &plan, true)?;
            } else {
                planned.push((p, t, provider, adopt));
            }
        }
        settle_refusals(&refused, dry_run)?;
        for (p, t, dp, adopt) in voting {
            pending |= self
                .provision_votes(p, t, dp, ProvisionOptions { dry_run, adopt }, out)
                .await?;
        }
        for (p, t, provider, adopt) in planned {
            let options = ProvisionOptions {
                dry_run: false,
                adopt,
            };
            let report = provider
                .provision_with(options)
                .await
                .with_context(|| format!("provisioning service {}", p.service))?;
            pending |= !report.is_noop();
            print_report(out, &p.service.0, t, &report, false)?;
        }
        Ok(pending)
    }
}

/// What provisioning does with the services it would refuse (`refused`, one text each): a dry
/// run prints them and goes on (exit 2 for the changes pending, as `terraform plan
/// -detailed-exitcode`); a real run refuses before any write.
///
/// # Errors
/// Not a dry run and some service refused (each is named).
fn settle_refusals(refused: &[String], dry_run: bool) -> anyhow::Result<()> {
    if dry_run {
        for why in refused {
            eprintln!("{why}");
        }
        if !refused.is_empty() {
            eprintln!("a real run refuses these without --adopt; nothing was written (dry run)");
        }
        return Ok(());
    }
    anyhow::ensure!(
        refused.is_empty(),
        "{}\nnothing was changed, for any service: every service is checked before any is written",
        refused.join("\n"),
    );
    Ok(())
}

/// The names `--adopt` may give for policy `p`: its Route 53 record name (lowercase) and its
/// service; none for a Cloudflare policy.
fn adopt_names(p: &Policy) -> Vec<String> {
    match &p.target {
        Target::Route53(t) => vec![t.record_name.to_ascii_lowercase(), p.service.0.clone()],
        Target::Cloudflare(_) => Vec::new(),
    }
}

/// Why provisioning refuses `service` without `--adopt`: each object on its own line, then the
/// command that adopts them.
fn refusal(service: &str, t: &Route53Target, why: &[String]) -> String {
    format!(
        "service {service}: provision refuses to replace what gslb does not own without --adopt:\n  {}\n  \
         run `gslb provision --adopt {}` to replace them",
        why.join("\n  "),
        t.record_name
    )
}

/// Prints what provisioning did, or in a dry run would do, for `service`: one line per pool,
/// the change batch in a dry run, and what a real run would refuse without `--adopt`.
///
/// # Errors
/// `out` cannot be written (e.g. a closed pipe).
fn print_report(
    out: &mut dyn Write,
    service: &str,
    t: &Route53Target,
    report: &ProvisionReport,
    dry_run: bool,
) -> io::Result<()> {
    let verb = if dry_run {
        "would provision"
    } else {
        "provisioned"
    };
    if report.is_noop() {
        return writeln!(out, "{verb} {service}: nothing to change");
    }
    // A dry run without --adopt plans adoptions a real run would refuse.
    let refused = !report.needs_adopt.is_empty();
    for pool in &report.pools {
        let action = match &pool.action {
            ProvisionAction::Unchanged => "unchanged".to_owned(),
            ProvisionAction::Created => "record created".to_owned(),
            ProvisionAction::Replaced { reason } => format!("record replaced ({reason})"),
            ProvisionAction::Adopted { reason } if refused => {
                format!("would refuse without --adopt ({reason})")
            }
            ProvisionAction::Adopted { reason } => format!("record adopted ({reason})"),
        };
        let check = if pool.health_check_id == NEW_CHECK {
            "new verdict check".to_owned()
        } else if pool.created_health_check {
            format!("new verdict check {}", pool.health_check_id)
        } else {
            format!("verdict check {}", pool.health_check_id)
        };
        writeln!(
            out,
            "{verb} {service} {}: {action}; {check}",
            pool.set_identifier
        )?;
    }
    print_batch_and_refusals(out, service, t, report, (verb, dry_run))
}

/// The tail of a provisioning report: records deleted by adoption (or that would be, with
/// `--adopt`) and the change batch in a dry run.
///
/// # Errors
/// `out` cannot be written.
fn print_batch_and_refusals(
    out: &mut dyn Write,
    service: &str,
    t: &Route53Target,
    report: &ProvisionReport,
    (verb, dry_run): (&str, bool),
) -> io::Result<()> {
    let refused = !report.needs_adopt.is_empty();
    for removed in &report.removed {
        if refused {
            writeln!(
                out,
                "{verb} {service}: {removed} would be deleted only with --adopt (it is no pool's record)"
            )?;
        } else {
            writeln!(
                out,
                "{verb} {service}: {removed} deleted (adopted: it was no pool's record)"
            )?;
        }
    }
    if let Some(batch) = report.batch.as_ref().filter(|_| dry_run) {
        writeln!(
            out,
            "change batch for hosted zone {}:\n{batch}",
            t.hosted_zone_id
        )?;
    }
    Ok(())
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
        out: &mut dyn Write,
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
            writeln!(
                out,
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
            )?;
        }
        let dry = (verb, options.dry_run);
        print_batch_and_refusals(out, &p.service.0, t, &report.records, dry)?;
        for (set_id, id) in &report.unused {
            writeln!(
                out,
                "{verb} {} {set_id}: gslb's health check {id} is no longer carried by the record (a verdict check from verdict_check mode?); left in place: delete it once no other record uses it",
                p.service
            )?;
        }
        let changed = report.tallies.iter().any(|t| t.changed) || !report.records.is_noop();
        Ok(changed)
    }
}

/// The adapter's form of one pool's votes.
fn vote_pool(v: PoolVotes) -> VotePool {
    VotePool {
        set_identifier: v.set_identifier,
        drain_string: v.drain_string,
        serve_string: v.serve_string,
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
