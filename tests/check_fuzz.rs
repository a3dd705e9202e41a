//! `gslb check` over mutated policies and settings (issue 28): lines deleted, doubled, cut,
//! keys misspelt, values replaced by values of every kind, control characters and arrays
//! where tables belong. Whatever the input: no panic, no case over 2 s, no Rust or serde
//! wording in any message, and a line number for every syntax error and every unknown key
//! (they are written somewhere in the file).
//!
//! Properties run with proptest's fixed default seed unless `PROPTEST_RNG_SEED` says
//! otherwise; a failure is shrunk and printed with the input that caused it.

use std::path::Path;
use std::time::{Duration, Instant};

use gslb::config::Settings;
use gslb_core::policy;
use proptest::prelude::*;

const POLICY: &str = include_str!("../policies/api-seoul-tokyo.toml");

/// Daemon settings touching most tables (values valid as written).
const SETTINGS: &str = r#"vantage = "aws-ap-northeast-1"
policies = ["policies"]
[admin]
listen = "127.0.0.1:9464"
require_token_for_reads = false
[state]
dir = "state"
[probing]
max_in_flight = 1024
late_after = "50ms"
[dns]
timeout = "2s"
[engine]
suspect_window = "1m"
canary_interval = "10s"
[route53]
region = "us-east-1"
requests_per_second = 2
change_timeout = "120s"
[cloudflare]
requests_per_window = 300
[reconcile]
resync = "60s"
[[notify.webhooks]]
name = "ops"
url = "https://hooks.example.com/gslb"
timeout = "5s"
backoff = "1s"
max_backoff = "60s"
"#;

/// Values of every kind, and some that once broke a reader.
const VALUES: &[&str] = &[
    "\"x\"",
    "\"30s\"",
    "0",
    "-1",
    "99999999999999999999",
    "1.5",
    "1e400",
    "nan",
    "-inf",
    "true",
    "[]",
    "[1, \"a\"]",
    "[\"200ms\", \"150ms\"]",
    "{}",
    "{ a = 1 }",
    "1979-05-27",
    "1979-05-27T07:32:00Z",
    "\"\"",
    "\"500000000000y\"",
    "\"0s\"",
    "\"\\u0000\\u001b[31m\"",
    "\"a\\nb\"",
    "'''multi\nline'''",
    "0x10",
];

/// Lines to insert: tables of the wrong shape, unknown and repeated keys, bad syntax.
const LINES: &[&str] = &[
    "probe = [\"200ms\", \"150ms\"]",
    "[[probe]]",
    "[health.fall]",
    "timout = \"5s\"",
    "service = \"api\"",
    "[pools]",
    "= 1",
    "key = = 1",
    "[[target.route53.pools]]",
    "\u{0}\u{7f}",
    "x = \"unterminated",
    "[admin",
    "pools = 3",
];

/// One edit of a text's lines.
#[derive(Debug, Clone)]
enum Edit {
    Delete(usize),
    Double(usize),
    Cut(usize, usize),
    Misspell(usize, usize),
    Value(usize, usize),
    Insert(usize, usize),
    Control(usize, char),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<usize>().prop_map(Edit::Delete),
        any::<usize>().prop_map(Edit::Double),
        (any::<usize>(), any::<usize>()).prop_map(|(l, at)| Edit::Cut(l, at)),
        (any::<usize>(), any::<usize>()).prop_map(|(l, at)| Edit::Misspell(l, at)),
        (any::<usize>(), 0..VALUES.len()).prop_map(|(l, v)| Edit::Value(l, v)),
        (any::<usize>(), 0..LINES.len()).prop_map(|(l, v)| Edit::Insert(l, v)),
        (any::<usize>(), prop::char::range('\u{0}', '\u{9f}'))
            .prop_map(|(l, c)| Edit::Control(l, c)),
    ]
}

/// `text` with `edits` applied in order (line numbers taken modulo the lines there are).
fn mutate(text: &str, edits: &[Edit]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    for e in edits {
        if lines.is_empty() {
            lines.push(String::new());
        }
        let n = lines.len();
        match *e {
            Edit::Delete(l) => {
                lines.remove(l % n);
            }
            Edit::Double(l) => {
                let line = lines[l % n].clone();
                lines.insert(l % n, line);
            }
            Edit::Cut(l, at) => {
                let line = &mut lines[l % n];
                let cut = line.char_indices().nth(at % (line.chars().count() + 1));
                if let Some((i, _)) = cut {
                    line.truncate(i);
                }
            }
            Edit::Misspell(l, at) => {
                let line = &mut lines[l % n];
                if let Some(eq) = line.find(" = ")
                    && eq > 1
                {
                    let i = at % eq;
                    if line.is_char_boundary(i) && line.is_char_boundary(i + 1) {
                        line.remove(i);
                    }
                }
            }
            Edit::Value(l, v) => {
                let line = &mut lines[l % n];
                if let Some(eq) = line.find(" = ") {
                    line.truncate(eq + 3);
                    line.push_str(VALUES[v]);
                }
            }
            Edit::Insert(l, v) => lines.insert(l % (n + 1), LINES[v].to_owned()),
            Edit::Control(l, c) => {
                let line = &mut lines[l % n];
                let at = line.len() / 2;
                let at = (0..=at)
                    .rev()
                    .find(|&i| line.is_char_boundary(i))
                    .unwrap_or(0);
                line.insert(at, c);
            }
        }
    }
    lines.join("\n")
}

/// Words of Rust or serde that must never reach an operator.
const DEBUG_WORDS: &[&str] = &[
    "Some(",
    "None",
    "u16",
    "u32",
    "u64",
    "i64",
    "i128",
    "f64",
    "usize",
    "struct ",
    "unit variant",
    "newtype",
    "KeyMismatch",
    "os error",
    "Raw",
    "::",
];

fn assert_words(message: &str) -> Result<(), TestCaseError> {
    for word in DEBUG_WORDS {
        prop_assert!(!message.contains(word), "{word:?} in: {message}");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn check_survives_any_mutated_policy(edits in prop::collection::vec(edit(), 1..5)) {
        let text = mutate(POLICY, &edits);
        let start = Instant::now();
        let result = policy::parse(Path::new("api.toml"), &text);
        prop_assert!(start.elapsed() < Duration::from_secs(2), "{:?}", start.elapsed());
        if let Err(errors) = result {
            for e in &errors.0 {
                assert_words(&e.reason)?;
                assert_words(&e.key)?;
                let whole = e.key.is_empty() && !e.reason.ends_with("not shown (the first 100 are)");
                if whole || e.reason == "unknown key" {
                    prop_assert!(e.at.is_some(), "no line for: {e}\n{text}");
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn check_survives_any_mutated_settings(edits in prop::collection::vec(edit(), 1..5)) {
        let text = mutate(SETTINGS, &edits);
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("gslb.toml");
        std::fs::write(&file, &text).expect("write");
        let start = Instant::now();
        let result = Settings::load(&file);
        prop_assert!(start.elapsed() < Duration::from_secs(2), "{:?}", start.elapsed());
        if let Err(e) = result {
            let name = file.display().to_string();
            for problem in &e.problems {
                let message = problem.replace(&name, "gslb.toml");
                assert_words(&message)?;
                if message.contains("not valid TOML") || message.ends_with("unknown key") {
                    let line = message
                        .strip_prefix("gslb.toml:")
                        .and_then(|rest| rest.split(':').next())
                        .and_then(|n| n.parse::<usize>().ok());
                    prop_assert!(line.is_some(), "no line for: {message}\n{text}");
                }
            }
        }
    }
}
