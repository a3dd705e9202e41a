//! Reading the settings: the file (TOML) with `GSLB_*` environment variables over it, every
//! problem reported at once and blamed on where it comes from. Each unknown key and each value
//! of the wrong type is reported (with [`gslb_core::policy::read_all_with`], the policies'
//! reader), each at its line in the file or naming its environment variable. Works for any
//! section, including sections added later: nothing here lists them.

use std::path::Path;

use gslb_core::policy::{Position, Segment, Source, is_under, read_all_with, toml_reason};
use serde::de::DeserializeOwned;
use toml::Value;

/// One `GSLB_*` variable read as a settings key.
struct Var {
    /// Its name, e.g. `GSLB_ADMIN__LISTEN`.
    name: String,
    /// The key it sets, e.g. `admin.listen`.
    key: String,
    /// Its text, as set.
    text: String,
}

/// The settings key of variable `name` (after `GSLB_`): lower case, `__` between levels.
fn key_of(rest: &str) -> Vec<Segment> {
    rest.to_ascii_lowercase()
        .split("__")
        .map(|k| Segment::Key(k.to_owned()))
        .collect()
}

/// `text` as the `config` crate's `try_parsing` read it (gslb used that crate before): `true`/`false`, an integer, a float,
/// else a string; `list_keys` are comma-separated lists of strings.
fn parse(text: &str, key: &str, list_keys: &[&str]) -> Value {
    if list_keys.contains(&key) {
        return Value::Array(
            text.split(',')
                .map(|s| Value::String(s.trim().to_owned()))
                .collect(),
        );
    }
    if let Ok(b) = text.to_ascii_lowercase().parse::<bool>() {
        Value::Boolean(b)
    } else if let Ok(i) = text.parse::<i64>() {
        Value::Integer(i)
    } else if let Ok(f) = text.parse::<f64>() {
        Value::Float(f)
    } else {
        Value::String(text.to_owned())
    }
}

/// Reads `file`, sets each of `env` (`GSLB_*` variables, without those that are not settings)
/// over it and deserialises a `T`. `list_keys` are the keys whose variables are lists.
///
/// # Errors
/// Every problem, one line each: `file:line:column: key: reason` (the position when known) or
/// `environment variable GSLB_X: key: reason`.
pub(super) fn read<T: DeserializeOwned>(
    file: &Path,
    env: &[(String, String)],
    list_keys: &[&str],
) -> Result<T, Vec<String>> {
    let name = file.display().to_string();
    let text = gslb_core::policy::file::read_text(file, gslb_core::policy::file::MAX_TEXT_FILE)
        .map_err(|reason| vec![format!("{name}: cannot read: {reason}")])?;
    let source = Source::parse(&text).map_err(|errors| {
        errors
            .iter()
            .map(|e| format!("{name}:{}: {}", e.at, e.reason()))
            .collect::<Vec<_>>()
    })?;
    let mut root: toml::Table = toml::from_str(&text).map_err(|e| {
        let at = e
            .span()
            .map_or_else(String::new, |s| format!(":{}", source.position(s.start)));
        vec![format!(
            "{name}{at}: not valid TOML: {}",
            toml_reason(e.message())
        )]
    })?;
    let (vars, mut problems) = overlay(&mut root, env, list_keys);
    let mut as_text: Vec<String> = Vec::new();
    let read = read_all_with::<T>(Value::Table(root), |path, value| {
        // A variable's text read as a number or flag that does not fit: try it as a string.
        let key = Segment::join(path);
        let var = vars.iter().find(|v| v.key == key)?;
        (!value.is_str() && !as_text.contains(&key)).then(|| {
            as_text.push(key);
            Value::String(var.text.clone())
        })
    });
    // In the file's order (keys not written in it after), then the variables.
    let mut found: Vec<(bool, Option<Position>, String)> = Vec::new();
    let mut blame = |key: &str, reason: &str| {
        found.push(
            match vars
                .iter()
                .find(|v| is_under(std::slice::from_ref(&v.key), key))
            {
                Some(v) => (
                    true,
                    None,
                    format!("environment variable {}: {key}: {reason}", v.name),
                ),
                None => match source.locate(key) {
                    Some(at) => (false, Some(at), format!("{name}:{at}: {key}: {reason}")),
                    None => (false, None, format!("{name}: {key}: {reason}")),
                },
            },
        );
    };
    for key in &read.unknown {
        blame(key, "unknown key");
    }
    for p in &read.invalid {
        blame(&p.key, &p.reason);
    }
    found.sort_by_key(|(env, at, _)| (*env, at.is_none(), *at));
    problems.extend(found.into_iter().map(|(_, _, p)| p));
    match read.value {
        Some(v) if problems.is_empty() => Ok(v),
        _ => Err(problems),
    }
}

/// Sets each of `env` in `root`: the variables set, and a problem for each that cannot be.
fn overlay(
    root: &mut toml::Table,
    env: &[(String, String)],
    list_keys: &[&str],
) -> (Vec<Var>, Vec<String>) {
    let mut problems = Vec::new();
    let mut vars = Vec::new();
    for (var, value) in env {
        let Some(rest) = var.strip_prefix("GSLB_") else {
            continue;
        };
        let path = key_of(rest);
        let key = Segment::join(&path);
        if set(root, &path, parse(value, &key, list_keys)) {
            vars.push(Var {
                name: var.clone(),
                key,
                text: value.clone(),
            });
        } else {
            problems.push(format!(
                "environment variable {var}: {key}: cannot be set: a key on its way is not a table"
            ));
        }
    }
    (vars, problems)
}

/// Sets `value` at `path` in `root`, making the tables on the way; false when a key on the way
/// holds something other than a table.
fn set(root: &mut toml::Table, path: &[Segment], value: Value) -> bool {
    let Some((Segment::Key(last), parents)) = path.split_last() else {
        return false;
    };
    let mut at = root;
    for s in parents {
        let Segment::Key(k) = s else {
            return false;
        };
        let next = at
            .entry(k.clone())
            .or_insert_with(|| Value::Table(toml::Table::new()));
        match next {
            Value::Table(t) => at = t,
            _ => return false,
        }
    }
    at.insert(last.clone(), value);
    true
}

/// A range problem found after reading (`key: reason`), blamed like the others: on the
/// environment variable that set the key, else on the file.
pub(super) fn blame_range(problem: &str, file: &Path, env: &[(String, String)]) -> String {
    let key = problem.split(": ").next().unwrap_or_default();
    let var = env.iter().find(|(var, _)| {
        var.strip_prefix("GSLB_")
            .is_some_and(|rest| is_under(&[Segment::join(&key_of(rest))], key))
    });
    match var {
        Some((var, _)) => format!("environment variable {var}: {problem}"),
        None => format!("{}: {problem}", file.display()),
    }
}
