//! Policies: TOML as written -> a validated [`Policy`].
//!
//! One file per service. [`parse`] checks one text, [`load`] files and folders ([`load_each`]
//! file by file); they report every problem at once, each naming file, line and column (when the
//! key is written), key and reason ([`PolicyErrors`]). Nothing outside this module constructs a
//! [`Policy`]. This module does no I/O beyond reading the files. Its TOML reader ([`Source`],
//! [`read_all_with`]) also reads the daemon settings.
//!
//! Files, each using only those listed before it: `error` (problems, by file, position and
//! key), `words` (serde's messages in the policy's words), `lenient` (reading every problem at
//! once), `source` (syntax errors and key positions), `names` (DNS names), `parts` (the
//! validated parts: pools, endpoints, probe, thresholds, tuning), `observe`, `route53` and
//! `cloudflare` (one optional table or target each: as written, validated, and its validation),
//! `types` (the whole [`Policy`] and its [`Target`]), `raw` (the rest of the TOML as written),
//! `tuning` (the engine's tuning keys), `validate` (raw -> [`Policy`], every table), and this
//! module on top: parse and load.

mod cloudflare;
mod diff;
pub mod duration;
mod error;
pub mod file;
mod lenient;
mod names;
mod observe;
mod parts;
mod raw;
mod route53;
mod source;
mod strict;
mod tuning;
mod types;
mod validate;
mod words;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

pub use cloudflare::{CloudflarePoolRef, CloudflareTarget};
pub use diff::PolicyDiff;
pub use error::{PolicyError, PolicyErrors, Position};
pub use lenient::{Problem, Read, Segment, is_under, read_all, read_all_with};
pub use observe::{Observe, ServedBy, ServedByMarker};
pub use parts::*;
pub use route53::{AliasTarget, Route53Pool, Route53Target};
pub use source::{Source, SyntaxError};
pub use types::{Policy, Target};
pub use words::toml_reason;

use error::{Report, capped};

/// Parses and validates one policy text; `file` is only used in messages.
///
/// # Errors
/// Every problem found, each with its line and column when the key is written in the text:
/// every TOML syntax error (then nothing else is checked), each unknown key, each value of the
/// wrong type or required and missing, and every semantic rule broken (see `docs/policy.md`)
/// by the values that could be read.
pub fn parse(file: &Path, text: &str) -> Result<Policy, PolicyErrors> {
    let mut report = Report::new(file.to_path_buf());
    let source = match Source::parse(text) {
        Ok(s) => s,
        Err(syntax) => {
            for e in syntax {
                report.add_at("", Some(e.at), e.reason());
            }
            return Err(PolicyErrors(capped(report.errors)));
        }
    };
    let value: toml::Table = match toml::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            let at = e.span().map(|s| source.position(s.start));
            report.add_at(
                "",
                at,
                format!("not valid TOML: {}", words::toml_reason(e.message())),
            );
            return Err(PolicyErrors(report.errors));
        }
    };
    let read = lenient::read_all::<raw::RawPolicy>(toml::Value::Table(value));
    for key in &read.unknown {
        report.add_at(key.clone(), source.locate(key), "unknown key");
    }
    for p in &read.invalid {
        report.add_at(p.key.clone(), source.locate(&p.key), p.reason.clone());
    }
    let Some(raw) = read.value else {
        return Err(PolicyErrors(capped(report.errors)));
    };
    let mut rules = Report::new(file.to_path_buf());
    let policy = validate::validate(raw, &mut rules);
    for e in rules.errors {
        // A rule broken by a default or placeholder standing in for a reported value is not
        // the author's.
        if !lenient::is_under(&read.touched, &e.key) {
            report.add_at(e.key.clone(), source.locate(&e.key), e.reason);
        }
    }
    match policy {
        Some(policy) if report.errors.is_empty() => Ok(policy),
        _ => {
            // In the order of the file; problems with no position (rules across keys) last.
            report.errors.sort_by_key(|e| (e.at.is_none(), e.at));
            Err(PolicyErrors(capped(report.errors)))
        }
    }
}

/// Parses one endpoint written as in a policy (`https://…`, `http://…`, `tcp://host:port`),
/// for endpoints outside policies (canaries).
///
/// # Errors
/// `key: reason` when it is not a valid endpoint.
pub fn endpoint(raw: &str, key: &str) -> Result<Endpoint, String> {
    let mut report = Report::new(PathBuf::new());
    validate::endpoint(raw, "", key, &mut report).ok_or_else(|| {
        report
            .errors
            .first()
            .map_or_else(String::new, |e| format!("{key}: {}", e.reason))
    })
}

/// Loads every policy in `paths`: files as given, folders as their `*.toml` files in name
/// order. Service names must be unique across the set.
///
/// # Errors
/// Every problem in every file, plus unreadable paths, empty folders and duplicate services.
pub fn load(paths: &[PathBuf]) -> Result<Vec<(PathBuf, Policy)>, PolicyErrors> {
    let mut errors = Vec::new();
    let mut policies = Vec::new();
    for (file, result) in load_each(paths) {
        match result {
            Ok(policy) => policies.push((file, policy)),
            Err(PolicyErrors(mut e)) => errors.append(&mut e),
        }
    }
    if errors.is_empty() {
        Ok(policies)
    } else {
        Err(PolicyErrors(errors))
    }
}

/// Every policy file in `paths`, as [`load`] finds them, each with its policy or its problems,
/// in order: one bad file does not hide the others' results. A path that cannot be read and a
/// folder holding no policy are entries of their own; a service already defined by an earlier
/// file is a problem of the later one.
pub fn load_each(paths: &[PathBuf]) -> Vec<(PathBuf, Result<Policy, PolicyErrors>)> {
    let mut out = Vec::new();
    let mut files = Vec::new();
    // A file named twice (a folder and a file in it) is read once: a set, not a scan of the
    // list (issue 14: 5,000 files made that 12.5 million path comparisons).
    let mut seen = BTreeSet::new();
    for path in paths {
        let whole = |reason: String| {
            let e = PolicyErrors(vec![PolicyError::whole_file(path.clone(), reason)]);
            (path.clone(), Err(e))
        };
        match policy_files(path) {
            Ok(found) if found.is_empty() => {
                out.push(whole("folder holds no *.toml policy".into()))
            }
            Ok(found) => {
                for f in found {
                    if seen.insert(f.clone()) {
                        files.push(f);
                    }
                }
            }
            Err(e) => out.push(whole(e.to_string())),
        }
    }
    let mut services: BTreeMap<String, PathBuf> = BTreeMap::new();
    for file in files {
        let result = match file::read_text(&file, file::MAX_TEXT_FILE) {
            Ok(text) => parse(&file, &text),
            Err(reason) => Err(PolicyErrors(vec![PolicyError::whole_file(
                file.clone(),
                format!("cannot read: {reason}"),
            )])),
        };
        let result = result.and_then(|policy| match services.get(&policy.service.0) {
            Some(first) => Err(PolicyErrors(vec![PolicyError {
                file: file.clone(),
                key: "service".into(),
                at: None,
                reason: format!(
                    "service '{}' is already defined in {}",
                    policy.service,
                    first.display()
                ),
            }])),
            None => {
                services.insert(policy.service.0.clone(), file.clone());
                Ok(policy)
            }
        });
        out.push((file, result));
    }
    out
}

/// The policy files `path` names, as [`load`] reads them: the file itself, or a folder's
/// `*.toml` files in name order.
///
/// # Errors
/// `path` cannot be read.
pub fn policy_files(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    if !path.is_dir() {
        std::fs::metadata(path)?;
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str = include_str!("../../../policies/api-seoul-tokyo.toml");

    #[test]
    fn a_file_named_again_inside_a_named_folder_is_read_once_in_folder_order() {
        let dir = std::env::temp_dir().join(format!("gslb-load-each-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("a.toml"), POLICY).expect("write");
        let b = POLICY.replace("service = \"api\"", "service = \"web\"");
        std::fs::write(dir.join("b.toml"), b).expect("write");
        let paths = [dir.join("b.toml"), dir.clone(), dir.join("a.toml")];
        let loaded = load(&paths);
        std::fs::remove_dir_all(&dir).expect("clean up");
        let loaded = loaded.expect("no service is defined twice");
        let files: Vec<_> = loaded
            .iter()
            .map(|(f, p)| (f.clone(), p.service.0.clone()))
            .collect();
        assert_eq!(
            files,
            vec![
                (dir.join("b.toml"), "web".into()),
                (dir.join("a.toml"), "api".into())
            ]
        );
    }
}
