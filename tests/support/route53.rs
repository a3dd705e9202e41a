//! The real `gslb` binary against the moto Route 53 emulator: an SDK client for moto, the
//! command with AWS settings that keep it on loopback, and reading a record's verdict check.

use std::path::Path;
use std::process::Command;

use aws_sdk_route53::Client;
use aws_sdk_route53::config::{BehaviorVersion, Credentials, Region};

/// An SDK client for the emulator at `endpoint`, with static test credentials.
pub fn sdk(endpoint: &str) -> Client {
    let conf = aws_sdk_route53::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "static"))
        .build();
    Client::from_conf(conf)
}

/// The `gslb` command run in `dir` with `args`, AWS credentials and config kept local.
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
