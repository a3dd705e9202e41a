//! The drill state file: the active overrides, so they survive a restart
//! (`<state dir>/overrides.json`).
//!
//! The document is versioned JSON, `{"version":1,"overrides":[...]}`, each override as
//! [`Override`] serialises (times in Unix milliseconds). [`StateFile::save`] replaces it
//! atomically: the new document goes to a temporary file in the same folder, is synced, renamed
//! over the old one, and the folder is synced, so a crash leaves either the old or the new
//! document, never half of one.
//!
//! This module only reads and writes the file. It does not decide which saved overrides are
//! still valid (see [`gslb_core::engine::Overrides::restore_all`]) and never drops a file it cannot
//! read: a corrupt or unknown document is an error for the caller to report.

use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use gslb_core::engine::Override;

/// The document version this build writes and reads.
pub const STATE_VERSION: u64 = 1;

/// The state file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    /// Reading failed (other than the file being absent, which is an empty list).
    #[error("cannot read the drill state file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The file is not a valid state document.
    #[error(
        "the drill state file {} is corrupt: {reason}; fix it or move it aside to start without the saved drills",
        path.display()
    )]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong, with line and column.
        reason: String,
    },
    /// The document has a version this build does not know (written by a newer gslb?).
    #[error(
        "the drill state file {} has version {version}; this gslb reads version {STATE_VERSION} only",
        path.display()
    )]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version found.
        version: u64,
    },
    /// Writing, syncing or renaming failed; the previous document is unchanged.
    #[error("cannot write the drill state file {}: {source}", path.display())]
    Write {
        /// The file (or the temporary file / folder that failed).
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

#[derive(Serialize)]
struct DocumentOut<'a> {
    version: u64,
    overrides: &'a [Override],
}

#[derive(Deserialize)]
struct Header {
    version: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    #[allow(dead_code)]
    version: u64,
    overrides: Vec<Override>,
}

/// The drill state file at one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateFile {
    path: PathBuf,
}

impl StateFile {
    /// The state file at `path` (usually `<state dir>/overrides.json`). Nothing is read yet.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the saved overrides. A missing file is an empty list (first start).
    ///
    /// Blocking file I/O: from async code, call it before serving or in
    /// `tokio::task::spawn_blocking`.
    ///
    /// # Errors
    /// [`StateFileError::Read`], [`StateFileError::Corrupt`] (not JSON, wrong shape, empty),
    /// [`StateFileError::UnsupportedVersion`]; each names the file.
    pub fn load(&self) -> Result<Vec<Override>, StateFileError> {
        let bytes = match fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(StateFileError::Read {
                    path: self.path.clone(),
                    source,
                });
            }
        };
        let corrupt = |e: serde_json::Error| StateFileError::Corrupt {
            path: self.path.clone(),
            reason: e.to_string(),
        };
        let header: Header = serde_json::from_slice(&bytes).map_err(corrupt)?;
        if header.version != STATE_VERSION {
            return Err(StateFileError::UnsupportedVersion {
                path: self.path.clone(),
                version: header.version,
            });
        }
        let doc: Document = serde_json::from_slice(&bytes).map_err(corrupt)?;
        Ok(doc.overrides)
    }

    /// Replaces the file with `overrides`, atomically (temporary file in the same folder,
    /// fsync, rename, fsync of the folder). Creates the folder when missing.
    ///
    /// Blocking file I/O with two fsyncs: from async code, call it in
    /// `tokio::task::spawn_blocking`.
    ///
    /// # Errors
    /// [`StateFileError::Write`] naming the file that failed; the previous document is then
    /// unchanged (a leftover temporary file is replaced by the next save).
    pub fn save(&self, overrides: &[Override]) -> Result<(), StateFileError> {
        let write_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StateFileError::Write { path, source }
        };
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        fs::create_dir_all(&dir).map_err(write_err(&dir))?;
        let tmp = self.temp_path();
        let mut json = serde_json::to_vec_pretty(&DocumentOut {
            version: STATE_VERSION,
            overrides,
        })
        .map_err(|e| StateFileError::Write {
            path: self.path.clone(),
            source: io::Error::other(e),
        })?;
        json.push(b'\n');
        let result = (|| {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(&json)?;
            f.sync_all()
        })()
        .map_err(write_err(&tmp));
        if let Err(e) = result {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        if let Err(source) = fs::rename(&tmp, &self.path) {
            let _ = fs::remove_file(&tmp);
            return Err(StateFileError::Write {
                path: self.path.clone(),
                source,
            });
        }
        sync_dir(&dir).map_err(write_err(&dir))
    }

    /// [`save`](Self::save) on tokio's blocking pool, for the engine loop: the loop awaits the
    /// write (so an override is durable before it is acknowledged) without blocking a runtime
    /// thread.
    ///
    /// # Errors
    /// As [`save`](Self::save); a panicked or cancelled write is [`StateFileError::Write`].
    pub async fn save_async(&self, overrides: Vec<Override>) -> Result<(), StateFileError> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.save(&overrides))
            .await
            .unwrap_or_else(|e| {
                Err(StateFileError::Write {
                    path: self.path.clone(),
                    source: io::Error::other(e.to_string()),
                })
            })
    }

    /// `.<name>.tmp` next to the file.
    fn temp_path(&self) -> PathBuf {
        let name = self
            .path
            .file_name()
            .map_or_else(|| "overrides.json".into(), |n| n.to_string_lossy());
        self.path.with_file_name(format!(".{name}.tmp"))
    }
}

/// Makes the rename durable (POSIX: the directory entry is data of the folder).
#[cfg(unix)]
fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use gslb_core::engine::{OverrideAction, OverrideId};
    use gslb_core::model::Millis;

    fn sample(id: &str, action: OverrideAction) -> Override {
        Override {
            id: OverrideId(id.into()),
            service: "api".into(),
            action,
            pool: "seoul".into(),
            reason: "quarterly DR drill".into(),
            actor: "alice".into(),
            created: Millis(1_000),
            expires: Millis(1_801_000),
        }
    }

    fn files_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<_> = fs::read_dir(dir)
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_missing_file_is_an_empty_list() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sf = StateFile::new(dir.path().join("overrides.json"));
        assert_eq!(sf.load().expect("load"), Vec::new());
    }

    #[test]
    fn saved_overrides_load_back_and_no_temp_file_is_left() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sf = StateFile::new(dir.path().join("state/overrides.json"));
        let first = vec![sample("d-1", OverrideAction::Drain)];
        sf.save(&first).expect("save");
        assert_eq!(sf.load().expect("load"), first);
        let second = vec![
            sample("d-2", OverrideAction::Force),
            sample("d-3", OverrideAction::Restore),
        ];
        sf.save(&second).expect("replace");
        assert_eq!(sf.load().expect("load"), second);
        assert_eq!(files_in(&dir.path().join("state")), ["overrides.json"]);
        sf.save(&[]).expect("save empty");
        assert_eq!(sf.load().expect("load"), Vec::new());
    }

    #[tokio::test(start_paused = true)]
    async fn save_async_writes_off_the_runtime_threads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sf = StateFile::new(dir.path().join("overrides.json"));
        let saved = vec![sample("d-1", OverrideAction::Drain)];
        sf.save_async(saved.clone()).await.expect("save");
        assert_eq!(sf.load().expect("load"), saved);
    }

    #[test]
    fn the_document_is_versioned() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sf = StateFile::new(dir.path().join("overrides.json"));
        sf.save(&[sample("d-1", OverrideAction::Drain)])
            .expect("save");
        let doc: serde_json::Value =
            serde_json::from_slice(&fs::read(sf.path()).expect("read")).expect("json");
        assert_eq!(doc["version"], 1);
        assert_eq!(doc["overrides"][0]["id"], "d-1");
        assert_eq!(doc["overrides"][0]["action"], "drain");
        assert_eq!(doc["overrides"][0]["expires"], "1970-01-01T00:30:01.000Z");
        // A file written before times were RFC 3339 (Unix milliseconds) still loads.
        let old = fs::read_to_string(sf.path())
            .expect("read")
            .replace("\"1970-01-01T00:30:01.000Z\"", "1801000");
        fs::write(sf.path(), old).expect("write");
        assert_eq!(sf.load().expect("old file")[0].expires, Millis(1_801_000));
    }

    #[test]
    fn a_corrupt_file_is_an_error_naming_the_path_and_the_reason() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("overrides.json");
        let sf = StateFile::new(&path);
        for (content, reason) in [
            (
                r#"{"version":1,"overrides":[{"id":"d-1"#,
                "EOF while parsing",
            ),
            ("", "EOF while parsing"),
            (r#"{"overrides":[]}"#, "missing field `version`"),
            (
                r#"{"version":1,"overrides":[{"id":"d-1"}]}"#,
                "missing field",
            ),
            (
                r#"{"version":1,"overrides":[],"extra":true}"#,
                "unknown field `extra`",
            ),
        ] {
            fs::write(&path, content).expect("write");
            let err = sf.load().expect_err(content);
            let msg = err.to_string();
            assert!(matches!(err, StateFileError::Corrupt { .. }), "{msg}");
            assert!(msg.contains(&path.display().to_string()), "{msg}");
            assert!(msg.contains(reason), "{content:?} -> {msg}");
            assert!(msg.contains("move it aside"), "{msg}");
        }
        // The file the operator has to look at is still there.
        assert!(path.exists());
    }

    #[test]
    fn an_unknown_version_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("overrides.json");
        fs::write(&path, r#"{"version":2,"overrides":"new shape"}"#).expect("write");
        let err = StateFile::new(&path).load().expect_err("version 2");
        assert!(matches!(
            err,
            StateFileError::UnsupportedVersion { version: 2, .. }
        ));
        assert_eq!(
            err.to_string(),
            format!(
                "the drill state file {} has version 2; this gslb reads version 1 only",
                path.display()
            )
        );
    }

    #[test]
    fn a_failed_save_keeps_the_previous_document() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sf = StateFile::new(dir.path().join("overrides.json"));
        let kept = vec![sample("d-1", OverrideAction::Drain)];
        sf.save(&kept).expect("save");
        // A folder where the temporary file goes makes the write fail, even as root.
        let tmp = dir.path().join(".overrides.json.tmp");
        fs::create_dir(&tmp).expect("mkdir");
        let err = sf
            .save(&[sample("d-2", OverrideAction::Force)])
            .expect_err("temp path is a folder");
        assert!(matches!(err, StateFileError::Write { .. }), "{err}");
        assert!(err.to_string().contains(".overrides.json.tmp"), "{err}");
        assert_eq!(sf.load().expect("load"), kept);
    }
}
