//! How much probing one process may do at once: the `[probing]` settings (bounded in-flight
//! probes, the late threshold) and the open-file limit they must fit in.
//!
//! Must not: drop a probe silently. A probe that waits for room starts late and is counted as
//! such (see [`ProbeStats`](super::ProbeStats)).

use std::net::IpAddr;
use std::time::Duration;

use serde::Deserialize;

/// `[probing]` of the daemon settings: limits of the probe loops of one vantage point.
///
/// Strict: unknown keys are rejected. Example (TOML): `max_in_flight = 2048`,
/// `late_after = "50ms"`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbingSettings {
    /// Most probes running at once, across every endpoint of this process. A probe that finds
    /// no room waits (back-pressure) and starts late; it is never skipped for it. Default 1024:
    /// at a typical 100 ms per probe that is about 10,000 probes per second (issue 6's
    /// 10,000 endpoints at a 1 s interval), while endpoints that hang until their timeout
    /// cannot take more than 1,024 sockets. Capped at half the process's open-file limit
    /// (see [`effective_max_in_flight`]), so probes never run out of descriptors. At least 1.
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight: usize,
    /// A probe that starts more than this after its planned time is counted late
    /// (`gslb_probes_late_total`). Default 50 ms: issue 6's target for the 99th percentile
    /// of scheduling lateness.
    #[serde(default = "default_late_after", with = "gslb_core::policy::duration")]
    pub late_after: Duration,
    /// The local IP address every probe of this instance leaves from (HTTP and TCP probes
    /// bind to it before connecting; DNS lookups keep the resolver's own). Default: none, the
    /// system picks. Gives an instance its own vantage on a host with several addresses (the
    /// cluster tests give each instance its own 127.0.x.y on loopback).
    #[serde(default)]
    pub source_address: Option<IpAddr>,
}

/// Default for [`ProbingSettings::max_in_flight`]: 1024.
pub fn default_max_in_flight() -> usize {
    1024
}

/// Default for [`ProbingSettings::late_after`]: 50 ms.
pub fn default_late_after() -> Duration {
    Duration::from_millis(50)
}

impl Default for ProbingSettings {
    fn default() -> Self {
        Self {
            max_in_flight: default_max_in_flight(),
            late_after: default_late_after(),
            source_address: None,
        }
    }
}

/// The in-flight limit actually used: `configured`, at most half of `open_files` (the soft
/// `RLIMIT_NOFILE`, when known), at least 1. Each probe holds one socket, two while it also
/// resolves a name; the other half is left for the rest of the process (admin API, provider
/// clients, journal files).
pub fn effective_max_in_flight(configured: usize, open_files: Option<u64>) -> usize {
    let cap = open_files.map_or(usize::MAX, |n| usize::try_from(n / 2).unwrap_or(usize::MAX));
    configured.min(cap).max(1)
}

/// Raises the soft open-file limit to the hard limit (as the Go runtime does for every
/// program, blackbox_exporter included) and returns the soft limit in force afterwards.
///
/// # Errors
/// The limit cannot be read or set (the caller logs it and goes on with the old limit).
pub fn raise_open_file_limit() -> std::io::Result<u64> {
    rlimit::increase_nofile_limit(u64::MAX)
}

/// The soft open-file limit, when it can be read.
pub fn open_file_limit() -> Option<u64> {
    rlimit::getrlimit(rlimit::Resource::NOFILE)
        .ok()
        .map(|(soft, _)| soft)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_strictness() {
        let s: ProbingSettings = serde_json::from_str("{}").unwrap();
        assert_eq!(s, ProbingSettings::default());
        assert_eq!(s.max_in_flight, 1024);
        assert_eq!(s.late_after, Duration::from_millis(50));
        let s: ProbingSettings =
            serde_json::from_str(r#"{"max_in_flight":8,"late_after":"10ms"}"#).unwrap();
        assert_eq!(s.max_in_flight, 8);
        assert_eq!(s.late_after, Duration::from_millis(10));
        assert!(serde_json::from_str::<ProbingSettings>(r#"{"in_flight":8}"#).is_err());
    }

    #[test]
    fn in_flight_fits_the_open_file_limit() {
        assert_eq!(effective_max_in_flight(1024, None), 1024);
        assert_eq!(effective_max_in_flight(1024, Some(1024)), 512);
        assert_eq!(effective_max_in_flight(1024, Some(1_048_576)), 1024);
        assert_eq!(effective_max_in_flight(0, Some(1024)), 1);
        assert_eq!(effective_max_in_flight(8, Some(1)), 1);
    }
}
