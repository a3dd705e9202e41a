//! Commands from operators (admin API, CLI through the API) to the engine loop, each with a
//! reply channel. The engine loop is the only owner of the engine: commands are applied in
//! order with observations, recorded like them, and answered once applied.

use tokio::sync::{mpsc, oneshot};

use gslb_core::engine::{Override, OverrideError, OverrideId, OverrideRequest};
use gslb_core::model::ServiceId;

/// One operator command.
#[derive(Debug)]
pub enum Command {
    /// Start a drill override.
    AddOverride {
        /// The validated-by-the-engine request.
        request: OverrideRequest,
        /// The created override, or why it was refused.
        reply: oneshot::Sender<Result<Override, OverrideError>>,
    },
    /// End an override before its expiry.
    EndOverride {
        /// Which one.
        id: OverrideId,
        /// Who ends it.
        actor: String,
        /// Why.
        reason: String,
        /// The ended override, or [`OverrideError::NotFound`].
        reply: oneshot::Sender<Result<Override, OverrideError>>,
    },
    /// List the active overrides.
    ListOverrides {
        /// Every active override, by id.
        reply: oneshot::Sender<Vec<Override>>,
    },
    /// Refill the velocity budget of one service (or every service, and the controller-wide
    /// budget, when `None`) after a `velocity_limited` hold.
    Rearm {
        /// The service, or all.
        service: Option<ServiceId>,
        /// Who re-arms.
        actor: String,
        /// Why.
        reason: String,
        /// The services re-armed, or [`OverrideError::UnknownService`].
        reply: oneshot::Sender<Result<Vec<ServiceId>, OverrideError>>,
    },
}

/// The sending side, held by the admin API.
pub type CommandSender = mpsc::Sender<Command>;
