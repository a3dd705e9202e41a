//! Cluster writer metrics, one label set per provider binding (`binding` = the service):
//! whether this instance writes it, fenced writes it refused, late writes of an older writer
//! it detected.

use super::Family;

pub(super) const CLUSTER_WRITER: Family = Family {
    name: "gslb_cluster_writer",
    help: "1 while this instance is the elected writer of the binding, 0 otherwise.",
    labels: &["binding"],
};
pub(super) const CLUSTER_FENCED_WRITE_REFUSALS_TOTAL: Family = Family {
    name: "gslb_cluster_fenced_write_refusals_total",
    help: "Provider writes this instance, as writer, did not start because the fence refused them, by reason (coordination_lost, takeover_delay, lease_stale, token_lost, intent_moved, etcd_unreachable).",
    labels: &["binding", "reason"],
};
pub(super) const CLUSTER_LATE_WRITES_TOTAL: Family = Family {
    name: "gslb_cluster_late_writes_total",
    help: "Writes of an older writer (smaller epoch) seen at the provider after this writer's own write; each is corrected.",
    labels: &["binding"],
};
