//! An HTTPS origin on loopback with a fixed self-signed certificate (tokio-rustls): answers
//! every request `200 ok region=tls` and records the SNI and `Host` it saw.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Self-signed for `seoul.gslb-test.test` (P-256, valid 2026–2126), made with
/// `openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 36500
/// -subj /CN=seoul.gslb-test.test -addext subjectAltName=DNS:seoul.gslb-test.test
/// -addext basicConstraints=critical,CA:FALSE`.
/// Its `notAfter` is [`CERT_NOT_AFTER`].
pub const CERT_PEM: &str = "-----BEGIN CERTIFICATE-----
MIIBsjCCAVmgAwIBAgIUNYuuVKb9jUUR7XemJNJyh1UGzrIwCgYIKoZIzj0EAwIw
HzEdMBsGA1UEAwwUc2VvdWwuZ3NsYi10ZXN0LnRlc3QwIBcNMjYxMTI5MTUxMjQ1
WhgPMjEyNjExMDUxNTEyNDVaMB8xHTAbBgNVBAMMFHNlb3VsLmdzbGItdGVzdC50
ZXN0MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE7fEshyAMN2YXCxXUkM/Q5fyk
/X6ELNtCTfuhOkQ0d5J+6hEu9Wc28ZSVlnWLpsQcJM1sPu+B+Qn7N0GqTzVHaaNx
MG8wHQYDVR0OBBYEFGxarDR/DhLtXj2JxOPljbJR/OYBMB8GA1UdIwQYMBaAFGxa
rDR/DhLtXj2JxOPljbJR/OYBMB8GA1UdEQQYMBaCFHNlb3VsLmdzbGItdGVzdC50
ZXN0MAwGA1UdEwEB/wQCMAAwCgYIKoZIzj0EAwIDRwAwRAIgT2hqZGX4c/6U8yTo
jrJJh9NjQgMusLTPURjpxBWAG44CIBh+mY7yN9tSXkKZU50Kbwa/Ft1cy3S8mTzP
mp9j5jrr
-----END CERTIFICATE-----
";

/// `notAfter` of [`CERT_PEM`] in Unix milliseconds: 2126-11-05T15:12:45Z
/// (`openssl x509 -noout -enddate`).
pub const CERT_NOT_AFTER: u64 = 4_949_565_165_000;

/// The private key of [`CERT_PEM`].
pub const KEY_PEM: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgn/o2etlBTuY2XZnx
dwks/xwm4X7XMK9OAH5tHxYSBQOhRANCAATt8SyHIAw3ZhcLFdSQz9Dl/KT9foQs
20JN+6E6RDR3kn7qES71ZzbxlJWWdYumxBwkzWw+74H5Cfs3QapPNUdp
-----END PRIVATE KEY-----
";

/// Self-signed for `seoul.gslb-test.test` (P-256), valid 2020-01-01 to 2021-01-01: expired.
/// Made with Python `cryptography` (`CertificateBuilder`, SAN and `CA:FALSE` as [`CERT_PEM`]).
pub const EXPIRED_CERT_PEM: &str = "-----BEGIN CERTIFICATE-----
MIIBcTCCARegAwIBAgIUXyb+dfT1U7RAqL0HljGxLVSAdfgwCgYIKoZIzj0EAwIw
HzEdMBsGA1UEAwwUc2VvdWwuZ3NsYi10ZXN0LnRlc3QwHhcNMjAwMTAxMDAwMDAw
WhcNMjEwMTAxMDAwMDAwWjAfMR0wGwYDVQQDDBRzZW91bC5nc2xiLXRlc3QudGVz
dDBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABKM1Sr87eDjG8879Ko80V2YG/sys
prsNc+UvA4GgRrHfq6GaBtbipxfumn5XLbq5Io9eEtoTWYTfvVKELPqzcjqjMTAv
MB8GA1UdEQQYMBaCFHNlb3VsLmdzbGItdGVzdC50ZXN0MAwGA1UdEwEB/wQCMAAw
CgYIKoZIzj0EAwIDSAAwRQIgeSXPsoZi02UY7zpMCpr5RUiVCkJk/fw8o8GO83Cb
7T0CIQDUbzyr89nCrhqnU/DQq0Y4iAOY6MhhHQ6ISiQUGXfKRw==
-----END CERTIFICATE-----
";

/// The private key of [`EXPIRED_CERT_PEM`].
pub const EXPIRED_KEY_PEM: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgyuZcRtcL6vnLE8YL
4kfsz9By2MtXq4mHOBc+S1lK7dahRANCAASjNUq/O3g4xvPO/SqPNFdmBv7MrKa7
DXPlLwOBoEax36uhmgbW4qcX7pp+Vy26uSKPXhLaE1mE371ShCz6s3I6
-----END PRIVATE KEY-----
";

/// `notAfter` of [`EXPIRED_CERT_PEM`] in Unix milliseconds: 2021-01-01T00:00:00Z.
pub const EXPIRED_NOT_AFTER: u64 = 1_609_459_200_000;

/// Self-signed for `seoul.gslb-test.test` (P-256), valid 2120-01-01 to 2121-01-01: not valid
/// yet. Made like [`EXPIRED_CERT_PEM`].
pub const FUTURE_CERT_PEM: &str = "-----BEGIN CERTIFICATE-----
MIIBdDCCARugAwIBAgIUGr5tvpUUHAngdrTJIN7d2w6CBOQwCgYIKoZIzj0EAwIw
HzEdMBsGA1UEAwwUc2VvdWwuZ3NsYi10ZXN0LnRlc3QwIhgPMjEyMDAxMDEwMDAw
MDBaGA8yMTIxMDEwMTAwMDAwMFowHzEdMBsGA1UEAwwUc2VvdWwuZ3NsYi10ZXN0
LnRlc3QwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAAQLENzGyFAXJoOHaG6ftk+f
9Z4NoGi0YobE31GnirM4AEAI4Ln589l5LFDM+leQOIw9VG7mX9O86yo38TNb3WQd
ozEwLzAfBgNVHREEGDAWghRzZW91bC5nc2xiLXRlc3QudGVzdDAMBgNVHRMBAf8E
AjAAMAoGCCqGSM49BAMCA0cAMEQCIH6fTgi6BBNRzCTrYmE+BRryOAi189h/4hhN
LSruzFOhAiAbhCRz3jbWtwFeyuNhlJ0sy7kEWtcPuosbysZy+fE19g==
-----END CERTIFICATE-----
";

/// The private key of [`FUTURE_CERT_PEM`].
pub const FUTURE_KEY_PEM: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg9jm0PX24GrfraJWO
sav//VEYWWSzQxSFA/Xm98aiLWqhRANCAAQLENzGyFAXJoOHaG6ftk+f9Z4NoGi0
YobE31GnirM4AEAI4Ln589l5LFDM+leQOIw9VG7mX9O86yo38TNb3WQd
-----END PRIVATE KEY-----
";

/// A leaf for `tokyo.gslb-test.test` valid until 2126 ([`CHAIN_LEAF_NOT_AFTER`]), then the
/// intermediate that signed it, which expires first, in 2036 ([`CHAIN_INTERMEDIATE_NOT_AFTER`]).
/// Made with `openssl req -x509 ... -days 3650 -subj /CN=gslb-test-intermediate -addext
/// basicConstraints=critical,CA:TRUE` and `openssl x509 -req ... -CA <it> -days 36500`.
pub const CHAIN_PEM: &str = "-----BEGIN CERTIFICATE-----
MIIBtjCCAVugAwIBAgIUJL91Vc4rmq+lzTE8eQ7rfcBA9DIwCgYIKoZIzj0EAwIw
ITEfMB0GA1UEAwwWZ3NsYi10ZXN0LWludGVybWVkaWF0ZTAgFw0yNjEyMDIwNTQ0
MDhaGA8yMTI2MTEwODA1NDQwOFowHzEdMBsGA1UEAwwUdG9reW8uZ3NsYi10ZXN0
LnRlc3QwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAATTVov+d5vVqGcqHnh2akGv
R5IWQ2CupfB1yNbwDVK5eG4YrLh5T7EMwHbKLnQ5/eDmQZVPgviMTGbB0GmLHpfK
o3EwbzAfBgNVHREEGDAWghR0b2t5by5nc2xiLXRlc3QudGVzdDAMBgNVHRMBAf8E
AjAAMB0GA1UdDgQWBBRtvY9gTc+HNVlOJTw2kAaDkXh9zzAfBgNVHSMEGDAWgBTK
+W4ija3TYutM+MYRk55KwgToKjAKBggqhkjOPQQDAgNJADBGAiEA7SF8ir3KE0fQ
0fkl5NG3b5pQQSWbWDLDSlV8G9D9aPMCIQCloOh4IRxt+noyxVvd6MofMnqHwKM9
DqTC/dG86lJ70Q==
-----END CERTIFICATE-----
-----BEGIN CERTIFICATE-----
MIIBpzCCAU2gAwIBAgIUJFsp6+jG2OckBN2Gcqi/aLoUmKswCgYIKoZIzj0EAwIw
ITEfMB0GA1UEAwwWZ3NsYi10ZXN0LWludGVybWVkaWF0ZTAeFw0yNjEyMDIwNTQ0
MDhaFw0zNjExMjkwNTQ0MDhaMCExHzAdBgNVBAMMFmdzbGItdGVzdC1pbnRlcm1l
ZGlhdGUwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAATslivyK6Mp/+GI8mQVnht7
a2vyg2w/+vx7TY/aJFUevb37dpC1MRUcHu4/SgJ9H1spzWKiK5Ol5sNhGQMDDRz8
o2MwYTAdBgNVHQ4EFgQUyvluIo2t02LrTPjGEZOeSsIE6CowHwYDVR0jBBgwFoAU
yvluIo2t02LrTPjGEZOeSsIE6CowDwYDVR0TAQH/BAUwAwEB/zAOBgNVHQ8BAf8E
BAMCAgQwCgYIKoZIzj0EAwIDSAAwRQIhALiaGfHih+OdcIaQt/cogaQLbBSIzL1+
W6EjqkrosOn8AiACi6pcQSgc/REa9+i1D/fj2e1p1lURuo4YNF0ipTse/Q==
-----END CERTIFICATE-----
";

/// The key of [`CHAIN_PEM`]'s leaf.
pub const CHAIN_KEY_PEM: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQguW8NfyQweFW4lJ8I
nkR/gver7oqEyfboA8jqjin+Y1ahRANCAATTVov+d5vVqGcqHnh2akGvR5IWQ2Cu
pfB1yNbwDVK5eG4YrLh5T7EMwHbKLnQ5/eDmQZVPgviMTGbB0GmLHpfK
-----END PRIVATE KEY-----
";

/// `notAfter` of [`CHAIN_PEM`]'s leaf, Unix milliseconds.
pub const CHAIN_LEAF_NOT_AFTER: u64 = 4_949_790_248_000;

/// `notAfter` of [`CHAIN_PEM`]'s intermediate, Unix milliseconds: the earliest of the chain.
pub const CHAIN_INTERMEDIATE_NOT_AFTER: u64 = 2_111_550_248_000;

/// What the TLS origin saw of one request: the SNI and the `Host` header.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    /// The TLS server name the client sent.
    pub sni: Option<String>,
    /// The request's `Host` header.
    pub host: Option<String>,
}

/// A running HTTPS origin on 127.0.0.1.
pub struct TlsOrigin {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Every request it answered, in order.
    pub seen: Arc<Mutex<Vec<Seen>>>,
    /// Handshakes that failed (e.g. the client refused the certificate).
    pub failed_handshakes: Arc<AtomicUsize>,
}

/// An HTTPS origin with the self-signed certificate: answers `200 ok region=tls`.
pub async fn tls_origin() -> TlsOrigin {
    tls_origin_with(CERT_PEM, KEY_PEM).await
}

/// An HTTPS origin with this certificate and key (PEM): answers `200 ok region=tls`.
pub async fn tls_origin_with(cert_pem: &str, key_pem: &str) -> TlsOrigin {
    let certs = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let failed_handshakes = Arc::new(AtomicUsize::new(0));
    let (seen2, failed2) = (seen.clone(), failed_handshakes.clone());
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let (acceptor, seen, failed) = (acceptor.clone(), seen2.clone(), failed2.clone());
            tokio::spawn(async move {
                let mut tls = match acceptor.accept(stream).await {
                    Ok(tls) => tls,
                    Err(_) => {
                        failed.fetch_add(1, Ordering::SeqCst);
                        return;
                    }
                };
                let sni = tls.get_ref().1.server_name().map(str::to_owned);
                let head = read_head(&mut tls).await;
                let host = head
                    .lines()
                    .find_map(|l| {
                        l.strip_prefix("host: ")
                            .or_else(|| l.strip_prefix("Host: "))
                    })
                    .map(str::to_owned);
                seen.lock().unwrap().push(Seen { sni, host });
                let body = "ok region=tls\n";
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                tls.write_all(response.as_bytes()).await.unwrap();
                let _ = tls.shutdown().await;
            });
        }
    });
    TlsOrigin {
        addr,
        seen,
        failed_handshakes,
    }
}

/// Reads a request head (up to the blank line) from `stream`.
pub async fn read_head(stream: &mut (impl AsyncReadExt + Unpin)) -> String {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "client closed before the end of the request head");
        head.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&head).into_owned()
}
