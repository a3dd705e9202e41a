//! The timeline's vocabulary: the phases of a failover, what started a switch, where a
//! timeline stands, the timeline itself, what a service's timelines wait for ([`Expect`]) and
//! what the recorder asks its task to do ([`Update`]). Plain data: the rules that fill it in
//! are the [`Recorder`](super::Recorder)'s.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::model::{Millis, PoolId, ServiceId};
use crate::policy::Mode;

/// How long a timeline without observers waits for its provider phases: 10 min.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(600);

/// One phase of a failover, in the order they normally happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// The first failed probe of the run that took the old pool down.
    FirstFailedProbe,
    /// The old pool's quorum verdict turned unhealthy.
    MarkedDown,
    /// The engine decided the switch.
    Decision,
    /// The provider accepted the write.
    ProviderAccepted,
    /// A read-back of the provider showed the new pool serving.
    ProviderInSync,
    /// A DNS answer for the public name named the new pool.
    DnsObserved,
    /// A response through the public name was served by the new pool.
    ServedByObserved,
}

impl Phase {
    /// Every phase, in order.
    pub const ALL: [Phase; 7] = [
        Phase::FirstFailedProbe,
        Phase::MarkedDown,
        Phase::Decision,
        Phase::ProviderAccepted,
        Phase::ProviderInSync,
        Phase::DnsObserved,
        Phase::ServedByObserved,
    ];

    /// The label value, e.g. `provider_in_sync`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FirstFailedProbe => "first_failed_probe",
            Self::MarkedDown => "marked_down",
            Self::Decision => "decision",
            Self::ProviderAccepted => "provider_accepted",
            Self::ProviderInSync => "provider_in_sync",
            Self::DnsObserved => "dns_observed",
            Self::ServedByObserved => "served_by_observed",
        }
    }
}

/// What started a switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SwitchKind {
    /// The engine's own failover or failback.
    Automatic,
    /// An operator's drill (drain, force, restore).
    Drill,
}

impl SwitchKind {
    /// The JSON value and `gslb_switches_total` label: `automatic` or `drill`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Automatic => "automatic",
            Self::Drill => "drill",
        }
    }
}

/// Where a timeline stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Still waiting for phases.
    Open,
    /// Every expected phase was seen.
    Complete,
    /// A newer switch of the service came first.
    Superseded,
    /// The observation window passed first.
    TimedOut,
    /// The controller stopped watching first: it shut down, or a reload removed the service.
    Interrupted,
}

impl Status {
    /// The JSON value and audit `result`, e.g. `timed_out`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Complete => "complete",
            Self::Superseded => "superseded",
            Self::TimedOut => "timed_out",
            Self::Interrupted => "interrupted",
        }
    }
}

/// The times of each phase, Unix milliseconds; `None` when not (yet) seen.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Phases {
    /// See [`Phase::FirstFailedProbe`].
    pub first_failed_probe: Option<Millis>,
    /// See [`Phase::MarkedDown`].
    pub marked_down: Option<Millis>,
    /// See [`Phase::Decision`].
    pub decision: Option<Millis>,
    /// See [`Phase::ProviderAccepted`].
    pub provider_accepted: Option<Millis>,
    /// See [`Phase::ProviderInSync`].
    pub provider_in_sync: Option<Millis>,
    /// See [`Phase::DnsObserved`].
    pub dns_observed: Option<Millis>,
    /// See [`Phase::ServedByObserved`].
    pub served_by_observed: Option<Millis>,
}

impl Phases {
    /// The time of `phase`.
    pub fn get(&self, phase: Phase) -> Option<Millis> {
        *self.slot(phase)
    }

    fn slot(&self, phase: Phase) -> &Option<Millis> {
        match phase {
            Phase::FirstFailedProbe => &self.first_failed_probe,
            Phase::MarkedDown => &self.marked_down,
            Phase::Decision => &self.decision,
            Phase::ProviderAccepted => &self.provider_accepted,
            Phase::ProviderInSync => &self.provider_in_sync,
            Phase::DnsObserved => &self.dns_observed,
            Phase::ServedByObserved => &self.served_by_observed,
        }
    }

    pub(super) fn slot_mut(&mut self, phase: Phase) -> &mut Option<Millis> {
        match phase {
            Phase::FirstFailedProbe => &mut self.first_failed_probe,
            Phase::MarkedDown => &mut self.marked_down,
            Phase::Decision => &mut self.decision,
            Phase::ProviderAccepted => &mut self.provider_accepted,
            Phase::ProviderInSync => &mut self.provider_in_sync,
            Phase::DnsObserved => &mut self.dns_observed,
            Phase::ServedByObserved => &mut self.served_by_observed,
        }
    }
}

/// One switch and its phases.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timeline {
    /// `<service>-<decision time in Unix ms>`, unique per service and stable across restarts.
    pub id: String,
    /// The service.
    pub service: ServiceId,
    /// Automatic or drill.
    pub kind: SwitchKind,
    /// The service's `mode` when it switched: in `shadow` the switch did not happen at the
    /// provider (gslb would have made it), and its phases are not observed in the metrics.
    #[serde(default)]
    pub mode: Mode,
    /// The decision's rule, e.g. `failover`, `drain`.
    pub rule: String,
    /// The pool that served before.
    pub from: Option<PoolId>,
    /// The pool that serves after.
    pub to: Option<PoolId>,
    /// Where it stands.
    pub status: Status,
    /// The phases still awaited for `complete` (the provider's in-sync read unless in shadow
    /// mode; DNS and served-by when observers watch them).
    pub expected: Vec<Phase>,
    /// The times.
    pub phases: Phases,
    /// What the observers saw, by phase (`api.example.com A 192.0.2.2`, `X-Served-By: tokyo`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub observed: BTreeMap<String, String>,
    /// The holds the decision waited through since the service's last decision that was not a
    /// hold, by rule, in order (e.g. `confirm_target`: a probe of the target had to pass after
    /// the old pool went down); empty when it decided at once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waited: Vec<String>,
}

impl Timeline {
    /// Where the timeline starts: the first failed probe, else the marked-down time, else the
    /// decision.
    pub fn start(&self) -> Millis {
        self.phases
            .first_failed_probe
            .or(self.phases.marked_down)
            .or(self.phases.decision)
            .unwrap_or_default()
    }

    /// The time from the start to `phase`, when seen.
    pub fn since_start(&self, phase: Phase) -> Option<Duration> {
        self.phases.get(phase).map(|t| t.since(self.start()))
    }

    pub(super) fn is_complete(&self) -> bool {
        self.expected.iter().all(|p| self.phases.get(*p).is_some())
    }
}

/// What a service's timelines should wait for (from its policy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expect {
    /// The provider is written (`mode = "enforce"`): wait for its in-sync read.
    pub provider: bool,
    /// A DNS observer runs.
    pub dns: bool,
    /// A served-by observer runs.
    pub served_by: bool,
    /// How long a timeline stays open.
    pub window: Duration,
}

impl Expect {
    /// The phases a timeline waits for: the decision, then those of the provider and the
    /// observers that run.
    pub(super) fn phases(&self) -> Vec<Phase> {
        let mut expected = vec![Phase::Decision];
        for (on, phase) in [
            (self.provider, Phase::ProviderInSync),
            (self.dns, Phase::DnsObserved),
            (self.served_by, Phase::ServedByObserved),
        ] {
            if on {
                expected.push(phase);
            }
        }
        expected
    }
}

impl Default for Expect {
    fn default() -> Self {
        Self {
            provider: true,
            dns: false,
            served_by: false,
            window: DEFAULT_WINDOW,
        }
    }
}

/// What the recorder asks its task to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Update {
    /// A timeline opened (start its observers).
    Opened(Timeline),
    /// A phase was recorded, `seconds` after the timeline's start (enforce mode only).
    Phase {
        /// The service.
        service: ServiceId,
        /// The phase.
        phase: Phase,
        /// Seconds from the start.
        seconds: f64,
    },
    /// A timeline closed (complete, superseded, timed out or interrupted): audit it, stop its
    /// observers.
    Closed(Timeline),
}
