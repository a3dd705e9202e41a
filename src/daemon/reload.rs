//! Policy reload: when to reload and what to load. `gslb run` reloads its policies on SIGHUP
//! and when the policy files change (polled: [`POLL_INTERVAL`]); this module decides whether
//! the files changed and loads and validates the whole new set. Applying it is
//! [`Controller::reload`](crate::daemon::controller::Controller::reload)'s job; a set that
//! fails to load is never applied (the last good set keeps running).
//!
//! Change detection hashes the names and contents of the policy files (as
//! [`policy::load`] finds them), not their mtimes: a Kubernetes ConfigMap update swaps a
//! symlink, which leaves the files' own mtimes old, and editors that write in place can keep
//! the mtime within the same second. Only policies reload; daemon settings need a restart.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::time::Duration;

use gslb_core::policy::{self, Policy, PolicyErrors};

/// How often the policy files are read for changes: 5 s. A reload costs one read of every
/// policy file; 5 s keeps a ConfigMap update (which the kubelet itself propagates within about
/// a minute) from waiting on gslb.
pub const POLL_INTERVAL: Duration = Duration::from_secs(5);

/// Names and contents of every policy file under `paths`, hashed. An unreadable path hashes
/// its error, so it changes when the error does.
fn fingerprint(paths: &[PathBuf]) -> u64 {
    let mut h = DefaultHasher::new();
    for path in paths {
        path.hash(&mut h);
        match policy::policy_files(path) {
            Ok(files) => {
                for f in files {
                    f.hash(&mut h);
                    match std::fs::read(&f) {
                        Ok(bytes) => bytes.hash(&mut h),
                        Err(e) => e.kind().hash(&mut h),
                    }
                }
            }
            Err(e) => e.kind().hash(&mut h),
        }
    }
    h.finish()
}

/// Why a reload was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// SIGHUP: an operator asked. A set that failed before is tried again.
    Signal,
    /// The periodic read: a set that failed is not retried (nor logged again) until the files
    /// change.
    Poll,
}

impl Trigger {
    /// `signal` or `poll`, for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Signal => "signal",
            Self::Poll => "poll",
        }
    }
}

/// Tracks the policy files of a running controller.
#[derive(Debug)]
pub struct Reloader {
    paths: Vec<PathBuf>,
    applied: u64,
    failed: Option<u64>,
    pending: Option<u64>,
}

impl Reloader {
    /// Tracks `paths` (the settings' `policies`), whose current content is the set in force.
    pub fn new(paths: Vec<PathBuf>) -> Self {
        let applied = fingerprint(&paths);
        Self {
            paths,
            applied,
            failed: None,
            pending: None,
        }
    }

    /// Loads and validates the whole set when the files differ from the set in force, or are
    /// back to it after a refused set (a revert ends the failure: the caller applies the
    /// unchanged set and records a good load). `Ok(None)`: unchanged, nothing to do. Call
    /// [`Reloader::settle`] with the outcome.
    ///
    /// # Errors
    /// Every problem of the new set, with file, key and reason.
    pub fn check(&mut self, trigger: Trigger) -> Result<Option<Vec<Policy>>, PolicyErrors> {
        let now = fingerprint(&self.paths);
        let retry = trigger == Trigger::Signal || self.failed != Some(now);
        let reverted = now == self.applied && self.failed.is_some();
        if (now == self.applied && !reverted) || !retry {
            return Ok(None);
        }
        self.pending = Some(now);
        policy::load(&self.paths).map(|set| Some(set.into_iter().map(|(_, p)| p).collect()))
    }

    /// Records whether the set [`Reloader::check`] returned (or refused) was applied.
    pub fn settle(&mut self, applied: bool) {
        if let Some(fp) = self.pending.take() {
            if applied {
                self.applied = fp;
                self.failed = None;
            } else {
                self.failed = Some(fp);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str = include_str!("../../policies/api-seoul-tokyo.toml");

    #[test]
    fn reloads_only_changed_content_and_retries_a_bad_set_on_signal_only() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("api.toml");
        std::fs::write(&file, POLICY).expect("write");
        let mut r = Reloader::new(vec![dir.path().to_path_buf()]);
        assert_eq!(r.check(Trigger::Signal).expect("loads"), None, "unchanged");

        std::fs::write(&file, POLICY.replace("fall = ", "fall = -")).expect("write");
        let err = r.check(Trigger::Poll).expect_err("a bad set is refused");
        assert!(err.to_string().contains("api.toml"), "{err}");
        r.settle(false);
        assert_eq!(
            r.check(Trigger::Poll).expect("no retry"),
            None,
            "not polled again"
        );
        assert!(r.check(Trigger::Signal).is_err(), "SIGHUP retries");
        r.settle(false);

        std::fs::write(&file, POLICY.replace("rise = 2", "rise = 3")).expect("write");
        let set = r.check(Trigger::Poll).expect("loads").expect("changed");
        assert_eq!(set[0].thresholds.rise, 3);
        r.settle(true);
        assert_eq!(r.check(Trigger::Poll).expect("loads"), None, "applied");
    }

    #[test]
    fn reverting_a_refused_set_to_the_set_in_force_clears_the_failure() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("api.toml");
        std::fs::write(&file, POLICY).expect("write");
        let mut r = Reloader::new(vec![dir.path().to_path_buf()]);
        std::fs::write(&file, POLICY.replace("fall = ", "fall = -")).expect("write");
        assert!(r.check(Trigger::Poll).is_err(), "a bad set is refused");
        r.settle(false);

        // The operator reverts the file: the set in force is what the files hold again, so
        // the failure is over (the caller records a good load and the alert clears).
        std::fs::write(&file, POLICY).expect("write");
        let set = r
            .check(Trigger::Poll)
            .expect("loads")
            .expect("the revert is reported");
        assert_eq!(set.len(), 1);
        r.settle(true);
        assert_eq!(
            r.check(Trigger::Signal).expect("loads"),
            None,
            "unchanged now"
        );
    }
}
