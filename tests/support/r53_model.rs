//! A model of Route 53's data plane for tests: no emulator evaluates health checks or answers
//! failover queries, so this reads the health checks and failover records gslb provisioned
//! (from moto, through the SDK) and evaluates them against the real vote URLs the way Route 53
//! documents it, then says which record Route 53 would serve.
//!
//! Each rule, with its source (Route 53 Developer Guide, "How Amazon Route 53 determines
//! whether a health check is healthy" and "How health checks work in complex Amazon Route 53
//! configurations"; API Reference, `HealthCheckConfig`):
//! - several checker regions each probe every endpoint check once per `RequestInterval`
//!   ([`CHECKER_REGIONS`]: the default set of eight; one modelled round is one interval);
//! - a string-match probe succeeds when the TCP connection is made within 4 s, the answer
//!   comes within 2 s with status 2xx or 3xx, and `SearchString` is in the first 5,120 bytes
//!   of the body ([`probe_succeeds`]); HTTPS certificates are not validated;
//! - a checker changes its view after `FailureThreshold` consecutive opposite results
//!   ([`CheckerView::observe`]); a new check counts as healthy until it has data;
//! - an endpoint check is healthy when more than 18% of checkers see it healthy
//!   ([`endpoint_healthy`]); `Inverted` flips the result, so a new inverted check starts
//!   unhealthy; `Disabled` forces healthy;
//! - a CALCULATED check is healthy when at least `HealthThreshold` children are healthy
//!   ([`calculated_healthy`]);
//! - failover: the PRIMARY record when healthy, else the SECONDARY when healthy, else the
//!   PRIMARY; a record without a health check is healthy ([`failover_answer`]).
//!
//! What it leaves out: checkers are in step (real ones are spread over the interval, which
//! only makes a change visible sooner), no resolver caching (add the TTL), no latency from
//! a checker region to the endpoint.

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_route53::Client;
use aws_sdk_route53::types::{HealthCheckType, ResourceRecordSetFailover};

/// Route 53's default health-checker regions (API Reference, `HealthCheckConfig.Regions`).
pub const CHECKER_REGIONS: [&str; 8] = [
    "us-east-1",
    "us-west-1",
    "us-west-2",
    "eu-west-1",
    "ap-southeast-1",
    "ap-southeast-2",
    "ap-northeast-1",
    "sa-east-1",
];

/// How much of the body a string match reads: 5,120 bytes.
pub const BODY_READ: usize = 5120;

/// Whether one string-match probe succeeds: `status` 2xx or 3xx and `search` in the first
/// [`BODY_READ`] bytes of `body`. A connection failure or timeout is a failure before this.
pub fn probe_succeeds(status: u16, body: &[u8], search: &str) -> bool {
    let head = &body[..body.len().min(BODY_READ)];
    (200..400).contains(&status)
        && head
            .windows(search.len().max(1))
            .any(|w| w == search.as_bytes())
}

/// One checker region's view of one endpoint check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckerView {
    /// Healthy in this checker's eyes (before inversion).
    pub healthy: bool,
    /// Consecutive results disagreeing with `healthy`.
    pub streak: u32,
}

impl Default for CheckerView {
    /// A new check: healthy until it has data.
    fn default() -> Self {
        Self {
            healthy: true,
            streak: 0,
        }
    }
}

impl CheckerView {
    /// Takes one probe result; the view flips after `failure_threshold` consecutive opposite
    /// results.
    pub fn observe(&mut self, success: bool, failure_threshold: u32) {
        if success == self.healthy {
            self.streak = 0;
            return;
        }
        self.streak += 1;
        if self.streak >= failure_threshold {
            self.healthy = success;
            self.streak = 0;
        }
    }
}

/// Whether an endpoint check is healthy (before inversion): more than 18% of checkers say so.
pub fn endpoint_healthy(views: &[CheckerView]) -> bool {
    let healthy = views.iter().filter(|v| v.healthy).count();
    healthy * 100 > views.len() * 18
}

/// Whether a CALCULATED check is healthy: at least `threshold` healthy children.
pub fn calculated_healthy(children_healthy: &[bool], threshold: usize) -> bool {
    children_healthy.iter().filter(|h| **h).count() >= threshold
}

/// Which record Route 53 answers: PRIMARY if healthy, else SECONDARY if healthy, else
/// PRIMARY. `true` for PRIMARY.
pub fn failover_answer(primary_healthy: bool, secondary_healthy: bool) -> bool {
    primary_healthy || !secondary_healthy
}

/// What a check is.
#[derive(Debug, Clone)]
enum Kind {
    /// HTTP(S)_STR_MATCH: the URL probed, the string sought, `FailureThreshold`.
    Match {
        url: String,
        search: String,
        failure_threshold: u32,
    },
    /// CALCULATED: children and `HealthThreshold`.
    Calculated {
        children: Vec<String>,
        threshold: usize,
    },
}

#[derive(Debug, Clone)]
struct Check {
    kind: Kind,
    inverted: bool,
    disabled: bool,
}

/// One failover record: set identifier and health check.
#[derive(Debug, Clone)]
pub struct Record {
    /// `SetIdentifier`.
    pub set_identifier: String,
    /// `HealthCheckId`, if any.
    pub health_check: Option<String>,
}

/// The modelled data plane of one failover pair.
#[derive(Debug)]
pub struct DataPlaneModel {
    primary: Record,
    secondary: Record,
    checks: BTreeMap<String, Check>,
    views: BTreeMap<String, Vec<CheckerView>>,
    http: reqwest::Client,
    /// Rounds run so far; each is one `RequestInterval`.
    pub rounds: u32,
}

impl DataPlaneModel {
    /// Reads the failover pair `name` in `zone` and every health check from `client`.
    ///
    /// # Panics
    /// When the pair or a check it names cannot be read.
    pub async fn load(client: &Client, zone: &str, name: &str) -> Self {
        let records = client
            .list_resource_record_sets()
            .hosted_zone_id(zone)
            .send()
            .await
            .expect("list records");
        let mut pair: BTreeMap<bool, Record> = BTreeMap::new();
        for r in records.resource_record_sets() {
            if r.name().trim_end_matches('.') != name {
                continue;
            }
            let Some(role) = r.failover() else { continue };
            pair.insert(
                *role == ResourceRecordSetFailover::Primary,
                Record {
                    set_identifier: r.set_identifier().unwrap_or_default().to_owned(),
                    health_check: r.health_check_id().map(str::to_owned),
                },
            );
        }
        let listed = client
            .list_health_checks()
            .send()
            .await
            .expect("list checks");
        let mut checks = BTreeMap::new();
        for hc in listed.health_checks() {
            let Some(c) = hc.health_check_config() else {
                continue;
            };
            let kind = match c.r#type() {
                HealthCheckType::Calculated => Kind::Calculated {
                    children: c.child_health_checks().to_vec(),
                    threshold: usize::try_from(c.health_threshold().unwrap_or(0)).unwrap_or(0),
                },
                t @ (HealthCheckType::HttpsStrMatch | HealthCheckType::HttpStrMatch) => {
                    let scheme = if *t == HealthCheckType::HttpsStrMatch {
                        "https"
                    } else {
                        "http"
                    };
                    let host = c
                        .ip_address()
                        .or(c.fully_qualified_domain_name())
                        .unwrap_or_default();
                    Kind::Match {
                        url: format!(
                            "{scheme}://{host}:{}{}",
                            c.port().unwrap_or(443),
                            c.resource_path().unwrap_or("/")
                        ),
                        search: c.search_string().unwrap_or_default().to_owned(),
                        failure_threshold: u32::try_from(c.failure_threshold().unwrap_or(3))
                            .unwrap_or(3),
                    }
                }
                _ => continue,
            };
            checks.insert(
                hc.id().to_owned(),
                Check {
                    kind,
                    inverted: c.inverted().unwrap_or(false),
                    disabled: c.disabled().unwrap_or(false),
                },
            );
        }
        let views = checks
            .iter()
            .filter(|(_, c)| matches!(c.kind, Kind::Match { .. }))
            .map(|(id, _)| {
                (
                    id.clone(),
                    vec![CheckerView::default(); CHECKER_REGIONS.len()],
                )
            })
            .collect();
        Self {
            primary: pair.remove(&true).expect("a PRIMARY record"),
            secondary: pair.remove(&false).expect("a SECONDARY record"),
            checks,
            views,
            http: reqwest::Client::builder()
                .danger_accept_invalid_certs(true)
                .connect_timeout(Duration::from_secs(4))
                .timeout(Duration::from_secs(6))
                .build()
                .expect("client"),
            rounds: 0,
        }
    }

    /// The failover records, PRIMARY first.
    pub fn records(&self) -> [&Record; 2] {
        [&self.primary, &self.secondary]
    }

    /// `(children, HealthThreshold, children inverted)` of CALCULATED check `id`.
    pub fn tally(&self, id: &str) -> Option<(Vec<String>, usize, usize)> {
        match &self.checks.get(id)?.kind {
            Kind::Calculated {
                children,
                threshold,
            } => Some((
                children.clone(),
                *threshold,
                children.iter().filter(|c| self.inverted(c)).count(),
            )),
            Kind::Match { .. } => None,
        }
    }

    /// Whether check `id` is inverted.
    pub fn inverted(&self, id: &str) -> bool {
        self.checks.get(id).is_some_and(|c| c.inverted)
    }

    /// The URL string-match check `id` probes.
    pub fn url_of(&self, id: &str) -> Option<String> {
        match &self.checks.get(id)?.kind {
            Kind::Match { url, .. } => Some(url.clone()),
            Kind::Calculated { .. } => None,
        }
    }

    /// One `RequestInterval`: every checker region probes every string-match check once.
    pub async fn round(&mut self) {
        let mut probes = Vec::new();
        for (id, check) in &self.checks {
            if let Kind::Match { url, search, .. } = &check.kind {
                for region in 0..CHECKER_REGIONS.len() {
                    let (http, url, search, id) =
                        (self.http.clone(), url.clone(), search.clone(), id.clone());
                    probes.push(tokio::spawn(async move {
                        let ok = match http.get(&url).send().await {
                            Ok(r) => {
                                let status = r.status().as_u16();
                                let body = r.bytes().await.unwrap_or_default();
                                probe_succeeds(status, &body, &search)
                            }
                            Err(_) => false,
                        };
                        (id, region, ok)
                    }));
                }
            }
        }
        for p in probes {
            let (id, region, ok) = p.await.expect("probe task");
            let ft = match &self.checks[&id].kind {
                Kind::Match {
                    failure_threshold, ..
                } => *failure_threshold,
                Kind::Calculated { .. } => continue,
            };
            if let Some(v) = self.views.get_mut(&id).and_then(|v| v.get_mut(region)) {
                v.observe(ok, ft);
            }
        }
        self.rounds += 1;
    }

    /// Whether check `id` is healthy now (inversion, `Disabled` and CALCULATED applied); an
    /// unknown check is unhealthy.
    pub fn healthy(&self, id: &str) -> bool {
        let Some(c) = self.checks.get(id) else {
            return false;
        };
        if c.disabled {
            return true;
        }
        let raw = match &c.kind {
            Kind::Match { .. } => endpoint_healthy(&self.views[id]),
            Kind::Calculated {
                children,
                threshold,
            } => {
                let healthy: Vec<bool> = children.iter().map(|ch| self.healthy(ch)).collect();
                calculated_healthy(&healthy, *threshold)
            }
        };
        raw != c.inverted
    }

    fn record_healthy(&self, r: &Record) -> bool {
        r.health_check.as_deref().is_none_or(|id| self.healthy(id))
    }

    /// The set identifier Route 53 would answer with now.
    pub fn answer(&self) -> &str {
        if failover_answer(
            self.record_healthy(&self.primary),
            self.record_healthy(&self.secondary),
        ) {
            &self.primary.set_identifier
        } else {
            &self.secondary.set_identifier
        }
    }

    /// Runs rounds until `done` holds (checked before each round too), at most `max` rounds;
    /// the rounds it took, or `None`.
    pub async fn run_until(&mut self, max: u32, done: impl Fn(&Self) -> bool) -> Option<u32> {
        let start = self.rounds;
        loop {
            if done(self) {
                return Some(self.rounds - start);
            }
            if self.rounds - start >= max {
                return None;
            }
            self.round().await;
        }
    }
}
