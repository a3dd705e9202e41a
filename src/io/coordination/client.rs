//! The etcd connection: two clients over the same members, TLS (mutual) from
//! `[cluster.tls]`'s files. Each client sends to one member at a time and moves to the next
//! when that member fails ([`super::failover`]).
//!
//! etcd-client's per-request timeout also cancels a blocking `campaign` (an election call that
//! waits until this instance leads), so campaigns and the long-lived streams (watches, lease
//! keepalives, which time each message themselves) get their own client without it
//! ([`Clients::untimed`]); every other call goes through [`Clients::kv`], which has it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};
use serde::Deserialize;

use super::error::{CoordinationError, ErrorCounter, EtcdOp};
use super::failover::{Failover, Pin};
use super::keys::Keys;

/// `[cluster.tls]`: PEM files of etcd's client mTLS (relative to the settings file).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFiles {
    /// The CA certificate(s) the etcd members' server certificates are checked against.
    pub ca: PathBuf,
    /// This instance's client certificate (chain).
    pub cert: PathBuf,
    /// This instance's private key.
    pub key: PathBuf,
}

/// Where and how to connect: `[cluster]`'s `endpoints`, `tls`, `lease_ttl` and `prefix`.
#[derive(Debug, Clone, Copy)]
pub struct Connect<'a> {
    /// etcd client URLs.
    pub endpoints: &'a [String],
    /// Client mTLS files; none for plain `http://` endpoints.
    pub tls: Option<&'a TlsFiles>,
    /// This instance's lease TTL (sets the per-request timeout, see [`request_timeout`]).
    pub lease_ttl: Duration,
    /// The key prefix.
    pub prefix: &'a str,
}

/// The per-request timeout of normal calls for a lease of `ttl`: a third of it (a keepalive
/// must finish before the next one is due), at most 5 s.
pub fn request_timeout(ttl: Duration) -> Duration {
    (ttl / 3).min(Duration::from_secs(5))
}

/// Connections to etcd, the key layout and the error counter, cheap to clone (the clients
/// share their channels).
#[derive(Clone)]
pub struct Clients {
    /// Every call but campaigns: per-request timeout of [`request_timeout`].
    pub kv: Client,
    /// Campaigns, watches and keepalive streams: no per-request timeout (a campaign blocks
    /// until elected; a stream lives on). Callers bound each wait themselves.
    pub untimed: Client,
    /// The key layout under `[cluster] prefix`.
    pub keys: Keys,
    /// `gslb_cluster_etcd_errors_total{op}`.
    pub errors: ErrorCounter,
    /// The member both clients send to ([`super::failover`]).
    pin: Arc<Pin>,
    /// How many members `[cluster] endpoints` names.
    members: usize,
}

impl std::fmt::Debug for Clients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clients")
            .field("keys", &self.keys)
            .finish_non_exhaustive()
    }
}

impl Clients {
    /// Builds both clients for `to`. The channels connect lazily: a member that is down now is
    /// left for the next one on the first call that fails, so gslb starts (and fails static)
    /// without etcd.
    ///
    /// # Errors
    /// A TLS file cannot be read ([`CoordinationError::TlsFile`]), or the client refuses an
    /// endpoint ([`CoordinationError::Etcd`] with `connect`).
    pub async fn connect(to: Connect<'_>, errors: ErrorCounter) -> Result<Self, CoordinationError> {
        let timeout = request_timeout(to.lease_ttl);
        let mut options = ConnectOptions::new()
            .with_connect_timeout(timeout)
            .with_keep_alive(timeout, timeout)
            .with_keep_alive_while_idle(true)
            .with_require_leader(true);
        if let Some(tls) = to.tls {
            options = options.with_tls(tls_options(tls)?);
        }
        let pin = Arc::new(Pin::default());
        let connect = |options: ConnectOptions| {
            let errors = errors.clone();
            let failover = Failover {
                pin: Arc::clone(&pin),
                counter: errors.clone(),
            };
            async move {
                Client::connect_with_balanced_channel(to.endpoints, Some(options), failover)
                    .await
                    .map_err(|e| errors.failed(EtcdOp::Connect, e))
            }
        };
        let untimed = connect(options.clone()).await?;
        let kv = connect(options.with_timeout(timeout)).await?;
        Ok(Self {
            kv,
            untimed,
            keys: Keys::new(to.prefix),
            errors,
            pin,
            members: to.endpoints.len(),
        })
    }

    /// The member calls go to now (an index into `[cluster] endpoints`), to hand to
    /// [`Clients::suspect`] when a call started now is not answered in time.
    pub fn member(&self) -> usize {
        self.pin.member()
    }

    /// A call sent to `member` (read with [`Clients::member`] before the call) was not answered
    /// within its caller's own limit (a stream's message, a stream that would not open): both
    /// clients leave that member, as they do on a failure they see themselves.
    pub fn suspect(&self, member: usize) {
        if self.pin.leave(member, self.members) {
            tracing::debug!(
                member,
                "etcd member did not answer in time; the next member takes the requests"
            );
        }
    }
}

/// Reads the CA, certificate and key files of `[cluster.tls]`.
fn tls_options(tls: &TlsFiles) -> Result<TlsOptions, CoordinationError> {
    let read = |key: &'static str, path: &std::path::Path| {
        std::fs::read(path).map_err(|source| CoordinationError::TlsFile {
            key,
            path: path.to_owned(),
            source,
        })
    };
    let ca = read("ca", &tls.ca)?;
    let cert = read("cert", &tls.cert)?;
    let key = read("key", &tls.key)?;
    Ok(TlsOptions::new()
        .ca_certificate(Certificate::from_pem(ca))
        .identity(Identity::from_pem(cert, key)))
}
