//! Metrics of coordination through etcd (`[cluster]`): whether this instance is coordinated,
//! which vantage points' votes count, how many fresh voters each pool has, and failed etcd
//! calls. Alone (no `[cluster]`) only `gslb_cluster_coordinated` is exported, at 1.

use gslb_core::engine::{ClusterView, Decision};
use gslb_core::model::Millis;

use super::{Family, Metrics};

/// The families exported only by an instance in a cluster (`[cluster]`): alone they are
/// declared but have no sample (`gslb_cluster_coordinated` is exported either way).
pub const CLUSTER_ONLY: [&str; 7] = [
    "gslb_cluster_vantage_fresh",
    "gslb_cluster_fresh_voters",
    "gslb_cluster_etcd_errors_total",
    "gslb_cluster_etcd_requests_total",
    "gslb_cluster_writer",
    "gslb_cluster_fenced_write_refusals_total",
    "gslb_cluster_late_writes_total",
];

pub(super) const CLUSTER_COORDINATED: Family = Family {
    name: "gslb_cluster_coordinated",
    help: "1 while this instance is coordinated (alone, or holding a live etcd lease with its watches running); 0 while it fails static.",
    labels: &[],
};
pub(super) const CLUSTER_VANTAGE_FRESH: Family = Family {
    name: "gslb_cluster_vantage_fresh",
    help: "1 while the vantage point's heartbeat is fresh on this instance's clock (its votes count), 0 while stale.",
    labels: &["vantage"],
};
pub(super) const CLUSTER_FRESH_VOTERS: Family = Family {
    name: "gslb_cluster_fresh_voters",
    help: "Vantage points whose votes on the pool count now (fresh, not suspect); the pool's verdict needs cluster.min_voters of them.",
    labels: &["service", "pool"],
};
pub(super) const CLUSTER_ETCD_ERRORS_TOTAL: Family = Family {
    name: "gslb_cluster_etcd_errors_total",
    help: "Failed etcd calls by operation (connect, lease_grant, lease_keepalive, lease_revoke, put, get, watch, txn, election).",
    labels: &["op"],
};
pub(super) const CLUSTER_ETCD_REQUESTS_TOTAL: Family = Family {
    name: "gslb_cluster_etcd_requests_total",
    help: "Requests sent to etcd by gRPC method (Range, Put, Txn, LeaseGrant, LeaseKeepAlive: each keepalive message, Watch and Campaign: each stream or call opened, ...).",
    labels: &["method"],
};

impl Metrics {
    /// Sets `gslb_cluster_coordinated` and `gslb_cluster_vantage_fresh{vantage}` from the
    /// engine's view of the cluster at `now`.
    pub fn record_cluster(&self, cluster: &ClusterView, now: Millis) {
        self.cluster_coordinated
            .set(f64::from(u8::from(cluster.coordinated())));
        for v in &cluster.vantages {
            let fresh = cluster.fresh(v, now);
            self.cluster_vantage_fresh
                .with_label_values(&[v.0.as_str()])
                .set(f64::from(u8::from(fresh)));
        }
    }

    /// Sets `gslb_cluster_fresh_voters{service,pool}` from a decision's pools: the vantage
    /// points whose votes counted.
    pub fn record_fresh_voters(&self, decision: &Decision) {
        for (pool, state) in &decision.pools {
            let counted = state.by_vantage.values().filter(|v| v.counted).count();
            self.cluster_fresh_voters
                .with_label_values(&[decision.service.0.as_str(), pool.0.as_str()])
                .set(counted as f64);
        }
    }
}
