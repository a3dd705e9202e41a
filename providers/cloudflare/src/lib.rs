//! Cloudflare Load Balancing adapter for gslb: steers one zone-level load balancer whose
//! `default_pools` list account-level pools in failover order (`steering_policy: "off"`).
//!
//! A decision is pushed by PATCHing the load balancer's `default_pools` order (only that load
//! balancer changes, and Cloudflare keeps monitoring every pool as a second opinion); a drill
//! drain PATCHes one pool with only `{"enabled": false}`. Cloudflare has no ETag or If-Match,
//! so every write is read back: a read-back that does not show the write is reported as
//! [`gslb_provider::ProviderError::Conflict`] (another writer got there first).
//!
//! gslb touches only the objects a binding names, and only when their `description` carries
//! [`MANAGED_TAG`]; anything else is refused as [`gslb_provider::ProviderError::Unowned`].
//!
//! This crate knows nothing of probes, policies or the engine; it implements
//! [`gslb_provider::Provider`] and is wired up by the `gslb` binary. It calls the REST API with
//! `reqwest` directly: the `cloudflare` crate 0.14.0 has no pool or load balancer PATCH, fails
//! to parse real responses and drops `Retry-After` (see `docs/dependencies.md`).
//!
//! # Layout
//! - `config`: [`CloudflareBinding`], [`CloudflareSettings`], [`ApiToken`];
//! - `models`: tolerant models of pools and load balancers (unknown fields and enum values
//!   kept), the response envelope;
//! - `client`: rate limiter, `Retry-After` block, retries and the envelope around every call;
//!   `classify`: HTTP status and Cloudflare error codes → [`gslb_provider::ProviderError`];
//! - `account`: [`CloudflareAccount`], the client, rate limiter and shared reads of every
//!   binding on one token; `mirror`: what those reads keep of each listed item;
//! - `provider`: [`CloudflareProvider`], `observe` and `apply` with read-back;
//! - [`epoch`]: a cluster writer's epoch stamped in the load balancer's `description`;
//! - `fake` (feature `test-util`): a stateful fake of the API on 127.0.0.1.

mod account;
mod classify;
mod client;
mod config;
pub mod epoch;
#[cfg(feature = "test-util")]
pub mod fake;
mod mirror;
mod models;
mod provider;

pub use account::CloudflareAccount;
pub use config::{
    ApiToken, CloudflareBinding, CloudflarePool, CloudflareSettings, DEFAULT_API_BASE,
    DEFAULT_REQUESTS_PER_WINDOW, LoadBalancerRef, MANAGED_TAG, RATE_LIMIT_WINDOW, TokenError,
};
pub use models::{LoadBalancer, Origin, Pool, SteeringPolicy};
pub use provider::CloudflareProvider;
