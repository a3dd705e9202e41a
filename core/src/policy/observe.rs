//! The failover observer of a policy (`[observe]`): the raw TOML table, its validated form and
//! its validation. Optional; without it a failover timeline has no DNS-observed and no
//! served-by phase.
//!
//! ```toml
//! [observe]
//! dns_name = "api.example.com"            # default: the hostname
//! nameservers = ["205.251.192.1"]         # default: the daemon's [dns] nameservers
//! interval = "5s"                         # between two looks
//! window = "10m"                          # give up this long after the decision
//! url = "https://api.example.com/healthz" # the public URL, resolved like a client
//! served_by_header = "X-Served-By"        # or served_by_body = "region="
//! ```

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde::Deserialize;
use url::Url;

use super::error::Report;
use super::names::{is_dns_name, normalise_name};

/// Shortest observer interval accepted.
const MIN_INTERVAL: Duration = Duration::from_millis(100);
/// Longest observer interval accepted: a minute (slower says little about a failover).
const MAX_INTERVAL: Duration = Duration::from_secs(60);
/// Longest observation window accepted: a day.
const MAX_WINDOW: Duration = Duration::from_secs(24 * 3600);

/// `[observe]` as written.
#[derive(Debug, Deserialize)]
pub struct RawObserve {
    #[serde(default)]
    pub dns_name: Option<String>,
    #[serde(default)]
    pub nameservers: Vec<String>,
    #[serde(default = "default_interval", with = "crate::policy::duration")]
    pub interval: Duration,
    #[serde(default = "default_window", with = "crate::policy::duration")]
    pub window: Duration,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub served_by_header: Option<String>,
    #[serde(default)]
    pub served_by_body: Option<String>,
}

/// 5 s between two looks: what a DR drill does by hand with `dig` and `curl` in a loop.
pub fn default_interval() -> Duration {
    Duration::from_secs(5)
}

/// 10 min: a failover whose new region is not seen by then needs a person, not a timeline.
pub fn default_window() -> Duration {
    Duration::from_secs(600)
}

/// How a failover is watched from the outside (`[observe]`), from the decision until every
/// phase is seen or the window passes.
#[derive(Debug, Clone, PartialEq)]
pub struct Observe {
    /// The name whose answers are checked (lower-case, no trailing dot). Default: the
    /// policy's hostname.
    pub dns_name: String,
    /// Nameservers to ask (`ip` or `ip:port`; port 53 when left out): recursive resolvers or
    /// the zone's authoritative servers. Empty (default): the daemon's `[dns] nameservers`.
    pub nameservers: Vec<SocketAddr>,
    /// Time between two looks. Default 5 s; 100 ms to 1 min.
    pub interval: Duration,
    /// How long after the decision the observer keeps looking. Default 10 min; at least one
    /// interval, at most a day.
    pub window: Duration,
    /// The served-by probe of the public URL, if any.
    pub served_by: Option<ServedBy>,
}

/// The served-by probe: `GET url` (its host resolved through [`Observe::nameservers`], like a
/// client) and how to read the serving region off the response.
#[derive(Debug, Clone, PartialEq)]
pub struct ServedBy {
    /// The public URL, e.g. `https://api.example.com/healthz`.
    pub url: Url,
    /// Where the response names its region.
    pub marker: ServedByMarker,
}

/// Where a response names the region that served it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServedByMarker {
    /// A response header (`served_by_header`, e.g. `X-Served-By` or `Via`): served by a pool
    /// when one of the words of its value (split at commas, semicolons and whitespace) is the
    /// pool's `region` or name (case-insensitive): `seoul2` does not name `seoul`.
    Header(String),
    /// A body marker (`served_by_body`, e.g. `region=`): found anywhere in the body (a
    /// substring), the word after it (up to whitespace, a quote, `,`, `;`, `<` or `&`) is the
    /// serving region, compared whole with the pool's `region` or name (case-insensitive).
    /// Only the first 64 KiB of the body are read.
    Body(String),
}

/// Validates `[observe]`; `hostname` is the policy's. Problems go to `report`.
pub(super) fn validate(raw: RawObserve, hostname: &str, report: &mut Report) -> Option<Observe> {
    let before = report.errors.len();
    let dns_name = normalise_name(raw.dns_name.as_deref().unwrap_or(hostname));
    if !is_dns_name(&dns_name) {
        report.add(
            "observe.dns_name",
            format!("'{dns_name}' is not a DNS name"),
        );
    }
    let mut nameservers = Vec::new();
    for (i, ns) in raw.nameservers.iter().enumerate() {
        match ns
            .parse::<SocketAddr>()
            .or_else(|_| ns.parse::<IpAddr>().map(|ip| SocketAddr::new(ip, 53)))
        {
            Ok(a) => nameservers.push(a),
            Err(_) => report.add(
                format!("observe.nameservers[{i}]"),
                format!("'{ns}' is not an IP address or ip:port"),
            ),
        }
    }
    if raw.interval < MIN_INTERVAL || raw.interval > MAX_INTERVAL {
        report.add(
            "observe.interval",
            format!(
                "{} is outside {} to {}",
                humantime::format_duration(raw.interval),
                humantime::format_duration(MIN_INTERVAL),
                humantime::format_duration(MAX_INTERVAL)
            ),
        );
    }
    if raw.window < raw.interval || raw.window > MAX_WINDOW {
        report.add(
            "observe.window",
            format!(
                "{} must be at least the interval ({}) and at most {}",
                humantime::format_duration(raw.window),
                humantime::format_duration(raw.interval),
                humantime::format_duration(MAX_WINDOW)
            ),
        );
    }
    let served_by = served_by(&raw, report);
    if report.errors.len() > before {
        return None;
    }
    Some(Observe {
        dns_name,
        nameservers,
        interval: raw.interval,
        window: raw.window,
        served_by,
    })
}

fn served_by(raw: &RawObserve, report: &mut Report) -> Option<ServedBy> {
    let marker = match (&raw.served_by_header, &raw.served_by_body) {
        (Some(_), Some(_)) => {
            report.add(
                "observe.served_by_body",
                "give served_by_header or served_by_body, not both",
            );
            None
        }
        (Some(h), None) => {
            if http::HeaderName::from_bytes(h.as_bytes()).is_err() {
                report.add(
                    "observe.served_by_header",
                    format!("'{h}' is not an HTTP header name"),
                );
            }
            Some(ServedByMarker::Header(h.clone()))
        }
        (None, Some(b)) => {
            if b.trim().is_empty() {
                report.add(
                    "observe.served_by_body",
                    "must not be empty (it is the text before the region's name)",
                );
            }
            Some(ServedByMarker::Body(b.clone()))
        }
        (None, None) => None,
    };
    let Some(raw_url) = &raw.url else {
        if marker.is_some() {
            let key = if raw.served_by_header.is_some() {
                "observe.served_by_header"
            } else {
                "observe.served_by_body"
            };
            report.add(key, "needs observe.url: the public URL to request");
        }
        return None;
    };
    let url = match Url::parse(raw_url) {
        Ok(u) => u,
        Err(e) => {
            report.add("observe.url", format!("'{raw_url}' is not a URL: {e}"));
            return None;
        }
    };
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        report.add(
            "observe.url",
            format!("'{raw_url}' must be an http:// or https:// URL with a host"),
        );
    }
    if !url.username().is_empty() || url.password().is_some() {
        report.add(
            "observe.url",
            "must not carry user:password: it would show in logs and events",
        );
    }
    let Some(marker) = marker else {
        report.add(
            "observe.url",
            "needs served_by_header or served_by_body to tell which region served",
        );
        return None;
    };
    Some(ServedBy { url, marker })
}
