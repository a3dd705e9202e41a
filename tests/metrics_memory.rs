//! What one series of the metric tables costs on the heap, counted by dhat's allocator (bytes
//! asked for, without the allocator's own header of about 16 bytes per allocation, and
//! allocations live): the 5,000 services x 2 endpoints run exports about 258,000 series (issue
//! 14's 200 MB peak RSS target). The label values are interned before the count (a service's
//! name is stored once per process, whatever the number of its series), so the figure is
//! what a table adds per series.

use gslb::ops::metrics::Metrics;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// Bytes asked for and blocks live now.
#[allow(clippy::cast_possible_wrap)]
fn live() -> (isize, isize) {
    let s = dhat::HeapStats::get();
    (s.curr_bytes as isize, s.curr_blocks as isize)
}

/// Bytes and allocations per series that `create` (making `n` series) leaves live.
#[allow(clippy::cast_precision_loss)]
fn per_series(n: usize, create: impl FnOnce()) -> (f64, f64) {
    let (bytes, allocations) = live();
    create();
    let (b, a) = live();
    (
        (b - bytes) as f64 / n as f64,
        (a - allocations) as f64 / n as f64,
    )
}

/// `n` indices in a scattered order (a stride coprime with `n`), so series are not created
/// in the order a table sorts them.
fn scattered(n: usize) -> impl Iterator<Item = usize> {
    (0..n).map(move |i| i * 7_919 % n)
}

#[test]
fn a_gauge_or_counter_series_costs_under_50_bytes_and_no_allocation_of_its_own() {
    const SERVICES: usize = 5_000;
    let _profiler = dhat::Profiler::builder().testing().build();
    let metrics = Metrics::new();
    let services: Vec<String> = (0..SERVICES).map(|i| format!("service-{i:05}")).collect();
    let pools = ["primary", "secondary"];
    let verdicts = ["healthy", "unhealthy", "unknown"];
    for s in &services {
        for p in pools {
            metrics.active_pool.with_label_values(&[s, p]).set(1.0);
        }
    }
    for v in verdicts {
        metrics
            .pool_verdict
            .with_label_values(&[&services[0], pools[0], v]);
    }
    metrics
        .provider_calls_total
        .with_label_values(&["cloudflare", &services[0], "observe"]);
    metrics
        .provider_calls_total
        .with_label_values(&["cloudflare", &services[0], "apply"]);

    let n = SERVICES * pools.len() * verdicts.len();
    let gauges = per_series(n, || {
        for i in scattered(n) {
            let (s, rest) = (i / 6, i % 6);
            let labels = [services[s].as_str(), pools[rest / 3], verdicts[rest % 3]];
            metrics.pool_verdict.with_label_values(&labels).set(1.0);
        }
    });
    let n = SERVICES * 2;
    let counters = per_series(n, || {
        for i in scattered(n) {
            let operation = ["observe", "apply"][i % 2];
            let labels = ["cloudflare", services[i / 2].as_str(), operation];
            metrics
                .provider_calls_total
                .with_label_values(&labels)
                .inc();
        }
    });
    println!(
        "pool_verdict (gauge, 3 labels): {:.1} B and {:.3} allocations per series; \
         provider_calls_total (counter, 3 labels): {:.1} B and {:.3} allocations per series",
        gauges.0, gauges.1, counters.0, counters.1
    );
    assert_eq!(metrics.pool_verdict.len(), SERVICES * 6);
    // 110.6 B and 2.13 allocations per series with a map node and a boxed key per series and
    // an allocation per cell; 28.4 B and 0.016 (a chunk of 64 values) with keys of string ids
    // in sorted arrays and values in shared chunks.
    for (bytes, allocations) in [gauges, counters] {
        assert!(bytes < 50.0, "{bytes} B per series");
        assert!(allocations < 0.05, "{allocations} allocations per series");
    }
}
