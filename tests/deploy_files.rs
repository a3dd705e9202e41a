//! The deployment files under `deploy/` and the Dockerfile: the alert rules pass `promtool check
//! rules` and their unit tests, every alert has a firing and a non-firing case, every metric the
//! rules and the Grafana dashboard read is declared in `gslb::ops::metrics`, the dashboard's queries
//! parse, the Kubernetes manifests pass a schema check, their settings and policies load, their
//! containers run a `gslb run` command line gslb accepts, and the Dockerfile passes hadolint.
//!
//! The tools come from `.ci/install-tools.sh` (promtool on PATH; kubernetes-validate and
//! hadolint in the virtualenv). A missing tool skips its test with a message, except under
//! `GSLB_REQUIRE_TOOLS=1` (set by `.ci/run`), where it fails: CI cannot skip silently.

#[path = "support/emulators.rs"]
mod emulators;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use gslb::ops::metrics::Metrics;
use prometheus::proto::MetricType;

const RULES: &str = "deploy/prometheus/gslb-alerts.yml";
const RULE_TESTS: &str = "deploy/prometheus/tests/gslb-alerts.test.yml";
const DASHBOARD: &str = "deploy/grafana/gslb-dashboard.json";
const CLOUDS: [&str; 2] = ["aws-seoul", "gcp-tokyo"];

fn root() -> PathBuf {
    emulators::workspace_root()
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(root().join(relative))
        .unwrap_or_else(|e| panic!("reading {relative}: {e}"))
}

/// Runs `exe args` in the workspace root; panics with its output unless it exits 0.
fn run_ok(exe: &Path, args: &[&str]) -> String {
    let out = Command::new(exe)
        .args(args)
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", exe.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{} {args:?} failed ({}):\n{text}",
        exe.display(),
        out.status
    );
    text
}

#[test]
fn promtool_checks_the_rules_and_their_unit_tests_pass() {
    let Some(promtool) = emulators::tool("promtool") else {
        return;
    };
    let out = run_ok(&promtool, &["check", "rules", RULES]);
    assert!(out.contains("SUCCESS"), "{out}");
    let out = run_ok(&promtool, &["test", "rules", RULE_TESTS]);
    assert!(out.contains("SUCCESS"), "{out}");
}

/// Names after `- alert: ` in the rules file.
fn alert_names(rules: &str) -> Vec<String> {
    rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .map(|n| n.trim().to_owned())
        .collect()
}

#[test]
fn every_alert_has_a_firing_and_a_non_firing_unit_test() {
    let alerts = alert_names(&read(RULES));
    for required in [
        "PoolFlapping",
        "FailoverHappened",
        "DecisionNotApplied",
        "ProviderErrors",
        "ProviderWriteFight",
        "VelocityLimitHit",
        "AllPoolsDown",
        "StandbyUnhealthy",
        "ProberSuspect",
        "SingleVantageAllPoolsDown",
        "OverrideOutstanding",
        "CertExpiringSoon",
        "PolicyReloadFailed",
        "ClusterNoWriter",
        "ClusterSeveralWriters",
        "ClusterVantageStale",
        "ClusterCoordinationLost",
    ] {
        assert!(alerts.iter().any(|a| a == required), "{required} missing");
    }
    // Each `alertname: X` is followed by its `exp_alerts:` line: `[]` does not fire.
    let tests = read(RULE_TESTS);
    let mut cases: Vec<(String, bool)> = Vec::new();
    let mut current = None;
    for line in tests.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix("alertname: ") {
            current = Some(name.trim().to_owned());
        } else if let Some(rest) = line.strip_prefix("exp_alerts:") {
            let name = current.take().expect("exp_alerts after an alertname");
            cases.push((name, rest.trim() != "[]"));
        }
    }
    for alert in &alerts {
        for fires in [true, false] {
            assert!(
                cases.contains(&(alert.clone(), fires)),
                "{alert} has no unit test where it {}",
                if fires { "fires" } else { "does not fire" }
            );
        }
    }
}

/// The `expr` of every dashboard target.
fn dashboard_queries() -> Vec<String> {
    let dash: serde_json::Value = serde_json::from_str(&read(DASHBOARD)).expect("valid JSON");
    assert_eq!(dash["schemaVersion"], 39);
    let panels = dash["panels"].as_array().expect("panels");
    panels
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .map(|t| t["expr"].as_str().expect("expr").to_owned())
        .collect()
}

/// Every `gslb_*` or `probe_*` identifier in `text`.
fn metric_names(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("gslb_") || w.starts_with("probe_"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_metric_the_rules_and_the_dashboard_read_is_declared() {
    let metrics = Metrics::new();
    let mut exported = BTreeSet::new();
    for (name, kind) in metrics.families() {
        if kind == MetricType::HISTOGRAM {
            for suffix in ["_bucket", "_sum", "_count"] {
                exported.insert(format!("{name}{suffix}"));
            }
        } else {
            exported.insert(name.clone());
        }
    }
    assert!(exported.contains("gslb_failover_phase_seconds_bucket"));
    assert!(!exported.contains("gslb_failover_phase_seconds"));
    assert!(!exported.contains("gslb_switches_total_count"));
    let dashboard = dashboard_queries().join("\n");
    let used: Vec<(&str, String)> = [
        (RULES, read(RULES)),
        (RULE_TESTS, read(RULE_TESTS)),
        (DASHBOARD, dashboard),
    ]
    .into_iter()
    .flat_map(|(file, text)| metric_names(&text).into_iter().map(move |m| (file, m)))
    .collect();
    assert!(used.len() > 20, "{used:?}");
    let unknown: Vec<_> = used.iter().filter(|(_, m)| !exported.contains(m)).collect();
    assert!(
        unknown.is_empty(),
        "not declared in gslb::ops::metrics: {unknown:?}"
    );
}

#[test]
fn the_declared_families_are_what_metrics_renders() {
    let metrics = Metrics::new();
    let policies = gslb_core::policy::load(&[root().join("policies")]).expect("valid policies");
    for (_, p) in &policies {
        metrics.declare_service(p);
    }
    let families = metrics.families();
    let text = metrics.render();
    let rendered: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .collect();
    assert!(!rendered.is_empty());
    for (name, kind) in rendered {
        let kind = match kind {
            "counter" => MetricType::COUNTER,
            "gauge" => MetricType::GAUGE,
            "histogram" => MetricType::HISTOGRAM,
            other => panic!("{name}: unexpected type {other}"),
        };
        assert!(
            families.contains(&(name.to_owned(), kind)),
            "{name} ({kind:?}) rendered but not in Metrics::families"
        );
    }
    let mut names: Vec<_> = families.iter().map(|(n, _)| n).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), families.len(), "a family listed twice");
}

#[test]
fn every_dashboard_query_parses() {
    let Some(promtool) = emulators::tool("promtool") else {
        return;
    };
    // Grafana's variables replaced by what they expand to, each query as a recording rule.
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, q) in dashboard_queries().iter().enumerate() {
        let q = q
            .replace("$__rate_interval", "1m")
            .replace("$__range", "6h")
            .replace("$instance", ".*")
            .replace("$service", ".*");
        rules.push_str(&format!(
            "      - record: dashboard_query_{i}\n        expr: {}\n",
            serde_json::Value::String(q)
        ));
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("dashboard-rules.yml");
    std::fs::write(&file, rules).expect("write");
    let out = run_ok(
        &promtool,
        &["check", "rules", file.to_str().expect("utf-8")],
    );
    assert!(out.contains("SUCCESS"), "{out}");
}

#[test]
fn kubernetes_manifests_pass_the_schema_check() {
    let Some(validate) = emulators::tool("kubernetes-validate") else {
        return;
    };
    let mut files = vec!["deploy/kubernetes/namespace.yaml".to_owned()];
    files.extend(CLOUDS.map(|c| format!("deploy/kubernetes/{c}/gslb.yaml")));
    let args: Vec<&str> = ["--strict", "--kubernetes-version", "1.31.0"]
        .into_iter()
        .chain(files.iter().map(String::as_str))
        .collect();
    let out = run_ok(&validate, &args);
    for kind in ["deployment/gslb", "service/gslb", "configmap/gslb-config"] {
        assert_eq!(
            out.matches(&format!("passed for resource {kind}")).count(),
            CLOUDS.len(),
            "{kind}:\n{out}"
        );
    }
}

/// The block scalar `key: |` of the first ConfigMap in `manifest`, dedented.
fn config_map_entry(manifest: &str, key: &str) -> String {
    let start = format!("  {key}: |");
    let mut lines = manifest.lines().skip_while(|l| *l != start);
    assert!(lines.next().is_some(), "no data key {key}");
    let mut text = String::new();
    for line in lines {
        if line.is_empty() {
            text.push('\n');
        } else if let Some(body) = line.strip_prefix("    ") {
            text.push_str(body);
            text.push('\n');
        } else {
            break;
        }
    }
    text
}

#[test]
fn config_maps_hold_valid_settings_and_the_repository_policies() {
    let policies = ["api-seoul-tokyo.toml", "web-ncp-gcp.toml"];
    let mut writers = BTreeSet::new();
    for cloud in CLOUDS {
        let manifest = read(&format!("deploy/kubernetes/{cloud}/gslb.yaml"));
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("policies")).expect("mkdir");
        let settings_file = dir.path().join("gslb.toml");
        std::fs::write(&settings_file, config_map_entry(&manifest, "gslb.toml")).expect("write");
        for p in policies {
            let text = config_map_entry(&manifest, p);
            assert!(
                manifest.contains(&format!("path: policies/{p}")),
                "{cloud}: {p} not mounted"
            );
            let without_mode: String = text
                .lines()
                .filter(|l| !l.starts_with("mode = \"shadow\""))
                .map(|l| format!("{l}\n"))
                .collect();
            assert_eq!(
                without_mode,
                read(&format!("policies/{p}")),
                "{cloud}: {p} differs from policies/{p} by more than mode = \"shadow\""
            );
            std::fs::write(dir.path().join("policies").join(p), text).expect("write");
        }
        let settings =
            gslb::config::Settings::load(&settings_file).unwrap_or_else(|e| panic!("{cloud}: {e}"));
        assert_eq!(settings.state.dir, Path::new("/var/lib/gslb"), "{cloud}");
        assert_eq!(settings.admin.listen.port(), 9464, "{cloud}");
        let loaded =
            gslb_core::policy::load(&settings.policies).unwrap_or_else(|e| panic!("{cloud}: {e}"));
        assert_eq!(loaded.len(), policies.len(), "{cloud}");
        let enforced: Vec<_> = loaded
            .iter()
            .filter(|(_, p)| p.mode == gslb_core::policy::Mode::Enforce)
            .map(|(_, p)| p.service.to_string())
            .collect();
        for service in &enforced {
            assert!(writers.insert(service.clone()), "{service} has two writers");
        }
        // The Service, the ServiceMonitor and the probes agree on the admin port.
        assert!(manifest.contains("honorLabels: true"), "{cloud}");
        assert!(manifest.contains("- port: admin"), "{cloud}");
        assert_eq!(manifest.matches("path: /healthz").count(), 2, "{cloud}");
    }
    assert_eq!(
        writers.len(),
        policies.len(),
        "every service has one writer"
    );
}

/// The JSON array after `key` on the first line of `text` that starts (trimmed) with it, e.g.
/// `ENTRYPOINT ["gslb", "run"]` or `args: ["run"]`.
fn json_list_after(text: &str, key: &str) -> Option<Vec<String>> {
    let line = text.lines().map(str::trim).find(|l| l.starts_with(key))?;
    let list = line[key.len()..].trim();
    Some(
        serde_json::from_str(list)
            .unwrap_or_else(|e| panic!("{key} is not a flow-style list ({e}): {line}")),
    )
}

/// The command line each Deployment's container runs (the image's ENTRYPOINT, or the
/// container's `command`, followed by its `args`) is `gslb run` with arguments gslb accepts.
#[test]
fn the_kubernetes_containers_run_a_command_line_gslb_accepts() {
    let dockerfile = read("Dockerfile");
    let entrypoint = json_list_after(&dockerfile, "ENTRYPOINT").expect("an ENTRYPOINT");
    assert!(
        !dockerfile.lines().any(|l| l.starts_with("CMD")),
        "a CMD is replaced by a container's args: keep the command line in ENTRYPOINT"
    );
    for cloud in CLOUDS {
        let manifest = read(&format!("deploy/kubernetes/{cloud}/gslb.yaml"));
        let mut argv = json_list_after(&manifest, "command:").unwrap_or_else(|| entrypoint.clone());
        argv.extend(json_list_after(&manifest, "args:").unwrap_or_default());
        assert_eq!(
            argv.get(..2),
            Some(&["gslb".to_owned(), "run".to_owned()][..]),
            "{cloud}: {argv:?}"
        );
        // `--help` parses the rest of the command line without starting anything.
        let out = Command::new(env!("CARGO_BIN_EXE_gslb"))
            .args(&argv[1..])
            .arg("--help")
            .output()
            .expect("runs gslb");
        assert!(
            out.status.success(),
            "{cloud}: {argv:?} is refused: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_dockerfile_passes_hadolint() {
    let Some(hadolint) = emulators::tool("hadolint") else {
        return;
    };
    run_ok(&hadolint, &["Dockerfile"]);
    let dockerfile = read("Dockerfile");
    assert!(dockerfile.contains("HEALTHCHECK"), "no HEALTHCHECK");
    assert!(dockerfile.contains("USER 10001"), "not a non-root user");
}
