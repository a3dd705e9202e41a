//! Validation of the engine's tuning keys: `mode`, `failback_hold*`, `[quorum]`, `[damping]`,
//! `[flapping]` and `[velocity]`. Reports every problem; builds nothing when one is found.

use std::time::Duration;

use super::error::Report;
use super::parts::{Damping, FailbackHold, Flapping, Quorum, Velocity};
use super::raw::{RawDamping, RawPolicy, RawVelocity};

/// The tuning of one policy, validated.
pub(super) struct Tuning {
    pub failback_hold: FailbackHold,
    pub quorum: Quorum,
    pub damping: Damping,
    pub flapping: Flapping,
    pub velocity: Velocity,
}

const SECOND: Duration = Duration::from_secs(1);
/// Longest tuning duration accepted: a week. Longer says "never" in a way that overflows.
const MAX_TUNING: Duration = Duration::from_secs(7 * 24 * 3600);
/// Largest count accepted for thresholds and budgets.
const MAX_COUNT: u32 = 1_000_000;

/// Reports `key` when `d` is longer than [`MAX_TUNING`].
fn at_most_a_week(key: &str, d: Duration, report: &mut Report) {
    if d > MAX_TUNING {
        report.add(
            key,
            format!(
                "{} is longer than the 7 days allowed",
                humantime::format_duration(d)
            ),
        );
    }
}

/// Checks the tuning keys of `raw`, adding every problem to `report`.
pub(super) fn tuning(raw: &RawPolicy, report: &mut Report) -> Tuning {
    let failback_hold = failback_hold(raw, report);
    limits(raw, report);
    let q = &raw.quorum;
    if q.fresh_intervals == 0 || q.fresh_intervals > 100 {
        report.add(
            "quorum.fresh_intervals",
            "must be between 1 and 100 (0 would make every report stale)",
        );
    }
    let damping = damping(&raw.damping, report);
    let f = &raw.flapping;
    if !(0.0..=100.0).contains(&f.low) || !(0.0..=100.0).contains(&f.high) || f.low >= f.high {
        report.add(
            "flapping",
            format!(
                "low and high are percentages with low < high, got low {} and high {}",
                f.low, f.high
            ),
        );
    }
    Tuning {
        failback_hold,
        quorum: Quorum {
            fresh_intervals: q.fresh_intervals,
            provider_vote: q.provider_vote,
        },
        damping,
        flapping: Flapping {
            high: f.high,
            low: f.low,
        },
        velocity: velocity(&raw.velocity, report),
    }
}

/// `failback_hold` and `failback_hold_max`: the cap is not below one step.
fn failback_hold(raw: &RawPolicy, report: &mut Report) -> FailbackHold {
    let failback_hold = FailbackHold {
        step: raw.failback_hold,
        max: raw.failback_hold_max,
    };
    if failback_hold.max < failback_hold.step {
        report.add(
            "failback_hold_max",
            format!(
                "{} is shorter than failback_hold {}",
                humantime::format_duration(failback_hold.max),
                humantime::format_duration(failback_hold.step)
            ),
        );
    }
    failback_hold
}

/// The outer limits: every tuning duration at most a week, every count at most
/// [`MAX_COUNT`].
fn limits(raw: &RawPolicy, report: &mut Report) {
    for (key, d) in [
        ("failback_hold", raw.failback_hold),
        ("failback_hold_max", raw.failback_hold_max),
        ("min_dwell", raw.min_dwell),
        ("damping.half_life", raw.damping.half_life),
        ("damping.max_suppress", raw.damping.max_suppress),
        ("velocity.refill", raw.velocity.refill),
    ] {
        at_most_a_week(key, d, report);
    }
    if let Some(b) = raw.rto_budget {
        at_most_a_week("rto_budget", b, report);
    }
    for (key, n) in [
        ("damping.penalty", raw.damping.penalty),
        ("damping.suppress", raw.damping.suppress),
        ("damping.reuse", raw.damping.reuse),
        ("velocity.burst", raw.velocity.burst),
    ] {
        if n > MAX_COUNT {
            report.add(key, format!("{n} is above the {MAX_COUNT} allowed"));
        }
    }
}

/// `[damping]`: a penalty, a half-life of a second or more, `0 < reuse < suppress`, and a
/// `max_suppress` long enough to ever suppress.
fn damping(d: &RawDamping, report: &mut Report) -> Damping {
    let damping = Damping {
        penalty: d.penalty,
        half_life: d.half_life,
        suppress: d.suppress,
        reuse: d.reuse,
        max_suppress: d.max_suppress,
    };
    if d.penalty == 0 {
        report.add("damping.penalty", "must be at least 1");
    }
    if d.half_life < SECOND {
        report.add("damping.half_life", "must be at least 1s");
    }
    if d.reuse == 0 || d.reuse >= d.suppress {
        report.add(
            "damping.reuse",
            format!(
                "must be above 0 and below damping.suppress ({}), got {}",
                d.suppress, d.reuse
            ),
        );
    }
    if d.max_suppress < d.half_life {
        report.add(
            "damping.max_suppress",
            format!(
                "{} is shorter than damping.half_life {}",
                humantime::format_duration(d.max_suppress),
                humantime::format_duration(d.half_life)
            ),
        );
    } else if d.half_life >= SECOND && damping.ceiling() <= f64::from(d.suppress) {
        report.add(
            "damping.max_suppress",
            format!(
                "too short to ever suppress: the penalty ceiling reuse x 2^(max_suppress/half_life) = {:.0} is not above suppress {}",
                damping.ceiling(),
                d.suppress
            ),
        );
    }
    damping
}

/// `[velocity]`: a burst of one switch or more, refilled a second or more apart.
fn velocity(v: &RawVelocity, report: &mut Report) -> Velocity {
    if v.burst == 0 {
        report.add(
            "velocity.burst",
            "must be at least 1 (0 would block even the first failover)",
        );
    }
    if v.refill < SECOND {
        report.add("velocity.refill", "must be at least 1s");
    }
    Velocity {
        burst: v.burst,
        refill: v.refill,
    }
}
