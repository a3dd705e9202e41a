//! What a reload changes: the policy set in force compared with a reloaded one, once per
//! reload ([`PolicyDiff::new`]), and handed to every task that acts on it (the controller
//! stops and restarts tasks, the engine resets state, the failover timeline forgets what is
//! gone). Pure: no I/O.

use std::collections::BTreeSet;

use super::Policy;
use crate::model::ServiceId;

/// A reloaded policy set and how it differs from the set in force.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PolicyDiff {
    /// The whole new set, in the order it was loaded.
    pub policies: Vec<Policy>,
    /// Services of [`PolicyDiff::policies`] that start afresh (probe loops, reconciler,
    /// engine state), in that order: new ones, and those whose policy changes what they
    /// probe, decide or write ([`Policy::controls_like`]: an edit of `[observe]` or
    /// `rto_budget` alone is no change here).
    pub changed: Vec<ServiceId>,
    /// Services of [`PolicyDiff::policies`] that keep their state and tasks, in that order.
    pub unchanged: Vec<ServiceId>,
    /// Services of the set in force that the new set no longer has, in that set's order.
    pub removed: Vec<ServiceId>,
}

impl PolicyDiff {
    /// Compares `new` (the whole reloaded set) with `old` (the set in force). At start,
    /// `old` is empty: every policy is new.
    pub fn new(old: &[Policy], new: Vec<Policy>) -> Self {
        let (changed, unchanged): (Vec<&Policy>, Vec<&Policy>) = new.iter().partition(|p| {
            !old.iter()
                .any(|o| o.service == p.service && o.controls_like(p))
        });
        let ids = |set: Vec<&Policy>| -> Vec<ServiceId> {
            set.into_iter().map(|p| p.service.clone()).collect()
        };
        let kept: BTreeSet<&ServiceId> = new.iter().map(|p| &p.service).collect();
        let removed: Vec<ServiceId> = old
            .iter()
            .map(|p| &p.service)
            .filter(|id| !kept.contains(id))
            .cloned()
            .collect();
        Self {
            changed: ids(changed),
            unchanged: ids(unchanged),
            removed,
            policies: new,
        }
    }

    /// The new or changed policies, in load order.
    pub fn changed_policies(&self) -> impl Iterator<Item = &Policy> {
        self.policies
            .iter()
            .filter(|p| self.changed.contains(&p.service))
    }

    /// Whether `service` starts afresh (new or changed).
    pub fn resets(&self, service: &ServiceId) -> bool {
        self.changed.contains(service)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(file: &str, text: &str) -> Policy {
        crate::policy::parse(std::path::Path::new(file), text).expect("valid policy")
    }

    const API: &str = include_str!("../../../policies/api-seoul-tokyo.toml");
    const WEB: &str = include_str!("../../../policies/web-ncp-gcp.toml");

    #[test]
    fn changed_added_unchanged_and_removed_services_are_told_apart() {
        let api = policy("api.toml", API);
        let web = policy("web.toml", WEB);
        let old = [api.clone(), web.clone()];
        let api_edited = policy("api.toml", &API.replace("fall = 3", "fall = 4"));
        let img = policy(
            "img.toml",
            &API.replace("service = \"api\"", "service = \"img\""),
        );

        let diff = PolicyDiff::new(&old, vec![img.clone(), api_edited.clone()]);
        assert_eq!(diff.changed, [img.service.clone(), api.service.clone()]);
        assert!(diff.unchanged.is_empty());
        assert_eq!(diff.removed, std::slice::from_ref(&web.service));
        assert_eq!(
            diff.changed_policies().cloned().collect::<Vec<_>>(),
            [img, api_edited]
        );
        assert!(diff.resets(&api.service) && !diff.resets(&web.service));
    }

    #[test]
    fn an_edit_of_observe_or_rto_budget_alone_is_no_change() {
        let api = policy("api.toml", API);
        let edited = policy(
            "api.toml",
            &API.replace("rto_budget = \"3m\"", "rto_budget = \"4m\""),
        );
        assert_ne!(api, edited, "the edit took");
        let diff = PolicyDiff::new(std::slice::from_ref(&api), vec![edited.clone()]);
        assert!(diff.changed.is_empty() && diff.removed.is_empty());
        assert_eq!(diff.unchanged, [api.service]);
        assert_eq!(
            diff.policies,
            [edited],
            "the new policy is the one in force"
        );
    }

    #[test]
    fn at_start_every_policy_is_new() {
        let api = policy("api.toml", API);
        let diff = PolicyDiff::new(&[], vec![api.clone()]);
        assert_eq!(diff.changed, [api.service]);
        assert!(diff.unchanged.is_empty() && diff.removed.is_empty());
    }
}
