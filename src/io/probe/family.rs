//! "Unprobeable from here": an endpoint whose every address is of a family this host cannot
//! use at all (an IPv6 literal or an AAAA-only name on a host without IPv6, or the reverse).
//!
//! Asked only after a connection failed the way a missing local route fails (no route, no
//! source address, family not supported), never on the hot path: one UDP socket per family,
//! connected to a global address (a route lookup: no packet is sent), then closed.
//! Must not: send packets, or excuse a missing route to one prefix when the family has a
//! route (a withdrawn regional prefix is the origin's `network_unreachable`), or a host that
//! has no route for either family (that prober lost its network: the suspect rules catch it).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};

use gslb_core::model::ProbeReason;

/// The global address whose route is looked up for IPv4: Google Public DNS, `8.8.8.8:53`
/// (any global unicast address would do; nothing is sent to it).
const V4_PROBE: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(8, 8, 8, 8)), 53);

/// The same for IPv6: `[2001:4860:4860::8888]:53`.
const V6_PROBE: SocketAddr = SocketAddr::new(
    IpAddr::V6(Ipv6Addr::new(0x2001, 0x4860, 0x4860, 0, 0, 0, 0, 0x8888)),
    53,
);

/// Whether this host has a route to the Internet for IPv6 (`v6`) or IPv4: [`route_to`] a
/// global address of that family.
pub fn family_routable(v6: bool) -> bool {
    route_to(if v6 { V6_PROBE } else { V4_PROBE })
}

/// Whether this host has a route to `to`: a UDP socket of its family can be created and
/// connected to it (a route lookup; no packet is sent).
pub fn route_to(to: SocketAddr) -> bool {
    let local: SocketAddr = if to.is_ipv6() {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    };
    UdpSocket::bind(local).and_then(|s| s.connect(to)).is_ok()
}

/// `reason` for a connection to `addrs` that failed, or [`ProbeReason::Unprobeable`] when
/// `reason` is one a missing local route gives (`network_unreachable`, `local_resources`,
/// `other`), every address is of one family that `routable` says this host cannot use, and
/// the other family is usable. `routable` (see [`family_routable`]) is called only then.
pub fn refine(
    reason: ProbeReason,
    addrs: &[IpAddr],
    routable: impl Fn(bool) -> bool,
) -> ProbeReason {
    let local = matches!(
        reason,
        ProbeReason::NetworkUnreachable | ProbeReason::LocalResources | ProbeReason::Other
    );
    let Some(first) = addrs.first() else {
        return reason;
    };
    let v6 = first.is_ipv6();
    if local && addrs.iter().all(|a| a.is_ipv6() == v6) && !routable(v6) && routable(!v6) {
        ProbeReason::Unprobeable
    } else {
        reason
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V6_ONLY: [IpAddr; 1] = [IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1))];

    #[test]
    fn an_ipv6_only_endpoint_on_a_host_without_ipv6_is_unprobeable() {
        let no_v6 = |v6: bool| !v6;
        for reason in [
            ProbeReason::NetworkUnreachable,
            ProbeReason::LocalResources,
            ProbeReason::Other,
        ] {
            assert_eq!(refine(reason, &V6_ONLY, no_v6), ProbeReason::Unprobeable);
        }
        // The origin refusing, or timing out, is the origin's whatever the family.
        assert_eq!(
            refine(ProbeReason::Timeout, &V6_ONLY, no_v6),
            ProbeReason::Timeout
        );
        // An IPv4 address among them: the endpoint is probeable from here.
        let mixed = [V6_ONLY[0], IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1))];
        assert_eq!(
            refine(ProbeReason::NetworkUnreachable, &mixed, no_v6),
            ProbeReason::NetworkUnreachable
        );
    }

    #[test]
    fn a_family_with_a_route_or_a_host_with_none_keeps_the_reason() {
        let both = |_: bool| true;
        let neither = |_: bool| false;
        for routable in [&both as &dyn Fn(bool) -> bool, &neither] {
            assert_eq!(
                refine(ProbeReason::NetworkUnreachable, &V6_ONLY, routable),
                ProbeReason::NetworkUnreachable
            );
        }
        assert_eq!(
            refine(ProbeReason::NetworkUnreachable, &[], |_| false),
            ProbeReason::NetworkUnreachable
        );
    }
}
