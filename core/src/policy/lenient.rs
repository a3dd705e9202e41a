//! Reading a TOML document into a type, reporting every problem at once: each unknown key
//! (collected with `serde_ignored`) and each value of the wrong type or missing. serde stops at
//! the first wrong value, so the reader takes the offending value out (its default then
//! applies) and reads again; a required key taken out is put back as a placeholder of the kind
//! that reads, and the problems later checks find at a key already reported are for the caller
//! to drop ([`Read::touched`]). Shared by the daemon settings.

use serde::de::DeserializeOwned;
use toml::Value;

use super::words;

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// A table key.
    Key(String),
    /// A list index.
    Index(usize),
}

impl Segment {
    /// `pools[1].endpoints[0]` -> `pools`, `1`, `endpoints`, `0`.
    pub fn parse(key: &str) -> Vec<Self> {
        let mut path = Vec::new();
        for part in key.split('.').filter(|p| !p.is_empty()) {
            let mut pieces = part.split('[');
            if let Some(k) = pieces.next().filter(|k| !k.is_empty()) {
                path.push(Self::Key(k.to_owned()));
            }
            for index in pieces {
                match index.trim_end_matches(']').parse() {
                    Ok(i) => path.push(Self::Index(i)),
                    Err(_) => path.push(Self::Key(index.to_owned())),
                }
            }
        }
        path
    }

    /// The key a path is written as: `pools[1].endpoints[0]`.
    pub fn join(path: &[Self]) -> String {
        let mut key = String::new();
        for s in path {
            match s {
                Self::Key(k) if key.is_empty() => key.push_str(k),
                Self::Key(k) => {
                    key.push('.');
                    key.push_str(k);
                }
                Self::Index(i) => key.push_str(&format!("[{i}]")),
            }
        }
        key
    }
}

/// A value at `key` that could not be read: of the wrong type, or a required key missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The key, e.g. `health.fall`.
    pub key: String,
    /// Why, in the policy's words (see [`words::reason`]).
    pub reason: String,
}

/// What [`read_all`] found.
#[derive(Debug)]
pub struct Read<T> {
    /// The value read, wrong values replaced by defaults or placeholders; `None` only when
    /// no placeholder reads (the problems say why).
    pub value: Option<T>,
    /// Every unknown key, in the order met.
    pub unknown: Vec<String>,
    /// Every value of the wrong type and every required key missing.
    pub invalid: Vec<Problem>,
    /// The keys taken out or replaced: problems later checks report at, or under, one of these
    /// are about a default or a placeholder, not what was written.
    pub touched: Vec<String>,
}

impl<T> Read<T> {
    /// Whether `key` is, or is under, a key taken out or replaced.
    pub fn is_touched(&self, key: &str) -> bool {
        is_under(&self.touched, key)
    }
}

/// Whether `key` is one of `keys` or under one (`pools[1]` holds `pools[1].name`).
pub fn is_under(keys: &[String], key: &str) -> bool {
    keys.iter().any(|t| {
        key == t
            || key
                .strip_prefix(t.as_str())
                .is_some_and(|rest| rest.starts_with(['.', '[']))
    })
}

/// Rounds of reading before giving up: one per problem, far more than a file has.
const MAX_ROUNDS: usize = 256;

/// Values put in for a required key taken out, tried in order until one reads.
fn placeholder(attempt: usize) -> Option<Value> {
    Some(match attempt {
        0 => Value::String(String::new()),
        1 => Value::Integer(1),
        2 => Value::Array(Vec::new()),
        3 => Value::Table(toml::Table::new()),
        4 => Value::Boolean(false),
        5 => Value::Float(1.0),
        _ => return None,
    })
}

/// Reads `value` as a `T`, collecting every problem (see the module documentation).
pub fn read_all<T: DeserializeOwned>(mut value: Value) -> Read<T> {
    let mut read = Read {
        value: None,
        unknown: Vec::new(),
        invalid: Vec::new(),
        touched: Vec::new(),
    };
    // Placeholders in place: path and the attempt in use.
    let mut placed: Vec<(Vec<Segment>, usize)> = Vec::new();
    for _ in 0..MAX_ROUNDS {
        let mut unknown = Vec::new();
        let mut on_unknown = |p: serde_ignored::Path<'_>| unknown.push(Segment::join(&ignored(&p)));
        let de = serde_ignored::Deserializer::new(value.clone(), &mut on_unknown);
        let result: Result<T, _> = serde_path_to_error::deserialize(de);
        for key in unknown {
            if !read.unknown.contains(&key) {
                read.unknown.push(key);
            }
        }
        let e = match result {
            Ok(t) => {
                read.value = Some(t);
                return read;
            }
            Err(e) => e,
        };
        let mut path = erred(e.path());
        let message = e.into_inner().message().to_owned();
        let missing = message
            .strip_prefix("missing field `")
            .and_then(|m| m.strip_suffix('`'));
        if let Some(field) = missing {
            path.push(Segment::Key(field.to_owned()));
        }
        let key = Segment::join(&path);
        let attempt = match placed.iter_mut().find(|(p, _)| *p == path) {
            Some((_, attempt)) => {
                *attempt += 1;
                *attempt
            }
            None if missing.is_some() => {
                if !read.is_touched(&key) {
                    read.invalid.push(Problem {
                        key: key.clone(),
                        reason: "is required and missing".into(),
                    });
                }
                placed.push((path.clone(), 0));
                0
            }
            None => {
                read.invalid.push(Problem {
                    reason: words::reason(&message, &key),
                    key: key.clone(),
                });
                if let Some(Segment::Index(_)) = path.last() {
                    // Taking an element out would shift the later ones: take the list.
                    path.pop();
                }
                let key = Segment::join(&path);
                if !read.is_touched(&key) {
                    read.touched.push(key);
                }
                if !take(&mut value, &path, None) {
                    return read;
                }
                continue;
            }
        };
        if !read.is_touched(&key) {
            read.touched.push(key);
        }
        if !placeholder(attempt).is_some_and(|v| take(&mut value, &path, Some(v))) {
            return read;
        }
    }
    read
}

/// Takes the value at `path` out of `root`, or puts `with` there; false when `path` does
/// not lead anywhere in `root`.
fn take(root: &mut Value, path: &[Segment], with: Option<Value>) -> bool {
    let Some((last, parents)) = path.split_last() else {
        return false;
    };
    let mut at = root;
    for s in parents {
        let next = match (s, at) {
            (Segment::Key(k), Value::Table(t)) => t.get_mut(k),
            (Segment::Index(i), Value::Array(a)) => a.get_mut(*i),
            _ => None,
        };
        match next {
            Some(v) => at = v,
            None => return false,
        }
    }
    match (last, at, with) {
        (Segment::Key(k), Value::Table(t), None) => t.remove(k).is_some(),
        (Segment::Key(k), Value::Table(t), Some(v)) => {
            t.insert(k.clone(), v);
            true
        }
        (Segment::Index(i), Value::Array(a), Some(v)) if *i < a.len() => {
            a[*i] = v;
            true
        }
        _ => false,
    }
}

/// The path of a deserialisation error.
fn erred(path: &serde_path_to_error::Path) -> Vec<Segment> {
    path.iter()
        .filter_map(|s| match s {
            serde_path_to_error::Segment::Seq { index } => Some(Segment::Index(*index)),
            serde_path_to_error::Segment::Map { key } => Some(Segment::Key(key.clone())),
            serde_path_to_error::Segment::Enum { variant } => Some(Segment::Key(variant.clone())),
            serde_path_to_error::Segment::Unknown => None,
        })
        .collect()
}

/// The path of an ignored (unknown) key; `Option`'s `Some` and newtypes are not steps.
fn ignored(path: &serde_ignored::Path<'_>) -> Vec<Segment> {
    match path {
        serde_ignored::Path::Root => Vec::new(),
        serde_ignored::Path::Seq { parent, index } => {
            let mut p = ignored(parent);
            p.push(Segment::Index(*index));
            p
        }
        serde_ignored::Path::Map { parent, key } => {
            let mut p = ignored(parent);
            p.push(Segment::Key(key.clone()));
            p
        }
        serde_ignored::Path::Some { parent }
        | serde_ignored::Path::NewtypeStruct { parent }
        | serde_ignored::Path::NewtypeVariant { parent } => ignored(parent),
    }
}
