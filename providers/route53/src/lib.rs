//! Route 53 adapter for gslb: steers one failover pair (a PRIMARY and a SECONDARY record with
//! the same name and type) through gslb *verdict checks*.
//!
//! Each record carries a CALCULATED health check with no children and `HealthThreshold = 0`,
//! made by gslb (its `CallerReference` starts with `gslb-`). A pool's record is either an
//! Alias record (e.g. to an ALB) or a record with values. gslb disables a pool by setting
//! `Inverted = true` on that check, fenced by `HealthCheckVersion`; Route 53's globally
//! distributed data plane then answers with the other record. Records are written only by
//! [`Route53Provider::provision`], ahead of time and by compare-and-swap change batches, never
//! during a failover: the control plane (us-east-1) is not on the recovery path.
//!
//! This crate knows nothing of probes, policies or the engine; it implements
//! [`gslb_provider::Provider`] and is wired up by the `gslb` binary.
//!
//! # Layout
//! - `config`: [`Route53Binding`], [`Route53Pool`], [`Route53Settings`];
//! - `provider`: [`Route53Provider`], `observe` and `apply`;
//! - `provision`: [`Route53Provider::provision`], [`ProvisionOptions`], [`ProvisionReport`];
//!   `batch`: change batches and their JSON for a dry run;
//! - `ownership`: what gslb owns (health checks by `CallerReference` prefix, records by
//!   set identifier and owned check), for every kind of check gslb makes;
//! - `records`, `checks`: the pair's records and verdict checks;
//! - `dataplane`: [`Route53Provider::provision_data_plane`], the data-plane mode's vote and
//!   tally checks;
//! - `account`: [`Route53Account`], the client and the one rate limiter of an AWS account;
//! - `api`: rate limiter and retries around every SDK call; `classify`: SDK error →
//!   [`gslb_provider::ProviderError`];
//! - `testing` (feature `test-util`): SDK clients for local emulators.

mod account;
mod api;
mod batch;
mod checks;
mod classify;
mod config;
mod dataplane;
mod ownership;
mod provider;
mod provision;
mod records;
#[cfg(feature = "test-util")]
pub mod testing;

pub use account::Route53Account;
pub use aws_sdk_route53::Client;
pub use config::{Route53Alias, Route53Binding, Route53Pool, Route53Settings, default_region};
pub use dataplane::{DataPlaneBinding, DataPlaneReport, Side, TallyReport, VotePool, Voter};
pub use provider::Route53Provider;
pub use provision::{NEW_CHECK, PoolProvision, ProvisionAction, ProvisionOptions, ProvisionReport};
