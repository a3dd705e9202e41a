//! TLS of the admin API (rustls with the aws-lc provider, the stack reqwest already uses):
//! a certificate chain and key from PEM files, read again when either file changes, and a
//! listener that completes handshakes off the accept loop.
//!
//! A changed pair that does not load (a half-written file, a key that does not match) is
//! logged and the previous certificate keeps serving; the next change is tried again.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use gslb_core::policy::file::read_text;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use super::connections::MAX_CONNECTIONS;

/// How often the certificate and key files are read to notice a change: 5 s (as policy files,
/// [`crate::daemon::reload::POLL_INTERVAL`]). A renewed certificate serves within that.
pub const RELOAD_INTERVAL: Duration = crate::daemon::reload::POLL_INTERVAL;

/// The largest certificate or key file read: 1 MiB (a chain of a few certificates is a few
/// KiB).
pub const MAX_PEM_FILE: u64 = 1 << 20;

/// Longest time a client gets to complete its handshake: 10 s; a client that stalls is
/// dropped without holding up the others.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The certificate or key cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("admin TLS: {}: {reason}", path.display())]
pub struct TlsError {
    /// The file at fault (the certificate's for a pair that does not match).
    pub path: PathBuf,
    /// Why.
    pub reason: String,
}

/// The certificate being served, and the files it comes from.
#[derive(Debug)]
pub struct CertStore {
    cert_file: PathBuf,
    key_file: PathBuf,
    current: RwLock<(Vec<u8>, Arc<CertifiedKey>)>,
}

impl CertStore {
    /// Loads `cert_file` (PEM chain, leaf first) and `key_file` (PEM PKCS#8, PKCS#1 or SEC1
    /// key).
    ///
    /// # Errors
    /// [`TlsError`] naming the file that is unreadable, holds no certificate or key, or (the
    /// certificate's) whose key does not match.
    pub fn load(cert_file: &Path, key_file: &Path) -> Result<Self, TlsError> {
        let (bytes, key) = read_pair(cert_file, key_file)?;
        Ok(Self {
            cert_file: cert_file.to_path_buf(),
            key_file: key_file.to_path_buf(),
            current: RwLock::new((bytes, key)),
        })
    }

    /// Reads the files again; swaps in the pair when it changed and loads. Returns whether it
    /// swapped.
    ///
    /// # Errors
    /// The changed pair does not load; the previous one keeps serving.
    pub fn reload(&self) -> Result<bool, TlsError> {
        let bytes = files_bytes(&self.cert_file, &self.key_file)?;
        if self.read().0 == bytes {
            return Ok(false);
        }
        let (bytes, key) = read_pair(&self.cert_file, &self.key_file)?;
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = (bytes, key);
        Ok(true)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, (Vec<u8>, Arc<CertifiedKey>)> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Reloads every [`RELOAD_INTERVAL`] until the task is dropped, logging what happens.
    pub async fn watch(self: Arc<Self>) {
        let mut every = tokio::time::interval(RELOAD_INTERVAL);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        every.tick().await;
        loop {
            every.tick().await;
            let this = self.clone();
            match tokio::task::spawn_blocking(move || this.reload()).await {
                Ok(Ok(true)) => tracing::info!(
                    cert = %self.cert_file.display(),
                    "admin TLS certificate reloaded"
                ),
                Ok(Ok(false)) => {}
                Ok(Err(e)) => tracing::error!(
                    error = %e,
                    "admin TLS certificate not reloaded; the previous one keeps serving"
                ),
                Err(e) => tracing::error!(error = %e, "admin TLS reload task failed"),
            }
        }
    }

    /// A TLS acceptor (TLS 1.2 and 1.3, HTTP/1.1 over ALPN) serving whatever this store
    /// holds at each handshake.
    ///
    /// # Errors
    /// The crypto provider refuses the protocol versions (it supports both).
    pub fn acceptor(self: &Arc<Self>) -> Result<TlsAcceptor, TlsError> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError {
                path: self.cert_file.clone(),
                reason: e.to_string(),
            })?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.read().1.clone())
    }
}

fn files_bytes(cert_file: &Path, key_file: &Path) -> Result<Vec<u8>, TlsError> {
    let (mut cert, key) = files(cert_file, key_file)?;
    cert.extend(key);
    Ok(cert)
}

/// The certificate file's and the key file's bytes, each a regular file of at most
/// [`MAX_PEM_FILE`] bytes.
fn files(cert_file: &Path, key_file: &Path) -> Result<(Vec<u8>, Vec<u8>), TlsError> {
    let read = |p: &Path| {
        read_text(p, MAX_PEM_FILE)
            .map(String::into_bytes)
            .map_err(|reason| TlsError {
                path: p.to_path_buf(),
                reason: format!("cannot read: {reason}"),
            })
    };
    Ok((read(cert_file)?, read(key_file)?))
}

fn read_pair(cert_file: &Path, key_file: &Path) -> Result<(Vec<u8>, Arc<CertifiedKey>), TlsError> {
    let (cert, key) = files(cert_file, key_file)?;
    let bad = |p: &Path, reason: String| TlsError {
        path: p.to_path_buf(),
        reason,
    };
    let chain = CertificateDer::pem_slice_iter(&cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(cert_file, e.to_string()))?;
    if chain.is_empty() {
        return Err(bad(cert_file, "holds no PEM certificate".into()));
    }
    let der = PrivateKeyDer::from_pem_slice(&key).map_err(|e| bad(key_file, e.to_string()))?;
    let provider = rustls::crypto::aws_lc_rs::default_provider();
    let certified = CertifiedKey::from_der(chain, der, &provider).map_err(|e| {
        let why = match e {
            rustls::Error::InconsistentKeys(_) => "its public key is not the key's".to_owned(),
            other => other.to_string(),
        };
        bad(cert_file, format!("does not go with the key: {why}"))
    })?;
    let mut bytes = cert;
    bytes.extend(key);
    Ok((bytes, Arc::new(certified)))
}

/// A listener whose connections are TLS: accepted and handshaken on tasks of their own, so a
/// slow or failing client holds up nobody; failed handshakes are logged at debug level. At most
/// [`MAX_CONNECTIONS`] connections are between accept and the server's loop at once, each for at
/// most [`HANDSHAKE_TIMEOUT`] of handshake.
#[derive(Debug)]
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    addr: SocketAddr,
    accepting: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    /// TLS over `listener` with `acceptor`.
    ///
    /// # Errors
    /// The listener's address cannot be read.
    pub fn new(listener: TcpListener, acceptor: TlsAcceptor) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let (tx, ready) = mpsc::channel(64);
        // At most this many handshakes (or handshaken connections waiting for the server's
        // loop) hold a descriptor at once; then the loop stops accepting.
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        let accepting = tokio::spawn(async move {
            loop {
                let Ok(slot) = slots.clone().acquire_owned().await else {
                    return;
                };
                let (tcp, peer) = match listener.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        // E.g. out of file descriptors: pause rather than spin (as hyper does).
                        tracing::warn!(error = %e, "admin API: accepting a connection failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, error = %e, "admin TLS handshake failed")
                        }
                        Err(_) => tracing::debug!(%peer, "admin TLS handshake timed out"),
                    }
                    drop(slot);
                });
            }
        });
        Ok(Self {
            ready,
            addr,
            accepting,
        })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(conn) => conn,
            // The accept task only ends with this listener.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.addr)
    }
}
