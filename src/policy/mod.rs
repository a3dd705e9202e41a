//! Policies: TOML as written -> validated [`Policy`].
mod types;
pub use types::*;
