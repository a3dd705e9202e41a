//! The documentation holds together: every relative link in `README.md` and `docs/**/*.md`
//! names a file that exists and, with a `#fragment` into a Markdown file, a heading of that
//! file (GitHub's anchor rules); every alert of `deploy/prometheus/gslb-alerts.yml` has its
//! runbook section in `docs/metrics-and-alerts.md`, and every `runbook_url` into the docs
//! names one; the README stays a guide (under 300 lines). No network: external links
//! (`http:`, `https:`, `mailto:`) are not fetched; drafts in `docs/_incoming/` are not checked.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `README.md` and every `.md` file under `docs/`, sorted; not `docs/_incoming/`, where helpers
/// leave drafts for the lead to fold into the pages (their links are written for the page
/// they will land in).
fn markdown_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("directory entry").path();
            if path.is_dir() && !path.ends_with("_incoming") {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut files = vec![root().join("README.md")];
    walk(&root().join("docs"), &mut files);
    files.sort();
    files
}

/// One Markdown file read: its headings' anchors and its links (destination, line).
struct Page {
    anchors: BTreeSet<String>,
    links: Vec<(String, usize)>,
}

/// GitHub's anchor of a heading whose rendered text is `text` (github-slugger): lower-cased,
/// every character that is not a letter, digit, `-`, `_` or space dropped, spaces turned
/// into `-`. A repeated anchor gets `-1`, `-2`, ... (done by the caller).
fn slug(text: &str) -> String {
    text.to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn read_page(path: &Path) -> Page {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let line_of = |offset: usize| text[..offset].matches('\n').count() + 1;
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let (mut anchors, mut links) = (BTreeSet::new(), Vec::new());
    let mut heading: Option<String> = None;
    for (event, range) in Parser::new_ext(&text, Options::all()).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::End(TagEnd::Heading(_)) => {
                let base = slug(&heading.take().unwrap_or_default());
                let n = seen.entry(base.clone()).or_insert(0);
                anchors.insert(if *n == 0 {
                    base.clone()
                } else {
                    format!("{base}-{n}")
                });
                *n += 1;
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                links.push((dest_url.to_string(), line_of(range.start)));
            }
            _ => {}
        }
    }
    Page { anchors, links }
}

/// `path` with `.` and `..` resolved lexically (the file need not exist).
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

fn is_external(dest: &str) -> bool {
    ["http://", "https://", "mailto:"]
        .iter()
        .any(|scheme| dest.starts_with(scheme))
}

/// Every broken relative link of the pages, as `file:line: link: reason`.
fn broken_links(pages: &BTreeMap<PathBuf, Page>) -> Vec<String> {
    let mut broken = Vec::new();
    for (file, page) in pages {
        let shown = file.strip_prefix(root()).unwrap_or(file).display();
        for (dest, line) in page.links.iter().filter(|(d, _)| !is_external(d)) {
            let (target, fragment) = dest.split_once('#').unwrap_or((dest, ""));
            let target = if target.is_empty() {
                file.clone()
            } else {
                normalise(&file.parent().expect("a folder").join(target))
            };
            if !target.exists() {
                broken.push(format!("{shown}:{line}: {dest}: no such file"));
                continue;
            }
            if fragment.is_empty() || target.extension().is_none_or(|e| e != "md") {
                continue;
            }
            let anchors = match pages.get(&target) {
                Some(p) => p.anchors.clone(),
                None => read_page(&target).anchors,
            };
            if !anchors.contains(fragment) {
                broken.push(format!(
                    "{shown}:{line}: {dest}: no heading with that anchor"
                ));
            }
        }
    }
    broken
}

fn pages() -> BTreeMap<PathBuf, Page> {
    markdown_files()
        .into_iter()
        .map(|f| {
            let page = read_page(&f);
            (f, page)
        })
        .collect()
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let pages = pages();
    assert!(
        pages.len() > 10,
        "the docs pages are found: {:?}",
        pages.keys()
    );
    let broken = broken_links(&pages);
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_checker_finds_a_broken_file_an_unknown_anchor_and_accepts_good_links() {
    let dir = tempfile::tempdir().expect("temp dir");
    let a = dir.path().join("a.md");
    let b = dir.path().join("b.md");
    std::fs::write(
        &b,
        "# Title\n\n## The `[cluster]` table, again!\n\n## Title\n\n```sh\n# not a heading\n```\n",
    )
    .expect("write b");
    std::fs::write(
        &a,
        "# A\n\n[ok](b.md#the-cluster-table-again) [dup](b.md#title-1) [self](#a)\n\
         [ext](https://example.com/#x) `[code](missing.md)`\n\n\
         [gone](missing.md)\n[bad anchor](b.md#not-a-heading)\n",
    )
    .expect("write a");
    let pages: BTreeMap<PathBuf, Page> = [&a, &b]
        .map(|f| (f.clone(), read_page(f)))
        .into_iter()
        .collect();
    let broken = broken_links(&pages);
    assert_eq!(broken.len(), 2, "{broken:?}");
    assert!(
        broken[0].ends_with("a.md:6: missing.md: no such file"),
        "{broken:?}"
    );
    assert!(
        broken[1].ends_with("a.md:7: b.md#not-a-heading: no heading with that anchor"),
        "{broken:?}"
    );
}

/// The alert names of the rules file (`- alert: X`).
fn alert_names() -> Vec<String> {
    let rules = std::fs::read_to_string(root().join("deploy/prometheus/gslb-alerts.yml"))
        .expect("the rules file");
    rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .map(|n| n.trim().to_owned())
        .collect()
}

#[test]
fn every_alert_has_a_runbook_section_and_every_runbook_url_resolves() {
    let page = read_page(&root().join("docs/metrics-and-alerts.md"));
    let alerts = alert_names();
    assert!(!alerts.is_empty(), "alerts are read from the rules file");
    let missing: Vec<_> = alerts
        .iter()
        .filter(|a| !page.anchors.contains(&a.to_lowercase()))
        .collect();
    assert!(
        missing.is_empty(),
        "alerts without a `### Name` runbook section in docs/metrics-and-alerts.md: {missing:?}"
    );
    let rules = std::fs::read_to_string(root().join("deploy/prometheus/gslb-alerts.yml"))
        .expect("the rules file");
    for url in rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("runbook_url:"))
    {
        let url = url.trim().trim_matches('"');
        if let Some((_, anchor)) = url.split_once("docs/metrics-and-alerts.md#") {
            assert!(
                page.anchors.contains(anchor),
                "runbook_url {url}: no such section"
            );
        }
    }
}

#[test]
fn the_readme_is_a_guide_under_300_lines() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let lines = readme.lines().count();
    assert!(
        lines < 300,
        "README.md has {lines} lines; reference goes to docs/"
    );
}
