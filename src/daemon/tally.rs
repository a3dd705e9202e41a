//! Route 53 data-plane mode: what Route 53's tally serves, read the way its checkers read it.
//!
//! Per data-plane service, one task reads every instance's vote URL for every pool (its own
//! included, through the URL Route 53's checkers use) every `request_interval / 3`, judges each
//! answer as a string-match check does (2xx or 3xx, the string in the first 5,120 bytes, the
//! certificate not validated, 4 s to connect, then at most 2 s between reads of the answer and
//! 6 s in all), counts the votes as the tally
//! checks do ([`tally_healthy`]) and applies Route 53's failover rule. It publishes:
//! - [`Served`] for the reconciler, through the service's vote board: the decision is
//!   reported applied only once the tally serves its pool and has held for the checkers'
//!   share of a failover;
//! - the status's `route53_tally` ([`TallyView`]);
//! - `gslb_dataplane_voters` and `gslb_dataplane_instances`.
//!
//! It decides nothing and writes no vote: it only reads.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use gslb_core::model::{Millis, PoolId, ServiceId};
use gslb_provider::{PoolRef, Served};

use crate::config::dataplane::{Vote, tally_healthy};
use crate::ops::status::{PoolTally, TallyView};
use crate::ops::telemetry::Telemetry;

/// How much of a vote URL's body a read judges: 5,120 bytes, as Route 53's string matching
/// (API Reference, `HealthCheckConfig.SearchString`).
pub const BODY_READ: usize = 5120;

/// Connection timeout of a read: 4 s, as Route 53's checkers (Developer Guide, "How Amazon
/// Route 53 determines whether a health check is healthy").
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(4);

/// Longest wait for each part of the answer once connected: 2 s, as Route 53's checkers.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// Whole-read timeout: the 4 s to connect and the 2 s Route 53 gives the answer.
pub const READ_TIMEOUT: Duration = Duration::from_secs(6);

/// One pool of a data-plane service as the tally reads it.
#[derive(Debug, Clone)]
pub struct TallyPool {
    /// The gslb pool.
    pub pool: PoolId,
    /// Its record's set identifier.
    pub set_identifier: PoolRef,
    /// What a vote URL answers to vote serve ([`crate::config::dataplane::serve_text`]).
    pub serve: String,
    /// What a vote URL answers to vote drain ([`crate::config::dataplane::drain_text`]).
    pub drain: String,
}

/// What one service's tally task reads and how often.
#[derive(Debug, Clone)]
pub struct TallySpec {
    /// The service.
    pub service: ServiceId,
    /// Its pools in priority order, PRIMARY first.
    pub pools: Vec<TallyPool>,
    /// Every instance: `(name, base URL)` from `[route53.data_plane] instances`.
    pub instances: Vec<(String, String)>,
    /// How long the votes must keep giving a pool before Route 53's checkers have surely
    /// followed: `request_interval x failure_threshold + request_interval`.
    pub lag: Duration,
    /// Time between two reads of every URL.
    pub period: Duration,
}

/// The client the tally reads with: no certificate validation (Route 53 does none on an
/// `HTTPS_STR_MATCH` check; the vote's secret, not the certificate, makes it genuine), no
/// redirects followed, [`CONNECT_TIMEOUT`], [`ANSWER_TIMEOUT`] between reads and
/// [`READ_TIMEOUT`] in all.
///
/// # Errors
/// The TLS back end cannot be set up.
pub fn client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(CONNECT_TIMEOUT)
        .read_timeout(ANSWER_TIMEOUT)
        .timeout(READ_TIMEOUT)
        .build()
}

/// Reads the votes, publishes them, and waits `spec.period`, until aborted. A reader that
/// replaces another (a reload) continues its `since` from the status.
pub async fn run(
    spec: TallySpec,
    client: reqwest::Client,
    served: Arc<watch::Sender<Option<Served>>>,
    telemetry: Telemetry,
) {
    let shown = telemetry
        .board
        .snapshot_of(Some(&spec.service), false)
        .remove(&spec.service)
        .and_then(|s| s.apply.route53_tally);
    let mut since: Option<(usize, Millis)> = shown.and_then(|t| {
        let at = spec.pools.iter().position(|p| p.pool == t.serves)?;
        Some((at, t.since))
    });
    loop {
        let votes = read_all(&client, &spec).await;
        let now = telemetry.clock.now();
        let view = view_of(&spec, &votes, now, &mut since);
        telemetry
            .metrics
            .record_voters(&spec.service.0, view.voters, view.instances);
        let serving = spec
            .pools
            .iter()
            .find(|p| p.pool == view.serves)
            .map(|p| p.set_identifier.clone());
        if let Some(pool) = serving {
            let settled = now >= view.settled_at;
            let why = if settled {
                view.summary()
            } else {
                format!(
                    "{}; Route 53's checkers follow these votes by {}",
                    view.summary(),
                    view.settled_at.rfc3339()
                )
            };
            served.send_replace(Some(Served { pool, settled, why }));
        }
        telemetry
            .board
            .update_apply(&spec.service, |a| a.route53_tally = Some(view));
        tokio::time::sleep(spec.period).await;
    }
}

/// One read of one URL: the vote, and why there is none when there is none.
type Read = (Vote, Option<&'static str>);

/// Every pool's votes, `[pool][instance]`, read concurrently.
async fn read_all(client: &reqwest::Client, spec: &TallySpec) -> Vec<Vec<Read>> {
    let reads = spec.pools.iter().map(|p| {
        futures_util::future::join_all(spec.instances.iter().map(|(_, base)| {
            let url = format!(
                "{}{}",
                base.trim_end_matches('/'),
                crate::config::dataplane::vote_path(&spec.service.0, &p.pool.0)
            );
            read_one(client, url, p)
        }))
    });
    futures_util::future::join_all(reads).await
}

/// Reads `url` and judges the answer as a string-match check on `pool`'s strings.
async fn read_one(client: &reqwest::Client, url: String, pool: &TallyPool) -> Read {
    let mut response = match client.get(url).send().await {
        Ok(r) => r,
        Err(e) if e.is_timeout() => return (Vote::Abstain, Some("timeout")),
        Err(_) => return (Vote::Abstain, Some("unreachable")),
    };
    let status = response.status().as_u16();
    if !(200..400).contains(&status) {
        return (Vote::Abstain, Some("error status"));
    }
    let mut body = Vec::new();
    while body.len() < BODY_READ {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) => break,
            Err(e) if e.is_timeout() => return (Vote::Abstain, Some("timeout")),
            Err(_) => return (Vote::Abstain, Some("unreachable")),
        }
    }
    body.truncate(BODY_READ);
    judge(&body, pool)
}

/// The vote in `body` (at most [`BODY_READ`] bytes of a 2xx or 3xx answer), as the two checks
/// count it: both strings make the serve check healthy and the drain check unhealthy, which
/// is no vote.
fn judge(body: &[u8], pool: &TallyPool) -> Read {
    let has = |s: &str| !s.is_empty() && body.windows(s.len()).any(|w| w == s.as_bytes());
    match (has(&pool.serve), has(&pool.drain)) {
        (true, false) => (Vote::Serve, None),
        (false, true) => (Vote::Drain, None),
        _ => (Vote::Abstain, Some("abstains")),
    }
}

/// The pool Route 53 answers with for the pools' tally checks `healthy` (priority order):
/// the first healthy one, else the first (when every record of a failover pair is unhealthy,
/// Route 53 answers the PRIMARY).
pub fn answer(healthy: &[bool]) -> usize {
    healthy.iter().position(|h| *h).unwrap_or(0)
}

/// The view of `votes` read at `now`; `since` keeps which pool the votes gave and since when.
fn view_of(
    spec: &TallySpec,
    votes: &[Vec<Read>],
    now: Millis,
    since: &mut Option<(usize, Millis)>,
) -> TallyView {
    let healthy: Vec<bool> = votes
        .iter()
        .map(|pool| tally_healthy(&pool.iter().map(|(v, _)| *v).collect::<Vec<_>>()))
        .collect();
    let serves = answer(&healthy);
    let from = match *since {
        Some((pool, at)) if pool == serves => at,
        _ => now,
    };
    *since = Some((serves, from));
    let voters = (0..spec.instances.len())
        .filter(|&i| votes.iter().all(|pool| pool[i].0 != Vote::Abstain))
        .count();
    let pools = spec
        .pools
        .iter()
        .zip(votes)
        .zip(&healthy)
        .map(|((p, reads), healthy)| PoolTally {
            pool: p.pool.clone(),
            healthy: *healthy,
            votes: spec
                .instances
                .iter()
                .zip(reads)
                .map(|((name, _), (vote, why))| {
                    let word = match why {
                        Some(why) => format!("{} ({why})", vote.word()),
                        None => vote.word().to_owned(),
                    };
                    (name.clone(), word)
                })
                .collect::<BTreeMap<_, _>>(),
        })
        .collect();
    TallyView {
        serves: spec.pools[serves].pool.clone(),
        since: from,
        settled_at: from.plus(spec.lag),
        read_at: now,
        voters,
        instances: spec.instances.len(),
        pools,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> TallySpec {
        let pool = |name: &str| TallyPool {
            pool: PoolId(name.into()),
            set_identifier: name.into(),
            serve: "gslb-serve s3cret-s3cret-s3cret".into(),
            drain: "gslb-drain s3cret-s3cret-s3cret".into(),
        };
        TallySpec {
            service: ServiceId("api".into()),
            pools: vec![pool("seoul"), pool("tokyo")],
            instances: ["a", "b", "c"]
                .iter()
                .map(|n| ((*n).to_owned(), format!("https://{n}.example:8443")))
                .collect(),
            lag: Duration::from_secs(120),
            period: Duration::from_secs(10),
        }
    }

    #[test]
    fn an_answer_is_judged_as_a_string_match_check() {
        let s = spec();
        let p = &s.pools[0];
        assert_eq!(judge(p.drain.as_bytes(), p).0, Vote::Drain);
        assert_eq!(judge(p.serve.as_bytes(), p).0, Vote::Serve);
        assert_eq!(judge(b"gslb-abstain", p), (Vote::Abstain, Some("abstains")));
        assert_eq!(
            judge(b"gslb-drain another-secret-0000", p).0,
            Vote::Abstain,
            "another secret is no vote"
        );
        let both = format!("{} {}", p.serve, p.drain);
        assert_eq!(judge(both.as_bytes(), p).0, Vote::Abstain, "both strings");
    }

    /// A loopback vote URL that answers `head` then `body`, waiting `delay` before the head,
    /// and then keeps the connection open without ending the body.
    async fn stalling_url(delay: Duration, body: Vec<u8>) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let body = body.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    let _ = conn.read(&mut buf).await;
                    tokio::time::sleep(delay).await;
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n",
                        body.len() + 10
                    );
                    let _ = conn.write_all(head.as_bytes()).await;
                    let _ = conn.write_all(&body).await;
                    tokio::time::sleep(Duration::from_secs(30)).await;
                });
            }
        });
        format!("http://{addr}/v1/vote/api/seoul")
    }

    #[tokio::test]
    async fn a_vote_url_is_read_as_route53_reads_it() {
        let s = spec();
        let p = &s.pools[0];
        let c = client().expect("client");
        // The vote ends exactly at byte 5,120 and the body goes on later: read at once.
        let mut body = vec![b' '; BODY_READ - p.serve.len()];
        body.extend_from_slice(p.serve.as_bytes());
        let url = stalling_url(Duration::ZERO, body).await;
        let started = std::time::Instant::now();
        assert_eq!(read_one(&c, url, p).await, (Vote::Serve, None));
        assert!(
            started.elapsed() < ANSWER_TIMEOUT,
            "{:?}",
            started.elapsed()
        );
        // An answer 3 s after connecting is none: Route 53 waits 2 s.
        let url = stalling_url(Duration::from_secs(3), p.serve.clone().into_bytes()).await;
        assert_eq!(read_one(&c, url, p).await, (Vote::Abstain, Some("timeout")));
    }

    #[test]
    fn route53_answers_the_first_healthy_record_else_the_primary() {
        assert_eq!(answer(&[true, true]), 0);
        assert_eq!(answer(&[false, true]), 1);
        assert_eq!(answer(&[false, false]), 0);
    }

    #[test]
    fn the_view_keeps_since_while_the_answer_holds_and_counts_voters() {
        use Vote::{Abstain, Drain, Serve};
        let s = spec();
        let read = |v: &[Vote]| v.iter().map(|v| (*v, None)).collect::<Vec<Read>>();
        let mut since = None;
        let failed_over = [
            read(&[Drain, Drain, Abstain]),
            read(&[Serve, Serve, Abstain]),
        ];
        let v = view_of(&s, &failed_over, Millis(1_000), &mut since);
        assert_eq!(
            (v.serves.0.as_str(), v.since, v.voters),
            ("tokyo", Millis(1_000), 2)
        );
        assert_eq!(v.settled_at, Millis(121_000));
        let one_left = [
            read(&[Drain, Abstain, Abstain]),
            read(&[Serve, Abstain, Abstain]),
        ];
        let v = view_of(&s, &one_left, Millis(5_000), &mut since);
        assert_eq!(
            (v.serves.0.as_str(), v.since, v.voters),
            ("tokyo", Millis(1_000), 1),
            "one voter keeps the failover"
        );
        assert_eq!(v.pools[1].votes["b"], "no vote");
        let none_left = [read(&[Abstain; 3]), read(&[Abstain; 3])];
        let v = view_of(&s, &none_left, Millis(9_000), &mut since);
        assert_eq!(
            (v.serves.0.as_str(), v.since, v.voters),
            ("seoul", Millis(9_000), 0)
        );
    }
}
