//! TCP probes: resolve the host, then connect to its addresses in order until one accepts.
//!
//! Must not: send or read any payload, or keep the connection (it is closed at once).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::net::TcpStream;

use gslb_core::model::ProbeReason;

use super::classify::classify;
use super::dns::Dns;
use super::family;
use super::http::error_chain;
use super::trace::Trace;

/// Runs one TCP connect check against `host:port` (`host` a name or an IP literal, IPv6 with or
/// without brackets), timing the lookup of a name (limited to `lookup`) in `trace`.
pub(crate) async fn check(
    dns: &Dns,
    host: &str,
    port: u16,
    trace: &mut Trace,
    lookup: Duration,
) -> ProbeReason {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let ips = match bare.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => match trace.lookup(dns, bare, lookup).await {
            Ok(ips) => ips,
            Err(e) => {
                // The resolver failing is the prober's side, an answer without records the
                // origin's: `classify` tells them apart.
                let reason = classify(&e);
                tracing::debug!(host, port, %reason, error = %error_chain(&e), "probe failed");
                return reason;
            }
        },
    };
    let mut last = None;
    for &ip in &ips {
        match TcpStream::connect(SocketAddr::new(ip, port)).await {
            Ok(stream) => {
                drop(stream);
                return ProbeReason::Ok;
            }
            Err(e) => last = Some(e),
        }
    }
    match last {
        Some(e) => {
            let reason = family::refine(classify(&e), &ips, family::family_routable);
            tracing::debug!(host, port, %reason, error = %e, "probe failed");
            reason
        }
        // The resolver never returns an empty success, but be explicit.
        None => ProbeReason::DnsResolution,
    }
}
