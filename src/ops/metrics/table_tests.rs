//! The tables' text against the `prometheus` crate's: the same operations on a [`Table`] and
//! on the crate's vector of the same family give the same lines in the same order (escaped
//! label values, label pairs sorted by name, series sorted by label values, histograms'
//! cumulative buckets, `+Inf`, `_sum` and `_count`, removed series gone, an empty family left
//! out).

use std::sync::Arc;

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry, TextEncoder};
use proptest::prelude::*;

use super::slab::{CHUNK, Words};
use super::strings::Strings;
use super::table::Encode;
use super::{CounterCell, Family, GaugeCell, HistogramCell, RECONCILE_BUCKETS, Table};

/// Declared out of name order, so the text's label order differs from the declared one.
const FAMILY: Family = Family {
    name: "gslb_test_series",
    help: "A \"test\" family\\ with\nescapes.",
    labels: &["service", "pool", "endpoint"],
};

/// Label values, escapes included. Not the empty value: the crate finds a series by a hash of
/// its label values written one after the other, so `("", "ab")` and `("ab", "")` are one
/// series to it (the tables compare the values themselves).
const VALUES: [&str; 7] = [
    "api",
    "api2",
    "a\"quoted\"",
    "back\\slash",
    "line\nfeed",
    "ünï-çødé",
    "http://127.0.0.1:1/health?x=y",
];

#[derive(Debug, Clone)]
enum Op {
    /// Set a gauge, add to a counter, observe a histogram.
    Record([usize; 3], f64),
    Remove([usize; 3]),
}

fn op() -> impl Strategy<Value = Op> {
    let labels = [0..VALUES.len(), 0..VALUES.len(), 0..VALUES.len()];
    // Sums of these are exact, so the order the crate adds its shards in does not matter.
    let value = proptest::sample::select(vec![0.0, 0.25, 0.5, 1.0, 7.0, 200.0, -1.0, 0.0625]);
    prop_oneof![
        4 => (labels.clone(), value).prop_map(|(l, v)| Op::Record(l, v)),
        1 => labels.prop_map(Op::Remove),
    ]
}

fn values(l: [usize; 3]) -> [&'static str; 3] {
    l.map(|i| VALUES[i])
}

fn ours<C: super::Cell + std::fmt::Debug>(table: &Table<C>) -> String {
    let mut out = String::new();
    table
        .encode(&mut out, &mut |_| Ok(()))
        .expect("keeping the text never fails");
    out
}

/// `table`'s text as the pieces `encode` hands on, each taken away; `between` runs after the
/// first piece, with the table's lock released.
fn pieces(table: &Table<GaugeCell>, mut between: impl FnMut()) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut out = String::new();
    table
        .encode(&mut out, &mut |text: &mut String| {
            pieces.push(std::mem::take(text));
            if pieces.len() == 1 {
                between();
            }
            Ok(())
        })
        .expect("never fails");
    pieces
}

/// A gauge per endpoint `0..n` of service `api`, pool `seoul`, set to its number.
fn endpoints(n: usize) -> Table<GaugeCell> {
    let table: Table<GaugeCell> = Table::new(&FAMILY, &[], Arc::new(Strings::default()));
    for i in 0..n {
        let endpoint = format!("http://10.0.{}.{}/health", i / 256, i % 256);
        table
            .with_label_values(&["api", "seoul", &endpoint])
            .set(i as f64);
    }
    table
}

#[test]
fn a_large_family_is_handed_on_in_pieces_that_make_the_whole_text() {
    let table = endpoints(5_000);
    let whole = ours(&table);
    let pieces = pieces(&table, || ());
    assert!(
        pieces.len() >= 4,
        "{} pieces of {} bytes",
        pieces.len(),
        whole.len()
    );
    assert!(
        pieces.iter().all(|p| p.len() < 64 * 1024 + 200),
        "a piece is about 64 KiB at most"
    );
    assert_eq!(pieces.concat(), whole);
}

#[test]
fn series_created_or_removed_between_pieces_are_written_at_most_once() {
    let table = endpoints(3_000);
    let first = table.clone();
    let pieces = pieces(&table, move || {
        // Before and after where the first piece stopped; one not yet written goes away.
        first
            .with_label_values(&["api", "seoul", "http://0.0.0.0/"])
            .set(-1.0);
        first
            .with_label_values(&["api", "seoul", "http://9.9.9.9/"])
            .set(-2.0);
        assert!(first.remove_label_values(&["api", "seoul", "http://10.0.9.255/health"]));
    });
    let text = pieces.concat();
    let series: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    let mut unique = series.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), series.len(), "no series written twice");
    assert!(
        !text.contains("\"http://0.0.0.0/\""),
        "sorts before the resume point: next scrape"
    );
    assert!(text.contains("http://9.9.9.9/"), "sorts after it: written");
    assert!(
        !text.contains("10.0.9.255/"),
        "removed before it was reached"
    );
    assert_eq!(
        series.len(),
        3_000,
        "3,000 - 1 removed + 1 created after the resume point"
    );
    let mut sorted = series.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, series, "still in label order");
}

fn crates(registry: &Registry) -> String {
    TextEncoder::new()
        .encode_to_string(&registry.gather())
        .expect("encodes")
}

fn opts() -> Opts {
    Opts::new(FAMILY.name, FAMILY.help)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn gauges_write_what_the_crate_writes(ops in proptest::collection::vec(op(), 0..40)) {
        gauges_against_the_crate(ops)?;
    }

    #[test]
    fn counters_write_what_the_crate_writes(ops in proptest::collection::vec(op(), 0..40)) {
        let table: Table<CounterCell> = Table::new(&FAMILY, &[], Arc::default());
        let vec = IntCounterVec::new(opts(), FAMILY.labels).expect("valid");
        let registry = Registry::new();
        registry.register(Box::new(vec.clone())).expect("registers");
        for op in ops {
            match op {
                Op::Record(l, v) => {
                    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                    let n = v.max(0.0) as u64;
                    table.with_label_values(&values(l)).inc_by(n);
                    vec.with_label_values(&values(l)).inc_by(n);
                }
                Op::Remove(l) => {
                    table.remove_label_values(&values(l));
                    let _ = vec.remove_label_values(&values(l));
                }
            }
        }
        prop_assert_eq!(ours(&table), crates(&registry));
    }

    #[test]
    fn histograms_write_what_the_crate_writes(ops in proptest::collection::vec(op(), 0..40)) {
        let table: Table<HistogramCell> =
            Table::new(&FAMILY, RECONCILE_BUCKETS, Arc::default());
        let hopts = HistogramOpts::new(FAMILY.name, FAMILY.help)
            .buckets(RECONCILE_BUCKETS.to_vec());
        let vec = HistogramVec::new(hopts, FAMILY.labels).expect("valid");
        let registry = Registry::new();
        registry.register(Box::new(vec.clone())).expect("registers");
        for op in ops {
            match op {
                Op::Record(l, v) => {
                    table.with_label_values(&values(l)).observe(v);
                    vec.with_label_values(&values(l)).observe(v);
                }
                Op::Remove(l) => {
                    table.remove_label_values(&values(l));
                    let _ = vec.remove_label_values(&values(l));
                }
            }
        }
        prop_assert_eq!(ours(&table), crates(&registry));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Long enough (343 possible series) for new series to be merged into the index's sorted
    /// bulk several times, and removed ones to stay as tombstones, come back and be swept.
    #[test]
    fn many_gauges_write_what_the_crate_writes(ops in proptest::collection::vec(op(), 200..800)) {
        gauges_against_the_crate(ops)?;
    }
}

/// `ops` on a gauge table and on the crate's vector give the same text and number of series;
/// the first handles stay held throughout (some past their series' removal).
fn gauges_against_the_crate(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let table: Table<GaugeCell> = Table::new(&FAMILY, &[], Arc::default());
    let vec = prometheus::GaugeVec::new(opts(), FAMILY.labels).expect("valid");
    let registry = Registry::new();
    registry.register(Box::new(vec.clone())).expect("registers");
    let mut kept = Vec::new();
    for op in ops {
        match op {
            Op::Record(l, v) => {
                let cell = table.with_label_values(&values(l));
                cell.set(v);
                vec.with_label_values(&values(l)).set(v);
                if kept.len() < 16 {
                    kept.push(cell);
                }
            }
            Op::Remove(l) => {
                let removed = table.remove_label_values(&values(l));
                prop_assert_eq!(removed, vec.remove_label_values(&values(l)).is_ok());
            }
        }
    }
    prop_assert_eq!(ours(&table), crates(&registry));
    let crate_series = registry
        .gather()
        .first()
        .map_or(0, |f| f.get_metric().len());
    prop_assert_eq!(table.len(), crate_series);
    Ok(())
}

#[test]
fn a_label_value_is_stored_once_and_dropped_when_no_series_holds_it() {
    let strings = Arc::new(Strings::default());
    let c: Table<GaugeCell> = Table::new(&FAMILY, &[], strings.clone());
    // Two series the crate would take for one (see `VALUES`).
    c.with_label_values(&["", "ab", "x"]).set(1.0);
    c.with_label_values(&["ab", "", "x"]).set(2.0);
    assert_eq!(c.len(), 2);
    assert!(c.remove_label_values(&["", "ab", "x"]));
    assert!(c.remove_label_values(&["ab", "", "x"]));
    let a: Table<GaugeCell> = Table::new(&FAMILY, &[], strings.clone());
    let b: Table<CounterCell> = Table::new(&FAMILY, &[], strings.clone());
    for pool in ["seoul", "tokyo"] {
        a.with_label_values(&["api", pool, "http://a/h"]).set(1.0);
        b.with_label_values(&["api", pool, "http://a/h"]).inc();
    }
    assert_eq!(
        strings.len(),
        4,
        "api, seoul, tokyo, the endpoint: once each"
    );
    for pool in ["seoul", "tokyo"] {
        assert!(a.remove_label_values(&["api", pool, "http://a/h"]));
        assert!(b.remove_label_values(&["api", pool, "http://a/h"]));
    }
    assert!(
        !a.remove_label_values(&["api", "seoul", "http://a/h"]),
        "gone"
    );
    assert_eq!(strings.len(), 0, "no series holds them");
    assert!(a.is_empty() && b.is_empty());
    assert_eq!(ours(&a), "", "an empty family is left out");
}

#[test]
fn a_cell_resolved_once_updates_the_exported_series() {
    let table: Table<HistogramCell> = Table::new(&FAMILY, &[1.0, 5.0], Arc::default());
    let cell = table.with_label_values(&["api", "seoul", "e"]);
    cell.observe(0.5);
    cell.observe(3.0);
    cell.observe(9.0);
    assert_eq!(cell.get_sample_count(), 3);
    assert_eq!(cell.get_sample_sum(), 12.5);
    let labels = r#"endpoint="e",pool="seoul",service="api""#;
    let text = ours(&table);
    for line in [
        format!("gslb_test_series_bucket{{{labels},le=\"1\"}} 1"),
        format!("gslb_test_series_bucket{{{labels},le=\"5\"}} 2"),
        format!("gslb_test_series_bucket{{{labels},le=\"+Inf\"}} 3"),
        format!("gslb_test_series_sum{{{labels}}} 12.5"),
        format!("gslb_test_series_count{{{labels}}} 3"),
    ] {
        assert!(
            text.contains(&format!("{line}\n")),
            "{line} missing from\n{text}"
        );
    }
}

#[test]
fn a_handle_kept_past_its_series_removal_never_changes_a_new_series() {
    let gauges: Table<GaugeCell> = Table::new(&FAMILY, &[], Arc::default());
    let counters: Table<CounterCell> = Table::new(&FAMILY, &[], Arc::default());
    let stale = gauges.with_label_values(&["api", "seoul", "a"]);
    let stale_count = counters.with_label_values(&["api", "seoul", "a"]);
    stale.set(5.0);
    stale_count.inc_by(5);
    assert!(gauges.remove_label_values(&["api", "seoul", "a"]));
    assert!(counters.remove_label_values(&["api", "seoul", "a"]));
    // New series, the removed one's again among them: none may share the stale slot.
    let labels = [
        ["api", "seoul", "a"],
        ["api", "seoul", "b"],
        ["api", "tokyo", "c"],
    ];
    for l in labels {
        assert_eq!(gauges.with_label_values(&l).get(), 0.0, "{l:?} reads 0");
        assert_eq!(counters.with_label_values(&l).get(), 0, "{l:?} reads 0");
    }
    stale.set(99.0);
    stale_count.inc_by(99);
    assert_eq!(stale.clone().get(), 99.0, "clones share the stale value");
    for l in labels {
        assert_eq!(gauges.with_label_values(&l).get(), 0.0, "{l:?} unchanged");
        assert_eq!(counters.with_label_values(&l).get(), 0, "{l:?} unchanged");
    }
    let text = ours(&gauges) + &ours(&counters);
    assert!(!text.contains(" 99\n") && !text.contains(" 5\n"), "{text}");
}

#[test]
fn a_removed_series_slot_is_reused_once_no_handle_of_it_is_left() {
    let mut words = Words::default();
    let (a, b) = (words.alloc(), words.alloc());
    assert_eq!((a, b), (0, 1));
    let held = words.handle(a);
    let clone = held.clone();
    held.store(7);
    words.retire(a);
    let c = words.alloc();
    assert_ne!(c, a, "a handle of the removed series is alive");
    drop(held);
    words.retire(b);
    assert_eq!(words.alloc(), b, "no handle of b: reused");
    let d = words.alloc();
    assert_ne!(d, a, "a clone of a's handle is alive");
    clone.add(1);
    assert_eq!(
        words.load(a),
        8,
        "the clone shares the removed series' value"
    );
    drop(clone);
    assert_eq!(words.alloc(), a, "the last handle is gone: reused");
    assert_eq!(words.load(a), 0, "a reused slot reads 0");
    for _ in 0..CHUNK * 2 {
        let slot = words.alloc();
        words.handle(slot).add(1);
        assert_eq!(words.load(slot), 1, "slot {slot}: a value of its own");
    }
}

#[test]
fn tables_sharing_strings_are_created_removed_and_written_from_many_threads_at_once() {
    let strings = Arc::new(Strings::default());
    let gauges: Table<GaugeCell> = Table::new(&FAMILY, &[], strings.clone());
    let counters: Table<CounterCell> = Table::new(&FAMILY, &[], strings.clone());
    std::thread::scope(|scope| {
        for t in 0..4 {
            let (gauges, counters) = (&gauges, &counters);
            scope.spawn(move || {
                let mut text = String::new();
                for i in 0..300 {
                    let (service, endpoint) = (format!("s{}", i % 50), format!("e{t}"));
                    let labels = [service.as_str(), "pool", endpoint.as_str()];
                    gauges.with_label_values(&labels).set(1.0);
                    counters.with_label_values(&labels).inc();
                    if i % 3 == 0 {
                        gauges.remove_label_values(&labels);
                    }
                    gauges
                        .encode(&mut text, &mut |_| Ok(()))
                        .expect("never fails");
                    text.clear();
                }
            });
        }
    });
    // Each thread's endpoint in 50 services; a gauge is gone when its last round (the last
    // `i` with that service, in 250..300) removed it.
    assert_eq!(counters.len(), 4 * 50);
    let removed_last = (0..50).filter(|s| (250..300).any(|i| i % 50 == *s && i % 3 == 0));
    assert_eq!(gauges.len(), 4 * (50 - removed_last.count()));
    for t in 0..4 {
        let cell = counters.with_label_values(&["s0", "pool", &format!("e{t}")]);
        assert_eq!(cell.get(), 6, "s0 counted at i = 0, 50, ..., 250");
    }
    assert_eq!(strings.len(), 50 + 1 + 4);
}
