//! The cluster's part of `/v1/status`: whether this instance is coordinated, and each
//! configured vantage point's freshness (its heartbeat's age on this instance's clock). Each
//! pool's votes per vantage point are in the pool's state (`by_vantage`).

use std::time::Duration;

use serde::Serialize;

use gslb_core::engine::ClusterView;
use gslb_core::model::{Millis, VantageId};

/// `cluster` of `/v1/status` (absent alone).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterStatus {
    /// This instance's vantage point.
    pub vantage: VantageId,
    /// Whether coordination holds; `false` means failing static (no change of the desired
    /// state, and no write).
    pub coordinated: bool,
    /// Fresh vantage-point votes a pool's verdict needs.
    pub min_voters: u32,
    /// Every configured vantage point but this one.
    pub peers: Vec<PeerStatus>,
}

/// One other vantage point, as this instance sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeerStatus {
    /// Its name.
    pub vantage: VantageId,
    /// Whether its votes count now (heartbeat fresh and coordinated).
    pub fresh: bool,
    /// Seconds since its last heartbeat was seen here; absent before the first.
    pub heartbeat_age_seconds: Option<f64>,
}

impl ClusterStatus {
    /// `vantage` joining a cluster: not coordinated yet, no peer heard from.
    pub fn joining(vantage: VantageId, min_voters: u32) -> Self {
        Self {
            vantage,
            coordinated: false,
            min_voters,
            peers: Vec::new(),
        }
    }

    /// Refreshes from the engine's view of `cluster` at `now`.
    pub fn refresh(&mut self, cluster: &ClusterView, now: Millis) {
        self.coordinated = cluster.coordinated();
        self.min_voters = cluster.min_voters;
        self.peers = cluster
            .vantages
            .iter()
            .filter(|v| **v != self.vantage)
            .map(|v| PeerStatus {
                vantage: v.clone(),
                fresh: cluster.fresh(v, now),
                heartbeat_age_seconds: cluster.age(v, now).map(|d: Duration| d.as_secs_f64()),
            })
            .collect();
    }
}
