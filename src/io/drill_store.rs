//! Where drills are kept so that they outlive the process, written before a new drill takes
//! effect (an acknowledged drill is never one a restart forgets):
//! - alone, the state file ([`StateFile`]): every change of the active drills writes the whole
//!   set (atomically, on tokio's blocking pool);
//! - in a cluster, etcd, the only store ([`drills::store`] under this instance's name): a new
//!   drill is stored there first and refused while coordination is lost (the other instances
//!   would not see it); its end and expiry reach etcd through the level-based sharing
//!   ([`crate::daemon::shared_drills`]). The state file is neither read nor written.
//!
//! Must not: decide anything about a drill (the engine does).

use gslb_core::engine::{Override, Overrides};
use gslb_core::model::{Millis, VantageId};
use tokio::sync::watch;

use crate::io::coordination::{Clients, drills};
use crate::io::state_file::StateFile;

/// The drill store of one instance. `DrillStore::default()` keeps nothing (tests, the demo).
#[derive(Debug, Default)]
pub enum DrillStore {
    /// Nothing: drills live in memory only.
    #[default]
    Memory,
    /// The state file, alone.
    File(StateFile),
    /// etcd, in a cluster.
    Etcd(Box<Shared>),
}

/// [`DrillStore::Etcd`]: where and as whom.
#[derive(Debug)]
pub struct Shared {
    /// The etcd clients and key layout.
    pub clients: Clients,
    /// This instance's vantage point (the drills' keys are under its name).
    pub vantage: VantageId,
    /// Whether coordination holds (a new drill is refused while it does not).
    pub coordinated: watch::Receiver<bool>,
}

impl DrillStore {
    /// Stores new drill `added`, with `all` the active drills once it is in force, at `now`:
    /// before the step that starts it.
    ///
    /// # Errors
    /// Why it is not stored (also logged): the file cannot be written, coordination through
    /// etcd is lost, or etcd did not store it.
    pub async fn add(&self, added: &Override, all: &Overrides, now: Millis) -> Result<(), String> {
        match self {
            Self::Memory => Ok(()),
            Self::File(file) => save(file, all).await,
            Self::Etcd(shared) => {
                let Shared {
                    clients,
                    vantage,
                    coordinated,
                } = shared.as_ref();
                if !*coordinated.borrow() {
                    return Err(
                        "coordination through etcd is lost: drills are refused until it is back"
                            .into(),
                    );
                }
                drills::store(&clients.kv, &clients.keys, vantage, added, now)
                    .await
                    .map_err(|e| {
                        tracing::error!(error = %e, drill = %added.id, "etcd did not store the drill");
                        format!("etcd did not store it: {e}")
                    })
            }
        }
    }

    /// After a step changed the active drills `all` otherwise (ended, expired, loaded, a
    /// reload): the state file is written; etcd follows through the shared drills.
    ///
    /// # Errors
    /// The file cannot be written (also logged).
    pub async fn changed(&self, all: &Overrides) -> Result<(), String> {
        match self {
            Self::File(file) => save(file, all).await,
            Self::Memory | Self::Etcd(_) => Ok(()),
        }
    }
}

/// Writes `all` to `file`.
async fn save(file: &StateFile, all: &Overrides) -> Result<(), String> {
    let active: Vec<_> = all.all().cloned().collect();
    file.save_async(active).await.map_err(|e| {
        tracing::error!(error = %e, "cannot save the drill state file");
        e.to_string()
    })
}
