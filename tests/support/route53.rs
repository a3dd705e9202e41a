//! Route 53 end-to-end helpers: an SDK client of the emulator, the `gslb` binary with static
//! test credentials and no AWS config files, a hosted zone, a pool's verdict check, an Alias
//! pool's policy table, and a zone's records and checks as listed.

use std::path::Path;
use std::process::Command;

use aws_sdk_route53::Client;
use aws_sdk_route53::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_route53::types::{HealthCheck, ResourceRecordSet};

/// An SDK client of the emulator at `endpoint` with static test credentials.
pub fn sdk(endpoint: &str) -> Client {
    let conf = aws_sdk_route53::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "static"))
        .build();
    Client::from_conf(conf)
}

/// The `gslb` binary run in `dir` with `args`, static test credentials, no AWS config or
/// credentials files, and `GSLB_LOG=info`.
pub fn gslb(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gslb"));
    cmd.args(args)
        .current_dir(dir)
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_CONFIG_FILE", dir.join("no-aws-config"))
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            dir.join("no-aws-credentials"),
        )
        .env("GSLB_LOG", "info");
    cmd
}

/// Creates the hosted zone `name` (e.g. `example.test.`) and returns its id without the
/// `/hostedzone/` prefix.
pub async fn create_zone(client: &Client, name: &str) -> String {
    let zone = client
        .create_hosted_zone()
        .name(name)
        .caller_reference(format!("e2e-{}-{name}", std::process::id()))
        .send()
        .await
        .expect("create zone");
    zone.hosted_zone()
        .expect("zone")
        .id()
        .trim_start_matches("/hostedzone/")
        .to_owned()
}

/// The verdict check of `set_id`: (id, inverted).
pub async fn verdict_check(client: &Client, zone: &str, set_id: &str) -> (String, bool) {
    let records = client
        .list_resource_record_sets()
        .hosted_zone_id(zone)
        .send()
        .await
        .expect("list records");
    let rr = records
        .resource_record_sets()
        .iter()
        .find(|r| r.set_identifier() == Some(set_id))
        .unwrap_or_else(|| panic!("no record {set_id}"));
    let id = rr
        .health_check_id()
        .expect("record has a verdict check")
        .to_owned();
    let hc = client
        .get_health_check()
        .health_check_id(&id)
        .send()
        .await
        .expect("get check");
    let inverted = hc
        .health_check()
        .and_then(|h| h.health_check_config())
        .and_then(|c| c.inverted())
        .unwrap_or(false);
    (id, inverted)
}

/// The `[target.route53.pools.<pool>.alias_target]` table of a test policy: an Alias record
/// to `<pool>-alb.elb.example.net` in load-balancer zone `ZELB<POOL>`.
pub fn alias_table(pool: &str, evaluate_target_health: bool) -> String {
    format!(
        "[target.route53.pools.{pool}.alias_target]\ndns_name = \"{pool}-alb.elb.example.net\"\nhosted_zone_id = \"ZELB{}\"\nevaluate_target_health = {evaluate_target_health}\n",
        pool.to_ascii_uppercase()
    )
}

/// Every record of `zone` and every health check, as listed: a zone's state to compare
/// before and after a command that must change nothing.
pub async fn snapshot(client: &Client, zone: &str) -> (Vec<ResourceRecordSet>, Vec<HealthCheck>) {
    let records = client
        .list_resource_record_sets()
        .hosted_zone_id(zone)
        .send()
        .await
        .expect("list records")
        .resource_record_sets;
    let checks = client
        .list_health_checks()
        .send()
        .await
        .expect("list checks")
        .health_checks;
    (records, checks)
}

/// The record of `zone` with set identifier `set_id`, as listed.
pub async fn record(client: &Client, zone: &str, set_id: &str) -> ResourceRecordSet {
    snapshot(client, zone)
        .await
        .0
        .into_iter()
        .find(|r| r.set_identifier() == Some(set_id))
        .unwrap_or_else(|| panic!("no record {set_id}"))
}

/// The `CallerReference` of health check `id`.
pub async fn caller_reference(client: &Client, id: &str) -> String {
    client
        .get_health_check()
        .health_check_id(id)
        .send()
        .await
        .expect("get check")
        .health_check
        .expect("a check")
        .caller_reference
}
/// Runs `gslb provision --config gslb.toml` in `dir`, then starts `gslb run` with the same
/// settings, its stderr in `dir/<log>`.
///
/// # Panics
/// When provisioning fails (its stderr is shown) or the binary cannot start.
pub fn provision_and_run(dir: &Path, log: &str) -> super::daemon::Daemon {
    let out = gslb(dir, &["provision", "--config", "gslb.toml"])
        .output()
        .expect("provision");
    assert!(
        out.status.success(),
        "provision failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    super::daemon::Daemon(
        gslb(dir, &["run", "--config", "gslb.toml"])
            .stderr(super::daemon::log_file(dir, log))
            .spawn()
            .expect("run"),
    )
}
