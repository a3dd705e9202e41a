//! Data-plane failover mode: Route 53's own health checks count gslb instances' votes, so a
//! failover needs no Route 53 API call (AWS Well-Architected REL11-BP04, "Rely on the data
//! plane and not the control plane during recovery").
//!
//! Per pool and instance two string-match *vote checks* on that instance's vote URL: a *serve
//! check* (healthy while the instance answers the serve string) and an inverted *drain check*
//! (healthy unless it answers the drain string). An instance that serves makes both healthy,
//! one that drains neither, and one that is dead, unreachable or stale exactly one: it gives
//! no vote either way. One CALCULATED *tally check* per pool over all of them, with
//! `HealthThreshold` = the number of instances, is healthy while at least as many voting
//! instances say serve as drain; the pool's failover record carries it. A new inverted check
//! counts as unhealthy until it has data (Route 53 Developer Guide, "How Amazon Route 53
//! determines whether a health check is healthy"), so a new tally check is made permissive
//! (threshold 0) and raised only by a later run once every vote check has data.
//!
//! Provisioning only: the vote URLs are served by the `gslb` daemon; the numbers (search
//! string, threshold, interval) come from its settings.

mod checks;

use gslb_provider::ProviderError;

use crate::Route53Provider;
use crate::provision::{ProvisionOptions, ProvisionReport};

/// One instance's vote URL for one pool, as Route 53's checkers reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Voter {
    /// The instance's name (goes into the check's caller reference).
    pub instance: String,
    /// `true`: `HTTPS_STR_MATCH` (the certificate is not validated); `false`:
    /// `HTTP_STR_MATCH`.
    pub https: bool,
    /// An IP address (the check's `IPAddress`) or a host name (its
    /// `FullyQualifiedDomainName`, sent as SNI over HTTPS).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// The vote path, e.g. `/v1/vote/api/seoul`.
    pub path: String,
}

/// Which of an instance's two vote checks for a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Not inverted: healthy while the instance answers the serve string.
    Serve,
    /// Inverted: healthy unless the instance answers the drain string.
    Drain,
}

impl Side {
    /// Both sides, in the order their checks are listed as the tally's children.
    pub const BOTH: [Side; 2] = [Side::Serve, Side::Drain];

    /// The check's `Inverted`.
    pub fn inverted(self) -> bool {
        self == Side::Drain
    }

    /// `serve` or `drain` (in the check's caller reference).
    pub fn word(self) -> &'static str {
        match self {
            Side::Serve => "serve",
            Side::Drain => "drain",
        }
    }
}

/// One pool's votes: every instance's URL and the strings they answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VotePool {
    /// The pool's record's set identifier (binding order, PRIMARY first).
    pub set_identifier: String,
    /// One per instance.
    pub voters: Vec<Voter>,
    /// The drain checks' `SearchString`: what a vote URL answers while its instance votes
    /// drain (at most 255 characters).
    pub drain_string: String,
    /// The serve checks' `SearchString`: what a vote URL answers while its instance votes
    /// serve (at most 255 characters).
    pub serve_string: String,
}

impl VotePool {
    /// The search string of `side`'s checks.
    pub fn search(&self, side: Side) -> &str {
        match side {
            Side::Serve => &self.serve_string,
            Side::Drain => &self.drain_string,
        }
    }
}

/// The data-plane checks of a binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataPlaneBinding {
    /// One per pool of the binding, in its order.
    pub pools: Vec<VotePool>,
    /// `RequestInterval`, seconds: 10 or 30.
    pub request_interval: i32,
    /// `FailureThreshold`: 1 to 10.
    pub failure_threshold: i32,
    /// The tally checks' `HealthThreshold` once every vote check has data.
    pub health_threshold: i32,
}

/// What data-plane provisioning did for one pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TallyReport {
    /// The pool's set identifier.
    pub set_identifier: String,
    /// The tally check its record carries.
    pub tally_check_id: String,
    /// Its `HealthThreshold` now: 0 (permissive) until every vote check has data.
    pub health_threshold: i32,
    /// Vote checks created this run.
    pub created: usize,
    /// Vote checks corrected this run.
    pub updated: usize,
    /// Whether this pool's checks were (in a dry run: would be) created or changed: a vote
    /// check created or corrected, the tally check created or its threshold raised.
    pub changed: bool,
}

impl TallyReport {
    /// The report of `pool`: its tally check `(id, threshold, created or raised)` and the vote
    /// checks `(created, corrected)`; `changed` when any of them was (or would be).
    fn new(
        pool: &VotePool,
        tally: (String, i32, bool),
        (created, updated): (usize, usize),
    ) -> Self {
        let (tally_check_id, health_threshold, tally_changed) = tally;
        Self {
            set_identifier: pool.set_identifier.clone(),
            tally_check_id,
            health_threshold,
            created,
            updated,
            changed: tally_changed || created + updated > 0,
        }
    }
}

/// The tally check id a dry run shows for a tally check it would create (it has no id yet).
pub const NEW_TALLY: &str = "(new tally check)";

/// What [`Route53Provider::provision_data_plane`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataPlaneReport {
    /// Per pool, binding order.
    pub tallies: Vec<TallyReport>,
    /// The records, as [`Route53Provider::provision`] reports them.
    pub records: ProvisionReport,
    /// gslb-owned checks (e.g. verdict checks from `verdict_check` mode) that the pair's
    /// records carried before this run and no longer do (in a dry run: would no longer),
    /// as `(set identifier, check id)`. Left in place: another record may still use them.
    pub unused: Vec<(String, String)>,
}

impl Route53Provider {
    /// Makes the data-plane checks of `dp` exist and points the binding's records at the tally
    /// checks (compare-and-swap batches, ownership and `options.adopt` as
    /// [`Route53Provider::provision_with`]). A dry run only reads (`ListHealthChecks`,
    /// `GetHealthCheckStatus`, the records) and reports what a run would create or correct,
    /// with the record batch; a tally check it would create is named [`NEW_TALLY`].
    ///
    /// A tally check made by this run is permissive (threshold 0); one whose vote checks all
    /// existed before this run and all have data (`GetHealthCheckStatus`) is raised to
    /// `dp.health_threshold`. Run provisioning again after `RequestInterval x
    /// FailureThreshold` to raise new ones.
    ///
    /// # Errors
    /// [`ProviderError::Invalid`] when `dp` does not have one entry per pool of the binding;
    /// otherwise as [`Route53Provider::provision_with`].
    pub async fn provision_data_plane(
        &self,
        dp: &DataPlaneBinding,
        options: ProvisionOptions,
    ) -> Result<DataPlaneReport, ProviderError> {
        self.binding.validate()?;
        let ids: Vec<&str> = self
            .binding
            .pools
            .iter()
            .map(|p| p.set_identifier.as_str())
            .collect();
        let given: Vec<&str> = dp.pools.iter().map(|p| p.set_identifier.as_str()).collect();
        if ids != given {
            return Err(ProviderError::Invalid(format!(
                "data-plane pools {given:?} differ from the binding's {ids:?}"
            )));
        }
        let mut tallies = Vec::new();
        if options.dry_run {
            let listed = checks::list_all(&self.api).await?;
            for pool in &dp.pools {
                tallies.push(self.plan_tally(dp, pool, &listed).await?);
            }
        } else {
            for pool in &dp.pools {
                tallies.push(self.provision_tally(dp, pool).await?);
            }
        }
        let fixed: Vec<String> = tallies.iter().map(|t| t.tally_check_id.clone()).collect();
        let before = crate::records::list_name_and_type(&self.api, &self.binding).await?;
        let records = self.provision_records(options, Some(&fixed)).await?;
        let unused = self.left_unused(&before, &fixed).await?;
        Ok(DataPlaneReport {
            tallies,
            records,
            unused,
        })
    }

    /// The gslb-owned checks the pair's records in `before` carried that are not among the
    /// tally checks `fixed` (no vote check is ever a record's check).
    async fn left_unused(
        &self,
        before: &[aws_sdk_route53::types::ResourceRecordSet],
        fixed: &[String],
    ) -> Result<Vec<(String, String)>, ProviderError> {
        let pair: Vec<(String, String)> = before
            .iter()
            .filter_map(|r| Some((r.set_identifier.clone()?, r.health_check_id.clone()?)))
            .filter(|(set_id, id)| {
                self.binding
                    .pools
                    .iter()
                    .any(|p| &p.set_identifier == set_id)
                    && !fixed.contains(id)
            })
            .collect();
        if pair.is_empty() {
            return Ok(pair);
        }
        let listed = checks::list_all(&self.api).await?;
        Ok(pair
            .into_iter()
            .filter(|(_, id)| listed.iter().any(|hc| &hc.id == id && checks::ours(hc)))
            .collect())
    }

    async fn provision_tally(
        &self,
        dp: &DataPlaneBinding,
        pool: &VotePool,
    ) -> Result<TallyReport, ProviderError> {
        let listed = checks::list_all(&self.api).await?;
        let (mut children, mut created, mut updated) = (Vec::new(), 0, 0);
        let timing = (dp.request_interval, dp.failure_threshold);
        for (v, side) in pool.voters.iter().flat_map(|v| Side::BOTH.map(|s| (v, s))) {
            let wanted = (side, pool.search(side));
            let (id, what) =
                checks::ensure_vote(&self.api, &listed, v, wanted, timing, &pool.set_identifier)
                    .await?;
            created += usize::from(what == checks::Ensured::Created);
            updated += usize::from(what == checks::Ensured::Updated);
            children.push(id);
        }
        let (tally_check_id, health_threshold, tally_changed) = match checks::find_tally(
            &listed, &children,
        ) {
            None => {
                let id = checks::create_tally(&self.api, &children, &pool.set_identifier).await?;
                tracing::info!(pool = %pool.set_identifier, check = %id, "route53 tally check created, permissive until its vote checks have data");
                (id, 0, true)
            }
            Some(tally) => {
                let (now, raise) = self.raise(dp, tally, &children, created).await?;
                if raise {
                    checks::set_threshold(&self.api, tally, dp.health_threshold).await?;
                }
                let threshold = if raise { dp.health_threshold } else { now };
                (tally.id.clone(), threshold, raise)
            }
        };
        Ok(TallyReport::new(
            pool,
            (tally_check_id, health_threshold, tally_changed),
            (created, updated),
        ))
    }

    /// A dry run of [`Self::provision_tally`] on the checks `listed`: reads only.
    async fn plan_tally(
        &self,
        dp: &DataPlaneBinding,
        pool: &VotePool,
        listed: &[aws_sdk_route53::types::HealthCheck],
    ) -> Result<TallyReport, ProviderError> {
        let timing = (dp.request_interval, dp.failure_threshold);
        let (mut children, mut created, mut updated) = (Vec::new(), 0, 0);
        for (v, side) in pool.voters.iter().flat_map(|v| Side::BOTH.map(|s| (v, s))) {
            match checks::find_vote(listed, v, (side, pool.search(side)), timing) {
                Some((hc, same)) => {
                    updated += usize::from(!same);
                    children.push(hc.id.clone());
                }
                None => created += 1,
            }
        }
        let found = (created == 0)
            .then(|| checks::find_tally(listed, &children))
            .flatten();
        let (tally_check_id, health_threshold, tally_changed) = match found {
            None => (NEW_TALLY.to_owned(), 0, true),
            Some(tally) => {
                let (now, raise) = self.raise(dp, tally, &children, created).await?;
                let threshold = if raise { dp.health_threshold } else { now };
                (tally.id.clone(), threshold, raise)
            }
        };
        Ok(TallyReport::new(
            pool,
            (tally_check_id, health_threshold, tally_changed),
            (created, updated),
        ))
    }

    /// `tally`'s threshold now, and whether a run raises it to `dp.health_threshold`: when it
    /// differs, no vote check was `created` this run and every child has data.
    async fn raise(
        &self,
        dp: &DataPlaneBinding,
        tally: &aws_sdk_route53::types::HealthCheck,
        children: &[String],
        created: usize,
    ) -> Result<(i32, bool), ProviderError> {
        let now = tally
            .health_check_config()
            .and_then(|c| c.health_threshold())
            .unwrap_or(0);
        let raise =
            now != dp.health_threshold && created == 0 && self.all_have_data(children).await?;
        Ok((now, raise))
    }

    async fn all_have_data(&self, children: &[String]) -> Result<bool, ProviderError> {
        for id in children {
            if !checks::has_data(&self.api, id).await? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}
