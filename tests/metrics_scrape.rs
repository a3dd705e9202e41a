//! The real `gslb run` (JSON logs) steering the Cloudflare fake, with an HTTPS origin (the
//! self-signed one of `support::tls`, `tls_verify = false`) and a plain one: after one probe
//! cycle and one reconcile, `/metrics` parses as the Prometheus text format and holds a sample
//! of every metric the controller declares ([`Metrics::families`], the prober's
//! included); histograms as `_bucket`, `_sum` and `_count`. Every stderr line is a JSON object
//! with a level and fields. `promtool check metrics` (the Prometheus server's own parser and
//! linter) accepts the scrape, and the render of many series with label values that need
//! escaping.

mod support;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use gslb::io::origin::Origin;
use gslb::io::probe::{DnsSettings, Prober};
use gslb::ops::metrics::Metrics;
use gslb_cloudflare::fake::{Fake, ids};
use gslb_core::model::{EndpointId, Millis, Observation, ServiceId, VantageId};
use gslb_core::policy::{Endpoint, EndpointKind, ProbeSpec};
use prometheus_parse::{Scrape, Value};
use serde_json::Value as Json;
use support::cloudflare::WebDaemon;
use support::daemon::status;
use support::eventually;
use support::tls::{
    CERT_NOT_AFTER, EXPIRED_CERT_PEM, EXPIRED_KEY_PEM, EXPIRED_NOT_AFTER, tls_origin,
    tls_origin_with,
};

/// Counter families whose series exist from their first count: no alert reads a first
/// increment of them (issue 14: zero series for every rule, code and reason of every service
/// were a third of a scrape).
const COUNTED_FROM_FIRST: [&str; 5] = [
    "gslb_provider_errors_total",
    "gslb_plans_refused_total",
    "gslb_decisions_total",
    "gslb_holds_total",
    "gslb_rail_holds_total",
];

/// Every metric family the daemon declares: the controller's and the prober's.
fn declared() -> Vec<String> {
    let metrics = Metrics::new();
    let prober = Prober::new(&DnsSettings {
        nameservers: vec!["127.0.0.1:9".parse().expect("addr")],
        ..DnsSettings::default()
    })
    .expect("prober");
    metrics.register_prober(&prober).expect("registers");
    // Alone, the cluster's families have no sample (cluster_votes checks them in a cluster),
    // nor have the data-plane mode's without such a service (route53_data_plane checks them).
    let cluster_only = gslb::ops::metrics::CLUSTER_ONLY;
    let data_plane_only = gslb::ops::metrics::DATA_PLANE_ONLY;
    metrics
        .families()
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| !cluster_only.contains(&n.as_str()) && !data_plane_only.contains(&n.as_str()))
        .collect()
}

/// Problems `promtool check metrics` finds in `text` (a parse error, or a lint: a counter
/// without `_total`, a family without help, ...); empty when it accepts it. `None` when
/// promtool is missing (the test skips, or fails under `GSLB_REQUIRE_TOOLS=1`).
fn promtool_problems(text: &str) -> Option<String> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let promtool = support::emulators::tool("promtool")?;
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool starts");
    let mut stdin = child.stdin.take().expect("piped");
    let input = text.to_owned();
    // Written from another thread: promtool may answer before reading everything.
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("promtool runs");
    let _ = writer.join();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(if out.status.success() {
        String::new()
    } else {
        said
    })
}

async fn scrape(admin: SocketAddr) -> Option<String> {
    let r = reqwest::get(format!("http://{admin}/metrics")).await.ok()?;
    r.status().is_success().then_some(())?;
    r.text().await.ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_declared_metric_is_exported_after_one_probe_cycle() {
    let fake = Fake::start().await;
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let tls = tls_origin().await;
    let gcp = Origin::start(loopback, "gcp").await.expect("gcp origin");
    let web = WebDaemon::start_with(
        &fake,
        [
            &format!("https://{}/api/v1/health", tls.addr),
            &format!("http://{}/api/v1/health", gcp.addr()),
        ],
        "[probe]\ninterval = \"200ms\"\ntimeout = \"150ms\"\nbody_contains = \"ok\"\ntls_verify = false\n[health]\nfall = 3\nrise = 1",
        &format!("load_balancer = \"{}\"", ids::LB_NAME),
        // A sink, so its delivery counters are declared; nothing listens there.
        "[[notify.webhooks]]\nname = \"ops\"\nurl = \"http://127.0.0.1:9/hook\"\n",
        &[("GSLB_LOG_FORMAT", "json"), ("GSLB_LOG", "info")],
    );
    let admin = web.admin;

    // One probe cycle of both endpoints and one reconcile pass that found NCP serving.
    let applied = eventually(Duration::from_secs(15), || async {
        status(admin, "web")
            .await
            .filter(|s| s["apply"]["state"] == "applied" && s["active"] == "ncp")
    })
    .await;
    assert!(applied.is_some(), "never applied:\n{}", web.log());
    let text = eventually(Duration::from_secs(10), || async {
        scrape(admin)
            .await
            .filter(|t| t.contains("probe_ssl_earliest_cert_expiry{"))
    })
    .await
    .unwrap_or_else(|| panic!("no certificate expiry exported:\n{}", web.log()));

    let parsed = Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).expect("parses");
    if let Some(problems) = promtool_problems(&text) {
        assert!(
            problems.is_empty(),
            "promtool check metrics:\n{problems}\n{text}"
        );
    }
    let present: BTreeSet<&str> = parsed.samples.iter().map(|s| s.metric.as_str()).collect();
    let histograms: BTreeSet<&str> = parsed
        .samples
        .iter()
        .filter(|s| matches!(s.value, Value::Histogram(_)))
        .map(|s| s.metric.as_str())
        .collect();
    let mut missing = Vec::new();
    for name in declared() {
        // Per binding, vantage point or etcd call: exported only with `[cluster]` (a writer
        // gauge of 0 on a lone instance would read as "no writer"); `tests/cluster_*.rs`
        // scrape them. `gslb_cluster_coordinated` reads 1 alone too.
        if name.starts_with("gslb_cluster_") && name != "gslb_cluster_coordinated" {
            continue;
        }
        // Per service from its first failover timeline on (none before a switch: they were
        // most of a scrape at scale); `tests/timeline_e2e.rs` scrapes them after a switch and
        // `the_task_observes_phase_histograms_and_audits_closed_timelines` checks that none
        // exists before.
        // Per service from their first count on; the metrics module's unit test
        // `a_service_and_its_binding_declare_only_the_series_alerts_count_from_zero` checks
        // which series a service and its binding start with.
        if COUNTED_FROM_FIRST.contains(&name.as_str()) {
            continue;
        }
        // Declared only for a service in shadow mode (the unit test above checks it); this
        // service enforces.
        if name == "gslb_shadow_plans_total" {
            assert!(!text.contains("gslb_shadow_plans_total{"), "{text}");
            continue;
        }
        if name == "gslb_failover_phase_seconds" {
            assert!(
                !text.contains("gslb_failover_phase_seconds_bucket{"),
                "no phase series before a switch:\n{text}"
            );
            continue;
        }
        if !present.contains(name.as_str()) {
            missing.push(name);
        } else if histograms.contains(name.as_str()) {
            for part in ["_sum", "_count"] {
                let sample = format!("{name}{part}");
                if !present.contains(sample.as_str()) {
                    missing.push(sample);
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "declared but not exported: {missing:?}\n{text}"
    );

    // The HTTPS endpoint's leaf certificate expiry, in Unix seconds; its name is an IP
    // literal, so no lookup time.
    let endpoint = format!("https://{}/api/v1/health", tls.addr);
    let of_https = |metric: &str| {
        parsed
            .samples
            .iter()
            .find(|s| s.metric == metric && s.labels.get("endpoint") == Some(endpoint.as_str()))
            .map(|s| s.value.clone())
    };
    assert_eq!(
        of_https("probe_ssl_earliest_cert_expiry"),
        Some(Value::Gauge(CERT_NOT_AFTER as f64 / 1000.0))
    );
    assert_eq!(
        of_https("probe_dns_lookup_time_seconds"),
        Some(Value::Gauge(0.0))
    );
    let gauge = |metric: &str| {
        parsed
            .samples
            .iter()
            .find(|s| s.metric == metric)
            .map(|s| s.value.clone())
    };
    assert_eq!(gauge("gslb_policy_reload_success"), Some(Value::Gauge(1.0)));
    assert!(
        matches!(gauge("gslb_policy_reload_timestamp_seconds"), Some(Value::Gauge(t)) if t > 1.7e9),
        "{text}"
    );

    // JSON logs: every line an object with a level and fields (a message among them).
    let log = web.log();
    assert!(log.lines().count() >= 2, "{log}");
    for line in log.lines() {
        let v: Json = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line}"));
        assert!(v["level"].is_string(), "{line}");
        assert!(v["fields"]["message"].is_string(), "{line}");
    }
    assert!(
        log.lines()
            .any(|l| l.contains(r#""message":"gslb running"#)),
        "{log}"
    );
}

/// This vantage point's suspect gauges read 0 from start, before any probe result (the engine
/// knows a vantage point only from its first result): an alert on them sees the series at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vantage_suspect_gauges_read_zero_before_any_probe_result() {
    let fake = Fake::start().await;
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let ncp = Origin::start(loopback, "ncp").await.expect("ncp origin");
    let gcp = Origin::start(loopback, "gcp").await.expect("gcp origin");
    // No probe result for the 5 s timeout.
    ncp.set_mode(gslb::io::origin::Mode::Hang);
    gcp.set_mode(gslb::io::origin::Mode::Hang);
    let web = WebDaemon::start_with(
        &fake,
        [
            &format!("http://{}/api/v1/health", ncp.addr()),
            &format!("http://{}/api/v1/health", gcp.addr()),
        ],
        "[probe]\ninterval = \"10s\"\ntimeout = \"5s\"",
        &format!("load_balancer = \"{}\"", ids::LB_NAME),
        "",
        &[],
    );
    let text = eventually(Duration::from_secs(4), || scrape(web.admin))
        .await
        .unwrap_or_else(|| panic!("no /metrics:\n{}", web.log()));
    for reason in ["all_pools_down", "canaries_down", "prober_side_failures"] {
        let series = format!("gslb_vantage_suspect{{reason=\"{reason}\",vantage=\"e2e\"}} 0");
        assert!(text.contains(&series), "{series} missing:\n{text}");
    }
}

#[tokio::test]
async fn an_expired_certificate_is_a_tls_expired_probe_with_its_expiry_exported() {
    // Issue 12: the handshake fails on expiry, yet the expiry is still reported, and the
    // reason label says which TLS check failed.
    let origin = tls_origin_with(EXPIRED_CERT_PEM, EXPIRED_KEY_PEM).await;
    let prober = Prober::new(&DnsSettings {
        nameservers: vec!["127.0.0.1:9".parse().expect("addr")],
        ..DnsSettings::default()
    })
    .expect("prober");
    let url = format!("https://{}/api/v1/health", origin.addr);
    let endpoint = Endpoint {
        id: EndpointId(url.clone()),
        kind: EndpointKind::Http(url.parse().expect("url")),
    };
    let spec = ProbeSpec {
        interval: Duration::from_secs(10),
        timeout: Duration::from_secs(3),
        expected_status: vec![200],
        body_contains: None,
        host_header: None,
        tls_server_name: Some("seoul.gslb-test.test".into()),
        tls_verify: true,
        follow_redirects: false,
    };
    let target = prober.target(&spec, &endpoint).expect("target");
    let observation = Observation {
        endpoint: endpoint.id.clone(),
        vantage: VantageId::from("here"),
        at: Millis(1),
        outcome: prober.probe(&target).await,
    };
    let metrics = Metrics::new();
    metrics.record_probe(&ServiceId::from("web"), "ncp", &observation);
    let text = metrics.render();
    let parsed = Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).expect("parses");
    let sample = |metric: &str| {
        parsed
            .samples
            .iter()
            .find(|s| s.metric == metric && s.labels.get("endpoint") == Some(url.as_str()))
    };
    let expiry = sample("probe_ssl_earliest_cert_expiry").map(|s| s.value.clone());
    assert_eq!(
        expiry,
        Some(Value::Gauge(EXPIRED_NOT_AFTER as f64 / 1000.0)),
        "{text}"
    );
    let probes = sample("gslb_probes_total").expect("counted");
    assert_eq!(probes.labels.get("reason"), Some("tls_expired"), "{text}");
}

/// Series of `services` services whose names and pools need escaping (`"`, `\\`, a line
/// feed) in every kind of family, recorded into `metrics` (about 3 kB of text per service).
fn escaped_series(metrics: &Metrics, services: u16) {
    for i in 0..services {
        let service = format!("svc-{i} \"quoted\" back\\slash\nline");
        metrics.declare_binding("cloudflare", &service);
        metrics
            .reconcile_duration_seconds
            .with_label_values(&["cloudflare"])
            .observe(0.03 * f64::from(i));
        metrics
            .failover_phase_seconds
            .with_label_values(&[&service, "decided"])
            .observe(f64::from(i));
        for pool in ["seoul", "to\"kyo"] {
            let endpoint = format!("http://127.0.0.{i}:80/health?pool={pool}");
            metrics
                .probe_success
                .with_label_values(&[&service, pool, &endpoint, "vp-1"])
                .set(1.0);
            metrics
                .probes_total
                .with_label_values(&[&service, pool, &endpoint, "ok"])
                .inc_by(u64::from(i));
        }
    }
    metrics
        .webhook_deliveries_total
        .with_label_values(&["ops \"sink\"", "delivered"])
        .inc();
}

/// Series of many services whose names and pools need escaping (`"`, `\\`, a line feed) in
/// every kind of family (gauges, counters, histograms; our tables and the crate's registry):
/// promtool (the Prometheus server's parser, which unescapes label values) parses the render
/// and finds nothing to lint.
#[test]
fn promtool_accepts_a_render_with_escaped_label_values() {
    let metrics = Metrics::new();
    escaped_series(&metrics, 50);
    let text = metrics.render();
    let line = r#"gslb_probes_total{endpoint="http://127.0.0.7:80/health?pool=to\"kyo",pool="to\"kyo",reason="ok",service="svc-7 \"quoted\" back\\slash\nline"} 7"#;
    assert!(
        text.contains(&format!("{line}\n")),
        "{line} missing from\n{text}"
    );
    if let Some(problems) = promtool_problems(&text) {
        assert!(
            problems.is_empty(),
            "promtool check metrics:\n{problems}\n{text}"
        );
    }
}

/// `GET path` on `admin`, asking for gzip when `gzip`: status, `Content-Encoding`, `Vary` and
/// the body as it came over the wire.
async fn get_raw(
    admin: SocketAddr,
    path: &str,
    gzip: bool,
) -> (u16, Option<String>, Option<String>, Vec<u8>) {
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let mut req = client.get(format!("http://{admin}{path}"));
    if gzip {
        req = req.header("accept-encoding", "gzip");
    }
    let r = req.send().await.expect("answer");
    let header = |name: &str| {
        r.headers()
            .get(name)
            .map(|v| v.to_str().expect("ascii").to_owned())
    };
    let (encoding, vary) = (header("content-encoding"), header("vary"));
    let status = r.status().as_u16();
    (
        status,
        encoding,
        vary,
        r.bytes().await.expect("body").to_vec(),
    )
}

fn gunzip(body: &[u8]) -> String {
    use std::io::Read;
    let mut text = String::new();
    flate2::read::GzDecoder::new(body)
        .read_to_string(&mut text)
        .expect("a gzip body of UTF-8 text");
    text
}

/// The scrape without the process's own families, whose CPU time and memory change between
/// two scrapes.
fn without_process(text: &str) -> String {
    text.lines()
        .filter(|l| {
            let name = l
                .trim_start_matches("# HELP ")
                .trim_start_matches("# TYPE ");
            !name.starts_with("process_")
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Prometheus asks every scrape with `Accept-Encoding: gzip`: the answer is gzip and decodes
/// to the text a client that does not ask gets (plain, no `Content-Encoding`), which promtool
/// accepts; `/v1/status` and `/v1/events` likewise. Both scrapes are streamed over many
/// chunks and arrive whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_asking_for_gzip_gets_the_same_text_compressed() {
    let sinks = support::controller::sinks(16);
    escaped_series(&sinks.metrics, 500);
    let state = gslb::admin::AdminState::new(&sinks, None, Default::default(), Default::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let admin = listener.local_addr().expect("addr");
    tokio::spawn(gslb::admin::serve(listener, state));

    let (status, encoding, vary, plain) = get_raw(admin, "/metrics", false).await;
    assert_eq!((status, encoding), (200, None), "plain without asking");
    assert_eq!(vary.as_deref(), Some("accept-encoding"));
    let plain = String::from_utf8(plain).expect("text");
    assert!(plain.contains("gslb_probes_total{"), "{plain}");
    // Streamed in chunks of 64 KiB: the answers span many (plain) and more than one (gzip).
    assert!(plain.len() > 16 << 16, "{} bytes", plain.len());
    let (status, encoding, vary, zipped) = get_raw(admin, "/metrics", true).await;
    assert_eq!((status, encoding.as_deref()), (200, Some("gzip")));
    assert_eq!(vary.as_deref(), Some("accept-encoding"));
    assert!(
        zipped.len() * 4 < plain.len(),
        "{} vs {} bytes",
        zipped.len(),
        plain.len()
    );
    assert!(zipped.len() > 1 << 16, "{} bytes", zipped.len());
    let decoded = gunzip(&zipped);
    assert_eq!(without_process(&decoded), without_process(&plain));
    if let Some(problems) = promtool_problems(&decoded) {
        assert!(
            problems.is_empty(),
            "promtool check metrics:\n{problems}\n{decoded}"
        );
    }

    for path in ["/v1/status", "/v1/events", "/v1/status?endpoints=false"] {
        let (_, encoding, _, plain) = get_raw(admin, path, false).await;
        assert_eq!(encoding, None, "{path}");
        let (status, encoding, _, zipped) = get_raw(admin, path, true).await;
        assert_eq!((status, encoding.as_deref()), (200, Some("gzip")), "{path}");
        assert_eq!(gunzip(&zipped).into_bytes(), plain, "{path}");
    }
}
