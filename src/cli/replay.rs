//! `gslb replay`: runs the pure engine over a recorded observation log (JSON lines of
//! [`Step`]s, as the daemon writes with `[record] observations`) and returns the decisions it
//! makes, so a team can tune thresholds against a past incident before changing production.
//!
//! With the policies the recording was made with, the decisions are exactly the live ones:
//! every run of the controller starts with an [`Input::Start`] step, where the replay starts a
//! fresh engine as the restarted controller did. A policy reload is recorded as an
//! [`Input::Reload`] step naming the services it reset or removed; the replay keeps its own
//! policies and resets (or drops) those services there, as the live engine did.

use std::collections::BTreeSet;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use gslb_core::engine::{Decision, Engine, EngineSettings, Input, Step};
use gslb_core::model::ServiceId;
use gslb_core::policy::Policy;

/// Why a recording could not be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// Reading failed.
    #[error("reading the recording: {0}")]
    Read(#[from] std::io::Error),
    /// A line other than the last is not a recorded step.
    #[error("line {line}: not a recorded step: {reason}")]
    Parse {
        /// 1-based line number.
        line: usize,
        /// The JSON error.
        reason: String,
    },
}

/// `gslb replay`: loads `policies` and the `[engine]` table of `config` (default: the
/// defaults), replays `observations` and prints the decisions to stdout, warnings to stderr.
///
/// # Errors
/// Bad policies or settings (exit code 2), an unreadable or unparsable recording (exit code 1).
pub fn command(
    policies: &[PathBuf],
    observations: &Path,
    config: Option<&Path>,
) -> Result<(), crate::cli::run::RunError> {
    use crate::cli::run::RunError;
    let policies = gslb_core::policy::load(policies).map_err(RunError::config)?;
    let engine = match config {
        Some(c) => {
            crate::config::Settings::load(c)
                .map_err(RunError::config)?
                .engine
        }
        None => crate::config::EngineConfig::default(),
    };
    let file = std::fs::File::open(observations)
        .map_err(|e| RunError::runtime(e).context(format!("opening {}", observations.display())))?;
    print(
        policies.into_iter().map(|(_, p)| p).collect(),
        &engine.engine_settings(),
        std::io::BufReader::new(file),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    )
    .map_err(|e| RunError::runtime(e).context(format!("replaying {}", observations.display())))
}

/// What a replay produced.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    /// Every decision that changed (rule, serving pool, blocked switch or drained pools), in
    /// order: the decisions the live controller published.
    pub decisions: Vec<Decision>,
    /// Steps replayed.
    pub steps: usize,
    /// Controller runs in the recording (`start` steps; a recording made before they existed
    /// counts as one).
    pub runs: usize,
    /// Services the recording observed that none of the policies names.
    pub unknown_services: BTreeSet<ServiceId>,
    /// The last line, when it is cut short (a crash mid-write): `(line number, reason)`. It is
    /// skipped; everything before it is replayed.
    pub truncated_last_line: Option<(usize, String)>,
}

/// `gslb replay`: replays `recording` with `policies` and `settings`, then prints every
/// decision with its reasons to `out` and warnings (a cut last line, services the recording
/// names but no policy does) to `warn`.
///
/// # Errors
/// The recording cannot be read ([`ReplayError`]), or writing fails.
pub fn print(
    policies: Vec<Policy>,
    settings: &EngineSettings,
    recording: impl BufRead,
    out: &mut impl std::io::Write,
    warn: &mut impl std::io::Write,
) -> Result<(), ReplayError> {
    let replayed = replay(policies, settings, recording)?;
    if let Some((line, reason)) = &replayed.truncated_last_line {
        writeln!(
            warn,
            "warning: the last line ({line}) is cut short and was skipped: {reason}"
        )?;
    }
    if !replayed.unknown_services.is_empty() {
        let names: Vec<_> = replayed
            .unknown_services
            .iter()
            .map(ToString::to_string)
            .collect();
        writeln!(
            warn,
            "warning: the recording observes services no given policy names: {}",
            names.join(", ")
        )?;
    }
    for d in &replayed.decisions {
        print_decision(d, out)?;
    }
    let decisions = &replayed.decisions;
    writeln!(
        out,
        "{} decision(s), {} switch(es) from {} step(s) in {} run(s)",
        decisions.len(),
        decisions.iter().filter(|d| d.switched()).count(),
        replayed.steps,
        replayed.runs
    )?;
    Ok(())
}

/// One decision: time, service, rule, serving pool, what was blocked, then each reason.
fn print_decision(d: &Decision, out: &mut impl std::io::Write) -> std::io::Result<()> {
    writeln!(
        out,
        "{} {} {} -> {}{}",
        d.at.rfc3339(),
        d.service,
        d.rule.as_str(),
        d.active.as_ref().map_or("-", |p| p.0.as_str()),
        d.blocked.as_ref().map_or_else(String::new, |b| format!(
            " (blocked: {} to {})",
            b.rule.as_str(),
            b.to
        )),
    )?;
    for r in &d.reasons {
        writeln!(out, "    - {r}")?;
    }
    Ok(())
}

/// Replays `recording` through a fresh engine for `policies` (a new one at every `start`
/// step). Steps for services not in `policies` are ignored and listed; blank lines are skipped;
/// a malformed *last* line is skipped and reported.
///
/// # Errors
/// See [`ReplayError`]; nothing is returned for a recording unreadable before its last line.
pub fn replay(
    policies: Vec<Policy>,
    settings: &EngineSettings,
    recording: impl BufRead,
) -> Result<Replay, ReplayError> {
    let known: BTreeSet<ServiceId> = policies.iter().map(|p| p.service.clone()).collect();
    let fresh = || Engine::new(policies.clone(), settings);
    let mut engine = fresh();
    let mut out = Replay {
        runs: 1,
        ..Replay::default()
    };
    let mut lines = recording.lines().enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let step: Step = match serde_json::from_str(&line) {
            Ok(s) => s,
            Err(e) if lines.peek().is_none() => {
                out.truncated_last_line = Some((i + 1, e.to_string()));
                break;
            }
            Err(e) => {
                return Err(ReplayError::Parse {
                    line: i + 1,
                    reason: e.to_string(),
                });
            }
        };
        match &step.input {
            Input::Start if out.steps > 0 => {
                engine = fresh();
                out.runs += 1;
            }
            Input::Observe { service, .. } | Input::Adopt { service, .. }
                if !known.contains(service) =>
            {
                out.unknown_services.insert(service.clone());
            }
            _ => {}
        }
        out.steps += 1;
        let result = engine.step(step.at, &step.input);
        out.decisions.extend(result.changed().cloned());
    }
    Ok(out)
}
