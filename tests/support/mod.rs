//! Shared helpers for integration tests: an in-process controller, real emulators (and Route
//! 53 helpers), a counting proxy, a fake DNS server, a real authoritative DNS server with a
//! switchable A record, an HTTPS origin, a webhook receiver, and waiting on a condition with a
//! deadline. Each test binary uses a subset, hence the dead-code allowance.
#![allow(dead_code)]

pub mod authoritative;
pub mod cloudflare;
pub mod cluster;
pub mod controller;
pub mod daemon;
pub mod dns;
pub mod emulators;
pub mod etcd;
pub mod policy;
pub mod props;
pub mod proxy;
pub mod r53_model;
pub mod reconcile;
pub mod route53;
pub mod sim;
pub mod tls;
pub mod webhook;

use std::future::Future;
use std::time::{Duration, Instant};

/// Polls `check` every 25 ms until it returns `Some`, or `within` has passed (then `None`).
/// A condition with a deadline, never a fixed sleep.
pub async fn eventually<T, F, Fut>(within: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    let mut tick = tokio::time::interval(Duration::from_millis(25));
    loop {
        tick.tick().await;
        if let Some(v) = check().await {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
    }
}
