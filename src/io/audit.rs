//! The audit log: one JSON line per operator action (drill started, refused, ended, expired;
//! re-arm) and per decision, in `<state dir>/audit.jsonl`.
//!
//! Line format (fields in this order; `service` and `detail` are left out when empty):
//!
//! ```json
//! {"time":1767225600000,"actor":"alice","action":"drill.drain","service":"api","reason":"quarterly DR drill","result":"ok","detail":{"id":"d-5f3a9c1e","pool":"seoul","expires":1767227400000}}
//! ```
//!
//! - `time`: RFC 3339, UTC, milliseconds ([`Millis`]; Unix milliseconds before, still read);
//! - `actor`: who (the API caller or CLI user as it names itself; `gslb` for the controller);
//! - `action`: `drill.drain`, `drill.restore`, `drill.force`, `drill.end`, `drill.expire`,
//!   `rearm`, `decision`, `failover.timeline` (a closed failover timeline, whole, in `detail`);
//! - `reason`: the operator's reason, or the rule for a decision;
//! - `result`: `ok`, `refused: <why>`, or for a decision what it does (`failover seoul ->
//!   tokyo`).
//!
//! Appending goes through [`JsonlWriter`]: it never blocks the caller, and lines that cannot
//! be queued are counted ([`AuditLog::dropped`]). At start, [`Past::read`] reads it back: the
//! timelines `GET /v1/events` lists and each service's last decision. This module decides nothing and sends
//! nothing to the engine; the engine loop writes the entries.

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::io::jsonl::{JsonlError, JsonlWriter};
use gslb_core::engine::{Decision, Override, OverrideError, OverrideRequest};
use gslb_core::model::{Millis, PoolId, ServiceId, VantageId};
use gslb_core::timeline::{CAPACITY, Timeline};

/// The actor of entries the controller makes by itself (expiries, decisions).
pub const CONTROLLER_ACTOR: &str = "gslb";

/// One audit line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// When, in Unix milliseconds.
    pub time: Millis,
    /// Who: the operator as named in the request, or [`CONTROLLER_ACTOR`].
    pub actor: String,
    /// What: `drill.drain`, `drill.restore`, `drill.force`, `drill.end`, `drill.expire`,
    /// `rearm`, `decision`.
    pub action: String,
    /// The service, when the action concerns one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceId>,
    /// Why (the operator's reason; the rule for a decision).
    pub reason: String,
    /// What came of it: `ok`, `refused: <why>`, `failover seoul -> tokyo`, ...
    pub result: String,
    /// Anything else worth keeping (override id, pool, expiry; a decision's reasons). Left out
    /// when null.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub detail: serde_json::Value,
}

impl AuditEntry {
    /// An entry with no service and no detail.
    pub fn new(
        time: Millis,
        actor: impl Into<String>,
        action: impl Into<String>,
        reason: impl Into<String>,
        result: impl Into<String>,
    ) -> Self {
        Self {
            time,
            actor: actor.into(),
            action: action.into(),
            service: None,
            reason: reason.into(),
            result: result.into(),
            detail: serde_json::Value::Null,
        }
    }

    /// Sets the service.
    #[must_use]
    pub fn with_service(mut self, service: ServiceId) -> Self {
        self.service = Some(service);
        self
    }

    /// Sets the detail.
    #[must_use]
    pub fn with_detail(mut self, detail: serde_json::Value) -> Self {
        self.detail = detail;
        self
    }

    /// A drill started: action `drill.<action>`, result `ok`, at the override's creation time.
    pub fn drill_started(o: &Override) -> Self {
        Self::new(
            o.created,
            &o.actor,
            format!("drill.{}", o.action),
            &o.reason,
            "ok",
        )
        .with_service(o.service.clone())
        .with_detail(override_detail(o))
    }

    /// A drill this instance loaded from the cluster's shared store (etcd), started elsewhere or
    /// put there directly: action `drill.load`, actor the drill's (as the store says), result
    /// `ok`, at `time`; the detail's `stored_by` names the vantage point whose key holds it
    /// (with etcd's auth on, the only one that could put it there).
    pub fn drill_loaded(time: Millis, o: &Override, stored_by: &VantageId) -> Self {
        let mut detail = override_detail(o);
        detail["stored_by"] = serde_json::Value::from(stored_by.0.as_str());
        Self::new(time, &o.actor, "drill.load", &o.reason, "ok")
            .with_service(o.service.clone())
            .with_detail(detail)
    }

    /// A drill request refused by the engine: action `drill.<action>`, result
    /// `refused: <why>`.
    pub fn drill_refused(time: Millis, req: &OverrideRequest, why: &OverrideError) -> Self {
        Self::new(
            time,
            &req.actor,
            format!("drill.{}", req.action),
            &req.reason,
            format!("refused: {why}"),
        )
        .with_service(req.service.clone())
        .with_detail(serde_json::json!({ "id": req.id, "pool": req.pool }))
    }

    /// A drill ended by an operator before its expiry: action `drill.end`, result `ok`.
    pub fn drill_ended(time: Millis, o: &Override, actor: &str, reason: &str) -> Self {
        Self::new(time, actor, "drill.end", reason, "ok")
            .with_service(o.service.clone())
            .with_detail(override_detail(o))
    }

    /// A drill reached its expiry: actor [`CONTROLLER_ACTOR`], action `drill.expire`, reason
    /// `expired`, result `ok`.
    pub fn drill_expired(time: Millis, o: &Override) -> Self {
        Self::new(time, CONTROLLER_ACTOR, "drill.expire", "expired", "ok")
            .with_service(o.service.clone())
            .with_detail(override_detail(o))
    }

    /// An end request for an unknown id: action `drill.end`, result `refused: <why>`.
    pub fn end_refused(time: Millis, actor: &str, reason: &str, why: &OverrideError) -> Self {
        Self::new(time, actor, "drill.end", reason, format!("refused: {why}"))
    }

    /// A re-arm: action `rearm`; `result` is `ok: <services>` or `refused: <why>`.
    pub fn rearm(
        time: Millis,
        actor: &str,
        service: Option<&ServiceId>,
        reason: &str,
        result: &Result<Vec<ServiceId>, OverrideError>,
    ) -> Self {
        let result = match result {
            Ok(services) => format!(
                "ok: {}",
                services
                    .iter()
                    .map(ServiceId::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Err(e) => format!("refused: {e}"),
        };
        let entry = Self::new(time, actor, "rearm", reason, result);
        match service {
            Some(s) => entry.with_service(s.clone()),
            None => entry,
        }
    }

    /// The decision `d` as audited: its rule, what it does (`failover seoul -> tokyo`,
    /// `hold on tokyo (blocked: failback_manual to seoul)`, `serve seoul`, `hold on seoul
    /// (nothing pushed)`) and its reasons (see [`AuditEntry::decision`]).
    pub fn decision_made(d: &Decision) -> Self {
        let pool = |p: &Option<PoolId>| {
            p.as_ref()
                .map_or_else(|| "-".to_owned(), ToString::to_string)
        };
        let result = match (&d.previous, &d.blocked) {
            (Some(from), _) if d.switched() => {
                format!("{} {from} -> {}", d.rule.as_str(), pool(&d.active))
            }
            (_, Some(b)) => format!(
                "hold on {} (blocked: {} to {})",
                pool(&d.active),
                b.rule.as_str(),
                b.to
            ),
            _ if d.rule.pushes() => format!("serve {}", pool(&d.active)),
            _ => format!("hold on {} (nothing pushed)", pool(&d.active)),
        };
        Self::decision(
            d.at,
            d.service.clone(),
            d.rule.as_str(),
            result,
            serde_json::json!({ "reasons": d.reasons, "drained": d.drained }),
        )
    }

    /// A decision: actor [`CONTROLLER_ACTOR`], action `decision`; `rule` goes in `reason`,
    /// what it does (`failover seoul -> tokyo`) in `result`, its reasons in `detail`.
    pub fn decision(
        time: Millis,
        service: ServiceId,
        rule: impl Into<String>,
        result: impl Into<String>,
        detail: serde_json::Value,
    ) -> Self {
        Self::new(time, CONTROLLER_ACTOR, "decision", rule, result)
            .with_service(service)
            .with_detail(detail)
    }
}

fn override_detail(o: &Override) -> serde_json::Value {
    serde_json::json!({
        "id": o.id,
        "action": o.action,
        "pool": o.pool,
        "created": o.created,
        "expires": o.expires,
        "actor": o.actor,
        "reason": o.reason,
    })
}

/// The action of a closed failover timeline's audit line (its `detail` is the [`Timeline`]).
pub const TIMELINE_ACTION: &str = "failover.timeline";

/// What an earlier run left in the audit log, read back at start: its last timelines (for
/// `GET /v1/events`) and each service's last decision (so a hold already notified is not
/// notified again).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Past {
    /// The last [`CAPACITY`] closed timelines, oldest first, each id once (its last line).
    pub timelines: Vec<Timeline>,
    /// Each service's last `decision` entry.
    pub decisions: BTreeMap<ServiceId, AuditEntry>,
    /// Lines that are not audit entries (a line cut short by a crash, an edit): skipped.
    pub skipped: usize,
}

impl Past {
    /// Reads the audit log at `path` from the start; a missing file is an empty past. Blocking
    /// file I/O: call it once at start (or on tokio's blocking pool). Time and memory grow with
    /// the file; only the last [`CAPACITY`] timelines and one decision per service are kept.
    ///
    /// # Errors
    /// The file exists but cannot be read.
    pub fn read(path: &Path) -> std::io::Result<Self> {
        let file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(e),
        };
        let mut past = Self::default();
        let mut timelines: VecDeque<Timeline> = VecDeque::new();
        for line in BufReader::new(file).lines() {
            let line = line?;
            let Ok(entry) = serde_json::from_str::<AuditEntry>(&line) else {
                past.skipped += usize::from(!line.trim().is_empty());
                continue;
            };
            match entry.action.as_str() {
                TIMELINE_ACTION => match serde_json::from_value::<Timeline>(entry.detail) {
                    Ok(t) => {
                        timelines.retain(|k| k.id != t.id);
                        timelines.push_back(t);
                        if timelines.len() > CAPACITY {
                            timelines.pop_front();
                        }
                    }
                    Err(_) => past.skipped += 1,
                },
                "decision" => {
                    if let Some(s) = entry.service.clone() {
                        past.decisions.insert(s, entry);
                    }
                }
                _ => {}
            }
        }
        past.timelines = timelines.into();
        Ok(past)
    }
}

/// The audit log file. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AuditLog {
    writer: JsonlWriter,
}

impl AuditLog {
    /// Opens (creates, appends to) the audit log at `path` with
    /// [`crate::io::jsonl::DEFAULT_CAPACITY`].
    ///
    /// # Errors
    /// [`JsonlError::Open`] naming the path.
    pub async fn open(path: impl Into<PathBuf>) -> Result<Self, JsonlError> {
        Ok(Self {
            writer: JsonlWriter::open(path, crate::io::jsonl::DEFAULT_CAPACITY).await?,
        })
    }

    /// Appends one entry without waiting; see [`JsonlWriter::append`]. Returns whether it
    /// was queued.
    pub fn record(&self, entry: &AuditEntry) -> bool {
        self.writer.append(entry)
    }

    /// Entries that never reached the file.
    pub fn dropped(&self) -> u64 {
        self.writer.dropped()
    }

    /// See [`JsonlWriter::count_drops_in`].
    pub fn count_drops_in(&self, metric: prometheus::IntCounter) {
        self.writer.count_drops_in(metric);
    }

    /// Waits until every recorded entry is written and synced.
    ///
    /// # Errors
    /// See [`JsonlWriter::flush`].
    pub async fn flush(&self) -> Result<(), JsonlError> {
        self.writer.flush().await
    }

    /// Writes, syncs and closes (at shutdown).
    ///
    /// # Errors
    /// See [`JsonlWriter::close`].
    pub async fn close(&self) -> Result<(), JsonlError> {
        self.writer.close().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gslb_core::engine::{OverrideAction, OverrideId};
    use gslb_core::model::PoolId;

    fn drain() -> Override {
        Override {
            id: OverrideId("d-1".into()),
            service: "api".into(),
            action: OverrideAction::Drain,
            pool: PoolId::from("seoul"),
            reason: "quarterly DR drill".into(),
            actor: "alice".into(),
            created: Millis(1_000),
            expires: Millis(1_801_000),
        }
    }

    #[test]
    fn a_started_drill_is_one_line_with_the_documented_fields() {
        let line = serde_json::to_string(&AuditEntry::drill_started(&drain())).expect("json");
        assert!(!line.contains('\n'));
        assert!(
            line.starts_with(
                r#"{"time":"1970-01-01T00:00:01.000Z","actor":"alice","action":"drill.drain","service":"api","reason":"quarterly DR drill","result":"ok","detail":{"#
            ),
            "{line}"
        );
        let back: AuditEntry = serde_json::from_str(&line).expect("parse back");
        assert_eq!(back.detail["expires"], "1970-01-01T00:30:01.000Z");
        assert_eq!(back.detail["pool"], "seoul");
    }

    #[test]
    fn empty_service_and_detail_are_left_out() {
        let e = AuditEntry::new(Millis(5), "bob", "rearm", "budget spent", "ok: api");
        assert_eq!(
            serde_json::to_string(&e).expect("json"),
            r#"{"time":"1970-01-01T00:00:00.005Z","actor":"bob","action":"rearm","reason":"budget spent","result":"ok: api"}"#
        );
    }

    #[test]
    fn refusals_say_why() {
        let req = OverrideRequest {
            id: OverrideId("d-2".into()),
            service: "api".into(),
            action: OverrideAction::Force,
            pool: "osaka".into(),
            reason: "try".into(),
            actor: "carol".into(),
            duration: None,
        };
        let err = OverrideError::UnknownPool {
            service: "api".into(),
            pool: "osaka".into(),
        };
        let e = AuditEntry::drill_refused(Millis(7), &req, &err);
        assert_eq!(e.action, "drill.force");
        assert_eq!(e.result, "refused: service 'api' has no pool 'osaka'");
        let r = AuditEntry::rearm(Millis(8), "dave", None, "spent", &Ok(vec!["api".into()]));
        assert_eq!((r.result.as_str(), r.service), ("ok: api", None));
    }

    #[tokio::test]
    async fn the_log_appends_entries_as_json_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state/audit.jsonl");
        let log = AuditLog::open(&path).await.expect("open");
        let o = drain();
        log.record(&AuditEntry::drill_started(&o));
        log.record(&AuditEntry::drill_expired(Millis(1_801_000), &o));
        log.flush().await.expect("flush");
        let text = std::fs::read_to_string(&path).expect("read");
        let entries: Vec<AuditEntry> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("line"))
            .collect();
        let actions: Vec<_> = entries.iter().map(|e| e.action.as_str()).collect();
        assert_eq!(actions, ["drill.drain", "drill.expire"]);
        assert_eq!(entries[1].actor, CONTROLLER_ACTOR);
        assert_eq!(log.dropped(), 0);
    }
}
