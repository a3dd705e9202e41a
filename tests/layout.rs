//! The architecture, checked: the pure core cannot do I/O, only the binary names the concrete
//! providers, dependencies between modules point one way at every level, and files and
//! functions stay small (ARCHITECTURE.md, issue 11's "Done when").

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("readable folder") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// `text` without its `#[cfg(test)] mod ...` tail and without comments: the code that ships.
fn shipped_code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim();
        if t == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|l| l.trim_start().starts_with("mod "))
        {
            break;
        }
        let code = t.split("//").next().unwrap_or_default();
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// Test-only source files: unit-test modules and fixtures.
fn is_test_file(path: &Path) -> bool {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    name == "tests.rs" || name.ends_with("_tests.rs") || name == "fixtures.rs"
}

#[test]
fn the_core_crate_depends_on_no_io_crate() {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "gslb-core",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .current_dir(root())
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(tree.starts_with("gslb-core "), "{tree}");
    let io: Vec<&str> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| ["tokio", "reqwest", "hyper", "axum"].contains(c) || c.starts_with("aws-"))
        .collect();
    assert!(
        io.is_empty(),
        "gslb-core pulls in I/O crates: {io:?}\n{tree}"
    );
}

#[test]
fn only_the_binary_names_the_concrete_providers() {
    let binary = [root().join("src/main.rs"), root().join("src/adapters.rs")];
    let mut naming = Vec::new();
    for dir in ["src", "core", "benches"] {
        for f in rust_files(&root().join(dir)) {
            let text = std::fs::read_to_string(&f).expect("readable");
            let code = shipped_code(&text);
            if !binary.contains(&f)
                && (code.contains("gslb_route53") || code.contains("gslb_cloudflare"))
            {
                naming.push(f.display().to_string());
            }
        }
    }
    assert!(naming.is_empty(), "these name an adapter crate: {naming:?}");
    for f in &binary {
        let code = shipped_code(&std::fs::read_to_string(f).expect("readable"));
        assert!(
            code.contains("gslb_") || code.contains("gslb::"),
            "{} is part of the binary",
            f.display()
        );
    }
}

/// The module path of a source file under `src` (`daemon/mod.rs` -> `daemon`,
/// `daemon/reconcile.rs` -> `daemon::reconcile`, `lib.rs` -> ``).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The module paths `code` (in module `here`) refers to with `crate::`, `super::` or `self::`,
/// each cut at the first segment that is not a module in `modules`. Grouped imports
/// (`use crate::ops::{events, status}`) count each member.
fn references(
    code: &str,
    here: &[String],
    modules: &BTreeSet<Vec<String>>,
) -> BTreeSet<Vec<String>> {
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("::") {
        let before = &code[..i];
        let start = before
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map_or(0, |p| p + 1);
        let anchor = &before[start..];
        let preceded_by_path = before[..start].ends_with("::");
        let mut base: Vec<String> = match anchor {
            "crate" => Vec::new(),
            "super" if !preceded_by_path => here[..here.len().saturating_sub(1)].to_vec(),
            "self" if !preceded_by_path => here.to_vec(),
            _ => continue,
        };
        let mut rest = &code[i + 2..];
        // Further `super::` segments.
        while let Some(r) = rest.strip_prefix("super::") {
            base.pop();
            rest = r;
        }
        let mut paths = vec![(base, rest)];
        let mut resolved = Vec::new();
        while let Some((mut path, mut rest)) = paths.pop() {
            loop {
                if let Some(group) = rest.strip_prefix('{') {
                    let inner = &group[..group.find('}').unwrap_or(group.len())];
                    for member in inner.split(',') {
                        paths.push((path.clone(), member.trim()));
                    }
                    break;
                }
                let end = rest
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                let seg = &rest[..end];
                let mut next = path.clone();
                next.push(seg.to_owned());
                if seg.is_empty() || !modules.contains(&next) {
                    resolved.push(path);
                    break;
                }
                path = next;
                match rest[end..].strip_prefix("::") {
                    Some(r) => rest = r,
                    None => {
                        resolved.push(path);
                        break;
                    }
                }
            }
        }
        out.extend(resolved);
    }
    out
}

/// For every reference from module `a` to module `b`, the edge between the two siblings just
/// below their common ancestor (none when one contains the other).
fn sibling_edges(src: &Path) -> BTreeMap<Vec<String>, BTreeSet<(String, String)>> {
    let files: Vec<PathBuf> = rust_files(src)
        .into_iter()
        .filter(|f| !is_test_file(f) && !f.starts_with(src.join("bin")))
        .filter(|f| !["main.rs", "adapters.rs"].iter().any(|b| *f == src.join(b)))
        .collect();
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(src, f)).collect();
    let mut edges: BTreeMap<Vec<String>, BTreeSet<(String, String)>> = BTreeMap::new();
    for f in &files {
        let here = module_of(src, f);
        let code = shipped_code(&std::fs::read_to_string(f).expect("readable"));
        for there in references(&code, &here, &modules) {
            let common = here.iter().zip(&there).take_while(|(a, b)| a == b).count();
            if common == here.len() || common == there.len() {
                continue;
            }
            edges
                .entry(here[..common].to_vec())
                .or_default()
                .insert((here[common].clone(), there[common].clone()));
        }
    }
    edges
}

/// Every edge of `edges` that lies on a cycle (its target reaches its source).
fn edges_on_cycles(edges: &BTreeSet<(String, String)>) -> Vec<(String, String)> {
    let reaches = |from: &str, to: &str| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_owned()];
        while let Some(n) = stack.pop() {
            if n == to {
                return true;
            }
            if seen.insert(n.clone()) {
                stack.extend(
                    edges
                        .iter()
                        .filter(|(f, _)| *f == n)
                        .map(|(_, t)| t.clone()),
                );
            }
        }
        false
    };
    edges
        .iter()
        .filter(|(from, to)| reaches(to, from))
        .cloned()
        .collect()
}

#[test]
fn module_dependencies_point_one_way_at_every_level() {
    let mut cycles = Vec::new();
    for src in [root().join("src"), root().join("core/src")] {
        for (parent, edges) in sibling_edges(&src) {
            for (from, to) in edges_on_cycles(&edges) {
                let at = parent.join("::");
                cycles.push(format!("{}: in `{at}`, {from} -> {to}", src.display()));
            }
        }
    }
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

#[test]
fn the_cycle_check_sees_a_cycle_between_siblings() {
    let modules: BTreeSet<Vec<String>> = [vec![], vec!["a".into()], vec!["b".into()]]
        .into_iter()
        .collect();
    let a = references("use crate::b::Thing;", &["a".into()], &modules);
    assert_eq!(a, BTreeSet::from([vec!["b".to_owned()]]));
    let grouped = references("use super::{a, b::X};", &["c".into()], &modules);
    assert_eq!(grouped.len(), 2, "{grouped:?}");
    let edges = BTreeSet::from([("a".into(), "b".into()), ("b".into(), "a".into())]);
    assert_eq!(edges_on_cycles(&edges).len(), 2);
    let one_way = BTreeSet::from([("a".into(), "b".into()), ("b".into(), "c".into())]);
    assert!(edges_on_cycles(&one_way).is_empty());
}

/// The functions of `code` longer than `limit` lines, as `name (lines)`. A function runs from
/// its `fn` line to the line that closes its body's braces.
fn long_functions(code: &str, limit: usize) -> Vec<String> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(at) = line.find("fn ").filter(|&at| {
            let before = line[..at].trim_end();
            before.is_empty()
                || before.ends_with("pub")
                || before.ends_with(')')
                || ["async", "const", "unsafe"]
                    .iter()
                    .any(|k| before.ends_with(k))
        }) else {
            continue;
        };
        if line.trim_end().ends_with(';') {
            continue;
        }
        let name: String = line[at + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let (mut depth, mut opened) = (0i64, false);
        for (j, l) in lines.iter().enumerate().skip(i) {
            depth += l.matches('{').count() as i64 - l.matches('}').count() as i64;
            opened |= l.contains('{');
            if opened && depth <= 0 {
                if j - i + 1 > limit {
                    out.push(format!("{name} ({} lines)", j - i + 1));
                }
                break;
            }
        }
    }
    out
}

#[test]
fn no_function_over_80_lines_outside_tests() {
    let mut long = Vec::new();
    let dirs = [
        "src",
        "core/src",
        "providers/api/src",
        "providers/route53/src",
        "providers/cloudflare/src",
        "bench/src",
    ];
    for dir in dirs {
        for f in rust_files(&root().join(dir)) {
            let support = ["fake", "contract.rs"]
                .iter()
                .any(|t| f.to_string_lossy().contains(t));
            if is_test_file(&f) || support {
                continue;
            }
            let code = shipped_code(&std::fs::read_to_string(&f).expect("readable"));
            for name in long_functions(&code, 80) {
                long.push(format!("{}: {name}", f.display()));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over 80 lines:\n{}",
        long.join("\n")
    );
}

#[test]
fn the_length_check_measures_a_function_body() {
    let body = "    let x = 1;\n".repeat(81);
    let code = format!("pub fn long() {{\n{body}}}\nfn short() {{\n}}\nfn decl();\n");
    assert_eq!(long_functions(&code, 80), vec!["long (83 lines)"]);
    assert!(long_functions(&code, 83).is_empty());
}

#[test]
fn one_module_convention_a_folder_with_mod_rs() {
    let mut both = Vec::new();
    for dir in ["src", "core/src", "providers", "bench/src"] {
        for f in rust_files(&root().join(dir)) {
            if f.with_extension("").is_dir() {
                both.push(f.display().to_string());
            }
        }
    }
    assert!(
        both.is_empty(),
        "a module file beside its folder (use folder/mod.rs): {both:?}"
    );
}

#[test]
fn main_rs_stays_under_300_lines() {
    let text = std::fs::read_to_string(root().join("src/main.rs")).expect("readable");
    assert!(
        text.lines().count() < 300,
        "src/main.rs has {} lines",
        text.lines().count()
    );
}
