//! Reading an operator's text file (a policy, the settings, a token or URL file): only a
//! regular file (a symlink to one is followed), at most a given size, so a FIFO named `*.toml`
//! cannot hang a reload and a link to `/dev/zero` cannot fill memory (issue 28).

use std::io::Read;
use std::path::Path;

/// The largest policy or settings file read: 1 MiB. A policy for 500 endpoints is about
/// 40 KiB.
pub const MAX_TEXT_FILE: u64 = 1 << 20;

/// Reads `path` as UTF-8 text when it is a regular file of at most `limit` bytes.
///
/// # Errors
/// Why it cannot be read, to follow `cannot read <path>: ` (the caller names the path): the OS
/// error (`No such file or directory`), `a folder`, `not a regular file (...)` (a FIFO, socket
/// or device), `larger than N bytes, the most read`, `not UTF-8 text (...)`.
pub fn read_text(path: &Path, limit: u64) -> Result<String, String> {
    let kind = |m: &std::fs::Metadata| {
        let t = m.file_type();
        if t.is_dir() {
            "a folder"
        } else {
            "not a regular file (a FIFO, socket or device)"
        }
    };
    let meta = std::fs::metadata(path).map_err(|e| os_error(&e))?;
    if !meta.is_file() {
        return Err(kind(&meta).to_owned());
    }
    let file = std::fs::File::open(path).map_err(|e| os_error(&e))?;
    // The path may have been replaced between the two looks: judge what was opened.
    let meta = file.metadata().map_err(|e| os_error(&e))?;
    if !meta.is_file() {
        return Err(kind(&meta).to_owned());
    }
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| os_error(&e))?;
    if bytes.len() as u64 > limit {
        return Err(format!("larger than {limit} bytes, the most read"));
    }
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "not UTF-8 text (an invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}

/// An I/O error's text without Rust's `(os error N)` suffix ([`without_os_error`]).
fn os_error(e: &std::io::Error) -> String {
    without_os_error(&e.to_string())
}

/// `text` without every ` (os error N)`: Rust's suffix to an OS error's text, which says
/// nothing the text before it does not (and doubled in messages quoting their source).
pub fn without_os_error(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(" (os error ") {
        out.push_str(&rest[..i]);
        let after = &rest[i + " (os error ".len()..];
        match after.find(')') {
            Some(end) if after[..end].bytes().all(|b| b.is_ascii_digit()) => {
                rest = &after[end + 1..];
            }
            _ => {
                out.push_str(" (os error ");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("gslb-read-text-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        dir
    }

    #[test]
    fn a_regular_file_within_the_limit_is_read() {
        let dir = temp("ok");
        std::fs::write(dir.join("a.toml"), "service = \"a\"\n").expect("write");
        assert_eq!(
            read_text(&dir.join("a.toml"), 100).as_deref(),
            Ok("service = \"a\"\n")
        );
        assert_eq!(
            read_text(&dir.join("a.toml"), 5),
            Err("larger than 5 bytes, the most read".into())
        );
        assert_eq!(
            read_text(&dir.join("missing.toml"), 5),
            Err("No such file or directory".into())
        );
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn a_device_behind_a_link_is_refused_without_reading() {
        let dir = temp("dev");
        let link = dir.join("zero.toml");
        std::fs::remove_file(&link).ok();
        std::os::unix::fs::symlink("/dev/zero", &link).expect("symlink");
        let err = read_text(&link, MAX_TEXT_FILE).expect_err("a device");
        assert!(err.contains("not a regular file"), "{err}");
        std::fs::remove_dir_all(dir).ok();
    }
}
