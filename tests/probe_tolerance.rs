//! Healthy origins that curl and blackbox_exporter accept are healthy to gslb too (issue 28),
//! each against a real server on 127.0.0.1: an HTTPS body delimited by the connection's close
//! without TLS `close_notify`; a header folded over two lines (obsolete line folding, which
//! RFC 9112 §5.2 tells a user agent to accept); a response with 120 headers. And a self-signed
//! certificate as `openssl req -x509` makes it (CA:TRUE) is `tls_unknown_issuer`, like one
//! without the CA flag.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use gslb::io::probe::{DnsSettings, Prober};
use gslb_core::model::{EndpointId, ProbeOutcome, ProbeReason};
use gslb_core::policy::{Endpoint, EndpointKind, ProbeSpec};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use support::tls::{CERT_PEM, KEY_PEM, read_head, tls_origin_with};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use url::Url;

/// A self-signed certificate for `seoul.gslb-test.test` made by
/// `openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 36500
/// -subj /CN=seoul.gslb-test.test -addext subjectAltName=DNS:seoul.gslb-test.test`: openssl's
/// default configuration marks it `CA:TRUE`. A test fixture, not a secret.
const CA_TRUE_CERT_PEM: &str = "-----BEGIN CERTIFICATE-----
MIIBtjCCAVygAwIBAgIUYIJra1MdZy4Ouf/4IwTPGxB+jPMwCgYIKoZIzj0EAwIw
HzEdMBsGA1UEAwwUc2VvdWwuZ3NsYi10ZXN0LnRlc3QwIBcNMjYxMjA0MTU0ODUy
WhgPMjEyNjExMTAxNTQ4NTJaMB8xHTAbBgNVBAMMFHNlb3VsLmdzbGItdGVzdC50
ZXN0MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE5WlWhSXOwZHaRmWXAJ0Tr5qY
CnAPuBLcBk6pS1UqjgJUmJfVIxLoYkCvTO7jSyaVqOAe58LBp3TiVY9aLV97FKN0
MHIwHQYDVR0OBBYEFC3WdfLpyM1vt9+JaErzzxPs4+j/MB8GA1UdIwQYMBaAFC3W
dfLpyM1vt9+JaErzzxPs4+j/MA8GA1UdEwEB/wQFMAMBAf8wHwYDVR0RBBgwFoIU
c2VvdWwuZ3NsYi10ZXN0LnRlc3QwCgYIKoZIzj0EAwIDSAAwRQIgZYiV2sa/qe5B
8JHUZxCALot+Xe6ISz+EzHWZLKCVSAMCIQCEU6dxIqHyKPoF4xjClJ0PDWjwhY3m
mFky1gP/UTxL5g==
-----END CERTIFICATE-----
";

/// The key of [`CA_TRUE_CERT_PEM`].
const CA_TRUE_KEY_PEM: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg7W/gi77pxORwu4zV
7wgZnBlSe7ur+ppfwuKjWSgzXEShRANCAATlaVaFJc7BkdpGZZcAnROvmpgKcA+4
EtwGTqlLVSqOAlSYl9UjEuhiQK9M7uNLJpWo4B7nwsGndOJVj1otX3sU
-----END PRIVATE KEY-----
";

fn spec(body: Option<&str>, verify: bool) -> ProbeSpec {
    ProbeSpec {
        interval: Duration::from_secs(10),
        timeout: Duration::from_secs(3),
        expected_status: vec![200],
        body_contains: body.map(str::to_owned),
        host_header: None,
        tls_server_name: Some("seoul.gslb-test.test".into()),
        tls_verify: verify,
        follow_redirects: false,
    }
}

async fn probe(spec: &ProbeSpec, url: &str) -> ProbeOutcome {
    let prober = Prober::new(&DnsSettings::default()).expect("prober");
    let endpoint = Endpoint {
        id: EndpointId::from(url),
        kind: EndpointKind::Http(Url::parse(url).expect("url")),
    };
    let target = prober.target(spec, &endpoint).expect("target");
    prober.probe(&target).await
}

/// A plain HTTP server on 127.0.0.1 that answers every request with `response` and closes.
async fn raw_origin(response: String) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let response = response.clone();
            tokio::spawn(async move {
                read_head(&mut stream).await;
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn an_https_body_ended_by_a_close_without_close_notify_is_read() {
    let certs = CertificateDer::pem_slice_iter(CERT_PEM.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .expect("certs");
    let key = PrivateKeyDer::from_pem_slice(KEY_PEM.as_bytes()).expect("key");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .expect("config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(stream).await else {
                    return;
                };
                read_head(&mut tls).await;
                // No Content-Length, no chunking: the close ends the body.
                let _ = tls
                    .write_all(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nstatus UP\n")
                    .await;
                let _ = tls.flush().await;
                // Close the TCP connection without sending close_notify.
                let (tcp, _) = tls.into_inner();
                drop(tcp);
            });
        }
    });
    let out = probe(&spec(Some("UP"), false), &format!("https://{addr}/health")).await;
    assert_eq!(out.reason, ProbeReason::Ok, "{out:?}");
}

#[tokio::test]
async fn a_folded_header_and_120_headers_are_read() {
    let folded = raw_origin(
        "HTTP/1.1 200 OK\r\nX-Note: first part\r\n  second part\r\ncontent-length: 9\r\n\r\nstatus UP"
            .to_owned(),
    )
    .await;
    let out = probe(&spec(Some("UP"), true), &format!("http://{folded}/health")).await;
    assert_eq!(out.reason, ProbeReason::Ok, "folded: {out:?}");

    let many: String = (0..120).map(|i| format!("x-header-{i}: {i}\r\n")).collect();
    let crowded = raw_origin(format!(
        "HTTP/1.1 200 OK\r\n{many}content-length: 9\r\n\r\nstatus UP"
    ))
    .await;
    let out = probe(&spec(Some("UP"), true), &format!("http://{crowded}/health")).await;
    assert_eq!(out.reason, ProbeReason::Ok, "120 headers: {out:?}");
}

#[tokio::test]
async fn a_self_signed_ca_certificate_is_tls_unknown_issuer() {
    let t = tls_origin_with(CA_TRUE_CERT_PEM, CA_TRUE_KEY_PEM).await;
    let out = probe(&spec(None, true), &format!("https://{}/health", t.addr)).await;
    assert_eq!(out.reason, ProbeReason::TlsUnknownIssuer, "{out:?}");
    // Not verified, the same origin is healthy: the certificate itself works.
    let out = probe(&spec(None, false), &format!("https://{}/health", t.addr)).await;
    assert_eq!(out.reason, ProbeReason::Ok, "{out:?}");
}
