//! gslb: a multi-cloud GSLB health controller.
//!
//! Independent probers check each region's own endpoints; a pure engine decides priority
//! failover with rise/fall thresholds, vantage-point quorum, flap damping, velocity limits,
//! safety rails and drills, and fails static when the evidence is bad; provider adapters push
//! the decision with fenced, idempotent writes.
//!
//! ## Layout
//!
//! Dependencies point one way: `model` <- `policy` <- `engine`; `model` <- `probe`;
//! `engine` + `gslb-provider` <- `reconcile`, `engine_loop` <- `controller`; `main.rs` is the
//! only place that names concrete providers.
//!
//! - [`model`]: vocabulary (ids, observations, verdicts, time as [`model::Millis`]).
//! - [`policy`]: TOML policies -> validated [`policy::Policy`], every error at once.
//! - [`engine`]: PURE: evidence, quorum, damping, velocity, drills, rails and the decision.
//! - [`probe`]: HTTP/TCP probers and their loops (the I/O edge): schedule, in-flight bound,
//!   lateness stats, DNS cache per vantage point.
//! - [`engine_loop`]: the one task owning the engine; records inputs, publishes decisions.
//! - [`journal`]: the engine loop's recording, audit log and drill state file.
//! - [`reconcile`]: observe -> plan (the core's write planner, `gslb_core::planner`) ->
//!   report -> apply against a provider, one apply in flight.
//! - [`controller`]: wires the engine loop, and per service its probes and reconciler;
//!   [`reload`]: when the policy files changed (SIGHUP, polling) and the new validated set.
//! - [`status`], [`metrics`], [`events`], [`admin`]: what operators see; [`admin`] also takes
//!   drills and re-arms and hands them to the engine loop as [`control`] commands.
//! - [`drills`] (state file), [`audit`] (audit log), [`jsonl`] (the JSON-lines appender both
//!   the audit log and the observation recording use): drill I/O edges.
//! - [`drill_client`]: `gslb drill`, `gslb rearm` and `gslb events`, clients of the admin API;
//!   [`healthcheck`]: `gslb healthcheck`, one `GET /healthz` for a container `HEALTHCHECK`.
//! - [`timeline`]: failover timelines (first failed probe to first response from the new
//!   region), a pure recorder of [`events`], outside observers, the drill report.
//! - [`replay`]: the engine over a recorded observation log (`gslb replay`).
//! - [`plan`]: what `gslb run` would change now and why, without writing (`gslb plan`).
//! - [`config`]: daemon settings (`config` crate, `GSLB_*` env).
//! - [`notify`]: webhook sinks (JSON, Slack) for switches, holds and drills.
//! - [`origin`], [`demo`]: loopback origins and the embedded `gslb demo`.
//! - [`clock`]: wall time derived from tokio's clock, for the loops only.
//!
//! Besides the `gslb` binary, `src/bin/gslb-bench/` is the probe benchmark (issue 6: gslb
//! against blackbox_exporter, detection latency); see the README's "Probe benchmark".

pub mod cli;
pub mod config;
pub mod daemon;
pub mod io;
pub mod ops;
