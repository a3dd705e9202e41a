//! Hostile or careless input never takes gslb down (issue 28): the real binary fed settings,
//! policies and state files an operator or attacker could write. `gslb check --config` refuses
//! exactly what `gslb run` refuses; a malformed token line is never echoed; out-of-range
//! durations and instants are refused, not overflowed; a FIFO or a device among the policies is
//! refused without hanging; a file of 40,000 mistakes is reported in linear time, the first
//! 100 of them.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const VALID: &str = include_str!("../policies/api-seoul-tokyo.toml");

/// Longest any command here may take before it counts as a hang.
const HANG: Duration = Duration::from_secs(20);

/// Runs `gslb args` in `dir` with `env` (and without the GSLB_* variables of the caller),
/// killing it when it runs past [`HANG`].
fn gslb(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gslb"));
    cmd.args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("GSLB_")) {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().expect("spawn gslb");
    let pid = child.id().to_string();
    // A watchdog: kills the command unless it ends within HANG.
    let (done, ended) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        let hung = ended.recv_timeout(HANG).is_err();
        if hung {
            let _ = Command::new("kill").args(["-9", &pid]).status();
        }
        hung
    });
    let out = child.wait_with_output().expect("output");
    let _ = done.send(());
    let hung = watchdog.join().expect("watchdog");
    assert!(!hung, "gslb {args:?} still running after {HANG:?}");
    out
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A folder with the example policy as `api.toml` and `settings` as `gslb.toml`.
fn setup(settings: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("api.toml"), VALID).expect("write");
    std::fs::write(dir.path().join("gslb.toml"), settings).expect("write");
    dir
}

/// Settings appended to the base, the environment, and a text both commands must print.
type Case = (
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static str,
);

#[test]
fn check_config_refuses_every_setting_run_refuses_with_the_same_reason() {
    let base = "policies = [\"api.toml\"]\n";
    let cases: [Case; 7] = [
        (
            "[admin]\nlisten = \"0.0.0.0:9464\"\n",
            &[],
            "is not a loopback address",
        ),
        (
            "[admin]\ntoken_file = \"missing-token\"\n",
            &[],
            "cannot read the admin token file",
        ),
        (
            "[admin]\ntoken_files = [\"tokens\"]\n",
            &[],
            "line 1 is not `name = \"token\"`",
        ),
        (
            "[admin]\nrequire_token_for_reads = true\n",
            &[],
            "require_token_for_reads",
        ),
        (
            "[[notify.webhooks]]\nname = \"ops\"\nurl_file = \"missing-url\"\n",
            &[],
            "url_file: cannot read",
        ),
        (
            "[admin]\ntls_cert_file = \"missing.crt\"\ntls_key_file = \"missing.key\"\n",
            &[],
            "missing.crt",
        ),
        ("", &[("GSLB_ADMIN_TOKEN", "  ")], "GSLB_ADMIN_TOKEN"),
    ];
    for (settings, env, needle) in cases {
        let dir = setup(&format!("{base}{settings}"));
        std::fs::write(dir.path().join("tokens"), "alice = \"s3cret-value\n").expect("write");
        let check = gslb(dir.path(), &["check", "--config", "gslb.toml"], env);
        assert_eq!(
            check.status.code(),
            Some(2),
            "check {settings}: {}",
            text(&check)
        );
        assert!(
            text(&check).contains(needle),
            "check {settings}: {}",
            text(&check)
        );
        let run = gslb(dir.path(), &["run", "--config", "gslb.toml"], env);
        assert_eq!(run.status.code(), Some(2), "run {settings}: {}", text(&run));
        assert!(
            text(&run).contains(needle),
            "run {settings}: {}",
            text(&run)
        );
        for out in [&check, &run] {
            assert!(
                !text(out).contains("s3cret"),
                "a secret echoed: {}",
                text(out)
            );
        }
    }
}

#[test]
fn durations_and_instants_out_of_range_are_refused_not_overflowed() {
    let dir = setup("policies = [\"api.toml\"]\n[reconcile]\nresync = \"500000000000y\"\n");
    let out = gslb(dir.path(), &["check", "--config", "gslb.toml"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("reconcile.resync") && text(&out).contains("too long"),
        "{}",
        text(&out)
    );
    assert!(!text(&out).contains("panicked"), "{}", text(&out));

    // A drill state file whose drill expires after year 9999.
    let dir = setup("policies = [\"api.toml\"]\n");
    std::fs::create_dir_all(dir.path().join("state")).expect("mkdir");
    let drill = serde_json::json!({
        "version": 1,
        "overrides": [{
            "id": "d-1", "service": "api", "action": "drain", "pool": "seoul",
            "reason": "far future", "actor": "alice",
            "created": 1_800_000_000_000u64, "expires": 253_402_300_800_000u64
        }]
    });
    std::fs::write(dir.path().join("state/overrides.json"), drill.to_string()).expect("write");
    let out = gslb(dir.path(), &["run", "--config", "gslb.toml"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("is corrupt") && text(&out).contains("9999-12-31T23:59:59.999Z"),
        "{}",
        text(&out)
    );
    assert!(!text(&out).contains("panicked"), "{}", text(&out));
}

#[test]
fn a_fifo_or_a_device_among_the_policies_is_refused_without_hanging() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policies = dir.path().join("policies");
    std::fs::create_dir(&policies).expect("mkdir");
    std::fs::write(policies.join("api.toml"), VALID).expect("write");
    let made = Command::new("mkfifo")
        .arg(policies.join("fifo.toml"))
        .status()
        .expect("mkfifo");
    assert!(made.success());
    std::os::unix::fs::symlink("/dev/zero", policies.join("zero.toml")).expect("symlink");
    let out = gslb(dir.path(), &["check", "policies"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let t = text(&out);
    assert!(
        t.contains("fifo.toml: cannot read: not a regular file"),
        "{t}"
    );
    assert!(
        t.contains("zero.toml: cannot read: not a regular file"),
        "{t}"
    );
    assert!(t.contains("ok: policies/api.toml"), "{t}");
}

#[test]
fn a_file_of_forty_thousand_mistakes_reports_the_first_hundred() {
    let dir = tempfile::tempdir().expect("tempdir");
    let unknown: String = (0..40_000).map(|i| format!("bogus_{i} = {i}\n")).collect();
    std::fs::write(dir.path().join("keys.toml"), format!("{unknown}{VALID}")).expect("write");
    let syntax: String = (0..40_000).map(|i| format!("x{i} = = 1\n")).collect();
    std::fs::write(dir.path().join("syntax.toml"), syntax).expect("write");
    let big = "# padding\n".repeat(120_000);
    std::fs::write(dir.path().join("big.toml"), format!("{big}{VALID}")).expect("write");
    for (file, last) in [
        ("keys.toml", "39900 more problems not shown"),
        ("syntax.toml", "39900 more problems not shown"),
        ("big.toml", "larger than 1048576 bytes"),
    ] {
        let out = gslb(dir.path(), &["check", file], &[]);
        assert_eq!(out.status.code(), Some(2), "{file}");
        let t = text(&out);
        assert!(t.contains(last), "{file}: {t}");
        let lines = t.lines().filter(|l| l.starts_with("error: ")).count();
        assert!(lines <= 102, "{file}: {lines} lines");
    }
}

/// A misspelt `timout` leaves the default timeout in force: the message says it is the
/// default, and the misspelt key is reported as unknown.
#[test]
fn a_default_that_breaks_a_rule_is_named_as_the_default() {
    let text = VALID
        .replace("interval = \"10s\"", "interval = \"1s\"")
        .replace("timeout = \"4s\"", "timout = \"500ms\"");
    let errors = gslb_core::policy::parse(Path::new("api.toml"), &text).expect_err("invalid");
    let reasons: Vec<String> = errors.0.iter().map(ToString::to_string).collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("probe.timout: unknown key")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r.contains(
            "timeout 5s (the default: probe.timeout is not set; a misspelt key is reported above) must be shorter than interval 1s"
        )),
        "{reasons:?}"
    );
}

/// serde reads a struct from a list of its fields in order: `probe = ["20s", "10s"]` passed as
/// a `[probe]` table. A table must be a table, in policies and settings alike.
#[test]
fn a_list_where_a_table_belongs_is_refused() {
    let policy = VALID.replace(
        "[probe]\ninterval = \"10s\"\ntimeout = \"4s\"\nexpected_status = [200]\nbody_contains = \"ok\"\ntls_verify = true\nfollow_redirects = false\n",
        "probe = [\"20s\", \"10s\"]\n",
    );
    assert!(policy.contains("probe = ["), "the example policy changed");
    let errors = gslb_core::policy::parse(Path::new("api.toml"), &policy).expect_err("a list");
    let reasons: Vec<String> = errors.0.iter().map(ToString::to_string).collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("probe: must be a table, not a list")),
        "{reasons:?}"
    );
    let dir = setup("policies = [\"api.toml\"]\nprobing = [1024, \"50ms\"]\n");
    let out = gslb(dir.path(), &["check", "--config", "gslb.toml"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("probing: must be a table, not a list"),
        "{}",
        text(&out)
    );
}

/// Route 53 allows 5 requests per second per account: more is refused, unless an emulator is
/// named (the tests' emulators take 50).
#[test]
fn route53_requests_per_second_is_bounded_by_route53s_own_limit() {
    let dir = setup("policies = [\"api.toml\"]\n[route53]\nrequests_per_second = 1000\n");
    let out = gslb(dir.path(), &["check", "--config", "gslb.toml"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("route53.requests_per_second: 1000 is more than the 5 requests"),
        "{}",
        text(&out)
    );
    let dir = setup(
        "policies = [\"api.toml\"]\n[route53]\nrequests_per_second = 50\nendpoint_url = \"http://127.0.0.1:5000\"\n",
    );
    let out = gslb(dir.path(), &["check", "--config", "gslb.toml"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}
