//! The fence around every provider write of a cluster writer, and the time relations it rests
//! on.
//!
//! Before a write, one etcd transaction checks that this instance's leader key still has the
//! creation revision it won the election with (its epoch, the fencing token) AND that the
//! binding's intent key has not moved since this writer last read or wrote it, and records
//! the new intent. Before that, no write starts when the last successful lease keepalive is
//! older than [`Timing::freshness`] on the monotonic clock, and none starts within
//! [`Timing::takeover_delay`] of winning the election.
//!
//! Must not: write to a provider, decide anything, or read the wall clock for a bound (the
//! intent's `at` is informational).

use std::time::{Duration, Instant};

use etcd_client::{Client, Compare, CompareOp, Txn, TxnOp, TxnOpResponse};
use serde::{Deserialize, Serialize};

/// Slack between the writer's view of its lease and etcd's: one WAN round trip (the keepalive
/// answer arrives after etcd restarted the lease's clock) plus clock-rate drift between two
/// machines over a TTL (well under 0.1 %). 1 s.
pub const MARGIN: Duration = Duration::from_secs(1);

/// The shortest write deadline a lease TTL may leave: 1 s, a few provider round trips.
pub const MIN_WRITE_DEADLINE: Duration = Duration::from_secs(1);

/// The time relations of a cluster writer, all derived from `lease_ttl` (see
/// [`Timing::derive`]):
///
/// - a write starts only while the last successful keepalive is at most `freshness` old
///   (`lease_ttl / 2`: keepalives every `lease_ttl / 3`, so one may be late);
/// - each apply, retries included, ends within `write_deadline` (`lease_ttl - freshness -
///   MARGIN`, at most the reconciler's per-call deadline of 12 s): a write that started in time
///   ends before the lease can have expired at etcd;
/// - a new writer waits `takeover_delay` (= `write_deadline`) after winning before its first
///   write, so a write of its predecessor that was in flight has ended.
///
/// With the default `lease_ttl` of 10 s: freshness 5 s, write deadline 4 s, takeover delay
/// 4 s; with 30 s: 15 s, 12 s (capped), 12 s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// The lease TTL (`[cluster] lease_ttl`).
    pub lease_ttl: Duration,
    /// Oldest last-keepalive age at which a write may start.
    pub freshness: Duration,
    /// One hard deadline for a whole apply, retries included.
    pub write_deadline: Duration,
    /// Wait after winning the election before the first write.
    pub takeover_delay: Duration,
}

impl Timing {
    /// The relations for `lease_ttl`, with `call_deadline` the reconciler's deadline for one
    /// provider call (the write deadline never exceeds it).
    ///
    /// # Errors
    /// `cluster.lease_ttl: ...` when the TTL leaves a write deadline under
    /// [`MIN_WRITE_DEADLINE`] (a TTL under 4 s).
    pub fn derive(lease_ttl: Duration, call_deadline: Duration) -> Result<Self, String> {
        let freshness = lease_ttl / 2;
        let room = lease_ttl.saturating_sub(freshness + MARGIN);
        if room < MIN_WRITE_DEADLINE {
            return Err(format!(
                "cluster.lease_ttl: {} leaves a write deadline of {} (lease_ttl / 2 - 1s); a \
                 writer needs at least {}, so lease_ttl must be at least 4s",
                humantime::format_duration(lease_ttl),
                humantime::format_duration(room),
                humantime::format_duration(MIN_WRITE_DEADLINE)
            ));
        }
        let write_deadline = room.min(call_deadline);
        Ok(Self {
            lease_ttl,
            freshness,
            write_deadline,
            takeover_delay: write_deadline,
        })
    }

    /// Whether a write may start at `now`, the last successful keepalive answered at
    /// `keepalive` (both monotonic).
    pub fn lease_fresh(&self, keepalive: Instant, now: Instant) -> bool {
        now.saturating_duration_since(keepalive) <= self.freshness
    }
}

/// What a writer records in etcd before each write: who, with which epoch, towards which
/// serving order, and when (milliseconds since the Unix epoch, informational).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    /// The writer's vantage point.
    pub vantage: String,
    /// The writer's epoch.
    pub epoch: u64,
    /// The provider pools in the order the write makes them serve.
    pub order: Vec<String>,
    /// Pools the write disables.
    pub disabled: Vec<String>,
    /// Wall-clock milliseconds of the write's start (informational only).
    pub at: u64,
}

/// Why a fenced write was refused; [`Refusal::reason`] is the metric label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// This instance is not the writer of the binding.
    Follower,
    /// Coordination is lost (the votes' watch: lease or peers' votes): fail static.
    Uncoordinated,
    /// Won the election less than the takeover delay ago; this much is left.
    TakeoverDelay(Duration),
    /// The last successful keepalive is older than [`Timing::freshness`].
    LeaseStale,
    /// The leader key is gone or has another creation revision: another writer took over.
    TokenLost,
    /// The intent key moved since this writer read it.
    IntentMoved,
    /// etcd did not answer the transaction.
    Unreachable(String),
}

impl Refusal {
    /// The bounded label of `gslb_cluster_fenced_write_refusals_total{reason}`.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Follower => "follower",
            Self::Uncoordinated => "coordination_lost",
            Self::TakeoverDelay(_) => "takeover_delay",
            Self::LeaseStale => "lease_stale",
            Self::TokenLost => "token_lost",
            Self::IntentMoved => "intent_moved",
            Self::Unreachable(_) => "etcd_unreachable",
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Follower => f.write_str("this instance is a follower: the writer writes"),
            Self::Uncoordinated => {
                f.write_str("coordination lost (etcd or the other vantage points): failing static")
            }
            Self::TakeoverDelay(left) => write!(
                f,
                "new writer: waiting out the takeover delay ({} left)",
                humantime::format_duration(Duration::from_millis(left.as_millis() as u64))
            ),
            Self::LeaseStale => f.write_str("the etcd lease was not renewed recently enough"),
            Self::TokenLost => f.write_str("leadership lost: another instance is the writer"),
            Self::IntentMoved => f.write_str("another writer recorded an intent since"),
            Self::Unreachable(e) => write!(f, "etcd did not answer the fencing check: {e}"),
        }
    }
}

/// The intent key's revision as last read or written by this writer, per epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntentSeen {
    /// The epoch this was read under.
    pub epoch: u64,
    /// The intent key's `mod_revision` (0: no intent yet).
    pub mod_revision: i64,
}

/// Reads the intent key's `mod_revision` (0 when absent) for a writer of `epoch`.
///
/// # Errors
/// [`Refusal::Unreachable`] when etcd does not answer.
pub async fn read_intent(
    client: &Client,
    intent_key: &str,
    epoch: u64,
) -> Result<IntentSeen, Refusal> {
    let got = client
        .kv_client()
        .get(intent_key, None)
        .await
        .map_err(|e| Refusal::Unreachable(e.to_string()))?;
    let mod_revision = got.kvs().first().map_or(0, |kv| kv.mod_revision());
    Ok(IntentSeen {
        epoch,
        mod_revision,
    })
}

/// The fencing transaction: if `leader_key`'s creation revision is still `seen.epoch` and
/// `intent_key`'s mod revision is still `seen.mod_revision`, put `intent`; returns the intent
/// key's new revision. On a failed compare, reads both keys in the same transaction to name
/// the cause.
///
/// # Errors
/// [`Refusal::TokenLost`], [`Refusal::IntentMoved`], or [`Refusal::Unreachable`].
pub async fn record(
    client: &Client,
    leader_key: &[u8],
    intent_key: &str,
    seen: IntentSeen,
    intent: &Intent,
) -> Result<IntentSeen, Refusal> {
    let epoch = i64::try_from(seen.epoch).unwrap_or(i64::MAX);
    let value = serde_json::to_vec(intent).map_err(|e| Refusal::Unreachable(e.to_string()))?;
    let txn = Txn::new()
        .when([
            Compare::create_revision(leader_key.to_vec(), CompareOp::Equal, epoch),
            Compare::mod_revision(intent_key, CompareOp::Equal, seen.mod_revision),
        ])
        .and_then([TxnOp::put(intent_key, value, None)])
        .or_else([TxnOp::get(leader_key.to_vec(), None)]);
    let resp = client
        .kv_client()
        .txn(txn)
        .await
        .map_err(|e| Refusal::Unreachable(e.to_string()))?;
    if resp.succeeded() {
        let revision = resp.header().map_or(0, |h| h.revision());
        return Ok(IntentSeen {
            epoch: seen.epoch,
            mod_revision: revision,
        });
    }
    let ours = resp.op_responses().into_iter().any(|op| match op {
        TxnOpResponse::Get(g) => g
            .kvs()
            .first()
            .is_some_and(|kv| kv.create_revision() == epoch),
        _ => false,
    });
    Err(if ours {
        Refusal::IntentMoved
    } else {
        Refusal::TokenLost
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CALL: Duration = Duration::from_secs(12);

    #[test]
    fn the_default_ttl_leaves_a_four_second_write_deadline() {
        let t = Timing::derive(Duration::from_secs(10), CALL).expect("room");
        assert_eq!(t.freshness, Duration::from_secs(5));
        assert_eq!(t.write_deadline, Duration::from_secs(4));
        assert_eq!(t.takeover_delay, t.write_deadline);
        assert!(
            t.freshness + t.write_deadline + MARGIN <= t.lease_ttl,
            "a write that starts in time ends before the lease can expire"
        );
    }

    #[test]
    fn a_long_ttl_is_capped_by_the_call_deadline() {
        let t = Timing::derive(Duration::from_secs(60), CALL).expect("room");
        assert_eq!(t.write_deadline, CALL);
        assert_eq!(t.takeover_delay, CALL);
    }

    #[test]
    fn a_short_ttl_is_refused_naming_the_key() {
        let e = Timing::derive(Duration::from_secs(3), CALL).expect_err("no room");
        assert!(
            e.starts_with("cluster.lease_ttl: 3s leaves a write deadline of 500ms"),
            "{e}"
        );
        assert!(Timing::derive(Duration::from_secs(4), CALL).is_ok());
    }

    #[test]
    fn a_write_starts_only_with_a_fresh_keepalive() {
        let t = Timing::derive(Duration::from_secs(10), CALL).expect("room");
        let ka = Instant::now();
        assert!(t.lease_fresh(ka, ka + Duration::from_secs(5)));
        assert!(!t.lease_fresh(ka, ka + Duration::from_millis(5001)));
    }
}
