//! `gslb demo` runs the embedded default end to end, prints the drill report, exits 0;
//! `gslb demo --cluster` runs three instances and etcd, or says how to install etcd.

mod support;

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
    assert_in_order(&stdout, &order);
}

/// `gslb demo --cluster` with etcd on PATH: etcd's auth on, a forged vote refused, the lone
/// vantage point is outvoted, two fail over with one write, the killed writer's successor
/// takes over with a larger epoch.
#[test]
fn demo_cluster_outvotes_one_fails_over_once_and_hands_over() {
    let Some(etcd) = support::emulators::tool("etcd") else {
        return;
    };
    let dir = etcd.parent().expect("etcd's folder");
    let out = Command::new(env!("CARGO_BIN_EXE_gslb"))
        .args(["demo", "--cluster"])
        .env("PATH", dir)
        .output()
        .expect("run gslb demo --cluster");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "demo failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let order = [
        "etcd: three members at https://127.0.29.1:",
        "etcd auth on",
        "writer of demo-api:",
        "aws-tokyo's certificate cannot forge a vote of aws-seoul: etcd says \"etcdserver: permission denied\"",
        "1. seoul fails only for aws-seoul's probes",
        "outvoted, no failover (engines want seoul, seoul, seoul); provider writes: 0",
        "2. seoul fails for aws-seoul and aws-tokyo too",
        "failover to tokyo",
        "provider writes: 1 (only the writer wrote)",
        "3. the writer,",
        "took over",
    ];
    assert_in_order(&stdout, &order);
}

/// Without etcd on PATH, `gslb demo --cluster` says how to install it and fails.
#[test]
fn demo_cluster_without_etcd_says_how_to_install_it() {
    let empty = std::env::temp_dir();
    let out = Command::new(env!("CARGO_BIN_EXE_gslb"))
        .args(["demo", "--cluster"])
        .env("PATH", &empty)
        .output()
        .expect("run gslb demo --cluster");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("apt-get install etcd-server"), "{stderr}");
}

/// Panics unless every line of `order` appears in `stdout`, in that order.
fn assert_in_order(stdout: &str, order: &[&str]) {
    let mut from = 0;
    for line in order {
        let at = stdout[from..]
            .find(line)
            .unwrap_or_else(|| panic!("missing or out of order: {line:?}\n{stdout}"));
        from += at + line.len();
    }
}
