//! Registration, overrides, policy loads, forgotten services and prober statistics.

/// The demo policy with placeholder origins.
pub(super) fn demo_policy() -> gslb_core::policy::Policy {
    gslb_core::policy::parse(
        std::path::Path::new("demo.toml"),
        &include_str!("../../cli/demo_policy.toml")
            .replace("{seoul}", "127.0.0.1:1")
            .replace("{tokyo}", "127.0.0.1:2"),
    )
    .expect("the demo policy is valid")
}

#[test]
fn every_metric_registers_once() {
    let m = super::Metrics::new();
    let policy = demo_policy();
    m.declare_service(&policy);
    assert!(m.render().contains("gslb_switches_total"));
}

#[test]
fn process_metrics_are_exported_and_declared() {
    let m = super::Metrics::new();
    let text = m.render();
    for family in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_start_time_seconds",
    ] {
        assert!(
            text.contains(&format!("# TYPE {family} ")),
            "{family}:\n{text}"
        );
        assert!(
            m.families().iter().any(|(n, _)| n == family),
            "{family} not declared"
        );
    }
}

#[test]
fn override_gauges_count_active_drills_and_fall_back_to_zero() {
    use gslb_core::engine::{OverrideAction, OverrideId, OverrideRequest, Overrides};
    use gslb_core::model::{Millis, PoolId};
    let m = super::Metrics::new();
    let policy = demo_policy();
    let mut overrides = Overrides::default();
    let req = OverrideRequest {
        id: OverrideId("d-1".into()),
        service: policy.service.clone(),
        action: OverrideAction::Drain,
        pool: PoolId("seoul".into()),
        reason: "drill".into(),
        actor: "alice".into(),
        duration: None,
    };
    overrides
        .add(&policy, &req, Millis(0))
        .expect("valid drill");
    m.record_overrides([&policy.service], &overrides, Millis(90_000));
    let text = m.render();
    assert!(
        text.contains(r#"gslb_overrides_active{action="drain",service="demo-api"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"gslb_overrides_active{action="force",service="demo-api"} 0"#),
        "{text}"
    );
    assert!(
        text.contains(r#"gslb_override_oldest_age_seconds{service="demo-api"} 90"#),
        "{text}"
    );
    overrides.end(&req.id).expect("ends");
    m.record_overrides([&policy.service], &overrides, Millis(91_000));
    let text = m.render();
    assert!(
        text.contains(r#"gslb_overrides_active{action="drain",service="demo-api"} 0"#),
        "{text}"
    );
    assert!(
        text.contains(r#"gslb_override_oldest_age_seconds{service="demo-api"} 0"#),
        "{text}"
    );
}

#[test]
fn an_expired_drains_revert_keeps_the_drills_age_until_traffic_is_back() {
    use gslb_core::engine::{
        Engine, EngineSettings, Input, OverrideAction, OverrideId, OverrideRequest,
    };
    use gslb_core::model::{Millis, PoolId};
    let m = super::Metrics::new();
    let policy = demo_policy();
    let service = policy.service.clone();
    let mut engine = Engine::new([policy], &EngineSettings::default());
    let drain = OverrideRequest {
        id: OverrideId("d-1".into()),
        service: service.clone(),
        action: OverrideAction::Drain,
        pool: PoolId("seoul".into()),
        reason: "drill".into(),
        actor: "alice".into(),
        duration: Some(std::time::Duration::from_secs(7_200)),
    };
    engine.step(Millis(0), &Input::AddOverride(drain));
    let age = |engine: &Engine, at: Millis| {
        m.record_overrides([&service], engine.overrides(), at);
        m.override_oldest_age_seconds
            .with_label_values(&[service.0.as_str()])
            .get()
    };
    assert_eq!(age(&engine, Millis(3_600_000)), 3_600.0);
    // The drain of the most preferred pool expires; a short restore reverts it. Traffic is not
    // back yet: the drill is still outstanding, and its age goes on from its start.
    engine.step(Millis(7_201_000), &Input::Tick);
    let active: Vec<_> = engine.overrides().all().map(|o| o.id.0.clone()).collect();
    assert_eq!(active, ["d-1-revert"]);
    assert_eq!(age(&engine, Millis(7_201_000)), 7_201.0);
    assert_eq!(age(&engine, Millis(7_230_000)), 7_230.0);
}

#[test]
fn policy_loads_and_forgotten_services() {
    use gslb_core::model::{EndpointId, Millis, Observation, ProbeOutcome, ProbeReason, VantageId};
    let m = super::Metrics::new();
    m.record_policy_load(true, 1_000.0);
    let text = m.render();
    assert!(text.contains("gslb_policy_reload_success 1"), "{text}");
    assert!(
        text.contains(r#"gslb_policy_reloads_total{result="error"} 0"#),
        "{text}"
    );
    m.record_policy_load(false, 2_000.0);
    let text = m.render();
    assert!(text.contains("gslb_policy_reload_success 0"), "{text}");
    assert!(
        text.contains("gslb_policy_reload_timestamp_seconds 1000"),
        "{text}"
    );
    assert!(
        text.contains(r#"gslb_policy_reloads_total{result="error"} 1"#),
        "{text}"
    );
    m.record_policy_load(true, 3_000.0);
    let text = m.render();
    assert!(
        text.contains("gslb_policy_reload_timestamp_seconds 3000"),
        "{text}"
    );
    assert!(
        text.contains(r#"gslb_policy_reloads_total{result="ok"} 2"#),
        "{text}"
    );

    let policy = demo_policy();
    m.declare_service(&policy);
    let endpoint: EndpointId = policy.pools[0].endpoints[0].id.clone();
    let vantage = VantageId("here".into());
    let obs = Observation {
        endpoint: endpoint.clone(),
        vantage: vantage.clone(),
        at: Millis(0),
        outcome: ProbeOutcome {
            success: true,
            duration: std::time::Duration::from_millis(1),
            http_status: Some(200),
            reason: ProbeReason::Ok,
            dns_lookup: None,
            cert_expiry: None,
        },
    };
    for _ in 0..3 {
        m.record_probe(&policy.service, policy.pools[0].id.0.as_str(), &obs);
    }
    assert_eq!(m.probe_series_resolved(), 1, "resolved once per endpoint");
    m.record_velocity(&policy.service, 3);
    m.record_stale_evidence(&policy.service, 2);
    assert!(m.render().contains(r#"probe_success{"#), "recorded");
    m.forget_service(&policy, &[(endpoint.clone(), vantage.clone())]);
    assert_eq!(m.probe_series_resolved(), 0, "forgotten with the gauges");
    let text = m.render();
    for gone in [
        "probe_success{",
        "gslb_velocity_available{",
        "gslb_stale_evidence{",
        "gslb_overrides_active{",
    ] {
        assert!(!text.contains(gone), "{gone} left:\n{text}");
    }
    assert!(
        text.contains("gslb_switches_total{"),
        "counters stay: {text}"
    );
    // A result after the service was forgotten resolves its series again: they export.
    m.record_probe(&policy.service, policy.pools[0].id.0.as_str(), &obs);
    let text = m.render();
    assert!(text.contains(r#"probe_success{"#), "{text}");
    assert!(
        text.contains(r#"gslb_probes_total{endpoint="http://127.0.0.1:1/api/v1/health",pool="seoul",reason="ok",service="demo-api"} 4"#),
        "the counter kept its history: {text}"
    );
}

#[test]
fn prober_stats_are_exported() {
    let m = super::Metrics::new();
    let prober = crate::io::probe::Prober::with_limits(
        &crate::io::probe::DnsSettings {
            nameservers: vec!["127.0.0.1:9".parse().expect("addr")],
            ..crate::io::probe::DnsSettings::default()
        },
        &crate::io::probe::ProbingSettings {
            max_in_flight: 16,
            ..crate::io::probe::ProbingSettings::default()
        },
    )
    .expect("prober");
    m.register_prober(&prober).expect("first registration");
    prober
        .stats()
        .started(std::time::Duration::from_millis(30), false);
    prober
        .stats()
        .started(std::time::Duration::from_millis(80), true);
    assert!(m.register_prober(&prober).is_err(), "registered once");
    let text = m.render();
    for line in [
        "gslb_probe_lateness_seconds_bucket{le=\"0.025\"} 0",
        "gslb_probe_lateness_seconds_bucket{le=\"0.05\"} 1",
        "gslb_probe_lateness_seconds_bucket{le=\"0.1\"} 2",
        "gslb_probe_lateness_seconds_bucket{le=\"+Inf\"} 2",
        "gslb_probe_lateness_seconds_count 2",
        "gslb_probes_started_total 2",
        "gslb_probes_late_total 1",
        "gslb_probes_skipped_total 0",
        "gslb_probes_in_flight 0",
        "gslb_probe_max_in_flight 16",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
    assert!(text.contains("# TYPE gslb_probe_lateness_seconds histogram"));
}

#[test]
fn families_are_written_once_each_sorted_by_name_tables_and_registry_interleaved() {
    use gslb_core::model::ServiceId;
    let m = super::Metrics::new();
    let policy = demo_policy();
    m.declare_service(&policy);
    m.declare_binding("route53", "demo-api");
    m.declare_failover_phases(&ServiceId::from("demo-api"));
    m.record_policy_load(true, 1_000.0);
    m.vantage_suspect
        .with_label_values(&["here", "flapping"])
        .set(0.0);
    m.webhook_deliveries_total
        .with_label_values(&["ops", "delivered"])
        .inc();
    let text = m.render();
    let families: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    let mut sorted = families.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(families, sorted, "once each, sorted by name");
    // Our tables' families and the registry's, interleaved by name.
    for name in [
        "gslb_build_info",
        "gslb_failover_phase_seconds",
        "gslb_override_oldest_age_seconds",
        "gslb_policy_reload_success",
        "gslb_provider_calls_total",
        "gslb_vantage_suspect",
        "gslb_webhook_deliveries_total",
        "process_cpu_seconds_total",
    ] {
        assert!(families.contains(&name), "{name} missing from {families:?}");
    }
    // Each sample follows its own family's HELP and TYPE lines.
    let mut current = "";
    for line in text.lines() {
        if let Some(t) = line.strip_prefix("# TYPE ") {
            current = t.split(' ').next().unwrap_or_default();
        } else if !line.starts_with('#') {
            assert!(line.starts_with(current), "{line} under {current}");
        }
    }
}

#[test]
fn the_text_written_a_family_at_a_time_is_the_whole_render() {
    struct Pieces(Vec<u8>, usize);
    impl std::io::Write for Pieces {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.extend_from_slice(buf);
            self.1 += 1;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let m = super::Metrics::new();
    m.declare_service(&demo_policy());
    // The process's own figures (CPU, memory) change between two renders.
    let steady = |text: &str| -> String {
        text.lines()
            .filter(|l| !l.starts_with("process_"))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    let whole = m.render();
    let mut pieces = Pieces(Vec::new(), 0);
    m.render_to(&mut pieces).expect("a Vec takes every write");
    let streamed = String::from_utf8(pieces.0).expect("the text is UTF-8");
    assert_eq!(steady(&streamed), steady(&whole));
    let families = whole.matches("# TYPE ").count();
    assert!(
        pieces.1 >= families,
        "one write per family at least: {} writes, {families} families",
        pieces.1
    );
}
