//! etcd's access control for one gslb cluster: each vantage point is an etcd user of its own,
//! authenticated by its client certificate (etcd takes the certificate's common name, CN, as
//! the user name when `--client-cert-auth` is on), whose role lets it write only its own keys
//! ([`grants`]). A forged vote, heartbeat, safety state or drill under another vantage point's
//! name is then refused by etcd itself (`permission denied`), whoever holds a certificate of
//! the cluster. [`set_up`] makes the users and roles and turns auth on; `gslb etcd-auth` runs
//! it.
//!
//! What stays shared: every instance may read all of `<prefix>/`, campaign in every election
//! and write every recorded intent (any instance may become a binding's writer; the fence, not
//! the key's owner, orders the writes).
//!
//! Must not: run in the daemon. Setting up auth needs etcd's `root` user, which no instance
//! holds.

use etcd_client::{Client, Permission, RoleRevokePermissionOptions, UserAddOptions};
use gslb_core::model::VantageId;

use super::keys::Keys;

/// The etcd user that may change users and roles (etcd requires it, with the `root` role,
/// before auth can be turned on).
pub const ROOT: &str = "root";

/// One permission of a role: what it allows on which keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// Read only, or read and write.
    pub write: bool,
    /// The first key.
    pub key: String,
    /// The end of the range (exclusive); empty for the one key `key`.
    pub range_end: String,
}

impl Grant {
    fn prefix(write: bool, prefix: String) -> Self {
        let range_end = prefix_end(&prefix);
        Self {
            write,
            key: prefix,
            range_end,
        }
    }

    fn key(write: bool, key: String) -> Self {
        Self {
            write,
            key,
            range_end: String::new(),
        }
    }

    fn permission(&self) -> Permission {
        let p = if self.write {
            Permission::read_write(self.key.as_str())
        } else {
            Permission::read(self.key.as_str())
        };
        if self.range_end.is_empty() {
            p
        } else {
            p.with_range_end(self.range_end.as_str())
        }
    }
}

/// The end of the range of keys starting with `prefix` (its last byte + 1; every key layout
/// prefix ends in `/`, so no byte overflows).
fn prefix_end(prefix: &str) -> String {
    let mut end = prefix.as_bytes().to_vec();
    if let Some(last) = end.last_mut() {
        *last = last.saturating_add(1);
    }
    String::from_utf8(end).unwrap_or_default()
}

/// The role of `vantage` under `keys`' prefix: `gslb:<prefix>:<vantage>`.
pub fn role(keys: &Keys, vantage: &VantageId) -> String {
    format!("gslb:{}:{vantage}", keys.all().trim_end_matches('/'))
}

/// What `vantage`'s role allows: read every key under the prefix; write its own votes,
/// heartbeat, safety states and drill records; write the shared elections and intents.
pub fn grants(keys: &Keys, vantage: &VantageId) -> Vec<Grant> {
    vec![
        Grant::prefix(false, keys.all()),
        Grant::prefix(true, keys.votes_of(vantage)),
        Grant::key(true, keys.heartbeat(vantage)),
        Grant::prefix(true, keys.safeties_of(vantage)),
        Grant::prefix(true, keys.drills_of(vantage)),
        Grant::prefix(true, keys.elections()),
        Grant::prefix(true, keys.intents()),
    ]
}

/// What [`set_up`] changed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Changes {
    /// Users added (no password: certificate only).
    pub users: Vec<String>,
    /// Roles added.
    pub roles: Vec<String>,
    /// Roles of this prefix deleted because their vantage point is no longer listed (etcd
    /// takes them from their users: those users can no longer write any gslb key).
    pub removed: Vec<String>,
    /// Permissions revoked from an existing role because [`grants`] no longer lists them.
    pub revoked: usize,
}

/// Makes `root` and one user and role per vantage point of `vantages` under `keys`' prefix,
/// each role with exactly its [`grants`], deletes the roles of this prefix whose vantage point
/// is no longer listed, then turns etcd's auth on. Idempotent: a user or role that exists is
/// kept, its permissions set again. `client` must connect as `root` once auth is on (its
/// certificate's CN is `root`), as anyone before.
///
/// # Errors
/// etcd refused a call or did not answer; what was done before stays (running it again
/// finishes the job).
pub async fn set_up(
    client: &Client,
    keys: &Keys,
    vantages: &[VantageId],
) -> Result<Changes, etcd_client::Error> {
    let mut auth = client.auth_client();
    let mut changes = Changes::default();
    if add_user(client, ROOT).await? {
        changes.users.push(ROOT.to_owned());
    }
    auth.user_grant_role(ROOT, ROOT).await?;
    for vantage in vantages {
        set_role(client, keys, vantage, &mut changes).await?;
    }
    let ours = role(keys, &VantageId(String::new()));
    let listed: Vec<String> = vantages.iter().map(|v| role(keys, v)).collect();
    for name in auth.role_list().await?.roles() {
        if name.starts_with(&ours) && !listed.contains(name) {
            auth.role_delete(name.as_str()).await?;
            changes.removed.push(name.clone());
        }
    }
    auth.auth_enable().await?;
    Ok(changes)
}

/// Gives `vantage` its user and its role with exactly its [`grants`], noting what changed.
async fn set_role(
    client: &Client,
    keys: &Keys,
    vantage: &VantageId,
    changes: &mut Changes,
) -> Result<(), etcd_client::Error> {
    let mut auth = client.auth_client();
    let role = role(keys, vantage);
    let wanted = grants(keys, vantage);
    match auth.role_get(role.as_str()).await {
        Ok(got) => {
            for p in got.permissions() {
                let held = wanted.iter().any(|g| {
                    g.key.as_bytes() == p.key() && g.range_end.as_bytes() == p.range_end()
                });
                if !held {
                    let options = RoleRevokePermissionOptions::new().with_range_end(p.range_end());
                    auth.role_revoke_permission(role.as_str(), p.key(), Some(options))
                        .await?;
                    changes.revoked += 1;
                }
            }
        }
        Err(_) => {
            auth.role_add(role.as_str()).await?;
            changes.roles.push(role.clone());
        }
    }
    for grant in &wanted {
        auth.role_grant_permission(role.as_str(), grant.permission())
            .await?;
    }
    if add_user(client, &vantage.0).await? {
        changes.users.push(vantage.0.clone());
    }
    auth.user_grant_role(vantage.0.as_str(), role.as_str())
        .await?;
    Ok(())
}

/// Adds user `name` without a password unless it exists; whether it was added.
async fn add_user(client: &Client, name: &str) -> Result<bool, etcd_client::Error> {
    let mut auth = client.auth_client();
    if auth.user_get(name).await.is_ok() {
        return Ok(false);
    }
    let options = UserAddOptions::new().with_no_pwd();
    auth.user_add(name, "", Some(options)).await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vantage_point_writes_only_its_own_keys_and_the_shared_ones() {
        let keys = Keys::new("/gslb");
        let a = VantageId("a".into());
        let g = grants(&keys, &a);
        let writes: Vec<(&str, &str)> = g
            .iter()
            .filter(|g| g.write)
            .map(|g| (g.key.as_str(), g.range_end.as_str()))
            .collect();
        assert_eq!(
            writes,
            [
                ("/gslb/votes/a/", "/gslb/votes/a0"),
                ("/gslb/heartbeats/a", ""),
                ("/gslb/safety/a/", "/gslb/safety/a0"),
                ("/gslb/drills/a/", "/gslb/drills/a0"),
                ("/gslb/election/", "/gslb/election0"),
                ("/gslb/intent/", "/gslb/intent0"),
            ]
        );
        assert!(g.contains(&Grant::prefix(false, "/gslb/".into())));
        // `a`'s votes range holds its own votes, not `ab`'s.
        let inside =
            |k: &str| ("/gslb/votes/a/"..="/gslb/votes/a0").contains(&k) && k != "/gslb/votes/a0";
        assert!(inside("/gslb/votes/a/web/https://x/"));
        assert!(!inside("/gslb/votes/ab/web/https://x/"));
        assert_eq!(role(&keys, &a), "gslb:/gslb:a");
    }
}
