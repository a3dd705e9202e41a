//! The whole etcd key layout of gslb, in one place. Every key starts with `[cluster] prefix`
//! (default `/gslb`):
//!
//! | key | value | bound to |
//! |---|---|---|
//! | `<prefix>/votes/<vantage>/<service>/<endpoint>` | `healthy`, `unhealthy` or `unknown` | the vantage point's lease |
//! | `<prefix>/heartbeats/<vantage>` | a counter, +1 per heartbeat | the vantage point's lease |
//! | `<prefix>/election/<binding>` | the election's prefix (leader keys below it) | the candidates' leases |
//! | `<prefix>/intent/<binding>` | the writer's last recorded intent | none |
//! | `<prefix>/safety/<vantage>/<service>` | the safety state as that vantage point last had it | none |
//! | `<prefix>/drills/<vantage>/<id>` | a drill that vantage point started, or its end as that vantage point recorded it | the drill's lease |
//!
//! Vantage point and service names hold no `/` (policy and settings names); an endpoint id may
//! (it is a URL), so it is always the last part.
//!
//! Every key a vantage point writes is under a segment of its own name, except the shared
//! election and intent keys: with etcd's auth on, each instance's user may write only its own
//! ([`super::access`]), so no instance can forge another's votes, heartbeat, safety state or
//! drills.

use gslb_core::model::{EndpointId, ServiceId, VantageId};

/// The key layout under one prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    prefix: String,
}

/// A vote key, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoteKey {
    /// Whose vote.
    pub vantage: VantageId,
    /// The service.
    pub service: ServiceId,
    /// The endpoint.
    pub endpoint: EndpointId,
}

impl Keys {
    /// The layout under `prefix` (e.g. `/gslb`, no trailing `/`).
    pub fn new(prefix: &str) -> Self {
        Self {
            prefix: prefix.trim_end_matches('/').to_owned(),
        }
    }

    /// Prefix of every gslb key: `<prefix>/`.
    pub fn all(&self) -> String {
        format!("{}/", self.prefix)
    }

    /// Prefix of every vote: `<prefix>/votes/`.
    pub fn votes(&self) -> String {
        format!("{}/votes/", self.prefix)
    }

    /// Prefix of `vantage`'s votes: `<prefix>/votes/<vantage>/`.
    pub fn votes_of(&self, vantage: &VantageId) -> String {
        format!("{}{vantage}/", self.votes())
    }

    /// `vantage`'s vote on `endpoint` of `service`.
    pub fn vote(&self, vote: &VoteKey) -> String {
        format!(
            "{}{}/{}",
            self.votes_of(&vote.vantage),
            vote.service,
            vote.endpoint
        )
    }

    /// Parses a vote key; `None` for a key outside the layout.
    pub fn parse_vote(&self, key: &[u8]) -> Option<VoteKey> {
        let rest = std::str::from_utf8(key).ok()?.strip_prefix(&self.votes())?;
        let (vantage, rest) = rest.split_once('/')?;
        let (service, endpoint) = rest.split_once('/')?;
        (!vantage.is_empty() && !service.is_empty() && !endpoint.is_empty()).then(|| VoteKey {
            vantage: VantageId(vantage.into()),
            service: ServiceId(service.into()),
            endpoint: EndpointId(endpoint.into()),
        })
    }

    /// Prefix of every heartbeat: `<prefix>/heartbeats/`.
    pub fn heartbeats(&self) -> String {
        format!("{}/heartbeats/", self.prefix)
    }

    /// `vantage`'s heartbeat.
    pub fn heartbeat(&self, vantage: &VantageId) -> String {
        format!("{}{vantage}", self.heartbeats())
    }

    /// The vantage point of a heartbeat key; `None` for a key outside the layout.
    pub fn parse_heartbeat(&self, key: &[u8]) -> Option<VantageId> {
        segment(key, &self.heartbeats()).map(|v| VantageId(v.into()))
    }

    /// The election of a provider binding (campaign on this name).
    pub fn election(&self, binding: &str) -> String {
        format!("{}{binding}", self.elections())
    }

    /// The recorded intent of a provider binding (checked and put in the fencing transaction).
    pub fn intent(&self, binding: &str) -> String {
        format!("{}{binding}", self.intents())
    }

    /// Prefix of every election: `<prefix>/election/`.
    pub fn elections(&self) -> String {
        format!("{}/election/", self.prefix)
    }

    /// Prefix of every recorded intent: `<prefix>/intent/`.
    pub fn intents(&self) -> String {
        format!("{}/intent/", self.prefix)
    }

    /// Prefix of every saved safety state: `<prefix>/safety/`.
    pub fn safeties(&self) -> String {
        format!("{}/safety/", self.prefix)
    }

    /// Prefix of the safety states `vantage` saved: `<prefix>/safety/<vantage>/`.
    pub fn safeties_of(&self, vantage: &VantageId) -> String {
        format!("{}{vantage}/", self.safeties())
    }

    /// The safety state of `service` (velocity budget, damping, holds) as `vantage` saved it.
    pub fn safety(&self, vantage: &VantageId, service: &ServiceId) -> String {
        format!("{}{service}", self.safeties_of(vantage))
    }

    /// Who saved a safety state key, and for which service; `None` for a key outside the
    /// layout.
    pub fn parse_safety(&self, key: &[u8]) -> Option<(VantageId, ServiceId)> {
        let (vantage, service) = pair(key, &self.safeties())?;
        Some((VantageId(vantage.into()), ServiceId(service.into())))
    }

    /// Prefix of every drill: `<prefix>/drills/`.
    pub fn drills(&self) -> String {
        format!("{}/drills/", self.prefix)
    }

    /// Prefix of the drill records of `vantage`: `<prefix>/drills/<vantage>/`.
    pub fn drills_of(&self, vantage: &VantageId) -> String {
        format!("{}{vantage}/", self.drills())
    }

    /// `vantage`'s record of drill `id` (the drill it started, or the end it recorded).
    pub fn drill(&self, vantage: &VantageId, id: &str) -> String {
        format!("{}{id}", self.drills_of(vantage))
    }

    /// Whose record a drill key is, and of which drill id; `None` for a key outside the
    /// layout.
    pub fn parse_drill<'a>(&self, key: &'a [u8]) -> Option<(VantageId, &'a str)> {
        let (vantage, id) = pair(key, &self.drills())?;
        Some((VantageId(vantage.into()), id))
    }
}

/// The one path segment of `key` after `prefix`; `None` for a key outside it, empty or deeper.
fn segment<'a>(key: &'a [u8], prefix: &str) -> Option<&'a str> {
    let rest = std::str::from_utf8(key).ok()?.strip_prefix(prefix)?;
    (!rest.is_empty() && !rest.contains('/')).then_some(rest)
}

/// The two path segments of `key` after `prefix`; `None` for a key outside it, with an empty
/// segment, or deeper.
fn pair<'a>(key: &'a [u8], prefix: &str) -> Option<(&'a str, &'a str)> {
    let rest = std::str::from_utf8(key).ok()?.strip_prefix(prefix)?;
    let (first, second) = rest.split_once('/')?;
    (!first.is_empty() && !second.is_empty() && !second.contains('/')).then_some((first, second))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vote_keys_round_trip_with_urls_as_endpoints() {
        let keys = Keys::new("/gslb/");
        let vote = VoteKey {
            vantage: VantageId("aws-ap-northeast-2".into()),
            service: ServiceId("api".into()),
            endpoint: EndpointId("https://api.example.com/healthz?x=1".into()),
        };
        let key = keys.vote(&vote);
        assert_eq!(
            key,
            "/gslb/votes/aws-ap-northeast-2/api/https://api.example.com/healthz?x=1"
        );
        assert_eq!(keys.parse_vote(key.as_bytes()), Some(vote));
        assert_eq!(keys.parse_vote(b"/gslb/votes/a/api"), None);
        assert_eq!(keys.parse_vote(b"/other/votes/a/b/c"), None);
    }

    #[test]
    fn heartbeat_and_other_keys() {
        let keys = Keys::new("/g");
        let v = VantageId("gcp".into());
        assert_eq!(keys.heartbeat(&v), "/g/heartbeats/gcp");
        assert_eq!(keys.parse_heartbeat(b"/g/heartbeats/gcp"), Some(v.clone()));
        assert_eq!(keys.parse_heartbeat(b"/g/heartbeats/"), None);
        assert_eq!(
            keys.election("cloudflare-api"),
            "/g/election/cloudflare-api"
        );
        assert_eq!(keys.intent("cloudflare-api"), "/g/intent/cloudflare-api");
        let api = ServiceId("api".into());
        assert_eq!(keys.safety(&v, &api), "/g/safety/gcp/api");
        assert_eq!(
            keys.parse_safety(b"/g/safety/gcp/api"),
            Some((v.clone(), api))
        );
        assert_eq!(keys.parse_safety(b"/g/safety/api"), None);
        assert_eq!(keys.parse_safety(b"/g/safety/gcp/"), None);
        assert_eq!(keys.drill(&v, "d-1"), "/g/drills/gcp/d-1");
        assert_eq!(keys.parse_drill(b"/g/drills/gcp/d-1"), Some((v, "d-1")));
        assert_eq!(keys.parse_drill(b"/g/drills/d-1"), None);
    }
}
