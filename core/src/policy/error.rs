//! Policy errors: every problem names its file, its key and the reason.

use std::fmt;
use std::path::PathBuf;

/// One problem in one policy file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError {
    /// The file, as given on the command line or in the daemon config.
    pub file: PathBuf,
    /// The dotted key, e.g. `health.fall` or `pools[1].endpoints[0]`; empty for whole-file
    /// problems (unreadable, not TOML).
    pub key: String,
    /// What is wrong, in words a policy author can act on.
    pub reason: String,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "{}: {}", self.file.display(), self.reason)
        } else {
            write!(f, "{}: {}: {}", self.file.display(), self.key, self.reason)
        }
    }
}

/// Every problem found, across every file checked. Never empty.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct PolicyErrors(pub Vec<PolicyError>);

impl fmt::Display for PolicyErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

/// Collects problems for one file.
#[derive(Debug)]
pub(super) struct Report {
    file: PathBuf,
    pub(super) errors: Vec<PolicyError>,
}

impl Report {
    pub(super) fn new(file: PathBuf) -> Self {
        Self {
            file,
            errors: Vec::new(),
        }
    }

    pub(super) fn add(&mut self, key: impl Into<String>, reason: impl Into<String>) {
        self.errors.push(PolicyError {
            file: self.file.clone(),
            key: key.into(),
            reason: reason.into(),
        });
    }
}
