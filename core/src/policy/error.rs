//! Policy errors: every problem names its file, its key, where it is (line and column, when
//! known) and the reason.

use std::fmt;
use std::path::PathBuf;

/// Where in a file: 1-based line and column (the column counts characters, not bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1, in characters.
    pub column: usize,
}

impl Position {
    /// The position of byte `offset` in `text` (clamped to its end and to a character
    /// boundary).
    pub fn of(text: &str, offset: usize) -> Self {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &text[..offset];
        let start = before.rfind('\n').map_or(0, |i| i + 1);
        Self {
            line: before.matches('\n').count() + 1,
            column: before[start..].chars().count() + 1,
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// One problem in one policy file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError {
    /// The file, as given on the command line or in the daemon config.
    pub file: PathBuf,
    /// The dotted key, e.g. `health.fall` or `pools[1].endpoints[0]`; empty for whole-file
    /// problems (unreadable, not TOML).
    pub key: String,
    /// Where the key (or the syntax error) is in the file, when known: not for whole-file
    /// problems, keys left out (a missing key) or rules spanning keys.
    pub at: Option<Position>,
    /// What is wrong, in words a policy author can act on.
    pub reason: String,
}

impl PolicyError {
    /// A problem of the whole file (unreadable, an empty folder): no key, no position.
    pub fn whole_file(file: PathBuf, reason: impl Into<String>) -> Self {
        Self {
            file,
            key: String::new(),
            at: None,
            reason: reason.into(),
        }
    }
}

/// `file:line:column: key: reason`, as compilers write it; the parts not known are left out.
impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(at) = self.at {
            write!(f, ":{at}")?;
        }
        if !self.key.is_empty() {
            write!(f, ": {}", self.key)?;
        }
        write!(f, ": {}", self.reason)
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
        self.add_at(key, None, reason);
    }

    pub(super) fn add_at(
        &mut self,
        key: impl Into<String>,
        at: Option<Position>,
        reason: impl Into<String>,
    ) {
        self.errors.push(PolicyError {
            file: self.file.clone(),
            key: key.into(),
            at,
            reason: reason.into(),
        });
    }
}
