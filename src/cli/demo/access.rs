//! `gslb demo --cluster`'s access control: etcd's auth set up as in production (one etcd user
//! per vantage point, named by its client certificate, each allowed to write only its own keys:
//! [`crate::io::coordination::access`]), then one instance's certificate used to forge another's
//! vote, which etcd refuses.

use std::time::Duration;

use gslb_core::model::VantageId;
use gslb_core::policy::Policy;

use super::etcd::Etcd;
use super::{DemoError, say};
use crate::io::coordination::access::{self, ROOT};
use crate::io::coordination::keys::VoteKey;
use crate::io::coordination::{Clients, Connect, ErrorCounter, Keys};

/// The key prefix of the demo cluster (the default).
pub const PREFIX: &str = "/gslb";

/// A client of `etcd` as `user`.
async fn connect(etcd: &Etcd, user: &str) -> Result<Clients, DemoError> {
    let tls = etcd.tls(user);
    let to = Connect {
        endpoints: etcd.endpoints(),
        tls: Some(&tls),
        lease_ttl: Duration::from_secs(10),
        prefix: PREFIX,
    };
    Clients::connect(to, ErrorCounter::detached())
        .await
        .map_err(|e| DemoError::Cluster(e.to_string()))
}

/// Sets up users and roles for `vantages` as `root` and turns auth on (what
/// `gslb etcd-auth` does).
///
/// # Errors
/// [`DemoError::Cluster`] when etcd refuses or does not answer.
pub async fn set_up(
    out: &mut impl std::io::Write,
    etcd: &Etcd,
    vantages: &[VantageId],
) -> Result<(), DemoError> {
    let root = connect(etcd, ROOT).await?;
    access::set_up(&root.kv, &root.keys, vantages)
        .await
        .map_err(|e| DemoError::Cluster(format!("setting up etcd's auth: {e}")))?;
    say(
        out,
        "etcd auth on (as `gslb etcd-auth` does): one user per vantage point, its client certificate's name; each may write only its own keys\n",
    );
    Ok(())
}

/// Puts an `unhealthy` vote of `victim` on the first endpoint of `policy`'s first pool with
/// `forger`'s certificate and shows etcd's refusal.
///
/// # Errors
/// [`DemoError::Cluster`] when etcd accepts the forged vote (auth is not on).
pub async fn forge(
    out: &mut impl std::io::Write,
    etcd: &Etcd,
    forger: &str,
    victim: &str,
    policy: &Policy,
) -> Result<(), DemoError> {
    let clients = connect(etcd, forger).await?;
    let Some(endpoint) = policy.pools.first().and_then(|p| p.endpoints.first()) else {
        return Err(DemoError::Cluster("the demo policy has no endpoint".into()));
    };
    let key = Keys::new(PREFIX).vote(&VoteKey {
        vantage: VantageId(victim.into()),
        service: policy.service.clone(),
        endpoint: endpoint.id.clone(),
    });
    match clients
        .kv
        .kv_client()
        .put(key.as_str(), "unhealthy", None)
        .await
    {
        Err(etcd_client::Error::GRpcStatus(s)) if s.code() == tonic::Code::PermissionDenied => {
            say(
                out,
                &format!(
                    "   {forger}'s certificate cannot forge a vote of {victim}: etcd says \"{}\"\n",
                    s.message()
                ),
            );
            Ok(())
        }
        Ok(_) => Err(DemoError::Cluster(format!(
            "etcd accepted {forger}'s forged vote under {key}: is its auth on?"
        ))),
        Err(e) => Err(DemoError::Cluster(format!(
            "etcd did not answer {forger}'s forged vote under {key}: {e}"
        ))),
    }
}
