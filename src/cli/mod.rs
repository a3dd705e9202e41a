//! The commands: `gslb run` ([`run`]: the controller with the admin API, webhooks, the
//! failover timeline and policy reload), `check`, `plan`, `replay`, `demo`, the drill, re-arm
//! and events clients of the admin API, and the container health check. The binary parses
//! the command line and calls these.
//!
//! Must not name a concrete provider: `gslb run` and `gslb plan` get theirs from the binary's
//! [`run::Bind`].

pub mod check;
pub mod demo;
pub mod drill;
pub mod healthcheck;
pub mod plan;
pub mod preflight;
pub mod replay;
pub mod run;

/// Whether `error` is, somewhere in its chain, a write to a reader that went away (a closed
/// pipe: `gslb plan | head`). The binary then exits quietly with 0, as `head`'s writer would.
pub fn closed_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
