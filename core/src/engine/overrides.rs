//! Manual drills: `drain(pool)`, `restore(pool)` and `force(pool)` overrides, each with a
//! reason and an expiry. PURE: the store only validates, lists and expires; the decision rules
//! that honour overrides live in [`super::decide`], and files, audit log and API live at the
//! I/O edges.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::model::{Millis, PoolId, ServiceId, Verdict};
use crate::policy::Policy;

use super::decide::Decision;

/// How long an override lasts when the request names no duration: 4 hours, long enough for a
/// DR drill, short enough that a forgotten toggle cannot silently disable failover for a day.
pub const DEFAULT_OVERRIDE_TTL: Duration = Duration::from_secs(4 * 3600);
/// The longest an override may last: 24 hours.
pub const MAX_OVERRIDE_TTL: Duration = Duration::from_secs(24 * 3600);
/// The longest reason accepted, in characters.
pub const MAX_REASON: usize = 500;
/// The longest actor name accepted, in characters.
pub const MAX_ACTOR: usize = 100;
/// The actor of the restores gslb adds when a drill that moved traffic ends.
pub const REVERT_ACTOR: &str = "gslb";
/// The id of such a restore: the ended drill's id and this suffix.
pub const REVERT_SUFFIX: &str = "-revert";

/// What an override does to a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OverrideAction {
    /// Take the pool out of service: it is never chosen, and traffic on it moves to the most
    /// preferred other healthy pool (through the safety rails; with no other healthy pool the
    /// drain holds). Providers that can disable a pool (Cloudflare) disable it.
    Drain,
    /// Bring the pool back: ends any drain of it and authorises a failback to it even when the
    /// policy's failback is `manual` (the operator is the one deciding). The override ends by
    /// itself once the pool serves.
    Restore,
    /// Pin traffic to the pool while it is healthy by quorum. A forced pool that goes down
    /// fails over as usual: a drill never outranks a real outage.
    Force,
}

impl OverrideAction {
    /// The label value: `drain`, `restore` or `force`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Drain => "drain",
            Self::Restore => "restore",
            Self::Force => "force",
        }
    }
}

impl fmt::Display for OverrideAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An override's id, chosen by the edge that creates it (unique within a controller).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct OverrideId(pub String);

impl fmt::Display for OverrideId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A request for an override, as an operator makes it (API or CLI).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OverrideRequest {
    /// The id to give it (the edge makes it unique, e.g. from the time and a counter).
    pub id: OverrideId,
    /// The service.
    pub service: ServiceId,
    /// What to do.
    pub action: OverrideAction,
    /// The pool it applies to.
    pub pool: PoolId,
    /// Why: required, shown in status and the audit log.
    pub reason: String,
    /// Who asked: the name of the API caller's token, or (with no token configured) the
    /// caller as it names itself, the CLI user.
    pub actor: String,
    /// How long it lasts; default [`DEFAULT_OVERRIDE_TTL`], at most [`MAX_OVERRIDE_TTL`].
    #[serde(default, with = "crate::model::wire::seconds::option")]
    pub duration: Option<Duration>,
}

/// An active override.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Override {
    /// Its id.
    pub id: OverrideId,
    /// The service.
    pub service: ServiceId,
    /// What it does.
    pub action: OverrideAction,
    /// The pool.
    pub pool: PoolId,
    /// Why.
    pub reason: String,
    /// Who created it.
    pub actor: String,
    /// When it was created.
    pub created: Millis,
    /// When it ends by itself.
    pub expires: Millis,
}

/// Why an override request or end was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(tag = "error", content = "message", rename_all = "snake_case")]
pub enum OverrideError {
    /// The service is not one of the loaded policies.
    #[error("unknown service '{0}'")]
    UnknownService(ServiceId),
    /// The pool is not one of the service's pools.
    #[error("service '{service}' has no pool '{pool}'")]
    UnknownPool {
        /// The service.
        service: ServiceId,
        /// The pool asked for.
        pool: PoolId,
    },
    /// The reason is empty.
    #[error("a reason is required")]
    MissingReason,
    /// The reason or the actor is too long (over [`MAX_REASON`] / [`MAX_ACTOR`] characters) or
    /// holds control characters (which could forge lines in listings and logs).
    #[error("{0}")]
    BadText(String),
    /// The duration is zero or longer than [`MAX_OVERRIDE_TTL`].
    #[error("duration must be between 1s and 24h, got {0}")]
    BadDuration(String),
    /// The id is already used.
    #[error("override id '{0}' already exists")]
    DuplicateId(OverrideId),
    /// The request contradicts an active override (e.g. a second `force`, or draining a forced
    /// pool); end that one first.
    #[error("conflicts with active override {id} ({action} {pool}); end it first")]
    Conflict {
        /// The active override.
        id: OverrideId,
        /// Its action.
        action: OverrideAction,
        /// Its pool.
        pool: PoolId,
    },
    /// No active override has this id.
    #[error("no active override '{0}'")]
    NotFound(OverrideId),
    /// The drill store (the state file, or etcd in a cluster) could not be written, so the
    /// change would not survive a restart (or reach the other instances): a new drill is
    /// refused before it takes effect; an ended one stays ended in memory but is still listed
    /// in the file.
    #[error("the drill could not be stored: {0}")]
    NotSaved(String),
}

/// The active overrides of every service, by id. Deterministic order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    active: BTreeMap<OverrideId, Override>,
    /// For an active override that continues an ended drill (the restore reverting it, see
    /// [`Overrides::continues`]): when that drill started.
    continued: BTreeMap<OverrideId, Millis>,
}

impl Override {
    /// Whether gslb added this restore when a drill that moved traffic ended (actor
    /// [`REVERT_ACTOR`], id ending in [`REVERT_SUFFIX`]): it returns traffic at the drill's
    /// end, so the spacing rail does not hold it.
    pub fn is_revert(&self) -> bool {
        self.action == OverrideAction::Restore
            && self.actor == REVERT_ACTOR
            && self.id.0.ends_with(REVERT_SUFFIX)
    }

    /// Why this drill is not in effect after `d`, the service's decision at the step that
    /// started it (`order`: the service's pools, most preferred first), or `None` when it is:
    /// a drain whose pool still serves, a force whose pool does not serve, a restore of a pool
    /// more preferred than the serving one that does not serve. The reason is the pool's
    /// verdict when it is not healthy, else the decision's own (the rule or the rail that held
    /// it), e.g. `a drill drains seoul but no other pool is healthy: keeping seoul (never zero
    /// serving pools)`.
    pub fn held_by(&self, order: &[PoolId], d: &Decision) -> Option<String> {
        let serving = d.active.as_ref();
        let rank = |p: &PoolId| order.iter().position(|x| x == p);
        let held = match self.action {
            OverrideAction::Drain => serving == Some(&self.pool),
            OverrideAction::Force => serving != Some(&self.pool),
            OverrideAction::Restore => {
                serving.is_some_and(|s| s != &self.pool && rank(&self.pool) < rank(s))
            }
        };
        if !held {
            return None;
        }
        let verdict = d
            .pools
            .get(&self.pool)
            .map_or(Verdict::Unknown, |p| p.verdict);
        if self.action != OverrideAction::Drain && verdict != Verdict::Healthy {
            return Some(format!("{} is {verdict} by quorum", self.pool));
        }
        let last = d.reasons.last().map_or("", String::as_str);
        let why = ["rule: ", "hold: "]
            .iter()
            .find_map(|p| last.strip_prefix(p))
            .unwrap_or(last);
        Some(why.to_owned())
    }
}

impl Overrides {
    /// Validates `req` against `policy` and the active overrides and adds it at `now`.
    ///
    /// A `restore` ends the drains of its pool (they are returned in the second element).
    ///
    /// # Errors
    /// See [`OverrideError`]; nothing changes on error.
    pub fn add(
        &mut self,
        policy: &Policy,
        req: &OverrideRequest,
        now: Millis,
    ) -> Result<(Override, Vec<Override>), OverrideError> {
        if policy.pool(&req.pool).is_none() {
            return Err(OverrideError::UnknownPool {
                service: req.service.clone(),
                pool: req.pool.clone(),
            });
        }
        if req.reason.trim().is_empty() {
            return Err(OverrideError::MissingReason);
        }
        for (what, text, max) in [
            ("reason", &req.reason, MAX_REASON),
            ("actor", &req.actor, MAX_ACTOR),
        ] {
            if text.chars().count() > max || text.chars().any(char::is_control) {
                return Err(OverrideError::BadText(format!(
                    "{what} must be at most {max} characters without control characters"
                )));
            }
        }
        let duration = req.duration.unwrap_or(DEFAULT_OVERRIDE_TTL);
        if duration < Duration::from_secs(1) || duration > MAX_OVERRIDE_TTL {
            return Err(OverrideError::BadDuration(
                humantime::format_duration(duration).to_string(),
            ));
        }
        if self.active.contains_key(&req.id) {
            return Err(OverrideError::DuplicateId(req.id.clone()));
        }
        if let Some(c) = self
            .for_service(&req.service)
            .find(|o| conflicts(o, req.action, &req.pool))
        {
            return Err(OverrideError::Conflict {
                id: c.id.clone(),
                action: c.action,
                pool: c.pool.clone(),
            });
        }
        let ended = if req.action == OverrideAction::Restore {
            let ids: Vec<_> = self
                .for_service(&req.service)
                .filter(|o| o.action == OverrideAction::Drain && o.pool == req.pool)
                .map(|o| o.id.clone())
                .collect();
            ids.iter().filter_map(|id| self.active.remove(id)).collect()
        } else {
            Vec::new()
        };
        let o = Override {
            id: req.id.clone(),
            service: req.service.clone(),
            action: req.action,
            pool: req.pool.clone(),
            reason: req.reason.trim().to_owned(),
            actor: req.actor.clone(),
            created: now,
            expires: now.plus(duration),
        };
        self.active.insert(o.id.clone(), o.clone());
        Ok((o, ended))
    }

    /// Ends an override before its expiry.
    ///
    /// # Errors
    /// [`OverrideError::NotFound`] when no active override has this id.
    pub fn end(&mut self, id: &OverrideId) -> Result<Override, OverrideError> {
        self.continued.remove(id);
        self.active
            .remove(id)
            .ok_or_else(|| OverrideError::NotFound(id.clone()))
    }

    /// Records that the active override `id` continues a drill that started at `since`: the
    /// restore that reverts an ended drill, which lasts until traffic is back. Not saved in the
    /// drill state file: after a restart such a restore counts from its own creation.
    pub fn continues(&mut self, id: &OverrideId, since: Millis) {
        if self.active.contains_key(id) {
            self.continued.insert(id.clone(), since);
        }
    }

    /// Since when the drill of the active override `o` has been outstanding: `o.created`, or
    /// for a restore that continues an ended drill ([`Overrides::continues`]), when that drill
    /// started. `gslb_override_oldest_age_seconds` counts from it.
    pub fn started(&self, o: &Override) -> Millis {
        self.continued.get(&o.id).copied().unwrap_or(o.created)
    }

    /// Removes and returns every override whose expiry is at or before `now`.
    pub fn expire(&mut self, now: Millis) -> Vec<Override> {
        let due: Vec<_> = self
            .active
            .values()
            .filter(|o| o.expires <= now)
            .map(|o| o.id.clone())
            .collect();
        self.continued.retain(|id, _| !due.contains(id));
        due.iter().filter_map(|id| self.active.remove(id)).collect()
    }

    /// Why [`Overrides::restore_all`] skipped `o`, in an operator's words: what is wrong with
    /// the saved drill itself (no reason, an expiry not after its start, a duration over
    /// [`MAX_OVERRIDE_TTL`]), else that its service or pool is not in the policies or another
    /// drill of the pool was active.
    pub fn skip_reason(o: &Override) -> &'static str {
        if o.reason.trim().is_empty() {
            "it has no reason"
        } else if o.expires <= o.created {
            "it expires before it starts"
        } else if o.expires.0 - o.created.0 > MAX_OVERRIDE_TTL.as_millis() as u64 {
            "it lasts more than 24h"
        } else {
            "its service or pool is not in the policies, or another drill of the pool is active"
        }
    }

    /// Re-installs overrides read back from the state file (at start), checked as a request
    /// would be: overrides for which `known` is false (unknown service or pool), with an empty
    /// reason, a lifetime outside (0, 24 h], a conflict with one already installed, or a
    /// duplicate id are skipped and returned so the caller can log them.
    pub fn restore_all(
        &mut self,
        saved: Vec<Override>,
        known: impl Fn(&Override) -> bool,
    ) -> Vec<Override> {
        let mut skipped = Vec::new();
        for o in saved {
            let sane = !o.reason.trim().is_empty()
                && o.expires > o.created
                && o.expires.0 - o.created.0 <= MAX_OVERRIDE_TTL.as_millis() as u64
                && !self
                    .for_service(&o.service)
                    .any(|a| conflicts(a, o.action, &o.pool));
            if sane && known(&o) && !self.active.contains_key(&o.id) {
                self.active.insert(o.id.clone(), o);
            } else {
                skipped.push(o);
            }
        }
        let active = &self.active;
        self.continued.retain(|id, _| active.contains_key(id));
        skipped
    }

    /// Removes every active override, to re-install them with [`Overrides::restore_all`] (a
    /// reload): what [`Overrides::continues`] recorded is kept for those re-installed.
    pub fn clear(&mut self) {
        self.active.clear();
    }

    /// Every active override, by id.
    pub fn all(&self) -> impl Iterator<Item = &Override> {
        self.active.values()
    }

    /// The active overrides of one service.
    pub fn for_service<'a>(&'a self, service: &'a ServiceId) -> impl Iterator<Item = &'a Override> {
        self.active.values().filter(move |o| &o.service == service)
    }

    /// Whether no override is active.
    pub fn is_empty(&self) -> bool {
        self.active.is_empty()
    }
}

/// Whether an active override `o` contradicts a new `action` on `pool` of the same service.
fn conflicts(o: &Override, action: OverrideAction, pool: &PoolId) -> bool {
    use OverrideAction::{Drain, Force, Restore};
    match (o.action, action) {
        (Force, Force) => true,
        (Force, Drain) | (Drain, Force) => &o.pool == pool,
        (Restore, Drain) => &o.pool == pool,
        (Drain, Drain) | (Restore, Restore) => &o.pool == pool,
        _ => false,
    }
}
