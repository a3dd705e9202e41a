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
    /// A file given on the command line cannot be read.
    #[error("--{flag}: cannot read {}: {source}", path.display())]
    RootFile {
        /// `cert` or `key`.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The clients could not be built (the settings' CA file).
    #[error("{file}: {source}")]
    Connect {
        /// The settings file.
        file: String,
        /// Why.
        source: CoordinationError,
    },
    /// etcd refused or did not answer.
    #[error("etcd: {0}")]
    Etcd(String),
    /// etcd did not finish within [`DEADLINE`].
    #[error("etcd: no answer within {}s (are the endpoints etcd's client URLs?)", DEADLINE.as_secs())]
    Timeout,
    /// The report cannot be printed.
    #[error("cannot print: {0}")]
    Print(std::io::Error),
}

/// How long the whole set-up may take: 60 s (a few dozen calls; an endpoint that accepts
/// connections and never answers would otherwise hold it forever).
pub const DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);

/// Sets up auth for the cluster of settings file `config`, connecting with root's
/// certificate `cert` and key `key`, within [`DEADLINE`]; what it changed.
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
    for (flag, path) in [("cert", &cert), ("key", &key)] {
        if let Err(source) = std::fs::metadata(path) {
            let path = path.clone();
            return Err(EtcdAuthError::RootFile { flag, path, source });
        }
    }
    let root = TlsFiles {
        ca: tls.ca.clone(),
        cert,
        key,
    };
    let mut connect = cluster.connect();
    connect.tls = Some(&root);
    let clients = Clients::connect(connect, ErrorCounter::detached())
        .await
        .map_err(|source| EtcdAuthError::Connect { file, source })?;
    let set_up = access::set_up(&clients.kv, &clients.keys, &cluster.vantages);
    match tokio::time::timeout(DEADLINE, set_up).await {
        Ok(done) => done.map_err(|e| EtcdAuthError::Etcd(describe(&e))),
        Err(_) => Err(EtcdAuthError::Timeout),
    }
}

/// etcd's answer in words: a gRPC status's message and code (with a hint when the
/// certificate is not root's), and the innermost cause (e.g. "Connection refused").
fn describe(e: &etcd_client::Error) -> String {
    let text = match e {
        etcd_client::Error::GRpcStatus(s) if s.code() == tonic::Code::PermissionDenied => {
            return format!(
                "{}: connect as etcd's root user (--cert, --key: a client certificate with CN root)",
                s.message()
            );
        }
        etcd_client::Error::GRpcStatus(s) => {
            format!("{} ({})", s.message(), s.code().description())
        }
        other => other.to_string(),
    };
    let mut innermost = None;
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        innermost = Some(c.to_string());
        cause = c.source();
    }
    match innermost {
        Some(c) if !text.contains(&c) => format!("{text}: {c}"),
        _ => text,
    }
}

/// The lines `gslb etcd-auth` prints for `changes`.
fn report(changes: &Changes, out: &mut impl std::io::Write) -> std::io::Result<()> {
    for user in &changes.users {
        writeln!(out, "added user {user}")?;
    }
    for role in &changes.roles {
        writeln!(out, "added role {role}")?;
    }
    for role in &changes.removed {
        writeln!(
            out,
            "removed role {role} (its vantage point is no longer listed)"
        )?;
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
