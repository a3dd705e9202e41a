//! Policy validation: every rejection the controller promises, with its message, and the
//! `gslb check` / `gslb run` command-line behaviour on good and bad files.

mod support;

use std::path::Path;
use std::process::Command;

use gslb_core::policy::{self, PolicyError};

use support::policy::{assert_error, errors};

const VALID: &str = include_str!("../policies/api-seoul-tokyo.toml");

fn with(from: &str, to: &str) -> String {
    support::policy::edit(VALID, from, to)
}

#[test]
fn shipped_policy_is_valid_and_read_as_written() {
    let p = policy::parse(Path::new("api.toml"), VALID).expect("shipped policy validates");
    assert_eq!(p.service.0, "api");
    assert_eq!(p.pools[0].id.0, "seoul");
    assert_eq!(p.pools[1].id.0, "tokyo");
    assert_eq!(p.probe.interval, std::time::Duration::from_secs(10));
    assert_eq!(p.thresholds.fall, 3);
    assert!(p.probe.tls_verify && !p.probe.follow_redirects);
}

#[test]
fn unknown_keys_are_each_reported() {
    let text = with("fall = 3", "fall = 3\nfal = 2")
        .replace("tls_verify = true", "tls_verify = true\ntimeuot = \"1s\"");
    let errs = errors(&text);
    assert_error(&errs, "health.fal", "unknown key");
    assert_error(&errs, "probe.timeuot", "unknown key");
}

#[test]
fn zero_fall_or_rise_is_rejected() {
    let errs = errors(&with("fall = 3\nrise = 2", "fall = 0\nrise = 0"));
    assert_error(&errs, "health.fall", "must be at least 1");
    assert_error(&errs, "health.rise", "must be at least 1");
}

#[test]
fn timeout_not_below_interval_is_rejected() {
    let errs = errors(&with("timeout = \"4s\"", "timeout = \"10s\""));
    assert_error(&errs, "probe.timeout", "must be shorter than interval 10s");
}

#[test]
fn duplicate_pool_names_and_priorities_are_rejected() {
    let text = with(
        "name = \"tokyo\"\npriority = 2",
        "name = \"seoul\"\npriority = 1",
    );
    let errs = errors(&text);
    assert_error(&errs, "pools[1].name", "duplicate pool name 'seoul'");
    assert_error(&errs, "pools[1].priority", "duplicate priority 1");
}

#[test]
fn endpoint_on_the_public_failover_hostname_is_rejected() {
    let errs = errors(&with(
        "https://tokyo.api.example.com:443/api/v1/health",
        "https://API.example.com./api/v1/health",
    ));
    assert_error(
        &errs,
        "pools[1].endpoints[0]",
        "probes the public failover hostname 'api.example.com'",
    );
}

#[test]
fn fewer_than_two_pools_is_rejected() {
    let start = VALID
        .find("[[pools]]\nname = \"tokyo\"")
        .expect("tokyo pool");
    let end = VALID.find("[target.route53]").expect("target");
    let text = format!("{}{}", &VALID[..start], &VALID[end..]);
    let errs = errors(&text);
    assert_error(
        &errs,
        "pools",
        "needs at least two pools for failover, found 1",
    );
}

#[test]
fn a_third_pool_is_rejected_for_route53() {
    let third = "[[pools]]\nname = \"osaka\"\npriority = 3\nregion = \"aws-ap-northeast-3\"\nendpoints = [\"https://osaka.api.example.com/health\"]\n\n[target.route53]";
    let errs = errors(&with("[target.route53]", third));
    assert_error(
        &errs,
        "target.route53.pools",
        "pool 'osaka' (priority 3) would be a third pool",
    );
}

#[test]
fn detection_plus_ttl_beyond_the_rto_budget_is_rejected() {
    let errs = errors(&with("rto_budget = \"3m\"", "rto_budget = \"90s\""));
    assert_error(
        &errs,
        "rto_budget",
        "TTL 1m + fall 3 x interval 10s + timeout 4s = 1m 34s exceeds the RTO budget of 1m 30s",
    );
}

#[test]
fn type_errors_name_the_key() {
    let errs = errors(&with("fall = 3", "fall = \"three\""));
    assert_error(
        &errs,
        "health.fall",
        "must be an integer, not the string \"three\"",
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let text = with("fall = 3\nrise = 2", "fall = 0\nrise = 2\nbogus = 1")
        .replace("timeout = \"4s\"", "timeout = \"20s\"")
        .replace(
            "https://tokyo.api.example.com:443/api/v1/health",
            "https://api.example.com/api/v1/health",
        );
    let errs = errors(&text);
    assert!(
        errs.len() >= 4,
        "expected at least four problems, got {errs:?}"
    );
    assert_error(&errs, "health.bogus", "unknown key");
    assert_error(&errs, "health.fall", "at least 1");
    assert_error(&errs, "probe.timeout", "shorter than interval");
    assert_error(&errs, "pools[1].endpoints[0]", "public failover hostname");
}

/// An Alias pool: `alias_target` instead of `values`.
const ALIAS_TOKYO: &str = "[target.route53.pools.tokyo.alias_target]
dns_name = \"Tokyo-ALB-1.ap-northeast-1.elb.amazonaws.com.\"
hosted_zone_id = \"Z14GRHDCWA56QT\"
evaluate_target_health = true";

#[test]
fn an_alias_pool_is_read_as_written() {
    let text = with("values = [\"198.51.100.20\"]", ALIAS_TOKYO);
    let p = policy::parse(Path::new("api.toml"), &text).expect("alias policy validates");
    let policy::Target::Route53(t) = &p.target else {
        panic!("a Route 53 target")
    };
    assert_eq!(t.pools[0].alias_target, None);
    assert_eq!(
        t.pools[1].alias_target,
        Some(policy::AliasTarget {
            dns_name: "tokyo-alb-1.ap-northeast-1.elb.amazonaws.com".into(),
            hosted_zone_id: "Z14GRHDCWA56QT".into(),
            evaluate_target_health: true,
        })
    );
    assert!(t.pools[1].values.is_empty());
    assert!(
        !p.target.dns_names_the_pool(),
        "an Alias answer is the load balancer's addresses"
    );
}

#[test]
fn alias_target_errors_name_the_key_and_reason() {
    let both = with(
        "values = [\"198.51.100.20\"]",
        &format!("values = [\"198.51.100.20\"]\n{ALIAS_TOKYO}"),
    );
    assert_error(
        &errors(&both),
        "target.route53.pools.tokyo",
        "sets both values and alias_target",
    );
    let no_zone = with(
        "values = [\"198.51.100.20\"]",
        &ALIAS_TOKYO.replace("hosted_zone_id = \"Z14GRHDCWA56QT\"\n", ""),
    );
    assert_error(
        &errors(&no_zone),
        "target.route53.pools.tokyo.alias_target.hosted_zone_id",
        "canonical hosted zone id",
    );
    let bad_name = with(
        "values = [\"198.51.100.20\"]",
        &ALIAS_TOKYO.replace("Tokyo-ALB-1", "tokyo alb!"),
    );
    assert_error(
        &errors(&bad_name),
        "target.route53.pools.tokyo.alias_target.dns_name",
        "is not a DNS name",
    );
    let itself = with(
        "values = [\"198.51.100.20\"]",
        &ALIAS_TOKYO.replace(
            "Tokyo-ALB-1.ap-northeast-1.elb.amazonaws.com.",
            "api.example.com",
        ),
    );
    assert_error(
        &errors(&itself),
        "target.route53.pools.tokyo.alias_target.dns_name",
        "'api.example.com' is the policy's own name: the Alias record would point at itself",
    );
    let neither = with("values = [\"198.51.100.20\"]", "");
    assert_error(
        &errors(&neither),
        "target.route53.pools.tokyo.values",
        "must list the record's values",
    );
}

#[test]
fn alias_targets_are_a_or_aaaa_records_with_upper_case_zone_ids() {
    let cname = with("values = [\"198.51.100.20\"]", ALIAS_TOKYO)
        .replace("record_type = \"A\"", "record_type = \"CNAME\"");
    assert_error(
        &errors(&cname),
        "target.route53.pools.tokyo.alias_target",
        "an Alias to a load balancer is an A or AAAA record, not a CNAME",
    );
    let lower = with(
        "values = [\"198.51.100.20\"]",
        &ALIAS_TOKYO.replace("Z14GRHDCWA56QT", "z14grhdcwa56qt"),
    );
    assert_error(
        &errors(&lower),
        "target.route53.pools.tokyo.alias_target.hosted_zone_id",
        "'z14grhdcwa56qt' has lower-case letters; hosted zone ids are upper case as AWS prints them (write 'Z14GRHDCWA56QT')",
    );
}

#[test]
fn check_command_names_file_line_and_key_of_a_bad_alias_target() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("alias.toml");
    let text = with(
        "values = [\"198.51.100.20\"]",
        &ALIAS_TOKYO.replace("hosted_zone_id = \"Z14GRHDCWA56QT\"\n", ""),
    );
    std::fs::write(&bad, text).expect("write");
    let out = gslb()
        .arg("check")
        .arg(&bad)
        .output()
        .expect("run gslb check");
    assert_eq!(out.status.code(), Some(2));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("error: {}:", bad.display()))
            && stdout.contains("target.route53.pools.tokyo.alias_target.hosted_zone_id: must be the target's canonical hosted zone id"),
        "{stdout}"
    );
}

#[test]
fn target_pools_must_match_policy_pools() {
    let errs = errors(&with(
        "[target.route53.pools.tokyo]",
        "[target.route53.pools.osaka]",
    ));
    assert_error(&errs, "target.route53.pools.osaka", "no pool named 'osaka'");
    assert_error(&errs, "target.route53.pools.tokyo", "missing");
}

fn gslb() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gslb"))
}

#[test]
fn check_command_passes_every_shipped_policy() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let out = gslb()
        .arg("check")
        .arg(&dir)
        .output()
        .expect("run gslb check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "gslb check policies/ failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let files = std::fs::read_dir(&dir).expect("policies/").count();
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("ok: ")).count(),
        files,
        "{stdout}"
    );
}

#[test]
fn a_reader_that_stops_reading_ends_check_quietly() {
    // stdout is a socket whose reader is already gone: the first write fails with a broken
    // pipe, as `gslb check policies/ | head -0` would.
    let (stdout, reader) = std::os::unix::net::UnixStream::pair().expect("socket pair");
    drop(reader);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let out = gslb()
        .arg("check")
        .arg(&dir)
        .stdout(std::os::fd::OwnedFd::from(stdout))
        .output()
        .expect("run gslb check");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status);
    assert!(
        stderr.is_empty(),
        "nothing to report to a closed pipe: {stderr}"
    );
}

#[test]
fn check_and_run_refuse_a_bad_policy_with_exit_2_and_the_same_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, with("fall = 3", "fall = 0")).expect("write");
    let out = gslb()
        .arg("check")
        .arg(&bad)
        .output()
        .expect("run gslb check");
    assert_eq!(out.status.code(), Some(2));
    let check_out = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        check_out.contains(&format!(
            "error: {}:21:1: health.fall: must be at least 1",
            bad.display()
        )),
        "{check_out}"
    );

    let settings = dir.path().join("gslb.toml");
    std::fs::write(
        &settings,
        "policies = [\"bad.toml\"]\n[admin]\nlisten = \"127.0.0.1:0\"\n",
    )
    .expect("write");
    let out = gslb()
        .args(["run", "--config"])
        .arg(&settings)
        .output()
        .expect("run gslb run");
    assert_eq!(out.status.code(), Some(2));
    let run_err = String::from_utf8_lossy(&out.stderr);
    assert!(
        run_err.contains("health.fall: must be at least 1"),
        "{run_err}"
    );
}

#[test]
fn unknown_settings_keys_are_refused_with_exit_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let settings = dir.path().join("gslb.toml");
    std::fs::write(&settings, "vantage = \"x\"\nlisten = \"127.0.0.1:1\"\n").expect("write");
    let out = gslb()
        .args(["run", "--config"])
        .arg(&settings)
        .output()
        .expect("run gslb run");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("listen"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_endpoint_in_two_pools_is_rejected() {
    let errs = errors(&with(
        "https://tokyo.api.example.com:443/api/v1/health",
        "https://seoul.api.example.com:443/api/v1/health",
    ));
    assert_error(&errs, "pools[1].endpoints[0]", "is listed twice");
}

#[test]
fn a_hostname_that_is_not_a_dns_name_is_rejected() {
    for bad in [
        "https://api.example.com/",
        "203.0.113.1",
        "api..example.com",
    ] {
        let errs = errors(&with(
            "hostname = \"api.example.com\"",
            &format!("hostname = \"{bad}\""),
        ));
        assert_error(&errs, "hostname", "is not a fully qualified DNS name");
    }
}

#[test]
fn credentials_in_endpoint_urls_are_rejected_without_echoing_them() {
    let errs = errors(&with(
        "https://tokyo.api.example.com",
        "https://admin:s3cret@tokyo.api.example.com",
    ));
    assert_error(
        &errs,
        "pools[1].endpoints[0]",
        "must not carry user:password",
    );
    assert!(errs.iter().all(|e| !e.reason.contains("s3cret")));
}

#[test]
fn probe_header_and_server_name_are_checked_by_check_not_at_run_time() {
    let errs = errors(&with(
        "tls_verify = true",
        "tls_verify = true\nhost_header = \"bad\\r\\nX-Evil: 1\"\ntls_server_name = \"not a name!\"",
    ));
    assert_error(&errs, "probe.host_header", "visible ASCII");
    assert_error(&errs, "probe.tls_server_name", "is not a DNS name");
}

#[test]
fn tls_server_name_needs_https_endpoints() {
    let text = with(
        "tls_verify = true",
        "tls_verify = true\ntls_server_name = \"api.example.com\"",
    )
    .replace(
        "https://tokyo.api.example.com:443/api/v1/health",
        "http://tokyo.api.example.com/health",
    );
    let errs = errors(&text);
    assert_error(
        &errs,
        "probe.tls_server_name",
        "applies to https:// endpoints only, but pools[1].endpoints[0]",
    );
}

#[test]
fn set_identifiers_must_be_distinct() {
    let errs = errors(&with(
        "set_identifier = \"tokyo\"",
        "set_identifier = \"seoul\"",
    ));
    assert_error(
        &errs,
        "target.route53.pools.tokyo.set_identifier",
        "'seoul' is used by another pool",
    );
}

#[test]
fn settings_that_cannot_work_are_refused_at_start_with_exit_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("api.toml"), VALID).expect("write");
    for (body, needle) in [
        (
            "policies = []\n",
            "policies: lists no policy file or folder",
        ),
        (
            "policies = [\"api.toml\"]\n[route53]\nendpoint_url = \"not a url\"\n",
            "route53.endpoint_url",
        ),
        (
            "policies = [\"api.toml\"]\n[reconcile]\nresync = \"0s\"\n",
            "reconcile.resync: must be at least 100ms",
        ),
        (
            "policies = [\"api.toml\"]\n[engine]\nsuspect_window = \"0s\"\n",
            "engine.suspect_window: must be between 1s and 1h",
        ),
        (
            "policies = [\"api.toml\"]\n[engine]\ncanaries = [\"tcp://192.0.2.53:53\"]\n",
            "engine.canaries: list at least two independent targets",
        ),
        (
            "policies = [\"api.toml\"]\n[engine]\ncanaries = [\"ftp://192.0.2.1/\", \"tcp://192.0.2.53:53\"]\n",
            "engine.canaries[0]: scheme 'ftp' is not supported",
        ),
        (
            "policies = [\"api.toml\"]\n[engine.global_velocity]\nservices = 0\nwindow = \"10m\"\n",
            "engine.global_velocity: services must be at least 1",
        ),
    ] {
        let settings = dir.path().join("gslb.toml");
        std::fs::write(&settings, body).expect("write");
        let out = gslb()
            .args(["run", "--config"])
            .arg(&settings)
            .output()
            .expect("run gslb run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{body}: {stderr}");
        assert!(stderr.contains(needle), "{body}: {stderr}");
    }
}

#[test]
fn engine_tuning_defaults_come_from_their_sources() {
    let text = VALID.replace("[health]", "[health]\n");
    let p = policy::parse(Path::new("api.toml"), &text).expect("valid");
    let minutes = |m: u64| std::time::Duration::from_secs(60 * m);
    assert_eq!(p.mode, gslb_core::policy::Mode::Enforce);
    assert_eq!(
        (p.failback_hold.step, p.failback_hold.max),
        (minutes(5), minutes(30))
    );
    assert_eq!(p.failback_hold.after(3), minutes(15));
    assert_eq!(p.failback_hold.after(9), minutes(30), "capped");
    assert_eq!(
        (p.quorum.fresh_intervals, p.quorum.provider_vote),
        (3, false)
    );
    let d = p.damping;
    assert_eq!(
        (d.penalty, d.half_life, d.suppress, d.reuse, d.max_suppress),
        (1000, minutes(15), 3000, 750, minutes(60))
    );
    assert_eq!((p.flapping.high, p.flapping.low), (30.0, 20.0));
    assert_eq!((p.velocity.burst, p.velocity.refill), (2, minutes(30)));
    assert_eq!(
        p.spacing(),
        minutes(5),
        "max(2 x TTL 60 s, min_dwell 5 min)"
    );
}

#[test]
fn engine_tuning_that_cannot_work_is_rejected() {
    let text = with("[health]", "[damping]\nreuse = 3000\nsuppress = 3000\nhalf_life = \"0s\"\n\n[flapping]\nhigh = 20\nlow = 30\n\n[velocity]\nburst = 0\nrefill = \"10ms\"\n\n[quorum]\nfresh_intervals = 0\n\n[health]")
        .replace("min_dwell = \"5m\"", "min_dwell = \"5m\"\nfailback_hold = \"10m\"\nfailback_hold_max = \"5m\"");
    let errs = errors(&text);
    assert_error(&errs, "damping.reuse", "below damping.suppress (3000)");
    assert_error(&errs, "damping.half_life", "at least 1s");
    assert_error(&errs, "flapping", "low < high");
    assert_error(
        &errs,
        "velocity.burst",
        "would block even the first failover",
    );
    assert_error(&errs, "velocity.refill", "at least 1s");
    assert_error(&errs, "quorum.fresh_intervals", "between 1 and 100");
    assert_error(&errs, "failback_hold_max", "shorter than failback_hold");
}

#[test]
fn a_max_suppress_too_short_to_ever_suppress_is_rejected() {
    let errs = errors(&with(
        "[health]",
        "[damping]\nhalf_life = \"15m\"\nmax_suppress = \"20m\"\n\n[health]",
    ));
    assert_error(&errs, "damping.max_suppress", "too short to ever suppress");
}

#[test]
fn mode_accepts_enforce_and_shadow_only() {
    let p = policy::parse(
        Path::new("p.toml"),
        &with("service = \"api\"", "service = \"api\"\nmode = \"shadow\""),
    )
    .expect("shadow is valid");
    assert_eq!(p.mode, gslb_core::policy::Mode::Shadow);
    let errs = errors(&with(
        "service = \"api\"",
        "service = \"api\"\nmode = \"dry-run\"",
    ));
    assert_error(
        &errs,
        "mode",
        "must be \"enforce\" or \"shadow\", not \"dry-run\"",
    );
}

#[test]
fn huge_values_are_rejected_not_overflowed() {
    let errs = errors(
        &with("interval = \"10s\"", "interval = \"9000000000000000000s\"")
            .replace("fall = 3", "fall = 4294967295")
            .replace("[health]", "[quorum]\nfresh_intervals = 4294967295\n\n[health]")
            .replace(
                "min_dwell = \"5m\"",
                "min_dwell = \"5m\"\nfailback_hold = \"3000000000000000h\"\nfailback_hold_max = \"3000000000000000h\"",
            ),
    );
    // Durations past any key's range are refused when read (at most ten years, every key);
    // within that, each key's own range applies (below).
    assert_error(&errs, "probe.interval", "is too long: at most 3650d");
    assert_error(&errs, "health.fall", "above the 100 allowed");
    assert_error(&errs, "quorum.fresh_intervals", "between 1 and 100");
    assert_error(&errs, "failback_hold", "is too long: at most 3650d");
    let errs = errors(&with("interval = \"10s\"", "interval = \"2h\"").replace(
        "min_dwell = \"5m\"",
        "min_dwell = \"5m\"\nfailback_hold = \"3000d\"\nfailback_hold_max = \"3000d\"",
    ));
    assert_error(&errs, "probe.interval", "at most 1h");
    assert_error(&errs, "failback_hold", "longer than the 7 days allowed");
}

#[test]
fn the_observe_table_is_read_with_its_defaults() {
    let p = policy::parse(Path::new("api.toml"), VALID).expect("valid");
    let o = p.observe.expect("the shipped policy observes failovers");
    assert_eq!(o.dns_name, "api.example.com", "default: the hostname");
    assert!(o.nameservers.is_empty(), "default: the daemon's [dns]");
    assert_eq!(o.window, std::time::Duration::from_secs(600));
    let sb = o.served_by.expect("served-by probe");
    assert_eq!(
        sb.marker,
        policy::ServedByMarker::Header("X-Served-By".into())
    );
    let p = policy::parse(
        Path::new("api.toml"),
        &with(
            "interval = \"5s\"\nurl",
            "nameservers = [\"192.0.2.53\", \"127.0.0.1:5353\"]\ninterval = \"5s\"\nurl",
        ),
    )
    .expect("valid");
    let ns: Vec<String> = p
        .observe
        .expect("observe")
        .nameservers
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(ns, ["192.0.2.53:53", "127.0.0.1:5353"]);
}

#[test]
fn observe_mistakes_are_each_reported() {
    let text = with(
        "[observe]\ninterval = \"5s\"\nurl = \"https://api.example.com/api/v1/health\"\nserved_by_header = \"X-Served-By\"",
        "[observe]\ndns_name = \"not a name\"\nnameservers = [\"ns1\"]\ninterval = \"10ms\"\nwindow = \"1ms\"\nurl = \"ftp://api.example.com/\"\nserved_by_header = \"X Served\"\nserved_by_body = \"region=\"",
    );
    let errs = errors(&text);
    assert_error(&errs, "observe.dns_name", "'not a name' is not a DNS name");
    assert_error(
        &errs,
        "observe.nameservers[0]",
        "'ns1' is not an IP address or ip:port",
    );
    assert_error(&errs, "observe.interval", "10ms is outside 100ms to 1m");
    assert_error(&errs, "observe.window", "must be at least the interval");
    assert_error(&errs, "observe.url", "must be an http:// or https:// URL");
    assert_error(&errs, "observe.served_by_body", "not both");
    let errs = errors(&with(
        "served_by_header = \"X-Served-By\"",
        "served_by_header = \"X Served\"",
    ));
    assert_error(&errs, "observe.served_by_header", "not an HTTP header name");
    let errs = errors(&with("served_by_header = \"X-Served-By\"", ""));
    assert_error(
        &errs,
        "observe.url",
        "needs served_by_header or served_by_body",
    );
    let errs = errors(&with("url = \"https://api.example.com/api/v1/health\"", ""));
    assert_error(&errs, "observe.served_by_header", "needs observe.url");
    let errs = errors(&with("interval = \"5s\"\nurl", "bogus = 1\nurl"));
    assert_error(&errs, "observe.bogus", "unknown key");
}

#[test]
fn check_prints_the_worst_case_and_warns_past_the_rto_budget_with_apply_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    // TTL 60 s + fall 3 x 10 s + timeout 4 s = 94 s fits 2 m; with the confirm_target wait
    // (one timeout: the target is probed at once, 4 s) and Route 53's 60 s it does not.
    let file = dir.path().join("api.toml");
    std::fs::write(&file, with("rto_budget = \"3m\"", "rto_budget = \"2m\"")).expect("write");
    let out = gslb().arg("check").arg(&file).output().expect("check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "a warning is not an error: {stdout}");
    assert!(
        stdout.contains(
            "worst-case failover 2m 38s: detection and TTL 1m 34s + confirm_target 4s + expected apply time 1m"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "warning: {}: rto_budget: worst-case failover 2m 38s (TTL 1m + fall 3 x interval 10s + timeout 4s + confirm_target 4s + expected apply time 1m) exceeds rto_budget 2m",
            file.display()
        )),
        "{stdout}"
    );
    std::fs::write(&file, VALID).expect("write");
    let out = gslb().arg("check").arg(&file).output().expect("check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("warning"), "{stdout}");
}

/// Issue 12, part 3: the worst case includes the engine's wait for a passing probe of the
/// target (`confirm_target`: issue 14, the target is probed at once, so up to one timeout),
/// named; a budget that only fits without it warns.
#[test]
fn check_names_every_engine_wait_in_the_worst_case() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("api.toml");
    // 94 s + 60 s apply = 2m 34s fits 2m 36s; with confirm_target (4 s) it is 2m 38s.
    std::fs::write(
        &file,
        with("rto_budget = \"3m\"", "rto_budget = \"2m 36s\""),
    )
    .expect("write");
    let out = gslb().arg("check").arg(&file).output().expect("check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "a warning is not an error: {stdout}");
    assert!(
        stdout.contains("worst-case failover 2m 38s: detection and TTL 1m 34s + confirm_target 4s + expected apply time 1m"),
        "{stdout}"
    );
    assert!(
        stdout.contains("+ confirm_target 4s + expected apply time 1m) exceeds rto_budget 2m 36s"),
        "{stdout}"
    );
}

#[test]
fn check_warns_when_observe_watches_nothing() {
    let web = include_str!("../policies/web-ncp-gcp.toml");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("web.toml");
    let check = |text: String| {
        std::fs::write(&file, text).expect("write");
        let out = gslb().arg("check").arg(&file).output().expect("check");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "a warning is not an error: {stdout}");
        stdout
    };
    // Cloudflare, no url: neither phase can be watched.
    let stdout = check(format!("{web}\n[observe]\ninterval = \"5s\"\n"));
    assert!(
        stdout.contains(&format!(
            "warning: {}: observe: watches nothing: no DNS phase (a proxied Cloudflare load balancer answers with Cloudflare's addresses) and no url",
            file.display()
        )),
        "{stdout}"
    );
    // With a url, the served-by phase runs.
    let stdout = check(format!(
        "{web}\n[observe]\nurl = \"https://web.example.com/\"\nserved_by_header = \"X-Served-By\"\n"
    ));
    assert!(!stdout.contains("warning"), "{stdout}");
    // Route 53 A records without a url: the DNS phase runs.
    let stdout = check(with(
        "url = \"https://api.example.com/api/v1/health\"\nserved_by_header = \"X-Served-By\"",
        "",
    ));
    assert!(!stdout.contains("warning"), "{stdout}");
}

#[test]
fn check_warns_when_an_all_alias_pair_has_a_ttl_below_the_load_balancers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("alias.toml");
    let seoul = ALIAS_TOKYO
        .replace("tokyo", "seoul")
        .replace("Tokyo", "Seoul");
    let both = with("values = [\"198.51.100.20\"]", ALIAS_TOKYO)
        .replace("values = [\"203.0.113.10\"]", &seoul);
    let check = |text: String| {
        std::fs::write(&file, text).expect("write");
        let out = gslb().arg("check").arg(&file).output().expect("check");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "a warning is not an error: {stdout}");
        stdout
    };
    let stdout = check(both.replace("ttl = \"60s\"", "ttl = \"5s\""));
    assert!(
        stdout.contains(&format!(
            "warning: {}: target.route53.ttl: 5s is below the 1m an Alias answer for a load balancer is cached",
            file.display()
        )),
        "{stdout}"
    );
    assert!(!check(both).contains("warning"));
    // One pool with values: its records carry this TTL, no warning.
    let one = with("values = [\"198.51.100.20\"]", ALIAS_TOKYO);
    assert!(!check(one.replace("ttl = \"60s\"", "ttl = \"5s\"")).contains("warning"));
}

/// The 1-based line of `text` holding `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} not in the text"))
        + 1
}

/// Issue 16's named test: three type errors in one file and a syntax error in a second are
/// all reported, each with its file, line and column.
#[test]
fn three_type_errors_and_a_syntax_error_in_a_second_file_are_all_reported_with_lines() {
    let dir = tempfile::tempdir().expect("tempdir");
    let typed = with("failback = \"manual\"", "failback = \"sometimes\"")
        .replace("fall = 3", "fall = \"3\"")
        .replace("interval = \"10s\"", "interval = 10");
    let broken = include_str!("../policies/web-ncp-gcp.toml").replacen("\n[", "\nrise = = 2\n[", 1);
    std::fs::write(dir.path().join("a.toml"), &typed).expect("write");
    std::fs::write(dir.path().join("b.toml"), &broken).expect("write");
    let errs = policy::load(&[dir.path().to_path_buf()])
        .expect_err("both files are bad")
        .0;
    let found = |file: &str, key: &str, needle: &str| {
        errs.iter()
            .find(|e| e.file.ends_with(file) && e.key == key && e.reason.contains(needle))
            .unwrap_or_else(|| panic!("no {file} {key} {needle:?} in {errs:#?}"))
            .clone()
    };
    let failback = found(
        "a.toml",
        "failback",
        "must be \"manual\" or \"auto\", not \"sometimes\"",
    );
    let fall = found(
        "a.toml",
        "health.fall",
        "must be an integer, not the string \"3\"",
    );
    let interval = found(
        "a.toml",
        "probe.interval",
        "must be a duration like \"30s\" or \"1m 30s\", not the integer 10",
    );
    let syntax = found("b.toml", "", "not valid TOML");
    assert_eq!(errs.len(), 4, "nothing else: {errs:#?}");
    let line = |e: &PolicyError| e.at.map(|p| p.line);
    assert_eq!(
        line(&failback),
        Some(line_of(&typed, "failback = \"sometimes\""))
    );
    assert_eq!(line(&fall), Some(line_of(&typed, "fall = \"3\"")));
    assert_eq!(line(&interval), Some(line_of(&typed, "interval = 10")));
    assert_eq!(line(&syntax), Some(line_of(&broken, "rise = = 2")));
    assert!(
        syntax.reason.contains("rise = = 2"),
        "the offending text: {syntax}"
    );
    let shown = syntax.to_string();
    assert!(
        shown.contains(&format!("b.toml:{}:", line_of(&broken, "rise = = 2"))),
        "{shown}"
    );
    for e in [&failback, &fall, &interval] {
        assert!(
            !e.reason.contains("u32") && !e.reason.contains("expected"),
            "{e}"
        );
    }
}

/// The example: a bad `failback`, `fall = "3"`, a typo'd key and a duplicate priority
/// in one file are four problems, not one.
#[test]
fn a_type_error_no_longer_hides_the_other_problems() {
    let text = with("failback = \"manual\"", "failback = \"sometimes\"")
        .replace("fall = 3", "fall = \"3\"\nrsie = 2")
        .replace("priority = 2", "priority = 1");
    let errs = errors(&text);
    assert_error(&errs, "failback", "must be \"manual\" or \"auto\"");
    assert_error(&errs, "health.fall", "must be an integer");
    assert_error(&errs, "health.rsie", "unknown key");
    assert_error(&errs, "pools[1].priority", "duplicate priority 1");
    assert_eq!(errs.len(), 4, "{errs:#?}");
    assert!(
        errs.iter().all(|e| e.at.is_some()),
        "every key is located: {errs:#?}"
    );
}

/// A required key of the wrong type is reported once, and the rules it would break with a
/// stand-in value are not reported; the other problems still are.
#[test]
fn a_required_key_of_the_wrong_type_is_one_problem() {
    let text = VALID
        .replacen("priority = 1", "priority = \"first\"", 1)
        .replace("service = \"api\"", "service = 7");
    let errs = errors(&text);
    assert_error(
        &errs,
        "pools[0].priority",
        "must be an integer, not the string \"first\"",
    );
    assert_error(&errs, "service", "must be a string, not the integer 7");
    assert_eq!(errs.len(), 2, "{errs:#?}");
    let errs = errors(&VALID.replace("hostname = \"api.example.com\"\n", ""));
    assert_error(&errs, "hostname", "is required and missing");
}

/// `gslb check` prints every file's result, one failing file hiding none of the others, and
/// exits 2 when any failed.
#[test]
fn check_prints_every_files_result_and_fails_if_any_failed() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("a-good.toml"), VALID).expect("write");
    std::fs::write(
        dir.path().join("b-bad.toml"),
        with("fall = 3", "fall = \"3\""),
    )
    .expect("write");
    std::fs::write(
        dir.path().join("c-good.toml"),
        include_str!("../policies/web-ncp-gcp.toml"),
    )
    .expect("write");
    let out = gslb()
        .arg("check")
        .arg(dir.path())
        .output()
        .expect("gslb check");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}");
    for line in [
        "ok: ".to_owned() + &dir.path().join("a-good.toml").display().to_string(),
        format!(
            "error: {}:21:1: health.fall: must be an integer, not the string \"3\"",
            dir.path().join("b-bad.toml").display()
        ),
        "ok: ".to_owned() + &dir.path().join("c-good.toml").display().to_string(),
    ] {
        assert!(text.contains(&line), "{line:?} missing:\n{text}");
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("1 of 3 files invalid"), "{stderr}");
}

/// `gslb check --config` lints the daemon settings (every unknown key, the environment
/// variables named as such) and then the policies the settings name.
#[test]
fn check_config_lints_the_settings_and_their_policies() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("api.toml"), VALID).expect("write");
    let settings = dir.path().join("gslb.toml");
    std::fs::write(&settings, "policies = [\"api.toml\"]\n").expect("write");
    let out = gslb()
        .args(["check", "--config"])
        .arg(&settings)
        .output()
        .expect("gslb check");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(&format!("ok: {} (settings)", settings.display())),
        "{text}"
    );
    assert!(
        text.contains(&format!("ok: {}", dir.path().join("api.toml").display())),
        "{text}"
    );

    std::fs::write(
        &settings,
        "policies = [\"api.toml\"]\nlisten = \"127.0.0.1:1\"\n[admin]\nlistn = \"127.0.0.1:1\"\n",
    )
    .expect("write");
    let out = gslb()
        .args(["check", "--config"])
        .arg(&settings)
        .env("GSLB_PROBING__MAX_IN_FLYGHT", "4")
        .output()
        .expect("gslb check");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}");
    for line in [
        format!("error: {}:2:1: listen: unknown key", settings.display()),
        format!("error: {}:4:1: admin.listn: unknown key", settings.display()),
        "error: environment variable GSLB_PROBING__MAX_IN_FLYGHT: probing.max_in_flyght: unknown key".to_owned(),
    ] {
        assert!(text.contains(&line), "{line:?} missing:\n{text}");
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("1 of 1 files invalid"),
        "invalid settings name no policies to check: {stderr}"
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// Any value of any key replaced by a value of any kind: the policy is read to the end
    /// (no panic, no endless rereading) and every problem is in the policy's words.
    #[test]
    fn any_value_of_any_kind_is_reported_in_the_policys_words(
        line in 0usize..64,
        value in proptest::sample::select(vec![
            "\"x\"", "\"30s\"", "0", "-1", "99999999999", "1.5", "true", "[]", "[1, \"a\"]",
            "{}", "{ a = 1 }", "1979-05-27", "\"\"",
        ]),
    ) {
        let lines: Vec<&str> = VALID.lines().collect();
        let assignments: Vec<usize> = lines
            .iter()
            .enumerate()
            .filter(|(_, l)| !l.starts_with('#') && !l.starts_with('[') && l.contains(" = "))
            .map(|(i, _)| i)
            .collect();
        let target = assignments[line % assignments.len()];
        let mut edited: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
        let key = lines[target].split(" = ").next().unwrap_or_default();
        edited[target] = format!("{key} = {value}");
        if let Err(errs) = policy::parse(Path::new("p.toml"), &edited.join("\n")) {
            for e in &errs.0 {
                for rust in ["u16", "u32", "u64", "f64", "struct Raw", "Some(", "None", "a sequence", "a map"] {
                    proptest::prop_assert!(!e.reason.contains(rust), "{e}");
                }
            }
        }
    }
}
