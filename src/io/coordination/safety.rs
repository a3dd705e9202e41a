//! Each service's shared safety state in etcd (`<prefix>/safety/<service>`, JSON of
//! [`SafetyState`], no lease: it outlives every instance), read at start and put when it
//! changes, so a new writer or a restarted cluster continues the velocity budget, damping,
//! last switch and failback hold.
//!
//! Must not: merge or judge the state (the engine merges it, [`SafetyState::merge`]).

use etcd_client::Client;
use gslb_core::engine::SafetyState;
use gslb_core::model::ServiceId;

use super::keys::Keys;

/// The saved state of each of `services` that has one.
///
/// # Errors
/// etcd did not answer (the caller retries: a start without the saved state would refill the
/// budget). A value that is not a [`SafetyState`] is skipped with a warning.
pub async fn load(
    client: &Client,
    keys: &Keys,
    services: &[ServiceId],
) -> Result<Vec<(ServiceId, SafetyState)>, etcd_client::Error> {
    let mut out = Vec::new();
    for s in services {
        let got = client.kv_client().get(keys.safety(s), None).await?;
        let Some(kv) = got.kvs().first() else {
            continue;
        };
        match serde_json::from_slice(kv.value()) {
            Ok(state) => out.push((s.clone(), state)),
            Err(e) => {
                tracing::warn!(service = %s, error = %e, "ignoring an unreadable saved safety state");
            }
        }
    }
    Ok(out)
}

/// Puts `state` as `service`'s saved safety state.
///
/// # Errors
/// etcd did not answer.
pub async fn save(
    client: &Client,
    keys: &Keys,
    service: &ServiceId,
    state: &SafetyState,
) -> Result<(), etcd_client::Error> {
    let value = serde_json::to_vec(state).unwrap_or_default();
    client
        .kv_client()
        .put(keys.safety(service), value, None)
        .await
        .map(|_| ())
}
