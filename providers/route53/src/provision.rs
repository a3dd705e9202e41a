//! Provisioning: make the binding's PRIMARY/SECONDARY records and their verdict checks exist,
//! ahead of any failover, touching only what gslb owns ([`crate::ownership`]).
//!
//! Records are written only with a compare-and-swap change batch: `[DELETE <record exactly as
//! listed>, CREATE <desired>]` for a record that exists, `[CREATE]` for one that does not,
//! both pools in one atomic batch. Never UPSERT (it has no precondition), and never a DELETE
//! without its CREATE in the same batch, so the pair is never left without a record. A lost
//! race (`InvalidChangeBatch`) re-lists and re-plans.
//!
//! A record gslb does not own (no health check, a foreign or vanished one), a record at the
//! pair's name and type that is no pool's, and an Alias record that would become one with
//! values or back, are changed only with [`ProvisionOptions::adopt`]; otherwise provisioning
//! refuses, naming each, and writes nothing. A dry run plans and shows the batch, writing
//! nothing and creating no check.

use std::time::Duration;

use aws_sdk_route53::types::{
    Change, ChangeAction, ChangeBatch, ChangeInfo, ChangeStatus, ResourceRecordSet,
};
use gslb_provider::ProviderError;

use crate::Route53Provider;
use crate::batch::{self, change};
use crate::checks;
use crate::ownership::{self, Owner};
use crate::records::{desired_record, drift, kind, list_name_and_type, normalize_name, split_pair};

/// Change batches tried per [`Route53Provider::provision`] call before a lost race is
/// reported as [`ProviderError::Conflict`].
const CAS_ATTEMPTS: u32 = 3;

/// What a dry run shows as the health check of a record whose verdict check would be created.
pub const NEW_CHECK: &str = "(new gslb verdict check)";

/// How [`Route53Provider::provision_with`] runs. [`Default`]: write, adopt nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProvisionOptions {
    /// Plan and report the change batch without writing anything: no record change, no health
    /// check created (the batch names a new check [`NEW_CHECK`]).
    pub dry_run: bool,
    /// Replace records gslb does not own at the binding's name and type, and convert an Alias
    /// record to one with values or back (`gslb provision --adopt NAME`).
    pub adopt: bool,
}

/// What [`Route53Provider::provision`] did (or, in a dry run, would do), pool by pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProvisionReport {
    /// One entry per pool, in binding order (PRIMARY first).
    pub pools: Vec<PoolProvision>,
    /// The id of the change batch written, `None` when nothing was written (always in a dry
    /// run).
    pub change_id: Option<String>,
    /// The change batch written or, in a dry run, to be written, as the JSON `ChangeBatch` of
    /// `aws route53 change-resource-record-sets`; `None` when no record needs changing.
    pub batch: Option<String>,
    /// Records at the pair's name and type that are no pool's, deleted by an adopting run (or
    /// to be), each described as `record <name> <type> "<set identifier>"`.
    pub removed: Vec<String>,
    /// Dry run without adopt only: the objects a real run would refuse to touch, each with
    /// why; empty otherwise.
    pub needs_adopt: Vec<String>,
}

impl ProvisionReport {
    /// True when the run wrote (or would write) nothing: every record was already as the
    /// binding says, and no health check was (or would be) created.
    pub fn is_noop(&self) -> bool {
        self.change_id.is_none()
            && self.batch.is_none()
            && self
                .pools
                .iter()
                .all(|p| p.action == ProvisionAction::Unchanged && !p.created_health_check)
    }
}

/// What provisioning did for one pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolProvision {
    /// The pool's set identifier.
    pub set_identifier: String,
    /// What happened to its record.
    pub action: ProvisionAction,
    /// The verdict check the record now points at ([`NEW_CHECK`] in a dry run that would
    /// create one).
    pub health_check_id: String,
    /// Whether this run created (or would create) that verdict check (not inverted: the pool
    /// is enabled).
    pub created_health_check: bool,
}

/// What happened to one pool's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProvisionAction {
    /// The record was already as the binding says, pointing at a valid verdict check.
    Unchanged,
    /// There was no record with this set identifier; one was created.
    Created,
    /// A record gslb owns existed but differed; it was replaced by DELETE + CREATE.
    Replaced {
        /// How the old record differed, or why its health check was not usable.
        reason: String,
    },
    /// A record gslb did not own, or of the other kind (Alias / values), was replaced by
    /// DELETE + CREATE because `--adopt` named it. A foreign health check it used is left in
    /// place.
    Adopted {
        /// Whose it was and how it differed.
        reason: String,
    },
}

/// One pool as listed: its record, who owns it, and its verdict check if usable.
struct Seen {
    record: Option<ResourceRecordSet>,
    owner: Owner,
    usable: Option<String>,
    unusable_why: Option<String>,
}

/// What one listing found at the pair's name and type.
struct Inspection {
    all: Vec<ResourceRecordSet>,
    pools: Vec<Seen>,
    others: Vec<ResourceRecordSet>,
}

/// The plan for one attempt: the change batch and what it means per pool.
struct Attempt {
    changes: Vec<Change>,
    pools: Vec<PoolProvision>,
}

impl Route53Provider {
    /// [`Route53Provider::provision_with`] with the [`Default`] options: write, adopt nothing.
    ///
    /// # Errors
    /// As [`Route53Provider::provision_with`].
    pub async fn provision(&self) -> Result<ProvisionReport, ProviderError> {
        self.provision_with(ProvisionOptions::default()).await
    }

    /// Makes the binding's failover records and verdict checks exist.
    ///
    /// Per pool: a record gslb owns that already points at a valid gslb verdict check and
    /// matches the binding (values or Alias target, TTL, role) is left alone. Otherwise the
    /// record's verdict check is kept when valid (so a disabled pool stays disabled) or a new
    /// one is created, and the record is written by compare-and-swap (see the module doc). A
    /// lost race re-lists and re-plans, up to 3 batches. Then `GetChange` is polled every
    /// `poll_interval` until `INSYNC`. A second run with nothing to change makes no write and
    /// reports [`ProvisionReport::is_noop`]. With `dry_run`, only reads.
    ///
    /// # Errors
    /// [`ProviderError::Unowned`] naming every foreign record and health check (and every
    /// Alias/values conversion) when `adopt` is off and not a dry run: nothing was written;
    /// [`ProviderError::Invalid`] for a malformed binding or a change batch Route 53 refuses
    /// although nothing changed since the list; [`ProviderError::Conflict`] when every batch
    /// lost a race; [`ProviderError::Transient`] when the change is not `INSYNC` within
    /// `change_timeout` (it may still complete: run again to check); the errors of the API
    /// calls otherwise. Verdict checks created by a failed run are left in place and logged.
    pub async fn provision_with(
        &self,
        options: ProvisionOptions,
    ) -> Result<ProvisionReport, ProviderError> {
        self.provision_records(options, None).await
    }

    /// [`Route53Provider::provision_with`], with each pool's record carrying `fixed[pool]`
    /// instead of a verdict check when given (data-plane mode's tally checks, see
    /// [`crate::dataplane`]).
    pub(crate) async fn provision_records(
        &self,
        options: ProvisionOptions,
        fixed: Option<&[String]>,
    ) -> Result<ProvisionReport, ProviderError> {
        self.binding.validate()?;
        self.check_in_zone().await?;
        // Checks this run created, per pool, reused by later attempts instead of making more.
        let mut created: Vec<Option<String>> = vec![None; self.binding.pools.len()];
        let result = self.provision_attempts(options, &mut created, fixed).await;
        match &result {
            Ok(report) => warn_orphans(&created, &report.pools),
            Err(_) => warn_failed(&created),
        }
        result
    }

    /// The list / plan / write loop of [`Route53Provider::provision_with`], recording in
    /// `created` the verdict checks it creates or reuses.
    async fn provision_attempts(
        &self,
        options: ProvisionOptions,
        created: &mut [Option<String>],
        fixed: Option<&[String]>,
    ) -> Result<ProvisionReport, ProviderError> {
        // What the last refused batch was planned from, and why it was refused.
        let mut previous: Option<(Vec<ResourceRecordSet>, String)> = None;
        let mut batches = 0;
        loop {
            let seen = self.inspect().await?;
            let foreign = self.foreign(&seen);
            if !foreign.is_empty() && !options.adopt && !options.dry_run {
                return Err(ProviderError::Unowned(format!(
                    "{}; nothing was changed: run `gslb provision --adopt {}` to replace them",
                    foreign.join("; "),
                    self.binding.record_name
                )));
            }
            let attempt = self
                .plan_attempt(&seen, created, options.dry_run, fixed)
                .await?;
            let mut report = ProvisionReport {
                batch: (!attempt.changes.is_empty())
                    .then(|| batch::to_json(&self.comment(), &attempt.changes)),
                pools: attempt.pools,
                change_id: None,
                removed: seen.others.iter().map(ownership::describe).collect(),
                needs_adopt: if options.adopt { Vec::new() } else { foreign },
            };
            if options.dry_run || attempt.changes.is_empty() {
                return Ok(report);
            }
            if let Some((_, refusal)) = previous.as_ref().filter(|(all, _)| *all == seen.all) {
                return Err(ProviderError::Invalid(format!(
                    "Route 53 refused the change batch although the records did not change since they were \
                     listed, so no race lost; check the binding against the zone: {refusal}"
                )));
            }
            batches += 1;
            match self.submit(attempt.changes).await {
                Ok(info) => {
                    report.change_id = Some(info.id.clone());
                    self.wait_insync(info).await?;
                    return Ok(report);
                }
                Err(ProviderError::Conflict(msg)) if batches < CAS_ATTEMPTS => {
                    tracing::warn!(error = %msg, "route53 change batch lost a race; listing again");
                    previous = Some((seen.all, msg));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Refuses a record name outside the binding's hosted zone, for which Route 53 would refuse
    /// every change batch (so a dry run would report changes pending forever). One
    /// `GetHostedZone`.
    ///
    /// # Errors
    /// [`ProviderError::Invalid`] naming the record name, the zone id and the zone's name; as
    /// `Api::call` otherwise (`NoSuchHostedZone` is [`ProviderError::NotFound`]).
    async fn check_in_zone(&self) -> Result<(), ProviderError> {
        let zone = &self.binding.hosted_zone_id;
        let out = self
            .api
            .call("GetHostedZone", |c| c.get_hosted_zone().id(zone).send())
            .await?;
        let Some(hosted) = out.hosted_zone else {
            return Ok(());
        };
        let zone_name = normalize_name(&hosted.name);
        let name = normalize_name(&self.binding.record_name);
        if name == zone_name || name.ends_with(&format!(".{zone_name}")) {
            return Ok(());
        }
        Err(ProviderError::Invalid(format!(
            "record name {name} is not in hosted zone {zone} ({zone_name}), so Route 53 would \
             refuse every change batch; fix target.route53.record_name (or the policy's \
             hostname) or hosted_zone_id"
        )))
    }

    /// Lists the pair's name and type and reads each pool record's health check: who owns
    /// the record and whether its check is a usable verdict check.
    async fn inspect(&self) -> Result<Inspection, ProviderError> {
        let all = list_name_and_type(&self.api, &self.binding).await?;
        let (records, others) = split_pair(&self.binding, all.clone());
        let mut pools = Vec::new();
        for record in records {
            let Some(listed) = &record else {
                pools.push(Seen {
                    record,
                    owner: Owner::Gslb,
                    usable: None,
                    unusable_why: None,
                });
                continue;
            };
            let (owner, check) = ownership::record_owner(&self.api, listed).await?;
            let (usable, unusable_why) = match (&owner, check.as_ref().map(checks::verdict)) {
                (Owner::Gslb, Some(Ok(v))) => (Some(v.id), None),
                (Owner::Gslb, Some(Err(e))) => (None, Some(e.to_string())),
                _ => (None, None),
            };
            let (usable, unusable_why) = match shared_with(&pools, usable.as_deref()) {
                Some(first) => (None, Some(first)),
                None => (usable, unusable_why),
            };
            pools.push(Seen {
                record,
                owner,
                usable,
                unusable_why,
            });
        }
        Ok(Inspection { all, pools, others })
    }

    /// Every object of `seen` that provisioning may change only with `--adopt`, with why.
    fn foreign(&self, seen: &Inspection) -> Vec<String> {
        let mut out = Vec::new();
        for (pool, s) in self.binding.pools.iter().zip(&seen.pools) {
            let Some(listed) = &s.record else { continue };
            if let Owner::Foreign(why) = &s.owner {
                out.push(why.clone());
            } else if listed.alias_target.is_some() != pool.alias.is_some() {
                let want = if pool.alias.is_some() {
                    "an Alias record"
                } else {
                    "a record with values"
                };
                out.push(format!(
                    "{} is {}, the policy asks for {want}; converting needs --adopt",
                    ownership::describe(listed),
                    kind(listed)
                ));
            }
        }
        let ids: Vec<&str> = self
            .binding
            .pools
            .iter()
            .map(|p| p.set_identifier.as_str())
            .collect();
        out.extend(seen.others.iter().map(|r| {
            format!(
                "{} has the pair's name and type but is no pool's record (pools: {})",
                ownership::describe(r),
                ids.join(", ")
            )
        }));
        out
    }

    /// Plans one change batch from `seen`, creating verdict checks where needed (none in a
    /// dry run: [`NEW_CHECK`] stands for each); with `fixed`, pool `i`'s record carries
    /// `fixed[i]` and no verdict check is made.
    async fn plan_attempt(
        &self,
        seen: &Inspection,
        created: &mut [Option<String>],
        dry_run: bool,
        fixed: Option<&[String]>,
    ) -> Result<Attempt, ProviderError> {
        let b = &self.binding;
        let mut changes = Vec::new();
        for other in &seen.others {
            changes.push(change(ChangeAction::Delete, other.clone())?);
        }
        let mut pools = Vec::new();
        for (index, (pool, s)) in b.pools.iter().zip(&seen.pools).enumerate() {
            let usable = match fixed {
                Some(ids) => ids.get(index),
                None => s.usable.as_ref(),
            };
            let (check_id, created_health_check) = match (usable, &created[index]) {
                (Some(id), _) => (id.clone(), false),
                (None, Some(id)) => (id.clone(), true),
                (None, None) if dry_run => (NEW_CHECK.to_owned(), true),
                (None, None) => {
                    let check = self.verdict_check_for(index, seen).await?;
                    created[index] = Some(check.clone());
                    (check, true)
                }
            };
            let desired = desired_record(b, index, &check_id)?;
            let action = action(s, &desired);
            if action != ProvisionAction::Unchanged {
                if let Some(listed) = &s.record {
                    changes.push(change(ChangeAction::Delete, listed.clone())?);
                }
                changes.push(change(ChangeAction::Create, desired)?);
            }
            pools.push(PoolProvision {
                set_identifier: pool.set_identifier.clone(),
                action,
                health_check_id: check_id,
                created_health_check,
            });
        }
        Ok(Attempt { changes, pools })
    }

    /// A verdict check for pool `index`: one this pool's earlier runs left unattached, or a
    /// new one ([`checks::reuse_or_create`]).
    async fn verdict_check_for(
        &self,
        index: usize,
        seen: &Inspection,
    ) -> Result<String, ProviderError> {
        let b = &self.binding;
        let pool = &b.pools[index];
        let key = format!(
            "{}|{}|{}|{}",
            b.hosted_zone_id.trim_start_matches("/hostedzone/"),
            normalize_name(&b.record_name),
            b.record_type,
            pool.set_identifier
        );
        let stem = ownership::caller_reference_stem(&pool.set_identifier, &key);
        let in_use: Vec<&str> = seen
            .all
            .iter()
            .filter_map(|r| r.health_check_id.as_deref())
            .collect();
        let (check, reused) = checks::reuse_or_create(&self.api, &stem, &in_use).await?;
        let what = if reused {
            "reused (left by an earlier run)"
        } else {
            "created"
        };
        tracing::info!(pool = %pool.set_identifier, check = %check.id, "route53 verdict check {what}");
        Ok(check.id)
    }

    fn comment(&self) -> String {
        format!("gslb provision {}", self.binding.record_name)
    }

    async fn submit(&self, changes: Vec<Change>) -> Result<ChangeInfo, ProviderError> {
        let batch = ChangeBatch::builder()
            .comment(self.comment())
            .set_changes(Some(changes))
            .build()
            .map_err(|e| ProviderError::Invalid(format!("change batch: {e}")))?;
        let out = self
            .api
            .call("ChangeResourceRecordSets", |c| {
                c.change_resource_record_sets()
                    .hosted_zone_id(&self.binding.hosted_zone_id)
                    .change_batch(batch.clone())
                    .send()
            })
            .await?;
        out.change_info.ok_or_else(|| {
            ProviderError::Invalid("ChangeResourceRecordSets: no ChangeInfo".to_owned())
        })
    }

    /// Polls `GetChange` every `poll_interval` until `INSYNC`, within `change_timeout` of now.
    async fn wait_insync(&self, info: ChangeInfo) -> Result<(), ProviderError> {
        if info.status == ChangeStatus::Insync {
            return Ok(());
        }
        let id = info.id;
        let deadline = self.settings.change_timeout;
        let poll = async {
            loop {
                tokio::time::sleep(self.settings.poll_interval).await;
                let out = self
                    .api
                    .call("GetChange", |c| c.get_change().id(&id).send())
                    .await?;
                match out.change_info {
                    Some(i) if i.status == ChangeStatus::Insync => {
                        return Ok::<(), ProviderError>(());
                    }
                    Some(i) => {
                        tracing::debug!(change = %id, status = i.status.as_str(), "route53 change not INSYNC yet")
                    }
                    None => {
                        return Err(ProviderError::Invalid(format!(
                            "GetChange {id}: no ChangeInfo"
                        )));
                    }
                }
            }
        };
        match tokio::time::timeout(deadline, poll).await {
            Ok(result) => result,
            Err(_) => Err(ProviderError::Transient(format!(
                "route53 change {id} not INSYNC after {}; it may still complete: run provisioning again to check",
                secs(deadline)
            ))),
        }
    }
}

fn secs(d: Duration) -> String {
    format!("{}s", d.as_secs_f64())
}

/// Logs verdict checks this run created that no record ends up using.
fn warn_orphans(created: &[Option<String>], used: &[PoolProvision]) {
    for id in created.iter().flatten() {
        if !used.iter().any(|p| &p.health_check_id == id) {
            tracing::warn!(check = %id, "route53 verdict check created by provisioning is not in use; delete it by hand");
        }
    }
}

/// Logs the verdict checks a failed run created or reused (the next run reuses them).
fn warn_failed(created: &[Option<String>]) {
    let ids: Vec<&str> = created.iter().flatten().map(String::as_str).collect();
    if !ids.is_empty() {
        tracing::warn!(
            checks = %ids.join(", "),
            "route53 provisioning failed after creating verdict checks; they are left in place and \
             the next run reuses them instead of creating more"
        );
    }
}

/// Why verdict check `id` cannot also be this pool's: an earlier pool of `pools` uses it
/// (one check per pool, or disabling one pool would disable both).
fn shared_with(pools: &[Seen], id: Option<&str>) -> Option<String> {
    let id = id?;
    let first = pools.iter().find(|p| p.usable.as_deref() == Some(id))?;
    let record = first.record.as_ref().map(ownership::describe)?;
    Some(format!(
        "verdict check {id} is also the check of {record}; each pool needs its own"
    ))
}

/// What provisioning does to a pool's record, seen as `s`, to make it `desired`.
fn action(s: &Seen, desired: &ResourceRecordSet) -> ProvisionAction {
    let Some(listed) = &s.record else {
        return ProvisionAction::Created;
    };
    let how = drift(listed, desired);
    match (&s.owner, how) {
        (Owner::Foreign(why), how) => ProvisionAction::Adopted {
            reason: how.map_or(why.clone(), |h| format!("{why}; {h}")),
        },
        (Owner::Gslb, None) => ProvisionAction::Unchanged,
        (Owner::Gslb, Some(how)) => {
            let reason = s
                .unusable_why
                .as_ref()
                .map_or(how.clone(), |w| format!("{how} ({w})"));
            if listed.alias_target.is_some() != desired.alias_target.is_some() {
                ProvisionAction::Adopted { reason }
            } else {
                ProvisionAction::Replaced { reason }
            }
        }
    }
}
