//! The operations metrics: probe DNS time and certificate expiry, switches by kind, policy
//! loads, binding label sets, and the list of declared names.

use std::collections::BTreeSet;
use std::time::Duration;

use super::Metrics;
use super::tests::demo_policy;
use gslb_core::engine::{Blocked, Decision, Rule};
use gslb_core::model::{
    EndpointId, Millis, Observation, PoolId, ProbeOutcome, ProbeReason, ServiceId, VantageId,
};
use gslb_core::policy::Mode;

fn observation(dns_lookup: Option<Duration>, cert_expiry: Option<Millis>) -> Observation {
    Observation {
        endpoint: EndpointId("https://seoul.example.test/health".into()),
        vantage: VantageId("v1".into()),
        at: Millis(0),
        outcome: ProbeOutcome {
            success: true,
            duration: Duration::from_millis(40),
            http_status: Some(200),
            reason: ProbeReason::Ok,
            dns_lookup,
            cert_expiry,
        },
    }
}

const LABELS: &str =
    r#"endpoint="https://seoul.example.test/health",pool="seoul",service="api",vantage="v1""#;

#[test]
fn probes_export_dns_time_and_keep_the_last_certificate_expiry() {
    let m = Metrics::new();
    let text = m.render();
    assert!(!text.contains("probe_ssl_earliest_cert_expiry{"), "{text}");
    m.record_probe(
        &ServiceId::from("api"),
        "seoul",
        &observation(
            Some(Duration::from_millis(250)),
            Some(Millis(4_949_565_165_000)),
        ),
    );
    let text = m.render();
    for line in [
        format!("probe_dns_lookup_time_seconds{{{LABELS}}} 0.25"),
        format!("probe_ssl_earliest_cert_expiry{{{LABELS}}} 4949565165"),
    ] {
        assert!(text.contains(&line), "{line} missing from\n{text}");
    }
    // An IP literal (no lookup) reads 0; a probe without a certificate keeps the last expiry.
    m.record_probe(&ServiceId::from("api"), "seoul", &observation(None, None));
    let text = m.render();
    for line in [
        format!("probe_dns_lookup_time_seconds{{{LABELS}}} 0\n"),
        format!("probe_ssl_earliest_cert_expiry{{{LABELS}}} 4949565165"),
    ] {
        assert!(text.contains(&line), "{line} missing from\n{text}");
    }
}

fn decision(rule: Rule, previous: &str, active: &str) -> Decision {
    Decision {
        service: ServiceId("demo-api".into()),
        at: Millis(0),
        active: Some(PoolId(active.into())),
        previous: Some(PoolId(previous.into())),
        rule,
        blocked: None,
        drained: BTreeSet::new(),
        reasons: Vec::new(),
        pools: Default::default(),
    }
}

#[test]
fn switches_are_counted_by_kind_and_only_when_they_move_traffic() {
    let m = Metrics::new();
    m.declare_service(&demo_policy());
    let text = m.render();
    for kind in ["automatic", "drill"] {
        let line = format!(r#"gslb_switches_total{{kind="{kind}",service="demo-api"}} 0"#);
        assert!(text.contains(&line), "{line} missing from\n{text}");
    }
    m.record_decision(
        &decision(Rule::Failover, "seoul", "tokyo"),
        true,
        Mode::Enforce,
    );
    m.record_decision(
        &decision(Rule::Failback, "tokyo", "seoul"),
        true,
        Mode::Enforce,
    );
    // Republished unchanged: not a new switch.
    m.record_decision(
        &decision(Rule::Failback, "tokyo", "seoul"),
        false,
        Mode::Enforce,
    );
    for rule in [Rule::Drain, Rule::Force, Rule::Restore] {
        m.record_decision(&decision(rule, "seoul", "tokyo"), true, Mode::Enforce);
    }
    // Not a switch: the serving pool stays.
    m.record_decision(&decision(Rule::Stay, "seoul", "seoul"), true, Mode::Enforce);
    let mut first = decision(Rule::ServePreferred, "seoul", "seoul");
    first.previous = None;
    m.record_decision(&first, true, Mode::Enforce);
    let text = m.render();
    for line in [
        r#"gslb_switches_total{kind="automatic",service="demo-api"} 2"#,
        r#"gslb_switches_total{kind="drill",service="demo-api"} 3"#,
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
}

#[test]
fn a_rail_hold_of_a_drill_is_counted_as_a_rail_hold() {
    let m = Metrics::new();
    m.declare_service(&demo_policy());
    let rail_holds = |rule: Rule| {
        m.rail_holds_total
            .with_label_values(&["demo-api", rule.as_str()])
            .get()
    };
    // A drain of the serving pool while no other pool is healthy: the engine keeps the
    // drained pool serving (rule `rail_hold`, the never-zero-serving-pools rail) and blocks no
    // switch of its own.
    let mut kept = decision(Rule::RailHold, "primary", "primary");
    kept.previous = None;
    m.record_decision(&kept, true, Mode::Enforce);
    assert_eq!(rail_holds(Rule::RailHold), 1);
    // A switch a rail refused counts as before.
    let mut spaced = decision(Rule::Dwell, "primary", "primary");
    spaced.previous = None;
    spaced.blocked = Some(Blocked {
        rule: Rule::Failback,
        to: PoolId("secondary".into()),
    });
    m.record_decision(&spaced, true, Mode::Enforce);
    assert_eq!(rail_holds(Rule::Dwell), 1);
    assert_eq!(rail_holds(Rule::RailHold), 1);
}

#[test]
fn a_shadow_services_switches_are_not_counted_as_switches() {
    let m = Metrics::new();
    m.declare_service(&demo_policy());
    m.record_decision(
        &decision(Rule::Failover, "seoul", "tokyo"),
        true,
        Mode::Shadow,
    );
    m.record_decision(&decision(Rule::Drain, "tokyo", "seoul"), true, Mode::Shadow);
    let text = m.render();
    for line in [
        r#"gslb_switches_total{kind="automatic",service="demo-api"} 0"#,
        r#"gslb_switches_total{kind="drill",service="demo-api"} 0"#,
        // Still the engine's decisions.
        r#"gslb_decisions_total{rule="failover",service="demo-api"} 1"#,
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
}

#[test]
fn policy_loads_set_success_timestamp_and_count_by_result() {
    let m = Metrics::new();
    let text = m.render();
    for line in [
        r#"gslb_policy_reloads_total{result="ok"} 0"#,
        r#"gslb_policy_reloads_total{result="error"} 0"#,
        "gslb_policy_reload_success 0",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
    m.record_policy_load(true, 1_800_000_000.5);
    m.record_policy_load(false, 1_800_000_100.0);
    let text = m.render();
    for line in [
        r#"gslb_policy_reloads_total{result="ok"} 1"#,
        r#"gslb_policy_reloads_total{result="error"} 1"#,
        "gslb_policy_reload_success 0",
        // A failed load keeps the last good load's time.
        "gslb_policy_reload_timestamp_seconds 1800000000.5",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
    m.record_policy_load(true, 1_800_000_200.0);
    let text = m.render();
    assert!(text.contains("gslb_policy_reload_success 1"), "{text}");
    assert!(
        text.contains("gslb_policy_reload_timestamp_seconds 1800000200"),
        "{text}"
    );
}

#[test]
fn a_binding_reads_zero_everywhere_before_its_first_call() {
    let m = Metrics::new();
    m.declare_binding("route53", "api");
    let text = m.render();
    for line in [
        r#"gslb_provider_calls_total{operation="apply",provider="route53",service="api"} 0"#,
        r#"gslb_provider_writes_total{provider="route53",service="api"} 0"#,
        r#"gslb_provider_write_fights_total{provider="route53",service="api"} 0"#,
        r#"gslb_reconcile_duration_seconds_count{provider="route53"} 0"#,
        r#"gslb_decision_unapplied_age_seconds{service="api"} 0"#,
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
}

/// Series of `text` (sample lines, a histogram counted once by its `_count`) labelled
/// `service="api"`.
fn series_of_api(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| !l.starts_with('#') && l.contains(r#"service="api""#))
        .filter(|l| !l.contains("_bucket{") && !l.contains("_sum{"))
        .collect()
}

#[test]
fn a_service_and_its_binding_declare_only_the_series_alerts_count_from_zero() {
    let m = Metrics::new();
    let mut policy = demo_policy();
    policy.service = ServiceId("api".into());
    m.declare_service(&policy);
    m.declare_binding("route53", "api");
    let text = m.render();
    let series = series_of_api(&text);
    // 7 per service in enforce mode (velocity limited, 2 switch kinds, 3 override actions,
    // the oldest override's age) + 7 per binding (2 call counters, writes, drift, fights, the
    // call budget spent, the unapplied age): was 44 before issue 14's second round. The
    // reconcile histogram is the provider's, not the service's.
    assert_eq!(policy.mode, Mode::Enforce);
    assert_eq!(series.len(), 14, "{series:#?}");
    assert!(!text.contains("gslb_shadow_plans_total{"), "{text}");
    // In shadow mode (also after a reload into it) the shadow plans read 0 from the start.
    policy.mode = Mode::Shadow;
    m.declare_service(&policy);
    let text = m.render();
    assert!(
        text.contains("gslb_shadow_plans_total{service=\"api\"} 0\n"),
        "{text}"
    );
    assert!(text.contains(r#"gslb_reconcile_duration_seconds_count{provider="route53"} 0"#));
    for alerted in [
        r#"gslb_switches_total{kind="automatic",service="api"} 0"#,
        r#"gslb_velocity_limited_total{service="api"} 0"#,
        r#"gslb_provider_calls_total{operation="observe",provider="route53",service="api"} 0"#,
    ] {
        assert!(series.contains(&alerted), "{alerted} missing: {series:#?}");
    }
    for counted_from_first in [
        "gslb_provider_errors_total{",
        "gslb_plans_refused_total{",
        "gslb_decisions_total{",
        "gslb_holds_total{",
        "gslb_rail_holds_total{",
    ] {
        assert!(
            !text.contains(counted_from_first),
            "{counted_from_first}\n{text}"
        );
    }
    // A first count creates the series.
    m.provider_errors_total
        .with_label_values(&["route53", "api", "observe", "auth"])
        .inc();
    assert!(m.render().contains(
        r#"gslb_provider_errors_total{code="auth",operation="observe",provider="route53",service="api"} 1"#
    ));
}

#[test]
fn families_list_every_family_including_the_prober_s() {
    let m = Metrics::new();
    let names = family_names(&m);
    for name in [
        "probe_ssl_earliest_cert_expiry",
        "probe_dns_lookup_time_seconds",
        "gslb_switches_total",
        "gslb_reconcile_duration_seconds",
        "gslb_policy_reload_success",
        "gslb_build_info",
    ] {
        assert!(names.iter().any(|n| n == name), "{name} not in {names:?}");
    }
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "no family listed twice");
    let prober = crate::io::probe::Prober::new(&crate::io::probe::DnsSettings {
        nameservers: vec!["127.0.0.1:9".parse().expect("addr")],
        ..crate::io::probe::DnsSettings::default()
    })
    .expect("prober");
    m.register_prober(&prober).expect("registers");
    let more = family_names(&m);
    assert!(
        more.iter().any(|n| n == "gslb_probe_lateness_seconds"),
        "{more:?}"
    );
    assert!(
        more.iter().any(|n| n == "gslb_probes_in_flight"),
        "{more:?}"
    );
    assert!(more.len() > names.len());
}

fn family_names(m: &Metrics) -> Vec<String> {
    m.families().into_iter().map(|(n, _)| n).collect()
}
