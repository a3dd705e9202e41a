//! The shared vocabulary: identifiers, observations and verdicts.
//!
//! Plain data only: nothing here reads a clock, touches the network or knows of a provider.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub mod wire;

macro_rules! id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub String);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self(s.to_owned())
            }
        }
    };
}

id!(
    /// A service: one policy file, one public hostname (e.g. `api`).
    ServiceId
);
id!(
    /// A pool: one region's set of endpoints (e.g. `seoul`).
    PoolId
);
id!(
    /// An endpoint: one origin URL of a pool, written as in the policy
    /// (e.g. `https://seoul.api.example.com/api/v1/health`).
    EndpointId
);
id!(
    /// A vantage point: the controller instance that made an observation
    /// (e.g. `aws-ap-northeast-2`).
    VantageId
);

/// A map keyed by pool, in pool order, held in one sorted vector ([`litemap::LiteMap`]): a
/// service has a few pools, and a `BTreeMap` node keeps room for eleven entries whatever it
/// holds (at 5,000 services that room was about a tenth of the daemon's memory).
pub type ByPool<V> = litemap::LiteMap<PoolId, V>;

/// Serializes a [`ByPool`] as a JSON object by pool name, empty or not (`litemap` writes an
/// empty map as `[]` in human-readable formats). For `#[serde(serialize_with = ...)]`.
///
/// # Errors
/// The serializer's.
pub fn pools_as_map<S: serde::Serializer, V: Serialize>(
    map: &ByPool<V>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_map(map.iter())
}

/// Wall-clock time in milliseconds since the Unix epoch.
///
/// The engine takes time only as an argument of this type, so tests pass explicit instants and
/// recorded observations replay exactly.
///
/// In JSON it is an RFC 3339 string ([`wire`]); Unix milliseconds still read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Millis(pub u64);

impl Millis {
    /// The latest instant read from a file or the API: `9999-12-31T23:59:59.999Z`, the last
    /// one RFC 3339 can write (four-digit years). Later ones are refused when read.
    pub const MAX: Self = Self(253_402_300_799_999);

    /// `self + d`, saturating.
    pub fn plus(self, d: Duration) -> Self {
        Self(
            self.0
                .saturating_add(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        )
    }

    /// RFC 3339 with milliseconds, UTC, e.g. `2026-11-29T06:02:11.204Z`; an instant after
    /// [`Millis::MAX`] (never read, only computed by saturating arithmetic) writes as
    /// [`Millis::MAX`].
    pub fn rfc3339(self) -> String {
        let t = std::time::UNIX_EPOCH + Duration::from_millis(self.0.min(Self::MAX.0));
        humantime::format_rfc3339_millis(t).to_string()
    }

    /// The time from `earlier` to `self`; zero when `earlier` is later.
    pub fn since(self, earlier: Millis) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }
}

/// Why a probe failed, or `Ok`. A small bounded set so it can be a metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeReason {
    /// The probe succeeded.
    Ok,
    /// No answer within the probe timeout.
    Timeout,
    /// The endpoint refused the TCP connection.
    ConnectionRefused,
    /// The connection was reset or closed before a full response.
    ConnectionReset,
    /// The endpoint's hostname did not resolve.
    DnsResolution,
    /// The TLS handshake failed for a reason not listed below (protocol, no common cipher, a
    /// peer that does not speak TLS, a certificate refused for another reason).
    Tls,
    /// TLS: the certificate (the leaf or one of its chain) has expired. The earliest such
    /// `notAfter` is reported as [`ProbeOutcome::cert_expiry`].
    TlsExpired,
    /// TLS: the certificate is not valid yet (its `notBefore` is in the future).
    TlsNotYetValid,
    /// TLS: the certificate is not valid for the name asked for (the URL host, or
    /// `tls_server_name`).
    TlsNameMismatch,
    /// TLS: the certificate does not chain to a trusted root (self-signed, a private CA that is
    /// not trusted here: see `SSL_CERT_FILE` in `docs/probes.md`).
    TlsUnknownIssuer,
    /// The response status was not one of the expected codes (redirects included when they
    /// are not followed).
    HttpStatus,
    /// The body did not contain the expected substring.
    BodyMismatch,
    /// Any other failure (malformed response, host unreachable).
    Other,
    /// Prober-side: the vantage point's own resolver failed: SERVFAIL, REFUSED or another error
    /// code, no answer within the lookup's limit, or no nameserver listening (as opposed to an
    /// answer that the name does not exist or has no address, which is `dns_resolution`).
    ResolverUnavailable,
    /// No route to the endpoint's network (`ENETUNREACH`): the local routing table, or a router
    /// on the way reporting the region's prefix unreachable. Ambiguous, so it counts against
    /// the origin; a prober that lost its own route sees every pool fail and is caught by the
    /// suspect rules instead.
    NetworkUnreachable,
    /// Prober-side: the vantage point ran out of local resources (sockets, file descriptors,
    /// ephemeral ports, buffers).
    LocalResources,
    /// Unprobeable from here: every address of the endpoint is of a family this vantage point
    /// has no route for at all (an IPv6 literal or an AAAA-only name on a host without IPv6).
    /// Says nothing about the origin and nothing about the prober's health: it neither counts
    /// toward `fall` nor toward the vantage point being suspect; status shows it.
    Unprobeable,
    /// Not a result: the probe's timeout fired while this process was starved of CPU (the
    /// timeout was seen more than `[probing] late_after` past its deadline), so the probe never
    /// had its time. Says nothing about the origin nor about the vantage point's network: it
    /// counts toward neither `fall`, `rise` nor the vantage point being suspect, and does not
    /// refresh the evidence, which goes stale instead (stale evidence holds the last
    /// decision; `gslb_stale_evidence`, alert `ProbesRunningLate`).
    Late,
}

impl ProbeReason {
    /// The label value, e.g. `connection_refused`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Timeout => "timeout",
            Self::ConnectionRefused => "connection_refused",
            Self::ConnectionReset => "connection_reset",
            Self::DnsResolution => "dns_resolution",
            Self::Tls => "tls",
            Self::TlsExpired => "tls_expired",
            Self::TlsNotYetValid => "tls_not_yet_valid",
            Self::TlsNameMismatch => "tls_name_mismatch",
            Self::TlsUnknownIssuer => "tls_unknown_issuer",
            Self::HttpStatus => "http_status",
            Self::BodyMismatch => "body_mismatch",
            Self::Other => "other",
            Self::ResolverUnavailable => "resolver_unavailable",
            Self::NetworkUnreachable => "network_unreachable",
            Self::LocalResources => "local_resources",
            Self::Unprobeable => "unprobeable",
            Self::Late => "late",
        }
    }

    /// Whether the failure points at the prober itself rather than the origin. Such results
    /// never count toward `fall` (nor reset it); they count toward marking the vantage point
    /// suspect instead.
    pub fn is_prober_side(self) -> bool {
        matches!(self, Self::ResolverUnavailable | Self::LocalResources)
    }

    /// Whether the result counts toward the endpoint's rise/fall: not when it is prober-side,
    /// [`ProbeReason::Unprobeable`] or [`ProbeReason::Late`].
    pub fn counts_toward_health(self) -> bool {
        !self.is_prober_side() && self.counts_toward_suspicion()
    }

    /// Whether the result counts toward judging the vantage point (its share of prober-side
    /// failures): not when it is [`ProbeReason::Unprobeable`] (no route for the family at all)
    /// or [`ProbeReason::Late`] (the process was starved, which `ProbesRunningLate` shows).
    pub fn counts_toward_suspicion(self) -> bool {
        !matches!(self, Self::Unprobeable | Self::Late)
    }
}

impl fmt::Display for ProbeReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one probe saw. A failed probe is data, never an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeOutcome {
    /// Whether the endpoint passed the check.
    pub success: bool,
    /// Time from start to verdict, including DNS, connect, TLS and the response; seconds in
    /// JSON ([`wire::seconds`]).
    #[serde(with = "wire::seconds")]
    pub duration: Duration,
    /// The HTTP status, when a response arrived.
    pub http_status: Option<u16>,
    /// Why it failed, or [`ProbeReason::Ok`].
    pub reason: ProbeReason,
    /// Time spent resolving the endpoint's host name, until the answer, the failure or the
    /// probe timeout; `None` when the host is an IP literal (nothing to resolve). Absent from
    /// recordings made before it existed.
    #[serde(
        default,
        with = "wire::seconds::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub dns_lookup: Option<Duration>,
    /// When the TLS peer's leaf certificate expires (its `notAfter`), for `https://` probes
    /// that completed a handshake and got a response, or the expired certificate's `notAfter`
    /// for a `tls_expired` failure; `None` otherwise. Absent from recordings made before it
    /// existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_expiry: Option<Millis>,
}

/// One probe result, as fed to the engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// The endpoint probed.
    pub endpoint: EndpointId,
    /// The vantage point that probed it.
    pub vantage: VantageId,
    /// When the probe finished.
    pub at: Millis,
    /// What it saw.
    pub outcome: ProbeOutcome,
}

/// A health verdict for an endpoint or a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Passed `rise` consecutive probes.
    Healthy,
    /// Failed `fall` consecutive probes.
    Unhealthy,
    /// Not enough fresh evidence either way. Never causes a switch.
    #[default]
    Unknown,
}

impl Verdict {
    /// The label value: `healthy`, `unhealthy` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Healthy => "healthy",
            Self::Unhealthy => "unhealthy",
            Self::Unknown => "unknown",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recordings_without_lookup_time_or_expiry_still_read_and_new_ones_round_trip() {
        let old = r#"{"success":true,"duration":"12ms","http_status":200,"reason":"ok"}"#;
        let o: ProbeOutcome = serde_json::from_str(old).expect("an old recording line reads");
        assert_eq!((o.dns_lookup, o.cert_expiry), (None, None));
        // Written today: the duration in seconds.
        assert_eq!(
            serde_json::to_string(&o).expect("writes"),
            r#"{"success":true,"duration":0.012,"http_status":200,"reason":"ok"}"#
        );
        let new = ProbeOutcome {
            dns_lookup: Some(Duration::from_millis(3)),
            cert_expiry: Some(Millis(4_949_565_165_000)),
            ..o
        };
        let line = serde_json::to_string(&new).expect("writes");
        assert!(
            line.contains(r#""dns_lookup":0.003,"cert_expiry":"2126-11-05T15:12:45.000Z""#),
            "{line}"
        );
        let back: ProbeOutcome = serde_json::from_str(&line).expect("reads back");
        assert_eq!(back, new);
    }

    #[test]
    fn tls_details_and_unprobeable_have_stable_names_and_old_tls_recordings_still_read() {
        let old = r#"{"success":false,"duration":"3ms","http_status":null,"reason":"tls"}"#;
        let o: ProbeOutcome = serde_json::from_str(old).expect("an old tls line reads");
        assert_eq!(o.reason, ProbeReason::Tls);
        for (reason, name) in [
            (ProbeReason::TlsExpired, "tls_expired"),
            (ProbeReason::TlsNotYetValid, "tls_not_yet_valid"),
            (ProbeReason::TlsNameMismatch, "tls_name_mismatch"),
            (ProbeReason::TlsUnknownIssuer, "tls_unknown_issuer"),
            (ProbeReason::Unprobeable, "unprobeable"),
            (ProbeReason::Late, "late"),
        ] {
            assert_eq!(reason.as_str(), name);
            let line = serde_json::to_string(&reason).expect("writes");
            assert_eq!(line, format!("\"{name}\""));
            assert_eq!(
                serde_json::from_str::<ProbeReason>(&line).ok(),
                Some(reason)
            );
        }
        assert!(
            !ProbeReason::Unprobeable.is_prober_side(),
            "never makes a vantage suspect"
        );
        assert!(!ProbeReason::Unprobeable.counts_toward_health());
        // Issue 14: a timeout seen while the process was starved says nothing of anything.
        assert!(!ProbeReason::Late.is_prober_side());
        assert!(!ProbeReason::Late.counts_toward_health());
        assert!(!ProbeReason::Late.counts_toward_suspicion());
        assert!(ProbeReason::Timeout.counts_toward_suspicion());
        assert!(ProbeReason::TlsExpired.counts_toward_health());
    }
}
