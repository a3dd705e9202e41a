//! Per-endpoint rise/fall tracking and pool verdicts. Pure: time comes in as an argument.

use serde::Serialize;

use crate::model::{Millis, ProbeOutcome, ProbeReason, Verdict};
use crate::policy::{Flapping, ProbeSpec, Thresholds};

use super::damping::FlapHistory;

/// One endpoint's rise/fall state (HAProxy semantics: `fall` consecutive failures mark it
/// down, `rise` consecutive successes mark it up; it starts `unknown`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct EndpointHealth {
    /// The thresholded verdict, before staleness is applied.
    pub verdict: Verdict,
    /// Consecutive successes so far (0 after a failure).
    pub consecutive_ok: u32,
    /// Consecutive failures so far (0 after a success).
    pub consecutive_fail: u32,
    /// When the last probe finished.
    pub last_at: Option<Millis>,
    /// The last probe's outcome.
    pub last: Option<ProbeOutcome>,
    /// When the first failure of the current failing streak was seen.
    pub failing_since: Option<Millis>,
    /// The last 21 results, for the flapping percentage.
    pub flap: FlapHistory,
    /// Since when every result is [`ProbeReason::Unprobeable`] (this vantage point has no
    /// route for the endpoint's address family); `None` once a result counts again.
    pub unprobeable_since: Option<Millis>,
    /// Since when every result is a prober-side failure ([`ProbeReason::is_prober_side`]: this
    /// vantage point's own resolver or resources failed), and the last one's reason; `None`
    /// once a result counts again. Only explains why the evidence went stale.
    #[serde(skip)]
    pub prober_side: Option<(Millis, ProbeReason)>,
}

impl EndpointHealth {
    /// Records one probe. Returns the new verdict when it changed.
    ///
    /// Prober-side failures ([`ProbeReason::is_prober_side`]) and unprobeable results say
    /// nothing about the endpoint: they neither count toward `fall` nor reset it, and do not
    /// refresh the evidence; an unprobeable one is remembered in `unprobeable_since`.
    pub fn record(
        &mut self,
        outcome: &ProbeOutcome,
        at: Millis,
        th: Thresholds,
        flapping: &Flapping,
    ) -> Option<Verdict> {
        if self.last_at.is_some_and(|last| at < last) {
            return None; // an older result arriving late never overrides a newer one
        }
        if outcome.reason == ProbeReason::Unprobeable {
            self.unprobeable_since.get_or_insert(at);
        }
        if outcome.reason.is_prober_side() {
            let since = self.prober_side.map_or(at, |(since, _)| since);
            self.prober_side = Some((since, outcome.reason));
        }
        if !outcome.reason.counts_toward_health() {
            return None;
        }
        self.unprobeable_since = None;
        self.prober_side = None;
        self.flap.record(outcome.success, flapping);
        self.last_at = Some(at);
        self.last = Some(outcome.clone());
        let before = self.verdict;
        if outcome.success {
            self.consecutive_ok = self.consecutive_ok.saturating_add(1);
            self.consecutive_fail = 0;
            self.failing_since = None;
            if self.consecutive_ok >= th.rise {
                self.verdict = Verdict::Healthy;
            }
        } else {
            self.consecutive_fail = self.consecutive_fail.saturating_add(1);
            self.consecutive_ok = 0;
            self.failing_since.get_or_insert(at);
            if self.consecutive_fail >= th.fall {
                self.verdict = Verdict::Unhealthy;
            }
        }
        (self.verdict != before).then_some(self.verdict)
    }

    /// Restarts the consecutive counts from `since`, keeping the verdict: only a result at
    /// `since` itself (the probe round in which the vantage point stopped being suspect) still
    /// counts, so what follows must reach `rise` or `fall` before the verdict counts as
    /// [re-formed](Self::reformed).
    pub fn restart_streak(&mut self, since: Millis) {
        let kept = u32::from(self.last_at == Some(since));
        self.consecutive_ok = self.consecutive_ok.min(kept);
        self.consecutive_fail = self.consecutive_fail.min(kept);
    }

    /// The verdict when the current streak reaches its threshold (`rise` consecutive
    /// successes for healthy, `fall` failures for unhealthy), else `unknown`.
    pub fn reformed(&self, th: Thresholds) -> Verdict {
        match self.verdict {
            Verdict::Healthy if self.consecutive_ok >= th.rise => Verdict::Healthy,
            Verdict::Unhealthy if self.consecutive_fail >= th.fall => Verdict::Unhealthy,
            _ => Verdict::Unknown,
        }
    }

    /// The verdict at `now`: `unknown` when the last probe is older than `stale_after`.
    pub fn verdict_at(&self, now: Millis, stale_after: std::time::Duration) -> Verdict {
        match self.last_at {
            Some(last) if now.since(last) <= stale_after => self.verdict,
            _ => Verdict::Unknown,
        }
    }

    /// A one-line explanation, e.g. `failed 3 consecutive probes (fall=3), last: timeout`,
    /// `... last: http_status 503`, `... last: body_mismatch: the body lacks "ok" (...)` (the
    /// text `probe` expected, [`ProbeSpec::explain`]), or `unprobeable from here since <time> ...`.
    pub fn explain(&self, th: Thresholds, probe: &ProbeSpec) -> String {
        if let Some(since) = self.unprobeable_since {
            return format!(
                "unprobeable from here since {} (no route for its address family; not counted)",
                since.rfc3339()
            );
        }
        let last = self
            .last
            .as_ref()
            .map_or_else(|| "ok".into(), |o| describe(o, probe));
        match self.verdict {
            Verdict::Unhealthy if self.consecutive_fail < th.fall => format!(
                "still unhealthy: {} ok / {} failed in a row (rise={}, fall={}), last: {last}",
                self.consecutive_ok, self.consecutive_fail, th.rise, th.fall
            ),
            Verdict::Unhealthy => {
                format!(
                    "failed {} consecutive probes (fall={}), last: {last}",
                    self.consecutive_fail, th.fall
                )
            }
            Verdict::Healthy if self.consecutive_fail > 0 => format!(
                "healthy, {} failed probe(s) in a row (fall={}), last: {last}",
                self.consecutive_fail, th.fall
            ),
            Verdict::Healthy => format!(
                "passed {} consecutive probes (rise={})",
                self.consecutive_ok, th.rise
            ),
            Verdict::Unknown if self.last.is_none() => "no probe result yet".into(),
            Verdict::Unknown => format!(
                "not yet decided: {} ok / {} failed in a row (rise={}, fall={})",
                self.consecutive_ok, self.consecutive_fail, th.rise, th.fall
            ),
        }
    }
}

/// A probe's reason as decision reasons show it: the reason's name, with the status for
/// `http_status` (e.g. `http_status 503`) and the expected text for `body_mismatch`.
fn describe(o: &ProbeOutcome, probe: &ProbeSpec) -> String {
    match (o.reason, o.http_status) {
        (ProbeReason::HttpStatus, Some(code)) => format!("http_status {code}"),
        (ProbeReason::BodyMismatch, _) => match probe.explain(o) {
            Some(why) => format!("body_mismatch: {why}"),
            None => o.reason.to_string(),
        },
        (reason, _) => reason.to_string(),
    }
}

/// A pool's verdict from its endpoints' verdicts: healthy when at least one endpoint is
/// healthy (Cloudflare's `minimum_origins` default of 1), unhealthy when every endpoint is,
/// unknown otherwise.
pub fn pool_verdict(endpoints: impl IntoIterator<Item = Verdict>) -> Verdict {
    let mut any = false;
    let mut all_down = true;
    for v in endpoints {
        any = true;
        match v {
            Verdict::Healthy => return Verdict::Healthy,
            Verdict::Unknown => all_down = false,
            Verdict::Unhealthy => {}
        }
    }
    if any && all_down {
        Verdict::Unhealthy
    } else {
        Verdict::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn outcome(ok: bool) -> ProbeOutcome {
        ProbeOutcome {
            success: ok,
            duration: Duration::from_millis(5),
            http_status: ok.then_some(200),
            dns_lookup: None,
            cert_expiry: None,
            reason: if ok {
                ProbeReason::Ok
            } else {
                ProbeReason::Timeout
            },
        }
    }

    const TH: Thresholds = Thresholds { fall: 3, rise: 2 };

    fn probe() -> ProbeSpec {
        ProbeSpec {
            interval: Duration::from_secs(10),
            timeout: Duration::from_secs(5),
            expected_status: vec![200],
            body_contains: Some("UP".into()),
            host_header: None,
            tls_server_name: None,
            tls_verify: true,
            follow_redirects: false,
        }
    }

    const F: Flapping = Flapping {
        high: 30.0,
        low: 20.0,
    };

    #[test]
    fn starts_unknown_and_needs_consecutive_results() {
        let mut h = EndpointHealth::default();
        assert_eq!(h.record(&outcome(true), Millis(1), TH, &F), None);
        assert_eq!(
            h.record(&outcome(true), Millis(2), TH, &F),
            Some(Verdict::Healthy)
        );
        assert_eq!(h.record(&outcome(false), Millis(3), TH, &F), None);
        assert_eq!(h.record(&outcome(false), Millis(4), TH, &F), None);
        assert_eq!(
            h.record(&outcome(true), Millis(5), TH, &F),
            None,
            "a success resets the fall count"
        );
        for t in 6..8 {
            h.record(&outcome(false), Millis(t), TH, &F);
        }
        assert_eq!(
            h.record(&outcome(false), Millis(8), TH, &F),
            Some(Verdict::Unhealthy)
        );
        assert_eq!(h.failing_since, Some(Millis(6)));
    }

    #[test]
    fn stale_results_count_as_unknown_and_late_results_are_ignored() {
        let mut h = EndpointHealth::default();
        h.record(&outcome(true), Millis(1_000), TH, &F);
        h.record(&outcome(true), Millis(2_000), TH, &F);
        assert_eq!(
            h.verdict_at(Millis(3_000), Duration::from_secs(5)),
            Verdict::Healthy
        );
        assert_eq!(
            h.verdict_at(Millis(8_000), Duration::from_secs(5)),
            Verdict::Unknown
        );
        assert_eq!(h.record(&outcome(false), Millis(500), TH, &F), None);
        assert_eq!(h.consecutive_fail, 0);
    }

    #[test]
    fn prober_side_failures_do_not_count_toward_fall() {
        let mut h = EndpointHealth::default();
        h.record(&outcome(true), Millis(1), TH, &F);
        h.record(&outcome(true), Millis(2), TH, &F);
        let local = ProbeOutcome {
            reason: ProbeReason::ResolverUnavailable,
            ..outcome(false)
        };
        for t in 3..10 {
            assert_eq!(h.record(&local, Millis(t), TH, &F), None);
        }
        assert_eq!(h.verdict, Verdict::Healthy);
        assert_eq!(h.consecutive_fail, 0);
        assert_eq!(h.last_at, Some(Millis(2)), "no fresh evidence either");
    }

    #[test]
    fn decision_reasons_name_the_http_status_and_the_tls_detail() {
        let mut h = EndpointHealth::default();
        let status = ProbeOutcome {
            reason: ProbeReason::HttpStatus,
            http_status: Some(503),
            ..outcome(false)
        };
        for t in 1..=3 {
            h.record(&status, Millis(t), TH, &F);
        }
        assert_eq!(
            h.explain(TH, &probe()),
            "failed 3 consecutive probes (fall=3), last: http_status 503"
        );
        let expired = ProbeOutcome {
            reason: ProbeReason::TlsExpired,
            ..outcome(false)
        };
        h.record(&expired, Millis(4), TH, &F);
        assert!(
            h.explain(TH, &probe()).ends_with("last: tls_expired"),
            "{}",
            h.explain(TH, &probe())
        );
        let body = ProbeOutcome {
            reason: ProbeReason::BodyMismatch,
            http_status: Some(200),
            ..outcome(false)
        };
        h.record(&body, Millis(5), TH, &F);
        assert!(
            h.explain(TH, &probe()).ends_with(
                "last: body_mismatch: the body lacks \"UP\" (probe.body_contains, first 64 KiB read)"
            ),
            "{}",
            h.explain(TH, &probe())
        );
    }

    #[test]
    fn unprobeable_results_never_count_and_are_explained() {
        let mut h = EndpointHealth::default();
        let unprobeable = ProbeOutcome {
            reason: ProbeReason::Unprobeable,
            ..outcome(false)
        };
        for t in 1..=15 {
            assert_eq!(h.record(&unprobeable, Millis(t * 1_000), TH, &F), None);
        }
        assert_eq!((h.verdict, h.consecutive_fail), (Verdict::Unknown, 0));
        assert_eq!(h.unprobeable_since, Some(Millis(1_000)));
        let text = h.explain(TH, &probe());
        assert!(
            text.starts_with("unprobeable from here since 1970-01-01T00:00:01"),
            "{text}"
        );
        h.record(&outcome(true), Millis(16_000), TH, &F);
        assert_eq!(h.unprobeable_since, None, "a counted result ends it");
    }

    #[test]
    fn pool_verdict_rules() {
        use Verdict::*;
        assert_eq!(pool_verdict([Unhealthy, Healthy]), Healthy);
        assert_eq!(pool_verdict([Unhealthy, Unhealthy]), Unhealthy);
        assert_eq!(pool_verdict([Unhealthy, Unknown]), Unknown);
        assert_eq!(pool_verdict([]), Unknown);
    }
}
