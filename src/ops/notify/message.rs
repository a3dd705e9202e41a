//! Which controller events people are told about, and gslb's generic JSON message for them
//! (schema version [`SCHEMA_VERSION`], documented in `docs/notifications.md`).
//!
//! Pure: no I/O. A switch is a decision that moved traffic (automatic or by a drill); a hold is
//! a decision entering a hold that needs attention; a drill is any override change. Holds that
//! are routine steps of a normal failover or failback and end by themselves (`confirm_target`,
//! at most one probe interval; `dwell`, the spacing rail; `failback_hold`, the wait before an
//! automatic failback) are not sent: the switch that follows them is. Nor is `hold_unknown`
//! (no fresh evidence for the serving pool): every start passes through it until the probes
//! rise, and a prober that lost its network is `prober_suspect`, which is sent.
//!
//! A service in `mode = "shadow"` writes nothing: its messages are sent all the same, so its
//! opinion can be compared with the writer's, but say so (`mode: "shadow"`, a summary starting
//! `[shadow]`, and "would switch" for a switch).

use serde::Serialize;

use crate::config::NotifyKind;
use gslb_core::engine::{Decision, Override, OverrideChange, Rule};
use gslb_core::event::Event;
use gslb_core::model::{Millis, PoolId, ServiceId, VantageId};
use gslb_core::policy::Mode;

/// The version of the JSON message; bumped only on an incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// One message, as the `json` format sends it. Every key is always present (`null` or `[]`
/// when it does not apply), so receivers can rely on the shape.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Notification {
    /// [`SCHEMA_VERSION`].
    pub version: u32,
    /// `switch`, `hold` or `drill`.
    pub kind: NotifyKind,
    /// The service.
    pub service: ServiceId,
    /// When it happened: RFC 3339 UTC with milliseconds.
    pub at: String,
    /// The vantage point (controller instance) that sends it.
    pub vantage: VantageId,
    /// The service's `mode` at this instance: `enforce`, or `shadow` when this instance only
    /// records what it would write (a switch did not happen at the provider).
    pub mode: Mode,
    /// One line for humans; starts `[shadow] ` in shadow mode.
    pub summary: String,
    /// Switch and hold: the engine rule (`failover`, `drain`, `fail_static`, ...); drill: null.
    pub rule: Option<&'static str>,
    /// Switch: the pool that served before; hold: the pool serving (it stays); drill: null.
    pub from: Option<PoolId>,
    /// Switch: the pool serving now; hold: the pool a blocked switch would have moved to, or
    /// null; drill: null.
    pub to: Option<PoolId>,
    /// Switch and hold: the decision's reasons; drill: empty.
    pub reasons: Vec<String>,
    /// Drill: the override change; otherwise null.
    pub drill: Option<DrillChange>,
}

/// A drill override change.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DrillChange {
    /// `added`, `ended`, `expired`, `completed` (a restore whose pool serves again) or
    /// `skipped` (a saved drill whose service or pool is gone).
    pub change: &'static str,
    /// The override's id.
    pub id: String,
    /// `drain`, `restore` or `force`.
    pub action: &'static str,
    /// The pool.
    pub pool: PoolId,
    /// Who started it.
    pub actor: String,
    /// Why it was started.
    pub reason: String,
    /// When it ends by itself: RFC 3339.
    pub expires: String,
    /// `ended`: who ended it; otherwise null.
    pub ended_by: Option<String>,
    /// `ended`: why; otherwise null.
    pub end_reason: Option<String>,
}

/// Whether a decision in `rule` is sent as a hold (see the module doc).
pub fn is_notified_hold(rule: Rule) -> bool {
    rule.is_hold()
        && !matches!(
            rule,
            Rule::ConfirmTarget | Rule::Dwell | Rule::FailbackHold | Rule::HoldUnknown
        )
}

impl Notification {
    /// The message for `event` sent by `vantage`, or `None` when people are not told about it.
    /// `now` dates drill changes other than `added` (their event carries no time of its own);
    /// `mode` gives the `mode` of the event's service.
    pub fn from_event(
        event: &Event,
        vantage: &VantageId,
        now: Millis,
        mode: impl Fn(&ServiceId) -> Mode,
    ) -> Option<Self> {
        let mut n = match event {
            Event::Decision(d) => Self::decision(d, vantage, mode(&d.service))?,
            Event::Override(c) => Self::drill(c, vantage, now, mode),
            _ => return None,
        };
        if n.mode == Mode::Shadow {
            n.summary = format!("[shadow] {}", n.summary);
        }
        Some(n)
    }

    fn decision(d: &Decision, vantage: &VantageId, mode: Mode) -> Option<Self> {
        let rule = d.rule.as_str();
        let (kind, from, to, summary) = if d.switched() {
            let (from, to) = (d.previous.clone(), d.active.clone());
            let verb = match mode {
                Mode::Enforce => "switched",
                Mode::Shadow => "would switch",
            };
            let summary = format!(
                "{}: {verb} {} → {} ({rule})",
                d.service,
                name(from.as_ref()),
                name(to.as_ref())
            );
            (NotifyKind::Switch, from, to, summary)
        } else if is_notified_hold(d.rule) {
            let to = d.blocked.as_ref().map(|b| b.to.clone());
            let summary = match &to {
                Some(t) => format!(
                    "{}: hold ({rule}): staying on {}, not moving to {t}",
                    d.service,
                    name(d.active.as_ref())
                ),
                None => format!(
                    "{}: hold ({rule}): staying on {}",
                    d.service,
                    name(d.active.as_ref())
                ),
            };
            (NotifyKind::Hold, d.active.clone(), to, summary)
        } else {
            return None;
        };
        Some(Self {
            version: SCHEMA_VERSION,
            kind,
            service: d.service.clone(),
            at: d.at.rfc3339(),
            vantage: vantage.clone(),
            mode,
            summary,
            rule: Some(rule),
            from,
            to,
            reasons: d.reasons.clone(),
            drill: None,
        })
    }

    fn drill(
        c: &OverrideChange,
        vantage: &VantageId,
        now: Millis,
        mode: impl Fn(&ServiceId) -> Mode,
    ) -> Self {
        let (change, o, ended_by, end_reason) = match c {
            OverrideChange::Added(o) => ("added", o, None, None),
            OverrideChange::Ended {
                ended,
                actor,
                reason,
            } => ("ended", ended, Some(actor.clone()), Some(reason.clone())),
            OverrideChange::Expired(o) => ("expired", o, None, None),
            OverrideChange::Completed(o) => ("completed", o, None, None),
            OverrideChange::Skipped(o) => ("skipped", o, None, None),
        };
        let summary = drill_summary(change, o, ended_by.as_deref());
        Self {
            version: SCHEMA_VERSION,
            kind: NotifyKind::Drill,
            service: o.service.clone(),
            // An added drill carries its creation time; the other changes are published as
            // they happen.
            at: match change {
                "added" => o.created,
                _ => now,
            }
            .rfc3339(),
            vantage: vantage.clone(),
            mode: mode(&o.service),
            summary,
            rule: None,
            from: None,
            to: None,
            reasons: Vec::new(),
            drill: Some(DrillChange {
                change,
                id: o.id.0.clone(),
                action: o.action.as_str(),
                pool: o.pool.clone(),
                actor: o.actor.clone(),
                reason: o.reason.clone(),
                expires: o.expires.rfc3339(),
                ended_by,
                end_reason,
            }),
        }
    }
}

fn drill_summary(change: &str, o: &Override, ended_by: Option<&str>) -> String {
    let what = format!("drill {} ({} {})", o.id.0, o.action, o.pool);
    match change {
        "added" => format!(
            "{}: {what} started by {} until {}: {}",
            o.service,
            o.actor,
            o.expires.rfc3339(),
            o.reason
        ),
        "ended" => format!("{}: {what} ended by {}", o.service, ended_by.unwrap_or("?")),
        "completed" => format!("{}: {what} completed: {} serves again", o.service, o.pool),
        "skipped" => format!(
            "{}: saved {what} skipped: {}",
            o.service,
            gslb_core::engine::Overrides::skip_reason(o)
        ),
        _ => format!("{}: {what} expired", o.service),
    }
}

fn name(p: Option<&PoolId>) -> &str {
    p.map_or("none", |p| p.0.as_str())
}
