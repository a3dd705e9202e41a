//! The drill report of a failover timeline, as `gslb events` and `gslb demo` print it: each
//! phase with its absolute time and its offset from the start, then the figures a DR report is
//! built on. Pure formatting.
//!
//! ```text
//! api-1764439211204: seoul -> tokyo (automatic, failover), complete
//!   2026-11-29T18:00:10.592Z      +0 ms  first failed probe
//!   2026-11-29T18:00:11.004Z    +412 ms  marked down
//!   ...
//!   detection time      412 ms  (marked down - first failed probe)
//! ```

use std::fmt::Write as _;
use std::time::Duration;

use super::{Phase, Timeline};
use crate::model::{Millis, PoolId};
use crate::policy::Mode;

/// The words for a phase in the report.
pub fn phase_label(p: Phase) -> &'static str {
    match p {
        Phase::FirstFailedProbe => "first failed probe",
        Phase::MarkedDown => "marked down",
        Phase::Decision => "decision",
        Phase::ProviderAccepted => "provider accepted",
        Phase::ProviderInSync => "provider in sync",
        Phase::DnsObserved => "first DNS answer naming the new pool",
        Phase::ServedByObserved => "first response served by the new pool",
    }
}

/// The report of one timeline: a header line, one line per phase, then the figures.
pub fn render(t: &Timeline) -> String {
    let mut s = header(t);
    phases(t, &mut s);
    figures(t, &mut s);
    s
}

/// `<id> <service>: <from> -> <to> (<kind>, <rule>[, shadow: not written]), <status>`.
fn header(t: &Timeline) -> String {
    let pool = |p: &Option<PoolId>| {
        p.as_ref()
            .map_or_else(|| "-".to_owned(), ToString::to_string)
    };
    // A shadow service's switch is one gslb would have made.
    let shadow = match t.mode {
        Mode::Enforce => "",
        Mode::Shadow => ", shadow: not written",
    };
    format!(
        "{} {}: {} -> {} ({}, {}{shadow}), {}\n",
        t.id,
        t.service,
        pool(&t.from),
        pool(&t.to),
        t.kind.as_str(),
        t.rule,
        t.status.as_str(),
    )
}

/// One line per phase: its time, its offset from the start and what an observer saw, or `-`.
fn phases(t: &Timeline, s: &mut String) {
    let start = t.start();
    for phase in Phase::ALL {
        match t.phases.get(phase) {
            Some(at) => {
                let _ = write!(
                    s,
                    "  {}  {:>10}  {}",
                    at.rfc3339(),
                    format!("+{}", ms(at.since(start))),
                    phase_label(phase)
                );
                if let Some(d) = t.observed.get(phase.as_str()) {
                    let _ = write!(s, " ({d})");
                }
                if phase == Phase::Decision && !t.waited.is_empty() {
                    let _ = write!(s, " (waited: {})", t.waited.join(", "));
                }
                s.push('\n');
            }
            None => {
                let _ = writeln!(s, "  {:<24}  {:>10}  {}", "-", "", phase_label(phase));
            }
        }
    }
}

/// The figures a DR report is built on, each with how it is measured.
fn figures(t: &Timeline, s: &mut String) {
    let p = &t.phases;
    let start = t.start();
    let between = |a: Option<Millis>, b: Option<Millis>| match (a, b) {
        (Some(a), Some(b)) => ms(b.since(a)),
        _ => "-".to_owned(),
    };
    let rows = [
        (
            "detection time",
            between(p.first_failed_probe, p.marked_down),
            "marked down - first failed probe",
        ),
        (
            "decision time",
            between(p.marked_down.or(p.first_failed_probe), p.decision),
            "decision - marked down",
        ),
        (
            "apply time",
            between(p.decision, p.provider_accepted),
            "provider accepted - decision",
        ),
        (
            "in sync time",
            between(p.decision, p.provider_in_sync),
            "provider in sync - decision",
        ),
        (
            "DNS-observed time",
            between(Some(start), p.dns_observed),
            "first DNS answer naming the new pool - start",
        ),
        (
            "read RTO",
            between(Some(start), p.served_by_observed),
            "first response served by the new pool - start",
        ),
    ];
    for (name, value, how) in rows {
        let _ = writeln!(s, "  {name:<18} {value:>10}  ({how})");
    }
}

/// Every timeline's report, separated by blank lines, or `no failover timelines`.
pub fn render_all(timelines: &[Timeline]) -> String {
    if timelines.is_empty() {
        return "no failover timelines\n".into();
    }
    timelines.iter().map(render).collect::<Vec<_>>().join("\n")
}

/// Whole milliseconds, e.g. `1234 ms`.
fn ms(d: Duration) -> String {
    format!("{} ms", d.as_millis())
}
