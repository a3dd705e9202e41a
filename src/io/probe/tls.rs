//! TLS for HTTPS probes: the two client configurations a [`Prober`](super::Prober) shares
//! between all its targets (certificates verified, or not), and the handshake.
//!
//! Verified: the operating system's trust store through `rustls-platform-verifier` (on Linux
//! the system bundle, `SSL_CERT_FILE`/`SSL_CERT_DIR` honoured), the stack reqwest uses, so a
//! private CA is trusted the same way. Not verified (`tls_verify = false`): any certificate and
//! any handshake signature are accepted, as reqwest's `danger_accept_invalid_certs` does (an
//! old appliance's 1024-bit or SHA-1 key still passes; checking signatures of a certificate
//! nobody vouches for proves nothing). Both: the aws-lc provider, TLS 1.2 and 1.3, ALPN
//! `http/1.1`.
//!
//! Must not: resume sessions or send early data (each probe is a full handshake, as a new
//! client would make), or build a configuration per probe.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// The verified and the unverified client configuration, built once per prober.
#[derive(Debug, Clone)]
pub(crate) struct TlsConfigs {
    verified: Arc<ClientConfig>,
    unverified: Arc<ClientConfig>,
}

impl TlsConfigs {
    /// Builds both configurations (reads the system trust store: a few ms, once).
    ///
    /// # Errors
    /// The platform verifier cannot be built (no usable trust store).
    pub(crate) fn new() -> Result<Self, rustls::Error> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let platform = rustls_platform_verifier::Verifier::new(provider.clone())?;
        Ok(Self {
            verified: Arc::new(config(&provider, Arc::new(platform))?),
            unverified: Arc::new(config(&provider, Arc::new(AnyCertificate))?),
        })
    }

    /// The configuration for `tls_verify`.
    pub(crate) fn get(&self, verify: bool) -> &Arc<ClientConfig> {
        if verify {
            &self.verified
        } else {
            &self.unverified
        }
    }
}

fn config(
    provider: &Arc<CryptoProvider>,
    verifier: Arc<dyn ServerCertVerifier>,
) -> Result<ClientConfig, rustls::Error> {
    let mut config = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config.resumption = rustls::client::Resumption::disabled();
    Ok(config)
}

/// Runs the handshake for `name` on `tcp`. Errors are `io::Error`s wrapping the
/// `rustls::Error` (the classifier looks through them).
pub(crate) async fn handshake(
    config: &Arc<ClientConfig>,
    name: ServerName<'static>,
    tcp: TcpStream,
) -> std::io::Result<TlsStream<TcpStream>> {
    // Without it, the request written right after the client's Finished would wait for the
    // ACK of the Finished (Nagle), up to a delayed ACK's 40 ms.
    tcp.set_nodelay(true)?;
    TlsConnector::from(config.clone()).connect(name, tcp).await
}

/// The certificates the server presented, its leaf first (empty without any).
pub(crate) fn chain(tls: &TlsStream<TcpStream>) -> &[CertificateDer<'static>] {
    tls.get_ref().1.peer_certificates().unwrap_or_default()
}

/// `tls_verify = false`: every certificate and handshake signature is accepted.
#[derive(Debug)]
struct AnyCertificate;

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verify_tls12_signature(message, cert, dss)
    }

    /// Every scheme rustls knows, legacy ones included (the server picks).
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        use SignatureScheme as S;
        vec![
            S::RSA_PKCS1_SHA1,
            S::ECDSA_SHA1_Legacy,
            S::RSA_PKCS1_SHA256,
            S::ECDSA_NISTP256_SHA256,
            S::RSA_PKCS1_SHA384,
            S::ECDSA_NISTP384_SHA384,
            S::RSA_PKCS1_SHA512,
            S::ECDSA_NISTP521_SHA512,
            S::RSA_PSS_SHA256,
            S::RSA_PSS_SHA384,
            S::RSA_PSS_SHA512,
            S::ED25519,
            S::ED448,
        ]
    }
}
