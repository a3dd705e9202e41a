//! `gslb replay`: runs the pure engine over a recorded observation log (JSON lines of
//! [`Step`]s, as the daemon writes with `[record] observations`) and returns the decisions it
//! makes, so a team can tune thresholds against a past incident before changing production.
//!
//! With the policies the recording was made with, the decisions are exactly the live ones.

use std::io::BufRead;

use crate::engine::{Decision, Engine, EngineSettings, Step};
use crate::policy::Policy;

/// Why a recording could not be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// Reading failed.
    #[error("reading the recording: {0}")]
    Read(#[from] std::io::Error),
    /// A line is not a recorded step.
    #[error("line {line}: not a recorded step: {reason}")]
    Parse {
        /// 1-based line number.
        line: usize,
        /// The JSON error.
        reason: String,
    },
}

/// Replays `recording` through a fresh engine for `policies` and returns every decision that
/// changed (rule, serving pool, blocked switch or drained pools), in order: the decisions the
/// live controller published. Steps for services not in `policies` are ignored; blank lines are
/// skipped.
///
/// # Errors
/// See [`ReplayError`]; nothing is returned for a partly unreadable recording.
pub fn replay(
    policies: Vec<Policy>,
    settings: &EngineSettings,
    recording: impl BufRead,
) -> Result<Vec<Decision>, ReplayError> {
    let mut engine = Engine::new(policies, settings);
    let mut decisions = Vec::new();
    for (i, line) in recording.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let step: Step = serde_json::from_str(&line).map_err(|e| ReplayError::Parse {
            line: i + 1,
            reason: e.to_string(),
        })?;
        let out = engine.step(step.at, &step.input);
        decisions.extend(out.changed().cloned());
    }
    Ok(decisions)
}
