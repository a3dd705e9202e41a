//! An endpoint's last probes as one vantage point saw them: a fixed ring of
//! [`RECENT_PROBES`] compact entries, allocated once with the ring (never grown), read back as
//! the [`RecentProbe`]s the status shows.

use std::time::Duration;

use gslb_core::model::{Millis, ProbeOutcome, ProbeReason};

use super::{RECENT_PROBES, RecentProbe};

/// No value, in a field of [`Compact`] that is optional in the status.
const NONE: u64 = u64::MAX;

/// What [`RecentProbe`] shows, in 40 bytes instead of 72: durations in whole nanoseconds
/// (what a [`Duration`] holds, so the status's seconds are unchanged; saturating at 2^64 - 2 ns,
/// 584 years), absent values as [`NONE`].
#[derive(Debug, Clone, Copy)]
struct Compact {
    at: u64,
    duration_ns: u64,
    dns_lookup_ns: u64,
    cert_expiry: u64,
    http_status: Option<u16>,
    reason: ProbeReason,
    success: bool,
}

/// Nanoseconds of `d`, saturating below [`NONE`].
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).map_or(NONE - 1, |n| n.min(NONE - 1))
}

/// `v`, unless it is [`NONE`].
fn some(v: u64) -> Option<u64> {
    (v != NONE).then_some(v)
}

impl Compact {
    fn of(at: Millis, o: &ProbeOutcome) -> Self {
        Self {
            at: at.0,
            duration_ns: nanos(o.duration),
            dns_lookup_ns: o.dns_lookup.map_or(NONE, nanos),
            cert_expiry: o.cert_expiry.map_or(NONE, |m| m.0.min(NONE - 1)),
            http_status: o.http_status,
            reason: o.reason,
            success: o.success,
        }
    }

    fn probe(&self) -> RecentProbe {
        RecentProbe {
            at: Millis(self.at),
            outcome: ProbeOutcome {
                success: self.success,
                duration: Duration::from_nanos(self.duration_ns),
                http_status: self.http_status,
                reason: self.reason,
                dns_lookup: some(self.dns_lookup_ns).map(Duration::from_nanos),
                cert_expiry: some(self.cert_expiry).map(Millis),
            },
        }
    }
}

/// The last [`RECENT_PROBES`] probes of one endpoint from one vantage point, and whose: the
/// endpoint's rank among its service's endpoints by name and the vantage point's number on the
/// board (see `super::entry`).
#[derive(Debug, Clone)]
pub(super) struct Ring {
    /// The endpoint's rank by name in its service's policy.
    pub endpoint: u32,
    /// The vantage point's number on the board.
    pub vantage: u16,
    /// Where the next probe goes.
    next: u8,
    /// How many are held (up to [`RECENT_PROBES`]).
    len: u8,
    probes: [Compact; RECENT_PROBES],
}

impl Ring {
    /// A ring holding `at`'s probe alone.
    pub fn first(endpoint: u32, vantage: u16, at: Millis, outcome: &ProbeOutcome) -> Self {
        Self {
            endpoint,
            vantage,
            next: 1 % RECENT_PROBES as u8,
            len: 1,
            probes: [Compact::of(at, outcome); RECENT_PROBES],
        }
    }

    /// Keeps `at`'s probe, dropping the oldest once [`RECENT_PROBES`] are held.
    pub fn push(&mut self, at: Millis, outcome: &ProbeOutcome) {
        self.probes[usize::from(self.next)] = Compact::of(at, outcome);
        self.next = (self.next + 1) % RECENT_PROBES as u8;
        self.len = (self.len + 1).min(RECENT_PROBES as u8);
    }

    /// The probes held, oldest first.
    pub fn probes(&self) -> impl Iterator<Item = RecentProbe> + '_ {
        let (len, next) = (usize::from(self.len), usize::from(self.next));
        (0..len).map(move |i| self.probes[(next + RECENT_PROBES - len + i) % RECENT_PROBES].probe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(i: u64) -> ProbeOutcome {
        ProbeOutcome {
            success: i.is_multiple_of(2),
            duration: Duration::new(i, 123_456_789),
            http_status: (!i.is_multiple_of(3)).then_some(200 + i as u16),
            reason: if i.is_multiple_of(2) {
                ProbeReason::Ok
            } else {
                ProbeReason::Timeout
            },
            dns_lookup: (i % 2 == 1).then(|| Duration::from_nanos(i)),
            cert_expiry: (i % 4 == 1).then_some(Millis(i * 1_000)),
        }
    }

    #[test]
    fn a_ring_keeps_the_last_probes_oldest_first_as_they_came() {
        let mut ring = Ring::first(3, 1, Millis(0), &outcome(0));
        let held = |r: &Ring| r.probes().map(|p| (p.at.0, p.outcome)).collect::<Vec<_>>();
        assert_eq!(held(&ring), [(0, outcome(0))]);
        for i in 1..12 {
            ring.push(Millis(i), &outcome(i));
            let from = (i + 1).saturating_sub(RECENT_PROBES as u64);
            let expected: Vec<_> = (from..=i).map(|j| (j, outcome(j))).collect();
            assert_eq!(held(&ring), expected, "after probe {i}");
        }
        assert_eq!((ring.endpoint, ring.vantage), (3, 1));
        assert!(std::mem::size_of::<Compact>() <= 40);
    }
}
