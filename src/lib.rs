//! gslb: a multi-cloud GSLB health controller, the daemon around the pure core.
//!
//! Independent probers check each region's own endpoints; the pure engine of `gslb-core`
//! decides priority failover with rise/fall thresholds, vantage-point quorum, flap damping,
//! velocity limits, safety rails and drills, and fails static when the evidence is bad;
//! reconcilers push each decision with fenced, idempotent provider writes.
//!
//! ## Layout
//!
//! Dependencies point one way, bottom to top (`tests/layout.rs` checks it):
//!
//! - `gslb-core` (its own crate, PURE): model, policy, engine, write planner, events, timeline
//!   recorder. `gslb-provider`: the `Provider` contract.
//! - [`io`]: the I/O edges: probes, persistence (recording, audit log, drill state file, the
//!   JSON-lines appender), the loops' clock, signals, loopback origins.
//! - [`config`]: the daemon settings file (TOML, `GSLB_*` environment variables over it).
//! - [`ops`]: what the loops report to: the [`ops::telemetry::Telemetry`] handle (status
//!   board, metrics, event channel, clock), webhooks, the failover timeline task and its
//!   observers.
//! - [`daemon`]: the loops around the core: the engine loop and its inbox, one reconciler per
//!   provider binding, the controller that wires them per service, policy reload, and the
//!   [`daemon::builder`] that `gslb run`, `gslb demo`, the benchmark and the tests all start.
//! - [`admin`]: the admin HTTP API (status, metrics, events; drills and re-arms, handed to the
//!   engine loop's inbox).
//! - [`cli`]: the commands: `gslb run` ([`cli::run`], with the `Bind` trait through which the
//!   binary supplies providers), check, plan, replay, demo, drill/rearm/events, healthcheck.
//!
//! The `gslb` binary (`src/main.rs` and `src/adapters.rs`) is the only code that names the
//! concrete providers (`gslb-route53`, `gslb-cloudflare`). The product benchmark, which drives
//! this binary, is the workspace package `gslb-bench` (`bench/`); see `docs/benchmarks.md`.

pub mod admin;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod io;
pub mod ops;
