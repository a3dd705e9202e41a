//! Policies: TOML as written -> a validated [`Policy`].
//!
//! One file per service. [`parse`] checks one text, [`load`] files and folders; both report
//! every problem at once, each naming file, key and reason ([`PolicyErrors`]). Nothing outside
//! this module constructs a [`Policy`]. This module does no I/O beyond reading the files.
//!
//! Files, each using only those listed before it: `error` (problems, by file and key), `names`
//! (DNS names), `parts` (the validated parts: pools, endpoints, probe, thresholds, tuning),
//! `observe`, `route53` and `cloudflare` (one optional table or target each: as written,
//! validated, and its validation), `types` (the whole [`Policy`] and its [`Target`]), `raw`
//! (the rest of the TOML as written), `tuning` (the engine's tuning keys), `validate` (raw ->
//! [`Policy`], every table), and this module on top: parse and load.

mod cloudflare;
mod diff;
mod error;
mod names;
mod observe;
mod parts;
mod raw;
mod route53;
mod tuning;
mod types;
mod validate;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use cloudflare::{CloudflarePoolRef, CloudflareTarget};
pub use diff::PolicyDiff;
pub use error::{PolicyError, PolicyErrors};
pub use observe::{Observe, ServedBy, ServedByMarker};
pub use parts::*;
pub use route53::{Route53Pool, Route53Target};
pub use types::{Policy, Target};

use error::Report;

/// Parses and validates one policy text; `file` is only used in messages.
///
/// # Errors
/// Every problem found: TOML syntax, each unknown key, a wrong type, and every semantic rule
/// broken (see `docs/policy.md`).
pub fn parse(file: &Path, text: &str) -> Result<Policy, PolicyErrors> {
    let mut report = Report::new(file.to_path_buf());
    let value: toml::Table = match toml::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            report.add("", format!("not valid TOML: {}", e.message()));
            return Err(PolicyErrors(report.errors));
        }
    };
    let mut unknown = Vec::new();
    // serde_ignored writes an `Option`'s `Some` as a `?` segment; keys never contain one.
    let mut on_unknown =
        |path: serde_ignored::Path<'_>| unknown.push(path.to_string().replace(".?", ""));
    let de = serde_ignored::Deserializer::new(toml::Value::Table(value), &mut on_unknown);
    let parsed: Result<raw::RawPolicy, _> = serde_path_to_error::deserialize(de);
    for key in unknown {
        report.add(key, "unknown key");
    }
    match parsed {
        Ok(raw) => match validate::validate(raw, &mut report) {
            Some(policy) if report.errors.is_empty() => Ok(policy),
            _ => Err(PolicyErrors(report.errors)),
        },
        Err(e) => {
            let key = e.path().to_string();
            report.add(
                if key == "." { String::new() } else { key },
                e.into_inner().to_string(),
            );
            Err(PolicyErrors(report.errors))
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
    let mut files = Vec::new();
    for path in paths {
        match policy_files(path) {
            Ok(found) if found.is_empty() => errors.push(PolicyError {
                file: path.clone(),
                key: String::new(),
                reason: "folder holds no *.toml policy".into(),
            }),
            Ok(found) => {
                for f in found {
                    if !files.contains(&f) {
                        files.push(f);
                    }
                }
            }
            Err(e) => errors.push(PolicyError {
                file: path.clone(),
                key: String::new(),
                reason: e.to_string(),
            }),
        }
    }
    let mut policies = Vec::new();
    let mut services: BTreeMap<String, PathBuf> = BTreeMap::new();
    for file in files {
        let text = match std::fs::read_to_string(&file) {
            Ok(t) => t,
            Err(e) => {
                errors.push(PolicyError {
                    file,
                    key: String::new(),
                    reason: format!("cannot read: {e}"),
                });
                continue;
            }
        };
        match parse(&file, &text) {
            Ok(policy) => {
                if let Some(first) = services.insert(policy.service.0.clone(), file.clone()) {
                    errors.push(PolicyError {
                        file: file.clone(),
                        key: "service".into(),
                        reason: format!(
                            "service '{}' is already defined in {}",
                            policy.service,
                            first.display()
                        ),
                    });
                }
                policies.push((file, policy));
            }
            Err(PolicyErrors(mut e)) => errors.append(&mut e),
        }
    }
    if errors.is_empty() {
        Ok(policies)
    } else {
        Err(PolicyErrors(errors))
    }
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
