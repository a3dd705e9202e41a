//! Metrics of Route 53 data-plane mode: how many instances give votes Route 53 can count, as
//! this instance reads their vote URLs. Exported only for services in that mode.

use super::{Family, Metrics};

/// The families exported only for a service in Route 53 data-plane mode: without one they
/// are declared but have no sample.
pub const DATA_PLANE_ONLY: [&str; 2] = ["gslb_dataplane_voters", "gslb_dataplane_instances"];

pub(super) const DATAPLANE_VOTERS: Family = Family {
    name: "gslb_dataplane_voters",
    help: "Instances whose vote URLs answered a vote (serve or drain) on every pool of the service at this instance's last read; Route 53 fails static only while one does.",
    labels: &["service"],
};
pub(super) const DATAPLANE_INSTANCES: Family = Family {
    name: "gslb_dataplane_instances",
    help: "Instances listed in [route53.data_plane] instances for the service: the voters there should be.",
    labels: &["service"],
};

impl Metrics {
    /// Sets `gslb_dataplane_voters{service}` and `gslb_dataplane_instances{service}`.
    pub fn record_voters(&self, service: &str, voters: usize, instances: usize) {
        self.dataplane_voters
            .with_label_values(&[service])
            .set(voters as f64);
        self.dataplane_instances
            .with_label_values(&[service])
            .set(instances as f64);
    }

    /// Removes `service`'s data-plane gauges (the service is gone).
    pub fn forget_voters(&self, service: &str) {
        self.dataplane_voters.remove_label_values(&[service]);
        self.dataplane_instances.remove_label_values(&[service]);
    }
}
