//! `gslb demo` runs the embedded default end to end, prints the drill report, exits 0.

use std::process::Command;

#[test]
fn demo_prints_the_drill_report_and_exits_0() {
    let out = Command::new(env!("CARGO_BIN_EXE_gslb"))
        .arg("demo")
        .output()
        .expect("run gslb demo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "demo failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let order = [
        "Drill report: Seoul origin stopped",
        "failure injected: seoul origin stopped",
        "demo-api: seoul -> tokyo (automatic, failover), complete",
        "first failed probe",
        "marked down",
        "decision",
        "provider accepted",
        "provider in sync",
        "detection time",
        "apply time",
        "provider write: seoul disabled",
        "failover time",
        "seoul healthy again (rise 2)",
        "decision: failback_manual -> tokyo keeps serving",
        "provider now serves tokyo; 1 write(s) in total",
    ];
    let mut from = 0;
    for line in order {
        let at = stdout[from..]
            .find(line)
            .unwrap_or_else(|| panic!("missing or out of order: {line:?}\n{stdout}"));
        from += at + line.len();
    }
}
