//! A throwaway certificate authority for etcd with client-certificate auth on loopback
//! (`gslb demo --cluster` and the cluster tests): a CA, one server certificate for the members'
//! addresses and one client certificate per etcd user, whose common name (CN) etcd takes as the
//! user's name (a vantage point's, or `root`). ECDSA P-256 keys (rcgen's default), valid from
//! now for rcgen's default period.
//!
//! Must not: stand in for a real PKI. Production certificates come from the operator's CA
//! (docs/cluster.md, "Access control").

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    SanType,
};

use crate::io::coordination::TlsFiles;

/// The files written by [`Pki::issue`] in one folder: `ca.pem`, `server.pem`, `server-key.pem`
/// and `<user>.pem`, `<user>-key.pem` per client.
#[derive(Debug, Clone)]
pub struct Pki {
    dir: PathBuf,
}

/// Why certificates could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// rcgen refused a parameter.
    #[error("cannot make a certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    /// A file could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl Pki {
    /// Makes a CA, a server certificate for `servers` (IP addresses) and a client certificate
    /// for each of `users` (CN = the user), and writes them to `dir` (created if missing).
    ///
    /// # Errors
    /// [`PkiError`]: a certificate cannot be made or a file written.
    pub fn issue(dir: &Path, servers: &[IpAddr], users: &[&str]) -> Result<Self, PkiError> {
        let pki = Self {
            dir: dir.to_owned(),
        };
        std::fs::create_dir_all(dir).map_err(|source| PkiError::Write {
            path: dir.to_owned(),
            source,
        })?;
        let ca_key = KeyPair::generate()?;
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "gslb throwaway etcd CA");
        pki.write("ca.pem", &ca.self_signed(&ca_key)?.pem())?;
        let issuer = Issuer::new(ca, ca_key);
        let mut server = CertificateParams::new(vec!["localhost".to_owned()])?;
        server
            .subject_alt_names
            .extend(servers.iter().map(|ip| SanType::IpAddress(*ip)));
        server.distinguished_name.push(DnType::CommonName, "etcd");
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        pki.leaf("server", &server, &issuer)?;
        for user in users {
            let mut client = CertificateParams::new(Vec::<String>::new())?;
            client.distinguished_name.push(DnType::CommonName, *user);
            client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
            pki.leaf(user, &client, &issuer)?;
        }
        Ok(pki)
    }

    /// The CA certificate (PEM).
    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// The certificate and key of `name` (`server`, or a user): `<name>.pem`, `<name>-key.pem`.
    pub fn pair(&self, name: &str) -> (PathBuf, PathBuf) {
        (
            self.dir.join(format!("{name}.pem")),
            self.dir.join(format!("{name}-key.pem")),
        )
    }

    /// `[cluster.tls]` of user `name`.
    pub fn client(&self, name: &str) -> TlsFiles {
        let (cert, key) = self.pair(name);
        TlsFiles {
            ca: self.ca(),
            cert,
            key,
        }
    }

    fn leaf(
        &self,
        name: &str,
        params: &CertificateParams,
        issuer: &Issuer<'_, KeyPair>,
    ) -> Result<(), PkiError> {
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, issuer)?;
        self.write(&format!("{name}.pem"), &cert.pem())?;
        self.write(&format!("{name}-key.pem"), &key.serialize_pem())
    }

    fn write(&self, file: &str, text: &str) -> Result<(), PkiError> {
        let path = self.dir.join(file);
        std::fs::write(&path, text).map_err(|source| PkiError::Write { path, source })
    }
}
