//! The deployment files under `deploy/` and the Dockerfile: the alert rules pass `promtool check
//! rules` and their unit tests, every alert has a firing and a non-firing case, every metric the
//! rules and the Grafana dashboard read is declared in `gslb::ops::metrics`, the dashboard's queries
//! parse, the Kubernetes manifests pass a schema check, their settings and policies load, their
//! containers run a `gslb run` command line gslb accepts, and the Dockerfile passes hadolint.
//!
//! The tools come from `.ci/install-tools.sh` (promtool on PATH; kubernetes-validate, hadolint
//! and kubectl, whose `kubectl kustomize` renders the overlays, in the virtualenv). A missing tool skips its test with a message, except under
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
const CLOUDS: [&str; 3] = ["aws-seoul", "aws-tokyo", "gcp-tokyo"];

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
        "GslbDown",
        "WebhookDeliveryFailing",
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

#[test]
fn every_alert_links_its_runbook_section() {
    let rules = read(RULES);
    let alerts = alert_names(&rules);
    let links: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("runbook_url: "))
        .map(|v| v.trim_matches('"'))
        .collect();
    assert!(!rules.contains("runbook:"), "runbook is runbook_url now");
    assert_eq!(links.len(), alerts.len(), "one runbook_url per alert");
    for (alert, link) in alerts.iter().zip(&links) {
        assert_eq!(
            *link,
            format!("docs/metrics-and-alerts.md#{}", alert.to_lowercase()),
            "{alert}"
        );
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
    // The probe loops' own figures (lateness, late, started) too, as `gslb run` exports them.
    let prober =
        gslb::io::probe::Prober::new(&gslb::io::probe::DnsSettings::default()).expect("a prober");
    metrics.register_prober(&prober).expect("registered once");
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

/// The Kustomize overlays, one per cloud, under `deploy/kubernetes/overlays/`.
const OVERLAYS: &str = "deploy/kubernetes/overlays";
const BASE: &str = "deploy/kubernetes/base";

/// `kubectl kustomize DIR` (kustomize v5, built into kubectl) written to a file in `out`.
fn render(kubectl: &Path, dir: &str, out: &Path) -> PathBuf {
    let text = run_ok(kubectl, &["kustomize", dir]);
    let file = out.join(format!("{}.yaml", dir.replace('/', "_")));
    std::fs::write(&file, text).expect("write the rendered manifests");
    file
}

/// The YAML documents of `file` as JSON, read by the virtualenv's Python with PyYAML (which
/// kubernetes-validate installs): the test then asserts on the structure, not on text.
fn yaml_documents(python: &Path, file: &Path) -> Vec<serde_json::Value> {
    let script = "import json, sys, yaml\n\
                  print(json.dumps([d for d in yaml.safe_load_all(open(sys.argv[1])) if d]))";
    let out = run_ok(python, &["-c", script, file.to_str().expect("utf-8")]);
    serde_json::from_str(&out).expect("JSON from PyYAML")
}

/// One rendered overlay: its objects by `kind/name` (a generated ConfigMap's hash suffix cut).
struct Rendered {
    cloud: String,
    text: String,
    objects: std::collections::BTreeMap<String, serde_json::Value>,
}

impl Rendered {
    fn get(&self, kind_name: &str) -> &serde_json::Value {
        self.objects
            .get(kind_name)
            .unwrap_or_else(|| panic!("{}: no {kind_name}", self.cloud))
    }

    /// The first container of the Deployment or StatefulSet `kind_name`.
    fn container(&self, kind_name: &str) -> &serde_json::Value {
        &self.get(kind_name)["spec"]["template"]["spec"]["containers"][0]
    }
}

/// The value of the environment variable `name` of `container`.
fn env<'a>(container: &'a serde_json::Value, name: &str) -> Option<&'a str> {
    container["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)?["value"]
        .as_str()
}

/// The value of the command-line flag `--flag=` of `container`'s args.
fn flag<'a>(container: &'a serde_json::Value, name: &str) -> &'a str {
    let prefix = format!("--{name}=");
    container["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str()?.strip_prefix(prefix.as_str()))
        .next()
        .unwrap_or_else(|| panic!("no {prefix}"))
}

/// Every overlay rendered by kustomize and checked by kubernetes-validate (`--strict`, the
/// Kubernetes 1.31 schemas), the base too. `None` (the test skips) without the tools.
fn rendered_overlays() -> Option<Vec<Rendered>> {
    let kubectl = emulators::tool("kubectl")?;
    let validate = emulators::tool("kubernetes-validate")?;
    let python = emulators::venv_dir().join("bin/python");
    let dir = tempfile::tempdir().expect("tempdir");
    render(&kubectl, BASE, dir.path());
    let mut all = Vec::new();
    for cloud in CLOUDS {
        let file = render(&kubectl, &format!("{OVERLAYS}/{cloud}"), dir.path());
        let args = ["--strict", "--kubernetes-version", "1.31.0"];
        let out = run_ok(
            &validate,
            &[&args[..], &[file.to_str().expect("utf-8")]].concat(),
        );
        for kind in [
            "deployment/gslb",
            "statefulset/etcd",
            "service/etcd",
            "configmap/gslb-config-",
        ] {
            assert!(
                out.contains(&format!("passed for resource {kind}")),
                "{cloud}: {kind}:\n{out}"
            );
        }
        assert!(!out.contains("ERROR"), "{cloud}:\n{out}");
        let objects = yaml_documents(&python, &file)
            .into_iter()
            .map(|o| {
                let name = o["metadata"]["name"].as_str().expect("a name");
                let name = name
                    .strip_prefix("gslb-config-")
                    .map_or(name, |_| "gslb-config");
                (format!("{}/{name}", o["kind"].as_str().expect("a kind")), o)
            })
            .collect();
        let text = std::fs::read_to_string(&file).expect("rendered");
        all.push(Rendered {
            cloud: cloud.to_owned(),
            text,
            objects,
        });
    }
    Some(all)
}

/// The settings file of the ConfigMap with the vantage point the overlay's container sets
/// (`GSLB_VANTAGE`), and its `[cluster]` table.
fn settings_and_cluster(r: &Rendered) -> (String, toml::Table) {
    let text = r.get("ConfigMap/gslb-config")["data"]["gslb.toml"]
        .as_str()
        .expect("gslb.toml");
    let mut table: toml::Table = toml::from_str(text).expect("TOML");
    let vantage = env(r.container("Deployment/gslb"), "GSLB_VANTAGE").expect("GSLB_VANTAGE");
    table.insert("vantage".into(), vantage.into());
    let cluster = match table.get("cluster") {
        Some(toml::Value::Table(t)) => t.clone(),
        other => panic!("[cluster] is a table: {other:?}"),
    };
    (toml::to_string(&table).expect("TOML"), cluster)
}

#[test]
fn every_overlay_renders_and_passes_the_schema_check() {
    let Some(overlays) = rendered_overlays() else {
        return;
    };
    for r in &overlays {
        let gslb = r.container("Deployment/gslb");
        let probe = |which: &str| gslb[which]["httpGet"]["path"].as_str().map(str::to_owned);
        assert_eq!(
            probe("livenessProbe").as_deref(),
            Some("/healthz"),
            "{}",
            r.cloud
        );
        assert_eq!(
            probe("readinessProbe").as_deref(),
            Some("/readyz"),
            "{}",
            r.cloud
        );
        let deployment = &r.get("Deployment/gslb")["spec"];
        assert_eq!(
            (
                deployment["replicas"].as_u64(),
                &deployment["strategy"]["type"]
            ),
            (Some(1), &serde_json::json!("Recreate"))
        );
        let monitor = &r.get("ServiceMonitor/gslb")["spec"]["endpoints"][0];
        assert_eq!(
            (&monitor["port"], &monitor["honorLabels"]),
            (&serde_json::json!("admin"), &serde_json::json!(true)),
            "{}",
            r.cloud
        );
        // No static AWS key anywhere: IRSA on EKS, web identity federation on GKE.
        assert!(
            !r.text.contains("AWS_ACCESS_KEY_ID") && !r.text.contains("AWS_SECRET_ACCESS_KEY"),
            "{}",
            r.cloud
        );
    }
}

/// The files gslb reads (settings' token files, `[cluster.tls]`) are the Secret files the
/// Deployment mounts, and the settings and policies of the ConfigMap load.
#[test]
fn secrets_are_mounted_files_and_the_config_map_loads() {
    let Some(overlays) = rendered_overlays() else {
        return;
    };
    for r in &overlays {
        let spec = &r.get("Deployment/gslb")["spec"]["template"]["spec"];
        let mount = |volume: &str| {
            spec["containers"][0]["volumeMounts"]
                .as_array()
                .expect("mounts")
                .iter()
                .find(|m| m["name"] == volume)
                .and_then(|m| m["mountPath"].as_str())
                .unwrap_or_else(|| panic!("{}: {volume} not mounted", r.cloud))
                .to_owned()
        };
        let secrets = spec["volumes"]
            .as_array()
            .expect("volumes")
            .iter()
            .find(|v| v["name"] == "secrets")
            .expect("the secrets volume");
        let files: BTreeSet<String> = secrets["projected"]["sources"]
            .as_array()
            .expect("sources")
            .iter()
            .flat_map(|s| s["secret"]["items"].as_array().cloned().unwrap_or_default())
            .map(|i| format!("{}/{}", mount("secrets"), i["path"].as_str().expect("path")))
            .collect();
        let (settings, cluster) = settings_and_cluster(r);
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("policies")).expect("mkdir");
        let settings_file = dir.path().join("gslb.toml");
        std::fs::write(&settings_file, settings).expect("write");
        for p in ["api-seoul-tokyo.toml", "web-ncp-gcp.toml"] {
            let text = r.get("ConfigMap/gslb-config")["data"][p]
                .as_str()
                .expect("a policy");
            assert_eq!(
                text,
                read(&format!("policies/{p}")),
                "{}: {p} differs from policies/{p}",
                r.cloud
            );
            std::fs::write(dir.path().join("policies").join(p), text).expect("write");
        }
        let settings = gslb::config::Settings::load(&settings_file)
            .unwrap_or_else(|e| panic!("{}: {e}", r.cloud));
        assert_eq!(
            settings.state.dir,
            Path::new(&mount("state")),
            "{}",
            r.cloud
        );
        assert_eq!(settings.admin.listen.port(), 9464, "{}", r.cloud);
        assert!(settings.cluster.is_some(), "{}: [cluster] loads", r.cloud);
        let loaded = gslb_core::policy::load(&settings.policies)
            .unwrap_or_else(|e| panic!("{}: {e}", r.cloud));
        assert!(
            loaded
                .iter()
                .all(|(_, p)| p.mode == gslb_core::policy::Mode::Enforce),
            "{}: the elected writer writes",
            r.cloud
        );
        let mut wanted = vec![
            settings.admin.token_file.clone().expect("admin token file"),
            settings
                .cloudflare
                .token_file
                .clone()
                .expect("cloudflare token file"),
        ];
        let tls = cluster["tls"].as_table().expect("[cluster.tls]");
        wanted
            .extend(["ca", "cert", "key"].map(|k| PathBuf::from(tls[k].as_str().expect("a path"))));
        for file in wanted {
            assert!(
                files.contains(file.to_str().expect("utf-8")),
                "{}: {} is not a mounted secret file ({files:?})",
                r.cloud,
                file.display()
            );
        }
    }
}

/// gslb's `[cluster]` (one table in every cloud) names every etcd member's client URL and
/// every overlay's vantage point; each overlay's etcd member is in `--initial-cluster` under
/// its own name and URL, with peer and client mTLS and WAN timeouts.
#[test]
fn the_cluster_settings_name_the_members_and_the_vantage_points() {
    let Some(overlays) = rendered_overlays() else {
        return;
    };
    let mut vantages_seen = BTreeSet::new();
    for r in &overlays {
        let (_, cluster) = settings_and_cluster(r);
        let keys: BTreeSet<&str> = cluster.keys().map(String::as_str).collect();
        let known = BTreeSet::from([
            "endpoints",
            "tls",
            "vantages",
            "lease_ttl",
            "heartbeat",
            "min_voters",
            "prefix",
        ]);
        assert!(
            keys.is_subset(&known),
            "{}: unknown [cluster] keys {:?}",
            r.cloud,
            keys.difference(&known)
        );
        let list = |k: &str| -> Vec<String> {
            cluster[k]
                .as_array()
                .expect("a list")
                .iter()
                .map(|v| v.as_str().expect("text").to_owned())
                .collect()
        };
        let (endpoints, vantages) = (list("endpoints"), list("vantages"));
        let vantage = env(r.container("Deployment/gslb"), "GSLB_VANTAGE").expect("GSLB_VANTAGE");
        assert!(
            vantages.iter().any(|v| v == vantage),
            "{}: {vantage} not in {vantages:?}",
            r.cloud
        );
        assert!(
            vantages_seen.insert(vantage.to_owned()),
            "{vantage} used twice"
        );
        assert_eq!(vantages.len(), CLOUDS.len(), "{}", r.cloud);
        let min_voters = cluster["min_voters"].as_integer().expect("min_voters");
        assert_eq!(
            min_voters as usize,
            vantages.len() / 2 + 1,
            "{}: a majority",
            r.cloud
        );

        let etcd = r.container("StatefulSet/etcd");
        let name = env(etcd, "ETCD_NAME").expect("ETCD_NAME");
        assert_eq!(name, r.cloud);
        let peer_url = env(etcd, "ETCD_INITIAL_ADVERTISE_PEER_URLS").expect("peer URL");
        let client_url = env(etcd, "ETCD_ADVERTISE_CLIENT_URLS").expect("client URL");
        let members: Vec<&str> = flag(etcd, "initial-cluster").split(',').collect();
        assert_eq!(members.len(), CLOUDS.len(), "one member per cloud");
        assert!(
            members.contains(&format!("{name}={peer_url}").as_str()),
            "{}: {members:?}",
            r.cloud
        );
        assert!(
            endpoints.iter().any(|e| e == client_url),
            "{}: gslb does not list {client_url}",
            r.cloud
        );
        let host = client_url
            .trim_start_matches("https://")
            .split(':')
            .next()
            .expect("host");
        let annotations = &r.get("Service/etcd")["metadata"]["annotations"];
        assert_eq!(
            annotations["external-dns.alpha.kubernetes.io/hostname"], host,
            "{}",
            r.cloud
        );
        for (key, want) in [
            ("peer-client-cert-auth", "true"),
            ("client-cert-auth", "true"),
        ] {
            assert_eq!(flag(etcd, key), want, "{}: {key}", r.cloud);
        }
        for key in ["listen-peer-urls", "listen-client-urls"] {
            assert!(
                flag(etcd, key).starts_with("https://"),
                "{}: {key}",
                r.cloud
            );
        }
        let ms = |k: &str| flag(etcd, k).parse::<u64>().expect("milliseconds");
        let (heartbeat, election) = (ms("heartbeat-interval"), ms("election-timeout"));
        assert!(
            heartbeat > 100,
            "{}: heartbeat {heartbeat} ms is etcd's LAN default or less",
            r.cloud
        );
        assert_eq!(
            election,
            10 * heartbeat,
            "{}: election timeout 10x the heartbeat",
            r.cloud
        );
        let ttl = humantime::parse_duration(cluster["lease_ttl"].as_str().expect("lease_ttl"))
            .expect("a duration");
        assert!(
            ttl.as_millis() >= 5 * u128::from(election),
            "{}: lease_ttl vs election timeout",
            r.cloud
        );
    }
}

/// EKS overlays use IRSA (the role annotation); the GKE overlay federates its ServiceAccount
/// token to AWS: a projected token with audience sts.amazonaws.com at AWS_WEB_IDENTITY_TOKEN_FILE.
#[test]
fn each_cloud_gets_aws_credentials_from_its_identity() {
    let Some(overlays) = rendered_overlays() else {
        return;
    };
    for r in &overlays {
        let annotations = &r.get("ServiceAccount/gslb")["metadata"]["annotations"];
        let gslb = r.container("Deployment/gslb");
        if r.cloud.starts_with("aws-") {
            let role = annotations["eks.amazonaws.com/role-arn"]
                .as_str()
                .unwrap_or_default();
            assert!(
                role.starts_with("arn:aws:iam::"),
                "{}: {annotations}",
                r.cloud
            );
            assert!(
                env(gslb, "AWS_ROLE_ARN").is_none(),
                "{}: the webhook sets it",
                r.cloud
            );
            continue;
        }
        assert!(
            env(gslb, "AWS_ROLE_ARN")
                .unwrap_or_default()
                .starts_with("arn:aws:iam::"),
            "{}",
            r.cloud
        );
        let token_file =
            env(gslb, "AWS_WEB_IDENTITY_TOKEN_FILE").expect("AWS_WEB_IDENTITY_TOKEN_FILE");
        let spec = &r.get("Deployment/gslb")["spec"]["template"]["spec"];
        let mounts = gslb["volumeMounts"].as_array().expect("mounts");
        let mount_of = |volume: &serde_json::Value| {
            mounts
                .iter()
                .find(|m| m["name"] == volume["name"])
                .and_then(|m| m["mountPath"].as_str())
                .unwrap_or("-")
                .to_owned()
        };
        // Every projected service-account token as (its file in the container, its source).
        let mut projected = Vec::new();
        for volume in spec["volumes"].as_array().expect("volumes") {
            for source in volume["projected"]["sources"]
                .as_array()
                .into_iter()
                .flatten()
            {
                if let Some(token) = source.get("serviceAccountToken") {
                    let path = token["path"].as_str().unwrap_or_default();
                    projected.push((format!("{}/{path}", mount_of(volume)), token));
                }
            }
        }
        let (_, token) = projected
            .iter()
            .find(|(p, _)| p == token_file)
            .unwrap_or_else(|| {
                panic!(
                    "{}: {token_file} is no projected token ({projected:?})",
                    r.cloud
                )
            });
        assert_eq!(token["audience"], "sts.amazonaws.com", "{}", r.cloud);
    }
}

/// The command line each Deployment's container runs (the image's ENTRYPOINT, or the
/// container's `command`, followed by its `args`) is `gslb run` with arguments gslb accepts.
#[test]
fn the_kubernetes_containers_run_a_command_line_gslb_accepts() {
    let Some(overlays) = rendered_overlays() else {
        return;
    };
    let dockerfile = read("Dockerfile");
    let entrypoint = json_list_after(&dockerfile, "ENTRYPOINT").expect("an ENTRYPOINT");
    assert!(
        !dockerfile.lines().any(|l| l.starts_with("CMD")),
        "a CMD is replaced by a container's args: keep the command line in ENTRYPOINT"
    );
    let strings = |v: &serde_json::Value| -> Option<Vec<String>> {
        Some(
            v.as_array()?
                .iter()
                .map(|s| s.as_str().expect("text").to_owned())
                .collect(),
        )
    };
    for r in &overlays {
        // The access-control Job: a command line gslb accepts, on the same settings.
        let job = r.container("Job/gslb-etcd-auth");
        let argv = strings(&job["command"]).expect("the Job's command");
        assert_eq!(
            argv.get(..2),
            Some(&["gslb".to_owned(), "etcd-auth".to_owned()][..])
        );
        assert!(
            argv.contains(&"--config=/etc/gslb/gslb.toml".to_owned()),
            "{argv:?}"
        );
        let out = Command::new(env!("CARGO_BIN_EXE_gslb"))
            .args(&argv[1..])
            .arg("--help")
            .output()
            .expect("runs gslb");
        assert!(out.status.success(), "{}: {argv:?} is refused", r.cloud);
        let gslb = r.container("Deployment/gslb");
        let mut argv = strings(&gslb["command"]).unwrap_or_else(|| entrypoint.clone());
        argv.extend(strings(&gslb["args"]).unwrap_or_default());
        assert_eq!(
            argv.get(..2),
            Some(&["gslb".to_owned(), "run".to_owned()][..]),
            "{}: {argv:?}",
            r.cloud
        );
        // `--help` parses the rest of the command line without starting anything.
        let out = Command::new(env!("CARGO_BIN_EXE_gslb"))
            .args(&argv[1..])
            .arg("--help")
            .output()
            .expect("runs gslb");
        assert!(
            out.status.success(),
            "{}: {argv:?} is refused: {}",
            r.cloud,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The JSON array after `key` on the first line of `text` that starts (trimmed) with it, e.g.
/// `ENTRYPOINT ["gslb", "run"]`.
fn json_list_after(text: &str, key: &str) -> Option<Vec<String>> {
    let line = text.lines().map(str::trim).find(|l| l.starts_with(key))?;
    let list = line[key.len()..].trim();
    Some(
        serde_json::from_str(list)
            .unwrap_or_else(|e| panic!("{key} is not a flow-style list ({e}): {line}")),
    )
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

/// The build stage's dependency layer: the files it copies before `COPY . .` plus its stub
/// sources form the whole workspace, which cargo resolves with the lock file as it is
/// (`--locked`), so a new workspace member the Dockerfile does not copy fails here, not in
/// `docker build`.
/// The runtime image is distroless and labelled.
#[test]
fn the_dockerfile_dependency_layer_is_a_complete_workspace() {
    let dockerfile = read("Dockerfile");
    let build: Vec<&str> = dockerfile
        .split("\nFROM ")
        .nth(1)
        .expect("a build stage")
        .lines()
        .take_while(|l| l.trim() != "COPY . .")
        .collect();
    let dir = tempfile::tempdir().expect("tempdir");
    for line in build.iter().filter_map(|l| l.strip_prefix("COPY ")) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let (sources, dest) = words.split_at(words.len() - 1);
        for source in sources {
            let to = dir
                .path()
                .join(dest[0])
                .join(Path::new(source).file_name().expect("a file"));
            std::fs::create_dir_all(to.parent().expect("a folder")).expect("mkdir");
            std::fs::copy(root().join(source), &to).unwrap_or_else(|e| panic!("{source}: {e}"));
        }
    }
    // The stub RUN, up to its `cargo build`, joined into one shell command.
    let joined = build.join("\n").replace("\\\n", " ");
    let stub = joined
        .lines()
        .filter_map(|l| l.strip_prefix("RUN mkdir "))
        .next()
        .expect("the stub RUN");
    let stub = format!(
        "mkdir {}",
        &stub[..stub.find("&& cargo build").expect("a cargo build")]
    );
    let status = Command::new("sh")
        .args(["-c", stub.trim_end().trim_end_matches("&&")])
        .current_dir(dir.path())
        .status()
        .expect("sh");
    assert!(status.success(), "{stub}");
    // The lock file needs no change for the stub workspace (resolution only: the registry
    // index is cached by the build that runs this test, no package is downloaded).
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(&cargo)
        .args(["update", "--workspace", "--locked", "--offline"])
        .current_dir(dir.path())
        .output()
        .expect("cargo update");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let members = |at: &Path| {
        let out = Command::new(&cargo)
            .args([
                "metadata",
                "--no-deps",
                "--offline",
                "--format-version",
                "1",
            ])
            .current_dir(at)
            .output()
            .expect("cargo metadata");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        meta["workspace_members"].as_array().expect("members").len()
    };
    assert_eq!(members(dir.path()), members(&root()), "workspace members");
    let runtime = dockerfile.split("\nFROM ").last().expect("a runtime stage");
    assert!(
        runtime.starts_with("gcr.io/distroless/cc-debian12"),
        "{runtime}"
    );
    for label in ["title", "description", "version", "revision", "licenses"] {
        assert!(
            runtime.contains(&format!("org.opencontainers.image.{label}=")),
            "no OCI label {label}"
        );
    }
}

/// The Route 53 actions `deploy/aws/iam-policy.json` allows are exactly the SDK operations
/// the Route 53 adapter calls (every call goes through `Api::call("Operation", |c|
/// c.operation()...)`), on the example policy's hosted zone, with no wildcard action; and
/// docs/providers.md's permission table names each.
#[test]
fn the_iam_policy_allows_exactly_the_route53_calls_of_the_adapter() {
    let mut operations = BTreeSet::new();
    let mut sources = vec![root().join("providers/route53/src")];
    let mut files = Vec::new();
    while let Some(dir) = sources.pop() {
        for entry in std::fs::read_dir(dir).expect("the adapter") {
            let path = entry.expect("a file").path();
            if path.is_dir() {
                sources.push(path);
            } else {
                files.push(path);
            }
        }
    }
    for file in files {
        let text = std::fs::read_to_string(file).expect("source");
        for (i, _) in text.match_indices(".call(\"") {
            let rest = &text[i + 7..];
            let name = &rest[..rest.find('"').expect("a closing quote")];
            // The closure's SDK method is the same operation in snake case.
            let method = rest
                .split("c.")
                .nth(1)
                .expect("a client call")
                .split('(')
                .next()
                .expect("a method");
            let camel: String = method
                .split('_')
                .map(|w| w[..1].to_uppercase() + &w[1..])
                .collect();
            assert_eq!(camel, name, "the call named {name} sends {method}");
            operations.insert(format!("route53:{name}"));
        }
    }
    assert!(operations.len() >= 3, "{operations:?}");
    let policy: serde_json::Value =
        serde_json::from_str(&read("deploy/aws/iam-policy.json")).expect("valid JSON");
    assert_eq!(policy["Version"], "2012-10-17");
    let api: toml::Table = toml::from_str(&read("policies/api-seoul-tokyo.toml")).expect("policy");
    let zone = api["target"]["route53"]["hosted_zone_id"]
        .as_str()
        .expect("a zone");
    let mut allowed = BTreeSet::new();
    for statement in policy["Statement"].as_array().expect("statements") {
        assert_eq!(statement["Effect"], "Allow");
        let strings = |v: &serde_json::Value| -> Vec<String> {
            v.as_array()
                .expect("a list")
                .iter()
                .map(|s| s.as_str().expect("text").to_owned())
                .collect()
        };
        let (actions, resources) = (
            strings(&statement["Action"]),
            strings(&statement["Resource"]),
        );
        for action in &actions {
            assert!(
                action.starts_with("route53:") && !action.contains('*'),
                "{action}"
            );
            let wanted: &[&str] = match action.as_str() {
                "route53:ListResourceRecordSets"
                | "route53:ChangeResourceRecordSets"
                | "route53:GetHostedZone" => &["hostedzone"],
                "route53:GetHealthCheck"
                | "route53:UpdateHealthCheck"
                | "route53:GetHealthCheckStatus" => &["healthcheck"],
                "route53:GetChange" => &["change"],
                // Route 53 has no resource-level permission for creating or listing health
                // checks.
                "route53:CreateHealthCheck" | "route53:ListHealthChecks" => &[],
                other => panic!("{other}: not a call of the adapter"),
            };
            for resource in &resources {
                let ok = match wanted {
                    [] => resource == "*",
                    ["hostedzone"] => *resource == format!("arn:aws:route53:::hostedzone/{zone}"),
                    [kind] => *resource == format!("arn:aws:route53:::{kind}/*"),
                    _ => false,
                };
                assert!(ok, "{action} on {resource}");
            }
            allowed.insert(action.clone());
        }
    }
    assert_eq!(
        allowed, operations,
        "the policy's actions against the adapter's calls"
    );
    // docs/providers.md's permission table names each of them too.
    let docs = read("docs/providers.md");
    for op in &operations {
        let name = op.trim_start_matches("route53:");
        assert!(
            docs.lines()
                .any(|l| l.starts_with("| `Gslb") && l.contains(&format!("`{name}`"))),
            "docs/providers.md's IAM table does not name {name}"
        );
    }
}
