//! TCP probes: resolve the host, then connect to its addresses in order until one accepts.
//!
//! Must not: send or read any payload, or keep the connection (it is closed at once).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::net::TcpSocket;

use gslb_core::model::ProbeReason;

use super::classify::classify;
use super::dns::Dns;
use super::family;
use super::http::error_chain;
use super::trace::Trace;

/// What one TCP check connects to, and from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Target<'a> {
    /// A name or an IP literal, IPv6 with or without brackets.
    pub(crate) host: &'a str,
    pub(crate) port: u16,
    /// The local address to bind before connecting (`[probing] source_address`).
    pub(crate) source: Option<IpAddr>,
}

/// Runs one TCP connect check against `to`, timing the lookup of a name (limited to `lookup`)
/// in `trace`.
pub(crate) async fn check(
    dns: &Dns,
    to: Target<'_>,
    trace: &mut Trace,
    lookup: Duration,
) -> ProbeReason {
    let Target { host, port, source } = to;
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
        match connect(SocketAddr::new(ip, port), source).await {
            Ok(()) => return ProbeReason::Ok,
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

/// Connects to `addr`, from `source` when set (bound before connecting, port chosen by the
/// system).
async fn connect(addr: SocketAddr, source: Option<IpAddr>) -> std::io::Result<()> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    if let Some(ip) = source {
        socket.bind(SocketAddr::new(ip, 0))?;
    }
    drop(socket.connect(addr).await?);
    Ok(())
}
