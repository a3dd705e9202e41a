//! Log format on stderr: human-readable text by default, one JSON object per line with
//! `GSLB_LOG_FORMAT=json` or `--log-format json` (the fatal error included), and a clear
//! refusal of any other value. `GSLB_LOG_FORMAT` is not read as a settings key. The level and
//! filter come from `GSLB_LOG`.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

const VALID: &str = include_str!("../policies/api-seoul-tokyo.toml");

fn gslb() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gslb"));
    cmd.env_remove("GSLB_LOG_FORMAT").env("GSLB_LOG", "info");
    cmd
}

/// A folder with a policy whose `fall` is 0 and settings that use it.
fn bad_setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    assert!(VALID.contains("fall = 3"));
    std::fs::write(
        dir.path().join("bad.toml"),
        VALID.replace("fall = 3", "fall = 0"),
    )
    .expect("policy");
    std::fs::write(
        dir.path().join("gslb.toml"),
        "policies = [\"bad.toml\"]\n[admin]\nlisten = \"127.0.0.1:0\"\n",
    )
    .expect("settings");
    dir
}

/// Every stderr line parsed as a JSON object with a level and fields.
fn json_lines(out: &Output) -> Vec<Value> {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.trim().is_empty(), "nothing logged");
    stderr
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line}"));
            assert!(v["level"].is_string(), "{line}");
            assert!(v["fields"].is_object(), "{line}");
            v
        })
        .collect()
}

/// The last line is the fatal error, exit code 2, saying `needle`.
fn assert_fatal(lines: &[Value], needle: &str) {
    let last = lines.last().expect("a line");
    assert_eq!(last["level"], "ERROR", "{last}");
    assert_eq!(last["fields"]["exit_code"], 2, "{last}");
    let error = last["fields"]["error"].as_str().unwrap_or_default();
    assert!(error.contains(needle), "{last}");
}

/// The bad policy's problem, with its line and column.
fn bad_policy_problem(dir: &Path) -> String {
    format!(
        "{}:21:1: health.fall: must be at least 1",
        dir.join("bad.toml").display()
    )
}

#[test]
fn json_format_writes_every_line_as_json_including_the_fatal_error() {
    let dir = bad_setup();
    let out = gslb()
        .args(["--log-format", "json", "check"])
        .arg(dir.path().join("bad.toml"))
        .output()
        .expect("gslb check");
    assert_eq!(out.status.code(), Some(2));
    // The problems are the report, on stdout; the fatal error sums them up.
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains(&bad_policy_problem(dir.path())), "{report}");
    assert_fatal(&json_lines(&out), "1 of 1 files invalid");

    // By environment, for `run`: the variable is not taken for a settings key (the error is
    // the policy's, not an unknown `log_format` setting).
    let out = gslb()
        .args(["run", "--config", "gslb.toml"])
        .current_dir(dir.path())
        .env("GSLB_LOG_FORMAT", "json")
        .output()
        .expect("gslb run");
    assert_eq!(out.status.code(), Some(2));
    let lines = json_lines(&out);
    let error = lines.last().expect("a line")["fields"]["error"].to_string();
    assert!(error.contains("health.fall: must be at least 1"), "{error}");
}

#[test]
fn text_is_the_default() {
    let dir = bad_setup();
    let out = gslb()
        .arg("check")
        .arg(dir.path().join("bad.toml"))
        .output()
        .expect("gslb check");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(serde_json::from_str::<Value>(stderr.trim()).is_err());
}

#[test]
fn an_unknown_format_is_refused_naming_the_variable() {
    let out = gslb()
        .args(["check", "policies"])
        .env("GSLB_LOG_FORMAT", "yaml")
        .output()
        .expect("gslb check");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("invalid value 'yaml'") && stderr.contains("GSLB_LOG_FORMAT"),
        "{stderr}"
    );
    assert!(stderr.contains("`text` or `json`"), "{stderr}");
}

#[test]
fn the_level_comes_from_gslb_log_and_a_bad_filter_is_named() {
    let dir = bad_setup();
    let run = |filter: &str| {
        gslb()
            .args(["--log-format", "json", "run", "--config", "gslb.toml"])
            .current_dir(dir.path())
            .env("GSLB_LOG", filter)
            .output()
            .expect("gslb run")
    };
    // `off`: not even the fatal error is logged (the exit code still says it).
    let out = run("off");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A filter that does not parse: warned about, naming the variable, then the default level.
    let lines = json_lines(&run("[[bad"));
    assert_eq!(lines[0]["level"], "WARN", "{}", lines[0]);
    assert_eq!(lines[0]["fields"]["GSLB_LOG"], "[[bad", "{}", lines[0]);
    let last = lines.last().expect("a line");
    assert_eq!(last["level"], "ERROR", "{last}");
    assert_eq!(last["fields"]["exit_code"], 2, "{last}");
}

#[test]
fn json_decision_lines_name_pools_plainly_and_list_reasons_as_an_array() {
    // Issue 12: `"active":"Some(PoolId(\"seoul\"))"` and `reasons` as one debug string before.
    let out = gslb()
        .args(["--log-format", "json", "demo"])
        .output()
        .expect("gslb demo");
    assert_eq!(out.status.code(), Some(0));
    let lines = json_lines(&out);
    let decisions: Vec<&Value> = lines
        .iter()
        .filter(|l| l["fields"]["message"] == "decision")
        .collect();
    assert!(!decisions.is_empty(), "{lines:?}");
    for d in &decisions {
        let f = &d["fields"];
        let active = f["active"].as_str().unwrap_or_default();
        assert!(["seoul", "tokyo"].contains(&active), "{d}");
        let reasons = f["reasons"].as_array().unwrap_or_else(|| panic!("{d}"));
        assert!(
            reasons.iter().all(Value::is_string) && !reasons.is_empty(),
            "{d}"
        );
    }
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!text.contains("Some(") && !text.contains("None"), "{text}");
}
