//! Every binding's election, read in one call: a task reads the whole `<prefix>/election/` range
//! every `poll` and publishes who leads each election and which leader keys exist, for every
//! seat of this instance ([`super::election`]: a follower shows the writer from it, a writer
//! checks its own key in it). One read per poll whatever the number of services, where one
//! read per binding and poll made etcd reads grow with services (issue 27, defect 8: about 400
//! reads/s at 1,000 services and a 10 s lease).
//!
//! Must not: campaign, or judge a role (that is [`super::election`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use etcd_client::GetOptions;
use tokio::sync::watch;

use super::client::Clients;
use super::error::EtcdOp;

/// A binding's writer as etcd names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    /// The writer's vantage point (the campaign value).
    pub vantage: String,
    /// Its epoch: the creation revision of its leader key.
    pub epoch: u64,
}

/// One read of every election.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Elections {
    /// The etcd revision the read saw: a key created later is not in it.
    pub revision: i64,
    /// Each election's leader (the key with the lowest creation revision), by election name
    /// (`<prefix>/election/<binding>`).
    pub leaders: BTreeMap<String, Leader>,
    /// Every leader key and its creation revision.
    pub keys: BTreeMap<Vec<u8>, i64>,
}

impl Elections {
    /// The leader of election `name`, if anyone leads it.
    pub fn leader(&self, name: &str) -> Option<&Leader> {
        self.leaders.get(name)
    }

    /// Whether `key` exists with creation revision `epoch`; `None` when the read is older than
    /// the key (it cannot say).
    pub fn holds(&self, key: &[u8], epoch: i64) -> Option<bool> {
        (self.revision >= epoch).then(|| self.keys.get(key) == Some(&epoch))
    }

    /// Builds the read from `(key, value, creation revision)` triples under `prefix` (the
    /// elections' common prefix, ending in `/`), at `revision`.
    fn of<'a>(
        prefix: &str,
        revision: i64,
        kvs: impl Iterator<Item = (&'a [u8], &'a [u8], i64)>,
    ) -> Self {
        let mut read = Self {
            revision,
            ..Self::default()
        };
        for (key, value, created) in kvs {
            let Some(name) = std::str::from_utf8(key)
                .ok()
                .filter(|k| k.starts_with(prefix))
                .and_then(|k| k.rsplit_once('/'))
                .map(|(name, _)| name.to_owned())
            else {
                continue;
            };
            read.keys.insert(key.to_vec(), created);
            let epoch = u64::try_from(created).unwrap_or(0);
            let leads = read.leaders.get(&name).is_none_or(|l| epoch < l.epoch);
            if leads {
                let vantage = String::from_utf8_lossy(value).into_owned();
                read.leaders.insert(name, Leader { vantage, epoch });
            }
        }
        read
    }
}

/// What the task publishes: the last successful read and how many reads failed since.
#[derive(Debug, Clone, Default)]
pub struct LeaderPoll {
    /// The last successful read; `None` before the first.
    pub read: Option<Arc<Elections>>,
    /// Reads failed in a row since it.
    pub unanswered: u32,
}

/// Reads every election every `poll` on `clients`, publishing to the returned receiver, until
/// the task is aborted (it outlives its receivers: seats come and go with reloads).
pub fn spawn(
    clients: Clients,
    poll: Duration,
) -> (watch::Receiver<LeaderPoll>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = watch::channel(LeaderPoll::default());
    let task = tokio::spawn(async move {
        let prefix = clients.keys.election("");
        loop {
            let mut kv = clients.kv.clone();
            let got = kv
                .get(prefix.as_str(), Some(GetOptions::new().with_prefix()))
                .await;
            match got {
                Ok(got) => {
                    let revision = got.header().map_or(0, |h| h.revision());
                    let kvs = got
                        .kvs()
                        .iter()
                        .map(|kv| (kv.key(), kv.value(), kv.create_revision()));
                    let read = Elections::of(&prefix, revision, kvs);
                    tx.send_replace(LeaderPoll {
                        read: Some(Arc::new(read)),
                        unanswered: 0,
                    });
                }
                Err(e) => {
                    clients.errors.failed(EtcdOp::Get, e);
                    tx.send_modify(|p| p.unanswered += 1);
                }
            }
            tokio::time::sleep(poll).await;
        }
    });
    (rx, task)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_creation_revision_leads_each_election() {
        let kvs: [(&[u8], &[u8], i64); 4] = [
            (b"/g/election/web/2", b"b", 12),
            (b"/g/election/web/1", b"a", 9),
            (b"/g/election/api/3", b"c", 15),
            (b"/other/x/1", b"z", 1),
        ];
        let read = Elections::of("/g/election/", 20, kvs.into_iter());
        let web = read.leader("/g/election/web").expect("web leads");
        assert_eq!((web.vantage.as_str(), web.epoch), ("a", 9));
        assert_eq!(read.leader("/g/election/api").map(|l| l.epoch), Some(15));
        assert_eq!(read.keys.len(), 3, "keys outside the elections are ignored");
        assert_eq!(read.holds(b"/g/election/web/2", 12), Some(true));
        assert_eq!(
            read.holds(b"/g/election/web/2", 11),
            Some(false),
            "another key"
        );
        assert_eq!(read.holds(b"/g/election/web/4", 20), Some(false), "gone");
        assert_eq!(
            read.holds(b"/g/election/web/5", 21),
            None,
            "newer than the read"
        );
    }
}
