//! Provisioning: make the binding's PRIMARY/SECONDARY records and their verdict checks exist,
//! ahead of any failover.
//!
//! Records are written only with a compare-and-swap change batch: `[DELETE <record exactly as
//! listed>, CREATE <desired>]` for a record that exists, `[CREATE]` for one that does not,
//! both pools in one atomic batch. Never UPSERT (it has no precondition), and never a DELETE
//! without its CREATE in the same batch, so the pair is never left without a record. A lost
//! race (`InvalidChangeBatch`) re-lists and re-plans.

use std::time::Duration;

use aws_sdk_route53::types::{
    Change, ChangeAction, ChangeBatch, ChangeInfo, ChangeStatus, ResourceRecordSet,
};
use gslb_provider::ProviderError;

use crate::Route53Provider;
use crate::checks;
use crate::records::{desired_record, drift, list_pair};

/// Change batches tried per [`Route53Provider::provision`] call before a lost race is
/// reported as [`ProviderError::Conflict`].
const CAS_ATTEMPTS: u32 = 3;

/// What [`Route53Provider::provision`] did, pool by pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProvisionReport {
    /// One entry per pool, in binding order (PRIMARY first).
    pub pools: Vec<PoolProvision>,
    /// The id of the change batch written, `None` when nothing needed writing.
    pub change_id: Option<String>,
}

impl ProvisionReport {
    /// True when the run wrote nothing: every record was already as the binding says, and
    /// no health check was created.
    pub fn is_noop(&self) -> bool {
        self.change_id.is_none()
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
    /// The verdict check the record now points at.
    pub health_check_id: String,
    /// Whether this run created that verdict check (not inverted: the pool is enabled).
    pub created_health_check: bool,
}

/// What happened to one pool's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProvisionAction {
    /// The record was already as the binding says, pointing at a valid verdict check.
    Unchanged,
    /// There was no record with this set identifier; one was created.
    Created,
    /// A record existed but differed; it was replaced by DELETE + CREATE.
    Replaced {
        /// How the old record differed, or why its health check was not usable.
        reason: String,
    },
}

/// The plan for one attempt: the change batch and what it means per pool.
struct Attempt {
    listed: Vec<Option<ResourceRecordSet>>,
    changes: Vec<Change>,
    pools: Vec<PoolProvision>,
}

impl Route53Provider {
    /// Makes the binding's failover records and verdict checks exist.
    ///
    /// Per pool: a record that already points at a valid gslb verdict check and matches the
    /// binding (values, TTL, role) is left alone. Otherwise the record's verdict check is kept
    /// when valid (so a disabled pool stays disabled) or a new one is created, and the record
    /// is written by compare-and-swap (see the module doc). A lost race re-lists and re-plans,
    /// up to 3 batches. Then `GetChange` is polled every `poll_interval` until `INSYNC`.
    /// A second run with nothing to change makes no write and reports
    /// [`ProvisionReport::is_noop`].
    ///
    /// # Errors
    /// [`ProviderError::Invalid`] for a malformed binding or a change batch Route 53 refuses
    /// although nothing changed since the list; [`ProviderError::Conflict`] when every batch
    /// lost a race; [`ProviderError::Transient`] when the change is not `INSYNC` within
    /// `change_timeout` (it may still complete: run again to check); the errors of the API
    /// calls otherwise. Verdict checks created by a failed run are left in place and logged.
    pub async fn provision(&self) -> Result<ProvisionReport, ProviderError> {
        self.provision_records(None).await
    }

    /// [`Route53Provider::provision`], with each pool's record carrying `fixed[pool]` instead
    /// of a verdict check when given (data-plane mode's tally checks, see
    /// [`crate::dataplane`]).
    pub(crate) async fn provision_records(
        &self,
        fixed: Option<&[String]>,
    ) -> Result<ProvisionReport, ProviderError> {
        self.binding.validate()?;
        // Checks this run created, per pool, reused by later attempts instead of making more.
        let mut created: Vec<Option<String>> = vec![None; self.binding.pools.len()];
        // What the last refused batch was planned from, and why it was refused.
        let mut previous: Option<(Vec<Option<ResourceRecordSet>>, String)> = None;
        let mut batches = 0;
        loop {
            let attempt = self.plan_attempt(&mut created, fixed).await?;
            if attempt.changes.is_empty() {
                warn_orphans(&created, &attempt.pools);
                return Ok(ProvisionReport {
                    pools: attempt.pools,
                    change_id: None,
                });
            }
            if let Some((_, refusal)) = previous
                .as_ref()
                .filter(|(listed, _)| *listed == attempt.listed)
            {
                return Err(ProviderError::Invalid(format!(
                    "Route 53 refused the change batch although the records did not change since they were \
                     listed, so no race lost; check the binding against the zone: {refusal}"
                )));
            }
            batches += 1;
            match self.submit(attempt.changes).await {
                Ok(info) => {
                    let change_id = info.id.clone();
                    self.wait_insync(info).await?;
                    warn_orphans(&created, &attempt.pools);
                    return Ok(ProvisionReport {
                        pools: attempt.pools,
                        change_id: Some(change_id),
                    });
                }
                Err(ProviderError::Conflict(msg)) if batches < CAS_ATTEMPTS => {
                    tracing::warn!(error = %msg, "route53 change batch lost a race; listing again");
                    previous = Some((attempt.listed, msg));
                }
                Err(e) => {
                    let ids: Vec<&String> = created.iter().flatten().collect();
                    if !ids.is_empty() {
                        tracing::warn!(
                            checks = ?ids,
                            "route53 provisioning failed after creating verdict checks; the next run lists the \
                             records again and reuses any check a record points at"
                        );
                    }
                    return Err(e);
                }
            }
        }
    }

    /// Lists the records and plans one change batch, creating verdict checks where needed.
    async fn plan_attempt(
        &self,
        created: &mut [Option<String>],
        fixed: Option<&[String]>,
    ) -> Result<Attempt, ProviderError> {
        let b = &self.binding;
        let listed = list_pair(&self.api, b).await?;
        let mut changes = Vec::new();
        let mut pools = Vec::new();
        for (index, (pool, record)) in b.pools.iter().zip(&listed).enumerate() {
            let (usable, unusable_why) = match (
                fixed,
                record.as_ref().and_then(|r| r.health_check_id.as_deref()),
            ) {
                (Some(ids), _) => (ids.get(index).cloned(), None),
                (None, None) => (None, Some("it has no health check".to_owned())),
                (None, Some(id)) => match checks::get(&self.api, id).await {
                    Ok(check) => (Some(check.id), None),
                    Err(
                        e @ (ProviderError::NotFound(_)
                        | ProviderError::Unowned(_)
                        | ProviderError::Invalid(_)),
                    ) => (None, Some(e.to_string())),
                    Err(e) => return Err(e),
                },
            };
            let (check_id, created_health_check) = match (usable, &created[index]) {
                (Some(id), _) => (id, false),
                (None, Some(id)) => (id.clone(), true),
                (None, None) => {
                    let check = checks::create(
                        &self.api,
                        &checks::new_caller_reference(&pool.set_identifier),
                    )
                    .await?;
                    tracing::info!(pool = %pool.set_identifier, check = %check.id, "route53 verdict check created");
                    created[index] = Some(check.id.clone());
                    (check.id, true)
                }
            };
            let desired = desired_record(b, index, &check_id)?;
            let action = match record {
                None => ProvisionAction::Created,
                Some(listed) => match drift(listed, &desired) {
                    None => ProvisionAction::Unchanged,
                    Some(d) => ProvisionAction::Replaced {
                        reason: unusable_why.map_or(d.clone(), |w| format!("{d} ({w})")),
                    },
                },
            };
            if action != ProvisionAction::Unchanged {
                if let Some(listed) = record {
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
        Ok(Attempt {
            listed,
            changes,
            pools,
        })
    }

    async fn submit(&self, changes: Vec<Change>) -> Result<ChangeInfo, ProviderError> {
        let batch = ChangeBatch::builder()
            .comment(format!("gslb provision {}", self.binding.record_name))
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

fn change(action: ChangeAction, record: ResourceRecordSet) -> Result<Change, ProviderError> {
    Change::builder()
        .action(action)
        .resource_record_set(record)
        .build()
        .map_err(|e| ProviderError::Invalid(format!("change: {e}")))
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
