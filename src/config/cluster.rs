//! `[cluster]`: several gslb instances, one controller, coordinated through etcd (see
//! `docs/cluster.md`). Optional: without it gslb runs alone, exactly as before (the embedded
//! default).
//!
//! Must not: connect to anything. This is settings only; [`crate::io::coordination`] connects.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use gslb_core::model::VantageId;

use crate::io::coordination::{Connect, TlsFiles};

/// `[cluster]` of the daemon settings.
///
/// Example (TOML):
/// ```toml
/// [cluster]
/// endpoints = ["https://10.0.1.5:2379", "https://10.1.1.5:2379", "https://10.2.1.5:2379"]
/// vantages = ["aws-ap-northeast-2", "aws-ap-northeast-1", "gcp-asia-northeast3"]
/// lease_ttl = "10s"
/// [cluster.tls]
/// ca = "/etc/gslb/etcd-ca.pem"
/// cert = "/etc/gslb/etcd-client.pem"
/// key = "/etc/gslb/etcd-client-key.pem"
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSettings {
    /// etcd client URLs (`https://host:2379`, or `http://` for loopback tests). At least one;
    /// list every member so the client fails over between them.
    pub endpoints: Vec<String>,
    /// Client TLS (mutual): the CA that signed the members' certificates, this instance's
    /// certificate and key (PEM files; relative to the settings file). Default: none, plain
    /// `http://` endpoints only (loopback tests).
    #[serde(default)]
    pub tls: Option<TlsFiles>,
    /// Every configured vantage point's name (one per instance). Must include this instance's
    /// top-level `vantage`. Votes from names not listed here are ignored.
    pub vantages: Vec<VantageId>,
    /// TTL of this instance's etcd lease, which its votes, heartbeat and (as a writer) its
    /// leader key are bound to. Default 10 s: long enough that a keepalive every TTL/3 (3.3 s)
    /// survives one lost round trip and an etcd leader election across a WAN (etcd's election
    /// timeout is tuned to about 10 round trips), short enough that a dead writer's key goes
    /// within seconds. At least 2 s (etcd's minimum TTL is about its election timeout).
    #[serde(default = "default_lease_ttl", with = "gslb_core::policy::duration")]
    pub lease_ttl: Duration,
    /// How often this instance writes its heartbeat key. Default 2 s. A peer's votes count
    /// while its heartbeat changed within `3 x heartbeat` on the reader's own clock (see
    /// [`ClusterSettings::fresh_for`]). At least 100 ms, below `lease_ttl`.
    #[serde(default = "default_heartbeat", with = "gslb_core::policy::duration")]
    pub heartbeat: Duration,
    /// Fresh votes a pool's verdict needs (this instance's own included). Default: a
    /// majority of `vantages` (2 of 3). Between 1 and the number of `vantages`.
    #[serde(default)]
    pub min_voters: Option<u32>,
    /// Prefix of every gslb key in etcd. Default `/gslb`; give each gslb cluster sharing an
    /// etcd its own.
    #[serde(default = "default_prefix")]
    pub prefix: String,
}

/// Longest [`ClusterSettings::lease_ttl`]: 5 min. A writer that dies keeps its leader key this
/// long, so a longer TTL only delays a takeover (etcd itself refuses TTLs above about 285
/// years, `MaxLeaseTTL` in its lessor).
pub const MAX_LEASE_TTL: Duration = Duration::from_secs(300);

/// Whether `name` can be one segment of an etcd key: 1 to 64 ASCII letters, digits, `-`, `_`
/// or `.` (a `/` would split the key layout, an empty name would merge two segments).
fn is_key_part(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Default of [`ClusterSettings::lease_ttl`]: 10 s.
fn default_lease_ttl() -> Duration {
    Duration::from_secs(10)
}
/// Default of [`ClusterSettings::heartbeat`]: 2 s.
fn default_heartbeat() -> Duration {
    Duration::from_secs(2)
}
fn default_prefix() -> String {
    "/gslb".into()
}

/// Heartbeat periods a peer may miss before its votes stop counting: 3.
pub const HEARTBEATS_MISSED: u32 = 3;

impl ClusterSettings {
    /// The fresh votes a pool's verdict needs: `min_voters`, else a majority of `vantages`.
    pub fn min_voters(&self) -> u32 {
        self.min_voters.unwrap_or_else(|| {
            let n = u32::try_from(self.vantages.len()).unwrap_or(u32::MAX);
            n / 2 + 1
        })
    }

    /// Where and how the etcd clients connect.
    pub fn connect(&self) -> Connect<'_> {
        Connect {
            endpoints: &self.endpoints,
            tls: self.tls.as_ref(),
            lease_ttl: self.lease_ttl,
            prefix: &self.prefix,
        }
    }

    /// How long a peer's votes count after its heartbeat last changed, on the reader's clock:
    /// [`HEARTBEATS_MISSED`] heartbeat periods.
    pub fn fresh_for(&self) -> Duration {
        self.heartbeat * HEARTBEATS_MISSED
    }

    /// The ranges the types do not enforce, with `vantage` the top-level setting.
    ///
    /// # Errors
    /// The first problem, as `cluster.<key>: reason`.
    pub fn check(&self, vantage: &VantageId) -> Result<(), String> {
        if self.endpoints.is_empty() {
            return Err("cluster.endpoints: lists no etcd endpoint".into());
        }
        if let Some(bad) = self.endpoints.iter().find(|e| !is_etcd_url(e)) {
            return Err(format!(
                "cluster.endpoints: {bad} is not an http:// or https:// URL"
            ));
        }
        if self.tls.is_none() && self.endpoints.iter().any(|e| e.starts_with("https://")) {
            return Err(
                "cluster.tls: https:// endpoints need [cluster.tls] ca, cert and key".into(),
            );
        }
        if let Some(bad) = self.vantages.iter().find(|v| !is_key_part(&v.0)) {
            return Err(format!(
                "cluster.vantages: {:?} is not a vantage-point name for etcd keys (1 to 64 \
                 letters, digits, '-', '_' or '.')",
                bad.0
            ));
        }
        if self.vantages.iter().any(|v| v.0 == "root") {
            return Err(
                "cluster.vantages: \"root\" is etcd's superuser: a vantage point named so would \
                 hold every key (pick another name)"
                    .into(),
            );
        }
        if !self.vantages.contains(vantage) {
            return Err(format!(
                "cluster.vantages: does not list this instance's vantage point {vantage}"
            ));
        }
        let n = self.vantages.len();
        let distinct: std::collections::BTreeSet<_> = self.vantages.iter().collect();
        if distinct.len() != n {
            return Err("cluster.vantages: lists a vantage point twice".into());
        }
        if self.min_voters.is_some_and(|m| m == 0 || m as usize > n) {
            return Err(format!("cluster.min_voters: must be between 1 and {n}"));
        }
        if self.lease_ttl > MAX_LEASE_TTL {
            return Err(format!(
                "cluster.lease_ttl: must be at most {} (a dead writer's leader key lives that \
                 long before another instance can take over)",
                humantime::format_duration(MAX_LEASE_TTL)
            ));
        }
        // The writer's time relations need room for a write: the same rule `gslb run` applies.
        crate::io::coordination::fence::Timing::derive(self.lease_ttl, Duration::MAX)?;
        if self.heartbeat < Duration::from_millis(100) || self.heartbeat >= self.lease_ttl {
            return Err("cluster.heartbeat: must be at least 100ms and below lease_ttl".into());
        }
        if !self.prefix.starts_with('/') || self.prefix.len() < 2 || self.prefix.ends_with('/') {
            return Err("cluster.prefix: must start with / and not end with /".into());
        }
        Ok(())
    }

    /// Makes the TLS files relative to `base`, the settings file's folder.
    pub fn relative_to(&mut self, base: &Path) {
        if let Some(tls) = &mut self.tls {
            for p in [&mut tls.ca, &mut tls.cert, &mut tls.key] {
                if p.is_relative() {
                    *p = base.join(&*p);
                }
            }
        }
    }
}

fn is_etcd_url(e: &str) -> bool {
    url::Url::parse(e).is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> ClusterSettings {
        toml::from_str(text).expect("parses")
    }

    const BASE: &str =
        "endpoints = [\"http://127.0.0.1:2379\"]\nvantages = [\"a\", \"b\", \"c\"]\n";

    #[test]
    fn defaults() {
        let c = parse(BASE);
        assert_eq!(c.lease_ttl, Duration::from_secs(10));
        assert_eq!(c.heartbeat, Duration::from_secs(2));
        assert_eq!(c.fresh_for(), Duration::from_secs(6));
        assert_eq!(c.min_voters(), 2, "a majority of three");
        assert_eq!(c.prefix, "/gslb");
        assert_eq!(c.check(&VantageId("a".into())), Ok(()));
    }

    #[test]
    fn out_of_range_values_name_the_key() {
        let a = VantageId("a".into());
        let cases = [
            (
                "min_voters = 4\n",
                "cluster.min_voters: must be between 1 and 3",
            ),
            (
                "min_voters = 0\n",
                "cluster.min_voters: must be between 1 and 3",
            ),
            (
                "lease_ttl = \"3s\"\n",
                "cluster.lease_ttl: 3s leaves a write deadline of 500ms",
            ),
            (
                "heartbeat = \"10s\"\n",
                "cluster.heartbeat: must be at least 100ms",
            ),
            ("prefix = \"gslb\"\n", "cluster.prefix: must start with /"),
            (
                "lease_ttl = \"1h\"\n",
                "cluster.lease_ttl: must be at most 5m",
            ),
        ];
        for (extra, want) in cases {
            let e = parse(&format!("{BASE}{extra}")).check(&a).expect_err(extra);
            assert!(e.starts_with(want), "{extra}: {e}");
        }
        let e = parse(BASE)
            .check(&VantageId("z".into()))
            .expect_err("not listed");
        assert_eq!(
            e,
            "cluster.vantages: does not list this instance's vantage point z"
        );
        let e = parse("endpoints = [\"https://10.0.0.1:2379\"]\nvantages = [\"a\"]\n")
            .check(&a)
            .expect_err("tls");
        assert!(e.starts_with("cluster.tls:"), "{e}");
        let e = parse("endpoints = [\"10.0.0.1:2379\"]\nvantages = [\"a\"]\n")
            .check(&a)
            .expect_err("url");
        assert!(
            e.starts_with("cluster.endpoints: 10.0.0.1:2379 is not"),
            "{e}"
        );
    }

    #[test]
    fn a_vantage_point_name_must_be_one_etcd_key_segment() {
        for bad in ["x/y", "", "a b"] {
            let text =
                format!("endpoints = [\"http://127.0.0.1:2379\"]\nvantages = [\"a\", {bad:?}]\n");
            let e = parse(&text).check(&VantageId("a".into())).expect_err(bad);
            assert!(
                e.starts_with(&format!(
                    "cluster.vantages: {bad:?} is not a vantage-point name"
                )),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn root_is_not_a_vantage_point_name() {
        let text = "endpoints = [\"http://127.0.0.1:2379\"]\nvantages = [\"a\", \"root\"]\n";
        let e = parse(text).check(&VantageId("a".into())).expect_err("root");
        assert!(
            e.starts_with("cluster.vantages: \"root\" is etcd's superuser"),
            "{e}"
        );
    }
}
