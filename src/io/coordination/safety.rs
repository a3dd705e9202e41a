//! Each service's shared safety state in etcd: every vantage point puts the state as its
//! engine has it under its own key (`<prefix>/safety/<vantage>/<service>`, JSON of
//! [`SafetyState`], no lease: it outlives every instance) and reads everyone's, so a new
//! writer or a restarted cluster continues the velocity budget, damping, last switch and
//! failback hold. A key of its own per vantage point lets etcd's auth refuse a state put under
//! another's name ([`super::access`]); the engine merges them all.
//!
//! Must not: merge or judge the state (the engine merges it, [`SafetyState::merge`]).

use std::collections::BTreeSet;

use etcd_client::{Client, GetOptions};
use gslb_core::engine::SafetyState;
use gslb_core::model::{ServiceId, VantageId};

use super::keys::Keys;

/// Saved states, as one read found them.
#[derive(Debug, Default)]
pub struct Saved {
    /// Each saved state read, with the vantage point that saved it.
    pub states: Vec<(VantageId, ServiceId, SafetyState)>,
    /// The etcd revision of the read: the next read asks only for what changed after it.
    pub revision: i64,
}

/// Every vantage point's saved state of each of `services` put after revision `since` (`0`:
/// every one), in one read of `<prefix>/safety/` whatever the number of services (etcd's
/// `min_mod_revision`).
///
/// # Errors
/// etcd did not answer (the caller retries: a start without the saved state would refill the
/// budget). A value that is not a [`SafetyState`] is skipped with a warning.
pub async fn load(
    client: &Client,
    keys: &Keys,
    services: &BTreeSet<ServiceId>,
    since: i64,
) -> Result<Saved, etcd_client::Error> {
    let mut options = GetOptions::new().with_prefix();
    if since > 0 {
        options = options.with_min_mod_revision(since + 1);
    }
    let got = client
        .kv_client()
        .get(keys.safeties(), Some(options))
        .await?;
    let mut saved = Saved {
        states: Vec::new(),
        revision: got.header().map_or(since, |h| h.revision()),
    };
    for kv in got.kvs() {
        let Some((vantage, service)) = keys
            .parse_safety(kv.key())
            .filter(|(_, s)| services.contains(s))
        else {
            continue;
        };
        match serde_json::from_slice(kv.value()) {
            Ok(state) => saved.states.push((vantage, service, state)),
            Err(e) => {
                tracing::warn!(service = %service, vantage = %vantage, error = %e, "ignoring an unreadable saved safety state");
            }
        }
    }
    Ok(saved)
}

/// Puts `state` as `service`'s saved safety state under `vantage` (this instance's own name).
///
/// # Errors
/// etcd did not answer, or refused (another vantage point's name under auth).
pub async fn save(
    client: &Client,
    keys: &Keys,
    vantage: &VantageId,
    service: &ServiceId,
    state: &SafetyState,
) -> Result<(), etcd_client::Error> {
    let value = serde_json::to_vec(state).unwrap_or_default();
    client
        .kv_client()
        .put(keys.safety(vantage, service), value, None)
        .await
        .map(|_| ())
}
