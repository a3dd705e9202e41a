//! Policy reload: when to reload and what to load. `gslb run` reloads its policies on SIGHUP
//! and when the policy files change (polled: [`POLL_INTERVAL`]); this module decides whether
//! the files changed and loads and validates the whole new set. Applying it is
//! [`Controller::reload`](crate::daemon::controller::Controller::reload)'s job; a set that
//! fails to load is never applied (the last good set keeps running).
//!
//! Change detection hashes the names and metadata of the policy files (as
//! [`policy::load`] finds them): device, inode, size, modification and change times, read
//! through symlinks, not their contents (issue 14: reading and hashing 5,000 files every 5 s).
//! A Kubernetes ConfigMap update swaps a symlink to new files (a new inode); an editor that
//! writes in place changes the size or the nanosecond mtime and ctime. Only policies reload;
//! daemon settings need a restart.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::time::Duration;

use gslb_core::policy::{self, Policy, PolicyErrors};

/// How often the policy files are checked for changes: 5 s. A check costs one `stat` per
/// policy file (a reload, when one changed, reads them all); 5 s keeps a ConfigMap update (which the kubelet itself propagates within about
/// a minute) from waiting on gslb.
pub const POLL_INTERVAL: Duration = Duration::from_secs(5);

/// Names and metadata of every policy file under `paths`, hashed (one `stat` per file, no
/// read). An unreadable path hashes its error, so it changes when the error does.
fn fingerprint(paths: &[PathBuf]) -> u64 {
    let mut h = DefaultHasher::new();
    for path in paths {
        path.hash(&mut h);
        match policy::policy_files(path) {
            Ok(files) => {
                for f in files {
                    f.hash(&mut h);
                    match std::fs::metadata(&f) {
                        Ok(meta) => stamp(&meta, &mut h),
                        Err(e) => e.kind().hash(&mut h),
                    }
                }
            }
            Err(e) => e.kind().hash(&mut h),
        }
    }
    h.finish()
}

/// Hashes what changes when a file is replaced or rewritten: size and modification time
/// (nanoseconds where the file system keeps them), and on Unix device, inode and
/// status-change time.
fn stamp(meta: &std::fs::Metadata, h: &mut DefaultHasher) {
    meta.len().hash(h);
    meta.modified().ok().hash(h);
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        (meta.dev(), meta.ino(), meta.ctime(), meta.ctime_nsec()).hash(h);
    }
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

    #[test]
    fn a_same_size_rewrite_in_place_is_seen() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("api.toml");
        std::fs::write(&file, POLICY).expect("write");
        let mut r = Reloader::new(vec![dir.path().to_path_buf()]);
        let same_size = POLICY.replace("rise = 2", "rise = 3");
        assert_eq!(same_size.len(), POLICY.len());
        std::fs::write(&file, same_size).expect("write");
        let set = r.check(Trigger::Poll).expect("loads").expect("changed");
        assert_eq!(set[0].thresholds.rise, 3);
    }

    #[cfg(unix)]
    #[test]
    fn a_configmap_style_symlink_swap_is_seen() {
        // The kubelet's layout: `api.toml -> ..data/api.toml`, `..data -> ..v1`; an update
        // writes `..v2` and swaps `..data`, so `api.toml` itself never changes.
        let root = tempfile::tempdir().expect("temp dir");
        let dir = root.path().join("policies");
        for (version, text) in [
            ("..v1", POLICY.to_owned()),
            ("..v2", POLICY.replace("rise = 2", "rise = 3")),
        ] {
            std::fs::create_dir_all(root.path().join(version)).expect("dir");
            std::fs::write(root.path().join(version).join("api.toml"), text).expect("write");
        }
        std::fs::create_dir(&dir).expect("dir");
        std::os::unix::fs::symlink(root.path().join("..v1"), dir.join("..data")).expect("link");
        std::os::unix::fs::symlink(dir.join("..data/api.toml"), dir.join("api.toml"))
            .expect("link");
        let mut r = Reloader::new(vec![dir.clone()]);
        assert_eq!(r.check(Trigger::Poll).expect("loads"), None, "unchanged");

        std::os::unix::fs::symlink(root.path().join("..v2"), dir.join("..tmp")).expect("link");
        std::fs::rename(dir.join("..tmp"), dir.join("..data")).expect("swap");
        let set = r.check(Trigger::Poll).expect("loads").expect("changed");
        assert_eq!(set[0].thresholds.rise, 3);
    }
}
