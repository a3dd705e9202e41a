//! Every probe reason, against real local servers on 127.0.0.1 that behave that way: the
//! library's [`Origin`] in its modes, a TLS origin with a self-signed certificate, and a tiny
//! authoritative DNS server. Plus the probe loop under paused tokio time.

mod support;

use std::net::{Ipv4Addr, SocketAddr, UdpSocket as StdUdpSocket};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use gslb::io::clock::Clock;
use gslb::io::origin::{Mode, Origin};
use gslb::io::probe::{DnsSettings, Prober, ProbingSettings, run_endpoint};
use gslb_core::model::{EndpointId, Millis, ProbeOutcome, ProbeReason, VantageId};
use gslb_core::policy::{Endpoint, EndpointKind, ProbeSpec};
use support::dns::FakeDns;
use support::tls::{
    CERT_NOT_AFTER, CERT_PEM, CHAIN_INTERMEDIATE_NOT_AFTER, CHAIN_KEY_PEM, CHAIN_LEAF_NOT_AFTER,
    CHAIN_PEM, EXPIRED_CERT_PEM, EXPIRED_KEY_PEM, EXPIRED_NOT_AFTER, FUTURE_CERT_PEM,
    FUTURE_KEY_PEM, Seen, read_head, tls_origin, tls_origin_with,
};
use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::mpsc;
use url::Url;

const LOOPBACK: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 0);

// ---------------------------------------------------------------------------------------------
// Helpers

fn spec() -> ProbeSpec {
    ProbeSpec {
        interval: Duration::from_secs(10),
        timeout: Duration::from_secs(3),
        expected_status: vec![200],
        body_contains: None,
        host_header: None,
        tls_server_name: None,
        tls_verify: true,
        follow_redirects: false,
    }
}

fn http(url: &str) -> Endpoint {
    Endpoint {
        id: EndpointId::from(url),
        kind: EndpointKind::Http(Url::parse(url).unwrap()),
    }
}

fn tcp(host: &str, port: u16) -> Endpoint {
    Endpoint {
        id: EndpointId(format!("tcp://{host}:{port}")),
        kind: EndpointKind::Tcp {
            host: host.to_owned(),
            port,
        },
    }
}

/// A UDP port on 127.0.0.1 that nothing listens on (bound, then released).
fn silent_udp_port() -> SocketAddr {
    StdUdpSocket::bind(LOOPBACK).unwrap().local_addr().unwrap()
}

/// A prober whose nameserver never answers: any name that needs a real query fails, so no test
/// can reach the machine's resolver.
fn prober() -> Prober {
    Prober::new(&DnsSettings {
        nameservers: vec![silent_udp_port()],
        timeout: Duration::from_millis(300),
        ..DnsSettings::default()
    })
    .unwrap()
}

async fn probe(prober: &Prober, spec: &ProbeSpec, endpoint: &Endpoint) -> ProbeOutcome {
    prober.probe(&prober.target(spec, endpoint).unwrap()).await
}

async fn origin() -> Origin {
    Origin::start(LOOPBACK, "seoul").await.unwrap()
}

fn assert_reason(outcome: &ProbeOutcome, reason: ProbeReason) {
    assert_eq!(outcome.reason, reason, "{outcome:?}");
    assert_eq!(outcome.success, reason == ProbeReason::Ok, "{outcome:?}");
}

// ---------------------------------------------------------------------------------------------
// The origin itself

#[tokio::test]
async fn origin_answers_with_region_body_and_header() {
    let o = origin().await;
    let response = reqwest::get(format!("{}/any/path", o.base_url()))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-served-by"], "seoul");
    assert!(response.text().await.unwrap().contains("ok region=seoul"));
    assert_eq!(o.requests(), 1);
}

// ---------------------------------------------------------------------------------------------
// HTTP reasons

#[tokio::test]
async fn healthy_origin_is_ok() {
    let o = origin().await;
    let spec = ProbeSpec {
        body_contains: Some("ok region=seoul".into()),
        ..spec()
    };
    let out = probe(&prober(), &spec, &http(&format!("{}/health", o.base_url()))).await;
    assert_reason(&out, ProbeReason::Ok);
    assert_eq!(out.http_status, Some(200));
}

#[tokio::test]
async fn localhost_is_resolved_without_a_nameserver() {
    let o = origin().await;
    let url = format!("http://localhost:{}/health", o.addr().port());
    let out = probe(&prober(), &spec(), &http(&url)).await;
    assert_reason(&out, ProbeReason::Ok);
    assert_eq!(o.requests(), 1);
}

#[tokio::test]
async fn status_503_is_http_status() {
    let o = origin().await;
    o.set_mode(Mode::Status(503));
    let out = probe(&prober(), &spec(), &http(&o.base_url())).await;
    assert_reason(&out, ProbeReason::HttpStatus);
    assert_eq!(out.http_status, Some(503));
    // Accepted when listed.
    let spec = ProbeSpec {
        expected_status: vec![200, 503],
        ..spec()
    };
    assert_reason(
        &probe(&prober(), &spec, &http(&o.base_url())).await,
        ProbeReason::Ok,
    );
}

#[tokio::test]
async fn redirect_not_followed_is_http_status_302() {
    let o = origin().await;
    o.set_mode(Mode::Redirect);
    let out = probe(
        &prober(),
        &spec(),
        &http(&format!("{}/health", o.base_url())),
    )
    .await;
    assert_reason(&out, ProbeReason::HttpStatus);
    assert_eq!(out.http_status, Some(302));
    assert_eq!(o.requests(), 1);
}

#[tokio::test]
async fn redirect_followed_is_ok() {
    let o = origin().await;
    o.set_mode(Mode::Redirect);
    let spec = ProbeSpec {
        follow_redirects: true,
        body_contains: Some("ok region=seoul".into()),
        ..spec()
    };
    let out = probe(&prober(), &spec, &http(&format!("{}/health", o.base_url()))).await;
    assert_reason(&out, ProbeReason::Ok);
    assert_eq!(out.http_status, Some(200));
    assert_eq!(o.requests(), 2, "the 302, then /elsewhere");
}

#[tokio::test]
async fn wrong_body_is_body_mismatch() {
    let o = origin().await;
    o.set_mode(Mode::WrongBody);
    let checked = ProbeSpec {
        body_contains: Some("ok region=seoul".into()),
        ..spec()
    };
    let out = probe(&prober(), &checked, &http(&o.base_url())).await;
    assert_reason(&out, ProbeReason::BodyMismatch);
    assert_eq!(out.http_status, Some(200));
    // Without a body check the same answer passes.
    assert_reason(
        &probe(&prober(), &spec(), &http(&o.base_url())).await,
        ProbeReason::Ok,
    );
}

#[tokio::test]
async fn hung_origin_is_timeout() {
    let o = origin().await;
    o.set_mode(Mode::Hang);
    let spec = ProbeSpec {
        timeout: Duration::from_millis(250),
        ..spec()
    };
    // Real time on a shared machine: allow this process 1 s of scheduling delay before its
    // timeout counts as seen late (`late`, the prober starved; see probe_scale.rs).
    let prober = Prober::with_limits(
        &DnsSettings {
            nameservers: vec![silent_udp_port()],
            ..DnsSettings::default()
        },
        &ProbingSettings {
            late_after: Duration::from_secs(1),
            ..ProbingSettings::default()
        },
    )
    .unwrap();
    let out = probe(&prober, &spec, &http(&o.base_url())).await;
    assert_reason(&out, ProbeReason::Timeout);
    assert_eq!(out.http_status, None);
    assert!(out.duration >= Duration::from_millis(250), "{out:?}");
    assert!(out.duration < Duration::from_secs(2), "{out:?}");
    assert_eq!(o.connections(), 1);
}

#[tokio::test]
async fn reset_origin_is_connection_reset() {
    let o = origin().await;
    o.set_mode(Mode::Reset);
    let out = probe(&prober(), &spec(), &http(&o.base_url())).await;
    assert_reason(&out, ProbeReason::ConnectionReset);
    assert_eq!(out.http_status, None);
    assert_eq!(o.connections(), 1);
}

#[tokio::test]
async fn closed_without_an_answer_is_connection_reset() {
    // Reads the request, then closes normally (FIN): hyper's "connection closed before message
    // completed".
    let listener = TcpListener::bind(LOOPBACK).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            read_head(&mut stream).await;
        }
    });
    let out = probe(&prober(), &spec(), &http(&format!("http://{addr}/"))).await;
    assert_reason(&out, ProbeReason::ConnectionReset);
}

#[tokio::test]
async fn stopped_origin_is_connection_refused_and_start_again_recovers() {
    let mut o = origin().await;
    let p = prober();
    let endpoint = http(&o.base_url());
    assert_reason(&probe(&p, &spec(), &endpoint).await, ProbeReason::Ok);
    o.stop().await;
    assert_reason(
        &probe(&p, &spec(), &endpoint).await,
        ProbeReason::ConnectionRefused,
    );
    o.start_again().await.unwrap();
    assert_reason(&probe(&p, &spec(), &endpoint).await, ProbeReason::Ok);
    assert_eq!(o.connections(), 2);
}

#[tokio::test]
async fn host_header_reaches_the_origin() {
    let o = origin().await;
    let p = prober();
    assert_reason(
        &probe(&p, &spec(), &http(&o.base_url())).await,
        ProbeReason::Ok,
    );
    assert_eq!(o.last_host(), Some(o.addr().to_string()));
    let spec = ProbeSpec {
        host_header: Some("api.example.com".into()),
        ..spec()
    };
    assert_reason(
        &probe(&p, &spec, &http(&o.base_url())).await,
        ProbeReason::Ok,
    );
    assert_eq!(o.last_host().as_deref(), Some("api.example.com"));
}

// ---------------------------------------------------------------------------------------------
// TLS

#[tokio::test]
async fn https_to_a_plain_http_port_is_tls() {
    let o = origin().await;
    let url = format!("https://{}/health", o.addr());
    let out = probe(&prober(), &spec(), &http(&url)).await;
    assert_reason(&out, ProbeReason::Tls);
    assert_eq!(out.http_status, None);
}

#[tokio::test]
async fn self_signed_certificate_is_tls_unknown_issuer_when_verified() {
    let t = tls_origin().await;
    let spec = ProbeSpec {
        tls_server_name: Some("seoul.gslb-test.test".into()),
        ..spec()
    };
    let out = probe(
        &prober(),
        &spec,
        &http(&format!("https://{}/health", t.addr)),
    )
    .await;
    assert_reason(&out, ProbeReason::TlsUnknownIssuer);
    assert!(t.seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn expired_and_not_yet_valid_certificates_are_named_and_an_expired_ones_expiry_is_reported() {
    let sni = ProbeSpec {
        tls_server_name: Some("seoul.gslb-test.test".into()),
        ..spec()
    };
    let p = prober();
    let expired = tls_origin_with(EXPIRED_CERT_PEM, EXPIRED_KEY_PEM).await;
    let url = format!("https://{}/health", expired.addr);
    let out = probe(&p, &sni, &http(&url)).await;
    assert_reason(&out, ProbeReason::TlsExpired);
    assert_eq!(out.cert_expiry, Some(Millis(EXPIRED_NOT_AFTER)), "{out:?}");
    let future = tls_origin_with(FUTURE_CERT_PEM, FUTURE_KEY_PEM).await;
    let url = format!("https://{}/health", future.addr);
    let out = probe(&p, &sni, &http(&url)).await;
    assert_reason(&out, ProbeReason::TlsNotYetValid);
    assert_eq!(out.cert_expiry, None);
}

/// Set by [`a_private_ca_is_trusted_through_ssl_cert_file`] for its child process.
const PRIVATE_CA_CHILD: &str = "GSLB_TEST_PRIVATE_CA_CHILD";

#[test]
fn a_private_ca_is_trusted_through_ssl_cert_file() {
    // The verifier reads its roots once per process, so the check runs in a child process (this
    // test binary, running only `private_ca_child`) with SSL_CERT_FILE naming the certificate.
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("private-ca.pem");
    std::fs::write(&ca, CERT_PEM).unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "private_ca_child", "--ignored", "--nocapture"])
        .env("SSL_CERT_FILE", &ca)
        .env_remove("SSL_CERT_DIR")
        .env(PRIVATE_CA_CHILD, "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("1 passed"), "{text}");
}

#[tokio::test]
#[ignore = "run by a_private_ca_is_trusted_through_ssl_cert_file with SSL_CERT_FILE set"]
async fn private_ca_child() {
    if std::env::var_os(PRIVATE_CA_CHILD).is_none() {
        return;
    }
    let t = tls_origin().await;
    let url = format!("https://{}/health", t.addr);
    let named = |name: &str| ProbeSpec {
        tls_server_name: Some(name.into()),
        ..spec()
    };
    let p = prober();
    let out = probe(&p, &named("seoul.gslb-test.test"), &http(&url)).await;
    assert_reason(&out, ProbeReason::Ok);
    assert_eq!(out.cert_expiry, Some(Millis(CERT_NOT_AFTER)));
    let out = probe(&p, &named("tokyo.gslb-test.test"), &http(&url)).await;
    assert_reason(&out, ProbeReason::TlsNameMismatch);
}

#[tokio::test]
async fn unverified_tls_passes_and_sends_the_sni_override_to_the_url_host() {
    let t = tls_origin().await;
    let p = prober();
    let url = format!("https://{}/health", t.addr);
    let unverified = ProbeSpec {
        tls_verify: false,
        body_contains: Some("ok region=tls".into()),
        ..spec()
    };
    assert_reason(&probe(&p, &unverified, &http(&url)).await, ProbeReason::Ok);
    let sni = ProbeSpec {
        tls_server_name: Some("seoul.gslb-test.test".into()),
        ..unverified
    };
    assert_reason(&probe(&p, &sni, &http(&url)).await, ProbeReason::Ok);
    let seen = t.seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            // An IP literal is never sent as SNI.
            Seen {
                sni: None,
                host: Some(t.addr.to_string())
            },
            // The override is the SNI; the connection and the Host header are the URL's.
            Seen {
                sni: Some("seoul.gslb-test.test".into()),
                host: Some(t.addr.to_string())
            },
        ]
    );
    assert_eq!(t.failed_handshakes.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn https_probes_report_the_certificate_expiry_even_with_an_unexpected_status() {
    let t = tls_origin().await;
    let p = prober();
    let url = format!("https://{}/health", t.addr);
    let unverified = ProbeSpec {
        tls_verify: false,
        ..spec()
    };
    let out = probe(&p, &unverified, &http(&url)).await;
    assert_reason(&out, ProbeReason::Ok);
    assert_eq!(out.cert_expiry, Some(Millis(CERT_NOT_AFTER)), "{out:?}");
    assert_eq!(out.dns_lookup, None, "an IP literal is not resolved");
    let wrong_status = ProbeSpec {
        expected_status: vec![204],
        ..unverified
    };
    let out = probe(&p, &wrong_status, &http(&url)).await;
    assert_reason(&out, ProbeReason::HttpStatus);
    assert_eq!(out.cert_expiry, Some(Millis(CERT_NOT_AFTER)), "{out:?}");
    // No response (the certificate is refused), or no TLS: no expiry.
    let refused = probe(&p, &spec(), &http(&url)).await;
    assert_reason(&refused, ProbeReason::TlsUnknownIssuer);
    assert_eq!(refused.cert_expiry, None);
    let o = origin().await;
    let plain = probe(&p, &spec(), &http(&o.base_url())).await;
    assert_reason(&plain, ProbeReason::Ok);
    assert_eq!(plain.cert_expiry, None);
}

#[tokio::test]
async fn the_reported_expiry_is_the_earliest_of_the_chain_presented() {
    let t = tls_origin_with(CHAIN_PEM, CHAIN_KEY_PEM).await;
    let unverified = ProbeSpec {
        tls_verify: false,
        ..spec()
    };
    let out = probe(
        &prober(),
        &unverified,
        &http(&format!("https://{}/health", t.addr)),
    )
    .await;
    assert_reason(&out, ProbeReason::Ok);
    const { assert!(CHAIN_INTERMEDIATE_NOT_AFTER < CHAIN_LEAF_NOT_AFTER) };
    assert_eq!(
        out.cert_expiry,
        Some(Millis(CHAIN_INTERMEDIATE_NOT_AFTER)),
        "the intermediate expires first: {out:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// DNS

/// The test zone's server: `A seoul.gslb-test.test` is 127.0.0.1; other names are NXDOMAIN.
async fn fake_dns() -> FakeDns {
    FakeDns::start("seoul.gslb-test.test", 60).await
}

#[tokio::test]
async fn names_resolve_through_the_configured_nameserver() {
    let dns = fake_dns().await;
    let p = Prober::new(&DnsSettings {
        nameservers: vec![dns.addr],
        timeout: Duration::from_secs(1),
        ..DnsSettings::default()
    })
    .unwrap();
    let o = origin().await;
    let port = o.addr().port();
    let out = probe(
        &p,
        &spec(),
        &http(&format!("http://seoul.gslb-test.test:{port}/")),
    )
    .await;
    assert_reason(&out, ProbeReason::Ok);
    assert_eq!(o.last_host(), Some(format!("seoul.gslb-test.test:{port}")));
    assert!(dns.a_queries() >= 1);
    let lookup = out.dns_lookup.expect("a name is resolved and timed");
    assert!(lookup <= out.duration, "{out:?}");
    assert_reason(
        &probe(&p, &spec(), &tcp("seoul.gslb-test.test", port)).await,
        ProbeReason::Ok,
    );

    let out = probe(
        &p,
        &spec(),
        &http(&format!("http://tokyo.gslb-test.test:{port}/")),
    )
    .await;
    assert_reason(&out, ProbeReason::DnsResolution);
    assert!(
        out.duration < Duration::from_millis(500),
        "NXDOMAIN is immediate: {out:?}"
    );
    assert_reason(
        &probe(&p, &spec(), &tcp("tokyo.gslb-test.test", port)).await,
        ProbeReason::DnsResolution,
    );
    assert_eq!(o.connections(), 2, "no connection without an address");
}

#[tokio::test]
async fn silent_nameserver_is_resolver_unavailable_within_the_lookup_limit() {
    // The prober's nameserver is up but never answers; its DNS timeout is 300 ms, the probe's
    // 3 s. Issue 12: our own resolver's silence is the prober's side, never the origin's.
    let silent = UdpSocket::bind(LOOPBACK).await.unwrap();
    let p = Prober::new(&DnsSettings {
        nameservers: vec![silent.local_addr().unwrap()],
        timeout: Duration::from_millis(300),
        ..DnsSettings::default()
    })
    .unwrap();
    let out = probe(&p, &spec(), &http("http://seoul.gslb-test.test/health")).await;
    assert_reason(&out, ProbeReason::ResolverUnavailable);
    assert!(out.duration >= Duration::from_millis(300), "{out:?}");
    assert!(out.duration < Duration::from_secs(2), "{out:?}");
    let lookup = out.dns_lookup.expect("the failed lookup is timed");
    assert!(lookup >= Duration::from_millis(300), "{out:?}");

    // A probe timeout shorter than the DNS timeout: the lookup gets half of it, and the
    // reason is still the resolver's, with the lookup time reported.
    let short = ProbeSpec {
        timeout: Duration::from_millis(100),
        ..spec()
    };
    let out = probe(&p, &short, &tcp("seoul.gslb-test.test", 80)).await;
    assert_reason(&out, ProbeReason::ResolverUnavailable);
    let lookup = out.dns_lookup.expect("the cut-off lookup is timed");
    assert!(lookup >= Duration::from_millis(50), "{out:?}");
    assert!(lookup <= out.duration, "{out:?}");
}

/// A resolver on `ip` that answers every query with `rcode` (2 SERVFAIL, 5 REFUSED), or never
/// answers when `rcode` is `None`.
async fn broken_resolver(ip: [u8; 4], rcode: Option<u8>) -> SocketAddr {
    let socket = UdpSocket::bind((Ipv4Addr::from(ip), 0)).await.unwrap();
    let addr = socket.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = [0u8; 1500];
        while let Ok((n, peer)) = socket.recv_from(&mut buf).await {
            let (Some(rcode), true) = (rcode, n >= 12) else {
                continue;
            };
            let mut r = buf[..n].to_vec();
            r[2] = 0x80 | (r[2] & 0x01); // QR, RD copied
            r[3] = 0x80 | rcode; // RA, the code
            r[6..12].fill(0); // no answer, authority or additional records
            let _ = socket.send_to(&r, peer).await;
        }
    });
    addr
}

#[tokio::test]
async fn servfail_and_refused_from_our_own_resolver_are_resolver_unavailable() {
    for (ip, rcode) in [([127, 0, 0, 70], 2), ([127, 0, 0, 71], 5)] {
        let p = Prober::new(&DnsSettings {
            nameservers: vec![broken_resolver(ip, Some(rcode)).await],
            timeout: Duration::from_secs(1),
            ..DnsSettings::default()
        })
        .unwrap();
        let out = probe(&p, &spec(), &http("http://seoul.gslb-test.test/health")).await;
        assert_reason(&out, ProbeReason::ResolverUnavailable);
        assert_reason(
            &probe(&p, &spec(), &tcp("seoul.gslb-test.test", 443)).await,
            ProbeReason::ResolverUnavailable,
        );
    }
}

#[tokio::test]
async fn a_dead_resolver_with_the_default_dns_timeout_and_a_short_probe_timeout_is_not_an_origin_timeout()
 {
    // Issue 12: `[dns] timeout` 2 s (the default), probe timeout 1 s. The lookup is limited to
    // half the probe's time, so the reason is the resolver's, not `timeout`.
    let p = Prober::new(&DnsSettings {
        nameservers: vec![broken_resolver([127, 0, 0, 72], None).await],
        ..DnsSettings::default()
    })
    .unwrap();
    let short = ProbeSpec {
        timeout: Duration::from_secs(1),
        ..spec()
    };
    let out = probe(&p, &short, &http("http://seoul.gslb-test.test/health")).await;
    assert_reason(&out, ProbeReason::ResolverUnavailable);
    assert!(out.duration < Duration::from_secs(1), "{out:?}");
    let out = probe(&p, &short, &tcp("seoul.gslb-test.test", 443)).await;
    assert_reason(&out, ProbeReason::ResolverUnavailable);
}

#[tokio::test]
async fn dead_local_nameserver_is_resolver_unavailable_and_nxdomain_is_not() {
    // Nothing listens on the nameserver's port: hickory (unconnected UDP sockets) only times
    // out, the refusal check after the timeout hears ICMP port unreachable. The prober's side.
    let p = prober();
    let out = probe(&p, &spec(), &http("http://seoul.gslb-test.test/health")).await;
    assert_reason(&out, ProbeReason::ResolverUnavailable);
    assert!(out.duration < Duration::from_secs(1), "{out:?}");
    assert_reason(
        &probe(&p, &spec(), &tcp("seoul.gslb-test.test", 443)).await,
        ProbeReason::ResolverUnavailable,
    );
    assert!(ProbeReason::ResolverUnavailable.is_prober_side());

    // A live nameserver's NXDOMAIN is the origin's side, through the same classifier.
    let dns = fake_dns().await;
    let live = Prober::new(&DnsSettings {
        nameservers: vec![dns.addr],
        timeout: Duration::from_secs(1),
        ..DnsSettings::default()
    })
    .unwrap();
    assert_reason(
        &probe(&live, &spec(), &http("http://tokyo.gslb-test.test/health")).await,
        ProbeReason::DnsResolution,
    );
    assert_reason(
        &probe(&live, &spec(), &tcp("tokyo.gslb-test.test", 443)).await,
        ProbeReason::DnsResolution,
    );
}

#[tokio::test]
async fn reserved_invalid_name_is_dns_resolution_at_once() {
    // RFC 6761 `.invalid`: the resolver answers NXDOMAIN without asking anyone.
    let out = probe(
        &prober(),
        &spec(),
        &http("http://seoul.gslb-test.invalid/health"),
    )
    .await;
    assert_reason(&out, ProbeReason::DnsResolution);
    assert!(out.duration < Duration::from_millis(200), "{out:?}");
}

// ---------------------------------------------------------------------------------------------
// TCP

#[tokio::test]
async fn tcp_connect_is_ok_then_refused_after_stop() {
    let mut o = origin().await;
    let p = prober();
    let port = o.addr().port();
    assert_reason(
        &probe(&p, &spec(), &tcp("127.0.0.1", port)).await,
        ProbeReason::Ok,
    );
    assert_reason(
        &probe(&p, &spec(), &tcp("localhost", port)).await,
        ProbeReason::Ok,
    );
    assert_eq!(o.connections(), 2);
    assert_eq!(o.requests(), 0);
    o.stop().await;
    let out = probe(&p, &spec(), &tcp("127.0.0.1", port)).await;
    assert_reason(&out, ProbeReason::ConnectionRefused);
    assert_eq!(out.http_status, None);
}

// ---------------------------------------------------------------------------------------------
// Targets and the wire

#[test]
fn invalid_settings_are_refused_when_the_target_is_prepared() {
    let p = prober();
    let a = http("https://seoul.example.test/health");
    let refused = |spec: ProbeSpec| match p.target(&spec, &a) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("{spec:?} must be refused"),
    };
    let header = refused(ProbeSpec {
        host_header: Some("bad\nheader".into()),
        ..spec()
    });
    assert!(header.contains("host_header"), "{header}");
    let sni = refused(ProbeSpec {
        tls_server_name: Some("10.0.0.1".into()),
        ..spec()
    });
    assert!(sni.contains("tls_server_name must be a DNS name"), "{sni}");
    assert!(p.target(&spec(), &a).is_ok());
}

/// A server on 127.0.0.1 that answers every connection with `answer` (after reading the
/// request head) and then closes; returns its address.
async fn raw_server(answer: &'static [u8]) -> SocketAddr {
    use tokio::io::AsyncWriteExt;
    let listener = TcpListener::bind(LOOPBACK).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                read_head(&mut stream).await;
                let _ = stream.write_all(answer).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn chunked_and_connection_delimited_bodies_are_searched() {
    let chunked = raw_server(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
          3\r\nok \r\nc;ext=1\r\nregion=seoul\r\n0\r\n\r\n",
    )
    .await;
    let until_close = raw_server(b"HTTP/1.0 200 OK\r\n\r\nok region=seoul\n").await;
    let truncated =
        raw_server(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nok region=seoul").await;
    let spec = ProbeSpec {
        body_contains: Some("ok region=seoul".into()),
        ..spec()
    };
    let p = prober();
    for addr in [chunked, until_close] {
        let out = probe(&p, &spec, &http(&format!("http://{addr}/health"))).await;
        assert_reason(&out, ProbeReason::Ok);
    }
    let other = ProbeSpec {
        body_contains: Some("region=tokyo".into()),
        ..spec.clone()
    };
    let out = probe(&p, &other, &http(&format!("http://{chunked}/health"))).await;
    assert_reason(&out, ProbeReason::BodyMismatch);
    // The server closed 85 bytes short of its Content-Length: the body never arrived whole.
    let out = probe(&p, &spec, &http(&format!("http://{truncated}/health"))).await;
    assert_reason(&out, ProbeReason::ConnectionReset);
    assert_eq!(out.http_status, Some(200));
}

#[tokio::test]
async fn a_malformed_answer_is_other() {
    let addr = raw_server(b"SSH-2.0-OpenSSH_9.6\r\n").await;
    let out = probe(&prober(), &spec(), &http(&format!("http://{addr}/"))).await;
    assert_reason(&out, ProbeReason::Other);
    assert_eq!(out.http_status, None);
}

#[tokio::test]
async fn a_redirect_to_another_host_and_port_is_followed_there() {
    let o = origin().await;
    let location = format!("Location: {}/elsewhere\r\n", o.base_url());
    let answer = format!("HTTP/1.1 301 Moved Permanently\r\n{location}Content-Length: 0\r\n\r\n");
    let first = raw_server(Box::leak(answer.into_bytes().into_boxed_slice())).await;
    let spec = ProbeSpec {
        follow_redirects: true,
        host_header: Some("api.example.test".into()),
        ..spec()
    };
    let out = probe(&prober(), &spec, &http(&format!("http://{first}/health"))).await;
    assert_reason(&out, ProbeReason::Ok);
    assert_eq!(o.requests(), 1);
    assert_eq!(
        o.last_host().as_deref(),
        Some(o.addr().to_string().as_str()),
        "after a redirect the Host header is the new URL's authority"
    );
}

#[tokio::test]
async fn a_redirect_on_the_same_host_keeps_the_host_header() {
    let o = origin().await;
    o.set_mode(Mode::Redirect);
    let spec = ProbeSpec {
        follow_redirects: true,
        host_header: Some("api.example.test".into()),
        ..spec()
    };
    let out = probe(&prober(), &spec, &http(&format!("{}/health", o.base_url()))).await;
    assert_reason(&out, ProbeReason::Ok);
    assert_eq!(o.requests(), 2, "the 302, then /elsewhere");
    assert_eq!(o.last_host().as_deref(), Some("api.example.test"));
}

#[tokio::test]
async fn a_redirect_that_cannot_be_followed_is_judged_by_its_status() {
    let p = prober();
    let spec = ProbeSpec {
        follow_redirects: true,
        ..spec()
    };
    for location in ["http://[::bad/x", "ftp://files.example.test/x"] {
        let answer =
            format!("HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n");
        let addr = raw_server(Box::leak(answer.into_bytes().into_boxed_slice())).await;
        let out = probe(&p, &spec, &http(&format!("http://{addr}/health"))).await;
        assert_reason(&out, ProbeReason::HttpStatus);
        assert_eq!(out.http_status, Some(302), "{location}");
    }
    // A redirect to a port nobody listens on: the outcome is the last request's, which got
    // no answer (not the 302 before it).
    let closed = TcpListener::bind(LOOPBACK)
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let answer =
        format!("HTTP/1.1 302 Found\r\nLocation: http://{closed}/\r\nContent-Length: 0\r\n\r\n");
    let addr = raw_server(Box::leak(answer.into_bytes().into_boxed_slice())).await;
    let out = probe(&p, &spec, &http(&format!("http://{addr}/health"))).await;
    assert_reason(&out, ProbeReason::ConnectionRefused);
    assert_eq!(out.http_status, None);
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn probes_close_with_a_reset_and_leave_no_time_wait_behind() {
    let o = origin().await;
    let p = prober();
    let endpoint = http(&format!("{}/health", o.base_url()));
    for _ in 0..5 {
        assert_reason(&probe(&p, &spec(), &endpoint).await, ProbeReason::Ok);
    }
    let tcp_check = tcp("127.0.0.1", o.addr().port());
    assert_reason(&probe(&p, &spec(), &tcp_check).await, ProbeReason::Ok);
    // /proc/net/tcp: `local rem st ...`, addresses as hex `IP:PORT`; state 06 is TIME_WAIT.
    let port = format!(":{:04X}", o.addr().port());
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let waiting: Vec<&str> = table
        .lines()
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[3] == "06" && (f[1].ends_with(&port) || f[2].ends_with(&port))
        })
        .collect();
    assert!(
        waiting.is_empty(),
        "TIME_WAIT sockets left by probes: {waiting:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// The loop, under paused time

#[tokio::test(start_paused = true)]
async fn loop_keeps_the_interval_and_uses_a_fresh_connection_per_probe() {
    let o = origin().await;
    let p = Arc::new(prober());
    let target = p.target(&spec(), &http(&o.base_url())).unwrap();
    let t0 = Millis(1_000_000);
    let (tx, mut rx) = mpsc::channel(4);
    let task = tokio::spawn(run_endpoint(
        p.clone(),
        target,
        VantageId::from("test"),
        Clock::anchored_at(t0),
        tx,
        |o| o,
    ));
    let mut at = Vec::new();
    for _ in 0..5 {
        let obs = rx.recv().await.unwrap();
        assert_reason(&obs.outcome, ProbeReason::Ok);
        assert_eq!(obs.vantage, VantageId::from("test"));
        assert_eq!(obs.endpoint, EndpointId::from(o.base_url().as_str()));
        at.push(obs.at);
    }
    assert!(
        at[0].since(t0) < Duration::from_secs(1),
        "first probe within the start phase: {at:?}"
    );
    assert!(
        at[1].since(at[0]) <= Duration::from_secs(10),
        "the second probe spreads the phase over one interval: {at:?}"
    );
    for pair in at[1..].windows(2) {
        let gap = pair[1].since(pair[0]);
        assert!(
            (Duration::from_millis(9_500)..=Duration::from_millis(10_500)).contains(&gap),
            "gap {gap:?} outside 10 s ± 5 %"
        );
    }
    assert_eq!(o.connections(), 5, "one new connection per probe");
    assert_eq!(o.requests(), 5);
    drop(rx);
    task.await.unwrap();
    assert_eq!(o.connections(), 5, "no probe after the receiver is gone");
}

#[tokio::test(start_paused = true)]
async fn loop_on_a_hung_origin_times_out_each_probe_without_overlap() {
    let o = origin().await;
    o.set_mode(Mode::Hang);
    let spec = ProbeSpec {
        interval: Duration::from_secs(1),
        timeout: Duration::from_millis(800),
        ..spec()
    };
    let p = Arc::new(prober());
    let target = p.target(&spec, &http(&o.base_url())).unwrap();
    let (tx, mut rx) = mpsc::channel(4);
    tokio::spawn(run_endpoint(
        p,
        target,
        VantageId::from("test"),
        Clock::system(),
        tx,
        |o| o,
    ));
    let mut at = Vec::new();
    for n in 1..=4 {
        let obs = rx.recv().await.unwrap();
        assert_reason(&obs.outcome, ProbeReason::Timeout);
        assert_eq!(obs.outcome.duration, Duration::from_millis(800));
        assert_eq!(o.connections(), n, "one probe in flight at a time");
        at.push(obs.at);
    }
    for pair in at.windows(2) {
        let gap = pair[1].since(pair[0]);
        assert!(
            (Duration::from_millis(950)..=Duration::from_millis(1_050)).contains(&gap),
            "{gap:?}"
        );
    }
}
