//! `gslb plan` in a cluster (`[cluster]`): which instance writes each binding, read from etcd
//! (the election's current leader), so the plan says whether `gslb run` on this instance would
//! write it or only follow.

use gslb_core::model::{ServiceId, VantageId};

use crate::config::ClusterSettings;
use crate::io::coordination::election;
use crate::io::coordination::{Clients, ErrorCounter};

/// The line `gslb plan` prints for one binding: this instance's role, the writer and its
/// epoch; or that etcd did not answer (then `gslb run` would fail static and write nothing).
pub fn describe(me: &VantageId, writer: Result<Option<election::Leader>, ()>) -> String {
    match writer {
        Ok(Some(w)) if w.vantage == me.0 => {
            format!("writer (this instance, {me}; epoch {})", w.epoch)
        }
        Ok(Some(w)) => format!(
            "follower (the writer is {}, epoch {}); gslb run here would not write",
            w.vantage, w.epoch
        ),
        Ok(None) => "no writer elected yet; gslb run here would not write until one is".into(),
        Err(()) => "etcd did not answer; gslb run here would fail static and write nothing".into(),
    }
}

/// Each service's cluster line (see [`describe`]), reading etcd once per service.
pub async fn lines(
    cluster: &ClusterSettings,
    me: &VantageId,
    services: &[ServiceId],
) -> Vec<String> {
    let clients = Clients::connect(cluster.connect(), ErrorCounter::detached()).await;
    let mut out = Vec::new();
    for s in services {
        let writer = match &clients {
            Ok(c) => election::leader(&c.kv, &c.keys.election(&s.0)).await,
            Err(_) => Err(()),
        };
        out.push(describe(me, writer));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_the_role_the_writer_and_the_epoch() {
        let me = VantageId("a".into());
        let leader = |v: &str| {
            Ok(Some(election::Leader {
                vantage: v.into(),
                epoch: 15,
            }))
        };
        assert_eq!(
            describe(&me, leader("a")),
            "writer (this instance, a; epoch 15)"
        );
        assert_eq!(
            describe(&me, leader("b")),
            "follower (the writer is b, epoch 15); gslb run here would not write"
        );
        assert!(describe(&me, Err(())).contains("fail static"));
    }
}
