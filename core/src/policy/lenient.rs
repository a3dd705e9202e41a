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
    /// Why, in the policy's words ("must be an integer, not the string \"3\"").
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
pub fn read_all<T: DeserializeOwned>(value: Value) -> Read<T> {
    read_all_with(value, |_, _| None)
}

/// [`read_all`], with a second chance for wrong values: `retry` gets each wrong value's path
/// and the value; a value it returns is put in its place and read again without a problem
/// reported (the settings read an environment variable's text as a string when its number
/// does not fit). It must not return a value for the same path forever.
pub fn read_all_with<T: DeserializeOwned>(
    value: Value,
    retry: impl FnMut(&[Segment], &Value) -> Option<Value>,
) -> Read<T> {
    let mut reader = Reader {
        value,
        read: Read {
            value: None,
            unknown: Vec::new(),
            invalid: Vec::new(),
            touched: Vec::new(),
        },
        placed: Vec::new(),
        unknown_seen: std::collections::BTreeSet::new(),
        retry,
    };
    for _ in 0..MAX_ROUNDS {
        let mut unknown = Vec::new();
        let mut on_unknown = |p: serde_ignored::Path<'_>| unknown.push(Segment::join(&ignored(&p)));
        let strict = super::strict::Strict(reader.value.clone());
        let de = serde_ignored::Deserializer::new(strict, &mut on_unknown);
        let result: Result<T, _> = serde_path_to_error::deserialize(de);
        for key in unknown {
            reader.unknown(key);
        }
        match result {
            Ok(t) => {
                reader.read.value = Some(t);
                break;
            }
            Err(e) => {
                let path = erred(e.path());
                if !reader.wrong(path, e.into_inner().message()) {
                    break;
                }
            }
        }
    }
    reader.read
}

/// One [`read_all_with`] under way.
struct Reader<T, R> {
    value: Value,
    read: Read<T>,
    /// Placeholders in place: their path and the attempt in use.
    placed: Vec<(Vec<Segment>, usize)>,
    /// The keys of `read.unknown`, to keep each once.
    unknown_seen: std::collections::BTreeSet<String>,
    retry: R,
}

impl<T, R: FnMut(&[Segment], &Value) -> Option<Value>> Reader<T, R> {
    fn unknown(&mut self, key: String) {
        // A set beside the list: 40,000 unknown keys were 800 million comparisons.
        if self.unknown_seen.insert(key.clone()) {
            self.read.unknown.push(key);
        }
    }

    fn touch(&mut self, path: &[Segment]) {
        let key = Segment::join(path);
        if !self.read.is_touched(&key) {
            self.read.touched.push(key);
        }
    }

    /// Deals with the error `message` at `path`; false when reading cannot go on.
    fn wrong(&mut self, mut path: Vec<Segment>, message: &str) -> bool {
        let field = |prefix: &str| {
            message
                .strip_prefix(prefix)
                .and_then(|m| m.split('`').next())
                .map(ToOwned::to_owned)
        };
        if let Some(f) = field("unknown field `") {
            // `deny_unknown_fields`: the same as a key serde_ignored reports.
            if path.last() != Some(&Segment::Key(f.clone())) {
                path.push(Segment::Key(f));
            }
            self.unknown(Segment::join(&path));
            return take(&mut self.value, &path, None);
        }
        let missing = field("missing field `");
        if let Some(f) = &missing {
            path.push(Segment::Key(f.clone()));
        }
        let key = Segment::join(&path);
        let attempt = match self.placed.iter_mut().find(|(p, _)| *p == path) {
            Some((_, attempt)) => {
                *attempt += 1;
                *attempt
            }
            None if missing.is_some() => {
                if !self.read.is_touched(&key) {
                    self.read.invalid.push(Problem {
                        key,
                        reason: "is required and missing".into(),
                    });
                }
                self.placed.push((path.clone(), 0));
                0
            }
            None => return self.invalid(path, message),
        };
        self.touch(&path);
        placeholder(attempt).is_some_and(|v| take(&mut self.value, &path, Some(v)))
    }

    /// A value of the wrong type at `path`: retried, or reported and taken out.
    fn invalid(&mut self, mut path: Vec<Segment>, message: &str) -> bool {
        if let Some(v) = find(&self.value, &path).and_then(|v| (self.retry)(&path, v)) {
            return take(&mut self.value, &path, Some(v));
        }
        let key = Segment::join(&path);
        self.read.invalid.push(Problem {
            reason: words::reason(message, &key),
            key,
        });
        if let Some(Segment::Index(_)) = path.last() {
            // Taking an element out would shift the later ones: take the list.
            path.pop();
        }
        self.touch(&path);
        take(&mut self.value, &path, None)
    }
}

/// The value at `path` in `root`.
fn find<'v>(root: &'v Value, path: &[Segment]) -> Option<&'v Value> {
    let mut at = root;
    for s in path {
        at = match (s, at) {
            (Segment::Key(k), Value::Table(t)) => t.get(k)?,
            (Segment::Index(i), Value::Array(a)) => a.get(*i)?,
            _ => return None,
        };
    }
    Some(at)
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

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Section {
        #[serde(default)]
        count: u32,
        name: String,
    }

    #[derive(Debug, Deserialize)]
    struct Doc {
        #[serde(default)]
        flag: bool,
        section: Section,
        list: Vec<u16>,
    }

    fn read(text: &str) -> Read<Doc> {
        read_all(Value::Table(toml::from_str(text).expect("toml")))
    }

    #[test]
    fn every_wrong_value_and_unknown_key_is_found_in_one_read() {
        let r = read(
            "flag = 1\nextra = 2\nlist = [1, \"x\"]\n[section]\ncount = \"3\"\nname = 4\nnmae = \"a\"\n",
        );
        let keys: Vec<&str> = r.invalid.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, ["flag", "list[1]", "section.count", "section.name"]);
        assert_eq!(r.unknown, ["extra", "section.nmae"]);
        assert!(r.is_touched("list") && r.is_touched("section.name"));
        assert!(!r.is_touched("section") && !r.is_touched("flagship"));
        let d = r.value.expect("defaults and placeholders stand in");
        assert_eq!((d.flag, d.section.count, d.list.len()), (false, 0, 0));
    }

    #[test]
    fn a_missing_required_key_is_reported_once() {
        let r = read("list = []\n[section]\n");
        assert_eq!(r.invalid.len(), 1, "{:?}", r.invalid);
        assert_eq!(r.invalid[0].key, "section.name");
        assert_eq!(r.invalid[0].reason, "is required and missing");
    }

    #[test]
    fn a_retry_value_is_read_without_a_problem() {
        let value = Value::Table(toml::from_str("list = []\n[section]\nname = 7\n").expect("toml"));
        let r: Read<Doc> = read_all_with(value, |path, v| {
            (Segment::join(path) == "section.name" && !v.is_str()).then(|| Value::from("7"))
        });
        assert!(r.invalid.is_empty(), "{:?}", r.invalid);
        assert_eq!(r.value.expect("read").section.name, "7");
    }

    #[test]
    fn keys_parse_and_join_back() {
        for key in ["a", "pools[1].endpoints[0]", "target.route53.pools.seoul"] {
            assert_eq!(Segment::join(&Segment::parse(key)), key);
        }
    }
}
