//! `gslb check`: validates policy files or folders and prints, per policy, its worst-case
//! failover with each engine wait named, with warnings for an exceeded `rto_budget` or an `[observe]` table that watches
//! nothing.

use std::io::Write;
use std::path::PathBuf;

use gslb_core::policy::{self, PolicyErrors};

/// Why `gslb check` failed.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// A policy is invalid: every problem, with file, key and reason (exit code 2).
    #[error("{0}")]
    Invalid(#[from] PolicyErrors),
    /// Writing the report failed (exit code 1).
    #[error("writing the report: {0}")]
    Write(#[from] std::io::Error),
}

/// Loads every policy in `paths` and prints one `ok:` line per policy to `out`, each followed
/// by its warnings.
///
/// # Errors
/// See [`CheckError`]; nothing is printed when a policy is invalid.
pub fn run(paths: &[PathBuf], out: &mut impl Write) -> Result<(), CheckError> {
    let policies = policy::load(paths)?;
    for (file, p) in &policies {
        writeln!(
            out,
            "ok: {} (service {}, {} pools, worst-case failover {}: detection and TTL {} + {} + expected apply time {})",
            file.display(),
            p.service,
            p.pools.len(),
            humantime::format_duration(p.worst_case_rto()),
            humantime::format_duration(p.worst_case_failover()),
            p.failover_waits_text(),
            humantime::format_duration(p.target.expected_apply_time()),
        )?;
        if let Some(w) = p.rto_warning() {
            writeln!(out, "warning: {}: rto_budget: {w}", file.display())?;
        }
        if let Some(w) = p.observe_warning() {
            writeln!(out, "warning: {}: observe: {w}", file.display())?;
        }
    }
    Ok(())
}
