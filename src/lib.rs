//! gslb: a multi-cloud GSLB health controller.
//!
//! Independent probers check each region's own endpoints; a pure engine decides priority
//! failover with rise/fall thresholds, failback rules, minimum dwell and fail static; provider
//! adapters push the decision with fenced, idempotent writes.
//!
//! ## Layout
//!
//! Dependencies point one way: `model` <- `policy` <- `engine`; `model` <- `probe`;
//! `engine` + `gslb-provider` <- `reconcile` <- `service`/`controller`; `main.rs` is the only
//! place that names concrete providers.
//!
//! - [`model`]: vocabulary (ids, observations, verdicts, time as [`model::Millis`]).
//! - [`policy`]: TOML policies -> validated [`policy::Policy`], every error at once.
//! - [`engine`]: PURE rise/fall health and the failover decision.
//! - [`probe`]: HTTP/TCP probers and their loops (the I/O edge).
//! - [`service`]: one service's loop around its engine; publishes decisions.
//! - [`reconcile`]: observe -> diff -> apply against a provider, one apply in flight;
//!   [`guards`]: the fallback-pool refusal and write-fight detection it applies.
//! - [`controller`]: wires probes, service loop and reconciler for one policy.
//! - [`status`], [`metrics`], [`events`], [`admin`]: what operators see.
//! - [`config`]: daemon settings (`config` crate, `GSLB_*` env).
//! - [`origin`], [`demo`]: loopback origins and the embedded `gslb demo`.
//! - [`clock`]: wall time derived from tokio's clock, for the loops only.

pub mod admin;
pub mod clock;
pub mod config;
pub mod controller;
pub mod demo;
pub mod engine;
pub mod events;
pub mod guards;
pub mod metrics;
pub mod model;
pub mod origin;
pub mod policy;
pub mod probe;
pub mod reconcile;
pub mod service;
pub mod status;
