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

/// The most problems reported for one file: 100. Past that a file is not a policy with
/// mistakes but something else; the rest are counted in one last problem.
pub const MAX_PROBLEMS: usize = 100;

/// `errors` (of one file, in order), the first [`MAX_PROBLEMS`] of them and, when there were
/// more, one whole-file problem saying how many more.
pub(super) fn capped(mut errors: Vec<PolicyError>) -> Vec<PolicyError> {
    if errors.len() > MAX_PROBLEMS {
        let more = errors.len() - MAX_PROBLEMS;
        errors.truncate(MAX_PROBLEMS);
        let file = errors[0].file.clone();
        errors.push(PolicyError::whole_file(
            file,
            format!("{more} more problems not shown (the first {MAX_PROBLEMS} are)"),
        ));
    }
    errors
}

/// Where each line of a text starts, so a byte offset's [`Position`] costs a binary search and
/// a count within its line instead of a scan from the start of the text: a file with 40,000
/// problems is reported in linear time (issue 28).
#[derive(Debug, Clone)]
pub struct Lines<'t> {
    text: &'t str,
    starts: Vec<usize>,
}

impl<'t> Lines<'t> {
    /// Indexes `text` (one pass).
    pub fn new(text: &'t str) -> Self {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Self { text, starts }
    }

    /// The position of byte `offset` (clamped to the text's end and to a character boundary).
    pub fn position(&self, offset: usize) -> Position {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.starts.partition_point(|&s| s <= offset);
        let start = self.starts[line - 1];
        Position {
            line,
            column: self.text[start..offset].chars().count() + 1,
        }
    }

    /// Line `n` (from 1) without its line break; empty past the end.
    pub fn line(&self, n: usize) -> &'t str {
        let Some(&start) = n.checked_sub(1).and_then(|i| self.starts.get(i)) else {
            return "";
        };
        let end = self.starts.get(n).map_or(self.text.len(), |&e| e - 1);
        self.text[start..end].trim_end_matches('\r')
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
