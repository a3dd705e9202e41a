//! Failover observers: watch a switch from the outside, the way a DR drill does by hand with
//! `dig` and `curl` in a loop, and report what they see as [`Event::Observed`].
//!
//! For one timeline, from its decision until both phases are seen or the policy's
//! `[observe] window` passes, every `interval`:
//! - DNS: resolve `dns_name` through the observe nameservers (else the daemon's `[dns]`
//!   nameservers, else the system's) and look for one of the new pool's Route 53 `values`.
//!   Each observation gets a fresh resolver that then caches answers for their TTL, like a
//!   client's stub resolver: pointed at the zone's authoritative servers it sees every change
//!   at once; pointed at a recursive resolver it sees what that resolver's clients see.
//! - Served-by: `GET url`, its host resolved through the same resolver (to the same look's
//!   answer when it is `dns_name`; a new connection each time, no proxy, redirects not
//!   followed); any response whose `served_by_header` value has the new pool's `region` or
//!   name as one of its words ([`header_names`]), or whose body names it after
//!   `served_by_body`.
//!
//! Observers never touch the engine or a provider; a slow or failing lookup only delays the
//! observer itself.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::time::Instant;

use crate::io::clock::Clock;
use crate::io::http_body::read_at_most;
use crate::io::probe::{BODY_LIMIT, Dns, DnsSettings, USER_AGENT};
use crate::ops::events::EventSender;
use gslb_core::event::{Event, ObservedPhase};
use gslb_core::model::ServiceId;
use gslb_core::policy::{Policy, ServedBy, ServedByMarker};

use gslb_core::timeline::Timeline;

/// Longest wait for one served-by response: 10 s (or the interval, when shorter; at least 1 s).
pub const MAX_REQUEST_TIME: Duration = Duration::from_secs(10);

/// What one observer watches for.
#[derive(Debug, Clone)]
pub struct Job {
    /// The service.
    pub service: ServiceId,
    /// The timeline it reports to.
    pub timeline: String,
    /// The name resolved.
    pub dns_name: String,
    /// The new pool's addresses; empty: no DNS phase to watch.
    pub want: Vec<IpAddr>,
    /// The served-by probe, if any.
    pub served_by: Option<ServedBy>,
    /// The new pool's `region` and name, lower-case: what a served-by marker must name.
    pub names: Vec<String>,
    /// Time between two looks.
    pub interval: Duration,
    /// How long to keep looking.
    pub window: Duration,
    /// The resolver settings.
    pub dns: DnsSettings,
}

impl Job {
    /// The job for timeline `t` of `policy`, when the policy has `[observe]` and there is
    /// something to watch. `daemon` is the daemon's `[dns]`.
    pub fn new(policy: &Policy, t: &Timeline, daemon: &DnsSettings) -> Option<Job> {
        let observe = policy.observe.as_ref()?;
        let to = t.to.as_ref()?;
        let want = policy.target.dns_values(to).unwrap_or_default();
        if want.is_empty() && observe.served_by.is_none() {
            return None;
        }
        let mut names = vec![to.0.to_ascii_lowercase()];
        if let Some(p) = policy.pool(to).filter(|p| !p.region.is_empty()) {
            names.insert(0, p.region.to_ascii_lowercase());
        }
        let mut dns = daemon.clone();
        if !observe.nameservers.is_empty() {
            dns.nameservers.clone_from(&observe.nameservers);
        }
        // A handful of names per observer: the public name (A and AAAA).
        dns.cache_size = 16;
        Some(Job {
            service: t.service.clone(),
            timeline: t.id.clone(),
            dns_name: observe.dns_name.clone(),
            want,
            served_by: observe.served_by.clone(),
            names,
            interval: observe.interval,
            window: observe.window,
            dns,
        })
    }
}

/// Watches until both phases are seen or the window passes; reports to `events`.
pub async fn run(job: Job, events: EventSender, clock: Clock) {
    let dns = match Dns::new(&job.dns) {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!(service = %job.service, timeline = %job.timeline, error = %e, "failover observer cannot build its resolver");
            return;
        }
    };
    let Ok(resolving) = client_builder(&job).dns_resolver(dns.clone()).build() else {
        tracing::warn!(service = %job.service, timeline = %job.timeline, "failover observer cannot build its HTTP client");
        return;
    };
    // The served-by request goes to the addresses of the same look's answer when the URL's
    // host is the observed name, so the two phases never disagree within one look.
    let same_host = job
        .served_by
        .as_ref()
        .and_then(|sb| sb.url.host_str())
        .is_some_and(|h| h.eq_ignore_ascii_case(&job.dns_name));
    let deadline = Instant::now() + job.window;
    let mut dns_seen = job.want.is_empty();
    let mut served_seen = job.served_by.is_none();
    let mut tick = tokio::time::interval(job.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !(dns_seen && served_seen) && Instant::now() < deadline {
        tick.tick().await;
        let look = async {
            let answer = if !dns_seen || same_host {
                dns.lookup(&job.dns_name).await.ok()
            } else {
                None
            };
            let hit = match (dns_seen, &answer) {
                (false, Some(ips)) if ips.iter().any(|ip| job.want.contains(ip)) => {
                    let list: Vec<String> = ips.iter().map(ToString::to_string).collect();
                    let detail = format!("{} {}", job.dns_name, list.join(" "));
                    report(&events, &job, ObservedPhase::Dns, clock, detail);
                    true
                }
                _ => false,
            };
            (answer, hit)
        };
        // A URL that does not go through the observed name need not wait for the look (a
        // hanging nameserver would delay the served-by phase by its timeout).
        let unpinned = async {
            match (served_seen || same_host, &job.served_by) {
                (false, Some(sb)) => served_by(&resolving, sb, &job.names)
                    .await
                    .map(|detail| report(&events, &job, ObservedPhase::ServedBy, clock, detail))
                    .is_some(),
                _ => false,
            }
        };
        let ((answer, dns_hit), served_hit) = tokio::join!(look, unpinned);
        dns_seen |= dns_hit;
        served_seen |= served_hit;
        if let (false, true, Some(sb)) = (served_seen, same_host, &job.served_by) {
            // Port 0: the URL's port is used.
            let pinned = answer.as_ref().and_then(|ips| {
                let addrs: Vec<SocketAddr> = ips.iter().map(|ip| SocketAddr::new(*ip, 0)).collect();
                client_builder(&job)
                    .resolve_to_addrs(&job.dns_name, &addrs)
                    .build()
                    .ok()
            });
            if let Some(detail) =
                served_by(pinned.as_ref().unwrap_or(&resolving), sb, &job.names).await
            {
                report(&events, &job, ObservedPhase::ServedBy, clock, detail);
                served_seen = true;
            }
        }
    }
    if !(dns_seen && served_seen) {
        tracing::warn!(service = %job.service, timeline = %job.timeline, window = %humantime::format_duration(job.window), dns_seen, served_seen, "failover observer gave up: the new pool was not seen within the window");
    }
}

/// A client as a user's: a new connection each time, no proxy, no redirects followed.
fn client_builder(job: &Job) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .user_agent(USER_AGENT)
        .timeout(job.interval.clamp(Duration::from_secs(1), MAX_REQUEST_TIME))
}

fn report(events: &EventSender, job: &Job, phase: ObservedPhase, clock: Clock, detail: String) {
    let name = match phase {
        ObservedPhase::Dns => "dns",
        ObservedPhase::ServedBy => "served_by",
    };
    tracing::info!(service = %job.service, timeline = %job.timeline, phase = name, %detail, "failover observed");
    let _ = events.send(Event::Observed {
        service: job.service.clone(),
        timeline: job.timeline.clone(),
        phase,
        at: clock.now(),
        detail,
    });
}

/// One `GET`: `Some(what named the new pool)` when the response was served by it.
async fn served_by(client: &reqwest::Client, sb: &ServedBy, names: &[String]) -> Option<String> {
    let mut response = client.get(sb.url.clone()).send().await.ok()?;
    let status = response.status().as_u16();
    match &sb.marker {
        ServedByMarker::Header(h) => {
            let value = response.headers().get(h.as_str())?.to_str().ok()?;
            header_names(value, names).then(|| format!("{status} {h}: {value}"))
        }
        ServedByMarker::Body(marker) => {
            let body = read_at_most(&mut response, BODY_LIMIT).await.ok()?;
            let word = named_after(&String::from_utf8_lossy(&body.bytes), marker)?;
            names
                .iter()
                .any(|n| word.eq_ignore_ascii_case(n))
                .then(|| format!("{status} body {marker}{word}"))
        }
    }
}

/// Whether a served-by header `value` names one of `names` (lower-case): as a whole word, the
/// value split at commas, semicolons and whitespace, compared case-insensitively. So
/// `X-Served-By: tokyo` and `Via: 1.1 tokyo, 1.1 cdn` name `tokyo`; `seoul2` does not name
/// `seoul`.
pub fn header_names(value: &str, names: &[String]) -> bool {
    value
        .split(|c: char| c == ',' || c == ';' || c.is_whitespace())
        .any(|word| names.iter().any(|n| word.eq_ignore_ascii_case(n)))
}

/// The word right after the first `marker` in `body` (up to whitespace, a quote, `,`, `;`,
/// `<` or `&`).
fn named_after(body: &str, marker: &str) -> Option<String> {
    let rest = &body[body.find(marker)? + marker.len()..];
    let word: String = rest
        .chars()
        .take_while(|c| !c.is_whitespace() && !matches!(c, '"' | '\'' | ',' | ';' | '<' | '&'))
        .collect();
    (!word.is_empty()).then_some(word)
}

#[cfg(test)]
mod tests {
    use super::{header_names, named_after};

    #[test]
    fn a_header_names_a_pool_by_a_whole_word() {
        let names = ["ap-northeast-2".to_owned(), "seoul".to_owned()];
        for value in [
            "seoul",
            "SEOUL",
            "ap-northeast-2",
            "1.1 seoul, 1.1 cdn",
            "x;Seoul",
        ] {
            assert!(header_names(value, &names), "{value}");
        }
        for value in ["seoul2", "cache-seoul", "ap-northeast-2b", "", "tokyo"] {
            assert!(!header_names(value, &names), "{value}");
        }
    }

    #[test]
    fn the_word_after_the_marker_names_the_region() {
        assert_eq!(
            named_after("ok region=tokyo\n", "region=").as_deref(),
            Some("tokyo")
        );
        assert_eq!(
            named_after(r#"{"region="aws-ap-1","x":1}"#, "region=\"").as_deref(),
            Some("aws-ap-1")
        );
        assert_eq!(named_after("ok region=\n", "region="), None);
        assert_eq!(named_after("ok\n", "region="), None);
    }
}
