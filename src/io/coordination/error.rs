//! Coordination errors, and the counter of failed etcd calls by operation
//! (`gslb_cluster_etcd_errors_total{op}`).

use std::path::PathBuf;

use prometheus::IntCounterVec;

/// The etcd operations gslb counts failures of: the `op` label of
/// `gslb_cluster_etcd_errors_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EtcdOp {
    /// Connecting to the members.
    Connect,
    /// Granting a lease.
    LeaseGrant,
    /// A lease keepalive.
    LeaseKeepalive,
    /// Revoking a lost lease.
    LeaseRevoke,
    /// A put (vote, heartbeat).
    Put,
    /// A range read.
    Get,
    /// A watch stream.
    Watch,
    /// A transaction (fenced intents, shared safety state).
    Txn,
    /// An election call (campaign, leader, resign).
    Election,
}

impl EtcdOp {
    /// Every operation, in label order.
    pub const ALL: [EtcdOp; 9] = [
        Self::Connect,
        Self::LeaseGrant,
        Self::LeaseKeepalive,
        Self::LeaseRevoke,
        Self::Put,
        Self::Get,
        Self::Watch,
        Self::Txn,
        Self::Election,
    ];

    /// The label value, e.g. `lease_keepalive`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Connect => "connect",
            Self::LeaseGrant => "lease_grant",
            Self::LeaseKeepalive => "lease_keepalive",
            Self::LeaseRevoke => "lease_revoke",
            Self::Put => "put",
            Self::Get => "get",
            Self::Watch => "watch",
            Self::Txn => "txn",
            Self::Election => "election",
        }
    }
}

/// What went wrong talking to etcd.
#[derive(Debug, thiserror::Error)]
pub enum CoordinationError {
    /// A TLS file of `[cluster.tls]` cannot be read.
    #[error("cluster.tls.{key}: cannot read {}: {source}", path.display())]
    TlsFile {
        /// `ca`, `cert` or `key`.
        key: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// An etcd call took longer than its limit.
    #[error("etcd {}: timed out", .0.as_str())]
    TimedOut(EtcdOp),
    /// An etcd call failed (unreachable, timed out, no leader, refused).
    #[error("etcd {}: {}", op.as_str(), describe(error))]
    Etcd {
        /// The operation.
        op: EtcdOp,
        /// The client's error (described in the message, not chained: see [`describe`]).
        error: etcd_client::Error,
    },
    /// etcd answered, but the lease is gone (expired or revoked).
    #[error("etcd lease {0:x} expired")]
    LeaseExpired(i64),
}

/// Counts failed etcd calls in `gslb_cluster_etcd_errors_total{op}`, and every request sent to
/// etcd in `gslb_cluster_etcd_requests_total{method}` (the vectors are declared by the metrics
/// module and handed in, so this I/O edge does not depend on it).
#[derive(Debug, Clone)]
pub struct ErrorCounter(IntCounterVec, Option<IntCounterVec>);

impl ErrorCounter {
    /// Counts into `counter` (labels: `op`); pre-creates every operation's series at 0.
    pub fn new(counter: IntCounterVec) -> Self {
        for op in EtcdOp::ALL {
            counter.with_label_values(&[op.as_str()]);
        }
        Self(counter, None)
    }

    /// Also counts every request into `requests` (labels: `method`, the gRPC method: `Range`,
    /// `Put`, `Txn`, `LeaseGrant`, `LeaseKeepAlive`, `Watch`, `Campaign`...).
    pub fn counting_requests(self, requests: IntCounterVec) -> Self {
        Self(self.0, Some(requests))
    }

    /// A counter nobody reads (tools and tests without a metrics registry).
    pub fn detached() -> Self {
        let opts = prometheus::Opts::new("gslb_cluster_etcd_errors_total", "detached");
        Self(
            IntCounterVec::new(opts, &["op"]).expect("static metric definition"),
            None,
        )
    }

    /// Counts one request of gRPC `method` (a unary call, a stream opened, or a message sent on
    /// a lease keepalive stream).
    pub fn requested(&self, method: &str) {
        if let Some(requests) = &self.1 {
            requests.with_label_values(&[method]).inc();
        }
    }

    /// Wraps `source` as the failure of `op` and counts it.
    pub fn failed(&self, op: EtcdOp, source: etcd_client::Error) -> CoordinationError {
        self.0.with_label_values(&[op.as_str()]).inc();
        CoordinationError::Etcd { op, error: source }
    }

    /// Counts a failure of `op` that is not a client error (a call that took too long).
    pub fn timed_out(&self, op: EtcdOp) {
        self.0.with_label_values(&[op.as_str()]).inc();
    }

    /// Counts a call of `op` that took too long, and returns it as an error.
    pub fn timed_out_error(&self, op: EtcdOp) -> CoordinationError {
        self.timed_out(op);
        CoordinationError::TimedOut(op)
    }

    /// The failures of `op` counted so far.
    pub fn count(&self, op: EtcdOp) -> u64 {
        self.0.with_label_values(&[op.as_str()]).get()
    }
}

/// etcd-client's error in operators' words: a gRPC status as its code and message (tonic's own
/// text of a status carries Rust debug output: `source: Some(tonic::transport::Error(..))`),
/// anything else as etcd-client writes it.
pub(crate) fn describe(e: &etcd_client::Error) -> String {
    match e {
        etcd_client::Error::GRpcStatus(status) => {
            let code = status.code().description();
            match status.message() {
                "" => code.to_owned(),
                message => format!("{code}: {message}"),
            }
        }
        other => other.to_string(),
    }
}
