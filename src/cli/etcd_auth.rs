//! `gslb etcd-auth`: sets up etcd's access control for the cluster of a settings file, once,
//! as etcd's `root` user: one user and role per vantage point of `[cluster] vantages`, each
//! allowed to write only its own keys ([`crate::io::coordination::access`]), then turns auth
//! on. Run again after adding a vantage point; it is idempotent.
//!
//! The settings give the endpoints, the CA (`[cluster.tls] ca`) and the prefix; `--cert` and
//! `--key` give root's client certificate (CN `root`), which no instance holds.

use std::path::{Path, PathBuf};

use crate::config::{Settings, SettingsError};
use crate::io::coordination::access::{self, Changes};
use crate::io::coordination::{Clients, CoordinationError, ErrorCounter, TlsFiles};

/// `gslb etcd-auth` options.
#[derive(Debug, Clone, clap::Args)]
pub struct EtcdAuthArgs {
    /// Daemon settings file (TOML) with [cluster] and [cluster.tls].
    #[arg(long, short, env = "GSLB_CONFIG")]
    pub config: PathBuf,
    /// Root's client certificate (PEM, CN root).
    #[arg(long)]
    pub cert: PathBuf,
    /// Root's private key (PEM).
    #[arg(long)]
    pub key: PathBuf,
}

/// Runs `gslb etcd-auth` and prints what it changed to `out`.
///
/// # Errors
/// As [`run`], or `out` cannot be written.
pub async fn command(
    args: EtcdAuthArgs,
    out: &mut impl std::io::Write,
) -> Result<(), EtcdAuthError> {
    let changes = run(&args.config, args.cert, args.key).await?;
    report(&changes, out).map_err(EtcdAuthError::Print)
}

/// Why the set-up failed.
#[derive(Debug, thiserror::Error)]
pub enum EtcdAuthError {
    /// The settings cannot be loaded.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// The settings have no `[cluster]`, or no `[cluster.tls]` (auth needs client certificates).
    #[error("{file}: {what}")]
    NotACluster {
        /// The settings file.
        file: String,
        /// What is missing.
        what: &'static str,
    },
    /// The clients could not be built (a certificate file).
    #[error(transparent)]
    Connect(#[from] CoordinationError),
    /// etcd refused or did not answer.
    #[error("etcd: {0}")]
    Etcd(#[from] etcd_client::Error),
    /// The report cannot be printed.
    #[error("cannot print: {0}")]
    Print(std::io::Error),
}

/// Sets up auth for the cluster of settings file `config`, connecting with root's
/// certificate `cert` and key `key`; what it changed.
///
/// # Errors
/// [`EtcdAuthError`], with the file, key or etcd's reason.
pub async fn run(config: &Path, cert: PathBuf, key: PathBuf) -> Result<Changes, EtcdAuthError> {
    let settings = Settings::load(config)?;
    let file = config.display().to_string();
    let Some(cluster) = settings.cluster else {
        return Err(EtcdAuthError::NotACluster {
            file,
            what: "no [cluster] table: nothing to set up",
        });
    };
    let Some(tls) = &cluster.tls else {
        return Err(EtcdAuthError::NotACluster {
            file,
            what: "cluster.tls: etcd's auth needs client certificates ([cluster.tls] ca, cert, key)",
        });
    };
    let root = TlsFiles {
        ca: tls.ca.clone(),
        cert,
        key,
    };
    let mut connect = cluster.connect();
    connect.tls = Some(&root);
    let clients = Clients::connect(connect, ErrorCounter::detached()).await?;
    Ok(access::set_up(&clients.kv, &clients.keys, &cluster.vantages).await?)
}

/// The lines `gslb etcd-auth` prints for `changes`.
fn report(changes: &Changes, out: &mut impl std::io::Write) -> std::io::Result<()> {
    for user in &changes.users {
        writeln!(out, "added user {user}")?;
    }
    for role in &changes.roles {
        writeln!(out, "added role {role}")?;
    }
    if changes.revoked > 0 {
        writeln!(
            out,
            "revoked {} permission(s) no longer granted",
            changes.revoked
        )?;
    }
    writeln!(
        out,
        "etcd auth is on: each vantage point may write only its own keys"
    )
}
