//! TCP probes: resolve the host, then connect to its addresses in order until one accepts;
//! and the connect that HTTP probes share.
//!
//! Every probe connection closes with a TCP RST (`SO_LINGER` 0), as HAProxy's health checks
//! do: a probe has read all it wants by then, and a FIN would leave a `TIME_WAIT` socket on the
//! prober for 60 s per probe (at 10,000 probes a second, more than the kernel's table holds:
//! `net.ipv4.tcp_max_tw_buckets`, 131,072 on a small host) and cost the FIN exchange.
//!
//! Must not: send or read any payload in a TCP check, or keep the connection (it is closed at
//! once).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::net::{TcpSocket, TcpStream};

use gslb_core::model::ProbeReason;

use super::classify::{classify, error_chain};
use super::dns::Dns;
use super::family;
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
    match connect_any(&ips, port, source).await {
        Ok(stream) => {
            drop(stream);
            ProbeReason::Ok
        }
        Err(e) => {
            let reason = family::refine(classify(&e), &ips, family::family_routable);
            tracing::debug!(host, port, %reason, error = %e, "probe failed");
            reason
        }
    }
}

/// Connects to `ips` at `port` in order until one accepts; the last error when none does
/// (`HostUnreachable`, reported as `other`, for an empty list, which the resolver never
/// returns). With a `source`, addresses of its family only, unless there are none (then the
/// bind's error says why). Addresses are tried one after another, each within what is left of
/// the probe's timeout (no Happy Eyeballs race: the resolver answers A records only when it
/// has them). The stream closes with a RST when dropped.
pub(crate) async fn connect_any(
    ips: &[IpAddr],
    port: u16,
    source: Option<IpAddr>,
) -> io::Result<TcpStream> {
    let same_family = |ip: &IpAddr| source.is_none_or(|s| s.is_ipv4() == ip.is_ipv4());
    let any_family = !ips.iter().any(same_family);
    let mut last = io::Error::from(io::ErrorKind::HostUnreachable);
    for &ip in ips.iter().filter(|ip| any_family || same_family(ip)) {
        match connect(SocketAddr::new(ip, port), source).await {
            Ok(stream) => return Ok(stream),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Connects to `addr`, from `source` when set (bound before connecting, port chosen by the
/// system), with `SO_LINGER` 0.
async fn connect(addr: SocketAddr, source: Option<IpAddr>) -> io::Result<TcpStream> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    if let Some(ip) = source {
        socket.bind(SocketAddr::new(ip, 0))?;
    }
    socket.set_zero_linger()?;
    socket.connect(addr).await
}
