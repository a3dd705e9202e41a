//! The admin API's bearer tokens: the secret itself ([`AdminToken`]: constant-time comparison,
//! never printed, no `Display`, a redacted `Debug`), the named set callers are identified by
//! ([`AdminTokens`]: the name is the audit's actor), where they come from (`GSLB_ADMIN_TOKEN`
//! or `admin.token_file`: one token named [`SINGLE_TOKEN_NAME`]; `admin.token_files`: files of
//! `name = "token"` lines), and the refusal to expose the admin API without one. Checking
//! requests against them is the admin API's job (`admin::auth`).

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use gslb_core::policy::file::read_text;
use subtle::ConstantTimeEq as _;

use super::{ADMIN_TOKEN_ENV, AdminSettings};

/// The largest token file read: 64 KiB (a file of named tokens for a few hundred operators).
pub const MAX_TOKEN_FILE: u64 = 64 << 10;

/// A shared secret callers present as `Authorization: Bearer <token>`.
#[derive(Clone, PartialEq, Eq)]
pub struct AdminToken(String);

impl fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AdminToken(<redacted>)")
    }
}

/// A token could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The token file could not be read.
    #[error("cannot read the admin token file {}: {reason}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why (e.g. `No such file or directory`).
        reason: String,
    },
    /// The token (file or variable) is empty or only whitespace.
    #[error("the admin token from {from} is empty")]
    Empty {
        /// Where it came from: a file path or `GSLB_ADMIN_TOKEN`.
        from: String,
    },
}

impl AdminToken {
    /// The token `value` with surrounding whitespace trimmed; `from` names its source in errors
    /// (e.g. `GSLB_ADMIN_TOKEN`).
    ///
    /// # Errors
    /// [`TokenError::Empty`] when nothing is left after trimming.
    pub fn new(value: &str, from: &str) -> Result<Self, TokenError> {
        let t = value.trim();
        if t.is_empty() {
            return Err(TokenError::Empty { from: from.into() });
        }
        Ok(Self(t.to_owned()))
    }

    /// Reads a token file (its contents trimmed, so a trailing newline does not count).
    ///
    /// # Errors
    /// [`TokenError::Unreadable`] naming the file, or [`TokenError::Empty`].
    pub fn read_file(path: &Path) -> Result<Self, TokenError> {
        let text = read_text(path, MAX_TOKEN_FILE).map_err(|reason| TokenError::Unreadable {
            path: path.to_path_buf(),
            reason,
        })?;
        Self::new(&text, &path.display().to_string())
    }

    /// Whether `candidate` is this token, in time independent of where they differ.
    pub fn matches(&self, candidate: &str) -> bool {
        self.0.as_bytes().ct_eq(candidate.as_bytes()).into()
    }

    /// The secret, for the one place that sends it (the CLI's `Authorization` header).
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

/// The name of the one token of `GSLB_ADMIN_TOKEN` or `admin.token_file`: `admin`.
pub const SINGLE_TOKEN_NAME: &str = "admin";

/// Named bearer tokens: a caller presenting one is that name (the actor of its drills in the
/// audit log). Empty: no authentication. Names and tokens are unique.
#[derive(Debug, Clone, Default)]
pub struct AdminTokens(Vec<(String, AdminToken)>);

impl AdminTokens {
    /// One token, named [`SINGLE_TOKEN_NAME`].
    pub fn single(token: AdminToken) -> Self {
        Self(vec![(SINGLE_TOKEN_NAME.to_owned(), token)])
    }

    /// Whether no token is configured.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The name of the token `candidate` is. Every token is compared, each in constant time,
    /// so the time taken does not tell which one (or where) it differs.
    pub fn identify(&self, candidate: &str) -> Option<&str> {
        self.0.iter().fold(None, |found, (name, token)| {
            let hit = token.matches(candidate);
            found.or(hit.then_some(name.as_str()))
        })
    }

    /// Adds `token` as `name`.
    ///
    /// # Errors
    /// `name` or the token is already in the set (`from` names where it came from).
    fn add(&mut self, name: &str, token: AdminToken, from: &str) -> Result<(), AdminAuthError> {
        if self.0.iter().any(|(n, _)| n == name) {
            return Err(AdminAuthError::Duplicate {
                from: from.to_owned(),
                reason: format!("the name '{name}' is given twice"),
            });
        }
        if self.0.iter().any(|(_, t)| t == &token) {
            return Err(AdminAuthError::Duplicate {
                from: from.to_owned(),
                reason: format!("the token of '{name}' is another name's too"),
            });
        }
        self.0.push((name.to_owned(), token));
        Ok(())
    }

    /// Reads a named-token file: TOML, one `name = "token"` per line (`#` comments), names
    /// of letters, digits, `-`, `_` and `.`.
    ///
    /// # Errors
    /// [`AdminAuthError::TokenFiles`] naming the file and, for bad content, the line or name.
    fn read_file(&mut self, path: &Path) -> Result<(), AdminAuthError> {
        let bad = |reason: String| AdminAuthError::TokenFiles {
            path: path.to_path_buf(),
            reason,
        };
        let text = read_text(path, MAX_TOKEN_FILE).map_err(|r| bad(format!("cannot read: {r}")))?;
        // Never the parser's whole message: it quotes the offending line, which holds a secret.
        let table: toml::Table = toml::from_str(&text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            bad(match line {
                Some(n) => format!("line {n} is not `name = \"token\"` (TOML)"),
                None => "not `name = \"token\"` lines (TOML)".into(),
            })
        })?;
        if table.is_empty() {
            return Err(bad(
                "names no token (write one `name = \"token\"` per line)".into(),
            ));
        }
        for (name, value) in table {
            if !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            {
                return Err(bad(format!(
                    "'{name}': a name is letters, digits, '-', '_' and '.'"
                )));
            }
            let Some(value) = value.as_str() else {
                return Err(bad(format!("'{name}': the token must be a string")));
            };
            let token = AdminToken::new(value, &name).map_err(|e| bad(e.to_string()))?;
            self.add(&name, token, &path.display().to_string())?;
        }
        Ok(())
    }
}

/// The admin API's authentication: the tokens, and whether the read routes need one too.
#[derive(Debug, Clone, Default)]
pub struct AdminAuth {
    /// The tokens (empty: the drill routes are open, on loopback only).
    pub tokens: AdminTokens,
    /// `admin.require_token_for_reads`: `/v1/status`, `/v1/events` and `/metrics` need a token.
    pub protect_reads: bool,
}

/// The admin token could not be resolved, or the admin API would be exposed without one.
#[derive(Debug, thiserror::Error)]
pub enum AdminAuthError {
    /// A file of `admin.token_files` is unreadable or malformed.
    #[error("admin.token_files: {}: {reason}", path.display())]
    TokenFiles {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A name or token is given twice.
    #[error("admin tokens: {from}: {reason}")]
    Duplicate {
        /// Where the second one came from.
        from: String,
        /// What is duplicated.
        reason: String,
    },
    /// `admin.require_token_for_reads` without any token.
    #[error(
        "admin.require_token_for_reads: no admin token is configured; set admin.token_files, \
         admin.token_file or {ADMIN_TOKEN_ENV}"
    )]
    ReadsWithoutToken,
    /// `admin.token_file` is unreadable or empty.
    #[error("admin.token_file: {0}")]
    TokenFile(TokenError),
    /// `GSLB_ADMIN_TOKEN` is set but empty (unset it to use `admin.token_file`).
    #[error("{ADMIN_TOKEN_ENV} is set but empty")]
    EmptyTokenEnv,
    /// `admin.listen` is not a loopback address and no token is configured.
    #[error(
        "admin.listen: {listen} is not a loopback address and no admin token is configured; \
         set admin.token_files, admin.token_file or {ADMIN_TOKEN_ENV}, or listen on 127.0.0.1 \
         (the drill API must not be reachable without authentication)"
    )]
    ExposedWithoutToken {
        /// The configured address.
        listen: SocketAddr,
    },
}

/// The admin token: `env` (the value of `GSLB_ADMIN_TOKEN`, when set) takes precedence over
/// `admin.token_file`; `None` when neither is set. Both are trimmed.
///
/// # Errors
/// [`AdminAuthError::TokenFile`] when the file is unreadable or empty,
/// [`AdminAuthError::EmptyTokenEnv`].
pub fn resolve_admin_token(
    admin: &AdminSettings,
    env: Option<String>,
) -> Result<Option<AdminToken>, AdminAuthError> {
    if let Some(v) = env {
        return AdminToken::new(&v, ADMIN_TOKEN_ENV)
            .map(Some)
            .map_err(|_| AdminAuthError::EmptyTokenEnv);
    }
    match &admin.token_file {
        Some(path) => AdminToken::read_file(path)
            .map(Some)
            .map_err(AdminAuthError::TokenFile),
        None => Ok(None),
    }
}

impl AdminSettings {
    /// What the types do not enforce: both TLS files or neither, and `metrics_listen` apart
    /// from `listen`.
    ///
    /// # Errors
    /// The first problem, as `key: reason`.
    pub(super) fn check(&self) -> Result<(), String> {
        if self.tls_cert_file.is_some() != self.tls_key_file.is_some() {
            return Err(
                "admin.tls_cert_file, admin.tls_key_file: set both (TLS) or neither (plain HTTP)"
                    .into(),
            );
        }
        if self.metrics_listen == Some(self.listen) {
            return Err(format!(
                "admin.metrics_listen: {} is admin.listen too; leave it out to serve /metrics there",
                self.listen
            ));
        }
        Ok(())
    }
}

/// Every admin token: the one of `env` (`GSLB_ADMIN_TOKEN`) or `admin.token_file` (see
/// [`resolve_admin_token`]), named [`SINGLE_TOKEN_NAME`], then every `admin.token_files`
/// entry; and `admin.require_token_for_reads`, which needs at least one.
///
/// # Errors
/// Those of [`resolve_admin_token`], [`AdminAuthError::TokenFiles`],
/// [`AdminAuthError::Duplicate`], [`AdminAuthError::ReadsWithoutToken`].
pub fn resolve_admin_auth(
    admin: &AdminSettings,
    env: Option<String>,
) -> Result<AdminAuth, AdminAuthError> {
    let mut tokens = resolve_admin_token(admin, env)?
        .map(AdminTokens::single)
        .unwrap_or_default();
    for path in &admin.token_files {
        tokens.read_file(path)?;
    }
    if admin.require_token_for_reads && tokens.is_empty() {
        return Err(AdminAuthError::ReadsWithoutToken);
    }
    Ok(AdminAuth {
        tokens,
        protect_reads: admin.require_token_for_reads,
    })
}

/// Refuses a non-loopback `listen` address (including `0.0.0.0` and `::`) without a token.
///
/// # Errors
/// [`AdminAuthError::ExposedWithoutToken`].
pub fn check_admin_listen(listen: SocketAddr, tokens: &AdminTokens) -> Result<(), AdminAuthError> {
    let loopback = match listen.ip() {
        IpAddr::V4(ip) => ip.is_loopback(),
        IpAddr::V6(ip) => {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    };
    if loopback || !tokens.is_empty() {
        Ok(())
    } else {
        Err(AdminAuthError::ExposedWithoutToken { listen })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_never_shows_in_debug_or_errors() {
        let t = AdminToken::new("s3cret", "test").expect("token");
        assert_eq!(format!("{t:?}"), "AdminToken(<redacted>)");
        assert_eq!(format!("{:?}", Some(t)), "Some(AdminToken(<redacted>))");
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write");
        path
    }

    #[test]
    fn named_token_files_identify_callers_by_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ops = write(
            dir.path(),
            "ops",
            "# on call\nalice = \"a-secret\"\nbob = \" b-secret\\n\"\n",
        );
        let ci = write(dir.path(), "ci", "deploy-bot = \"c-secret\"\n");
        let admin = AdminSettings {
            token_files: vec![ops.clone(), ci],
            require_token_for_reads: true,
            ..AdminSettings::default()
        };
        let auth = resolve_admin_auth(&admin, Some("legacy".into())).expect("valid");
        assert!(auth.protect_reads);
        assert_eq!(auth.tokens.identify("a-secret"), Some("alice"));
        assert_eq!(auth.tokens.identify("b-secret"), Some("bob"));
        assert_eq!(auth.tokens.identify("c-secret"), Some("deploy-bot"));
        assert_eq!(auth.tokens.identify("legacy"), Some(SINGLE_TOKEN_NAME));
        assert_eq!(auth.tokens.identify("a-secre"), None);
        // A duplicate name or token, a bad line, a non-string: the file and the reason.
        let again = write(dir.path(), "again", "alice = \"other\"\n");
        let shared = write(dir.path(), "shared", "carol = \"a-secret\"\n");
        let broken = write(dir.path(), "broken", "alice: a-secret\n");
        let number = write(dir.path(), "number", "alice = 3\n");
        for (file, says) in [
            (&again, "the name 'alice' is given twice"),
            (&shared, "the token of 'carol' is another name's too"),
            (&broken, "line 1"),
            (&number, "'alice': the token must be a string"),
        ] {
            let admin = AdminSettings {
                token_files: vec![ops.clone(), file.clone()],
                ..AdminSettings::default()
            };
            let e = resolve_admin_auth(&admin, None)
                .expect_err("bad")
                .to_string();
            assert!(e.contains(&file.display().to_string()), "{e}");
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn protected_reads_need_a_token() {
        let admin = AdminSettings {
            require_token_for_reads: true,
            ..AdminSettings::default()
        };
        let e = resolve_admin_auth(&admin, None).expect_err("no token");
        assert!(
            e.to_string()
                .starts_with("admin.require_token_for_reads: no admin token is configured"),
            "{e}"
        );
    }

    #[test]
    fn token_files_are_trimmed_and_must_not_be_empty() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("token");
        std::fs::write(&path, "  abc \n").expect("write");
        assert!(AdminToken::read_file(&path).expect("read").matches("abc"));
        std::fs::write(&path, "\n").expect("write");
        let e = AdminToken::read_file(&path).expect_err("empty");
        assert_eq!(
            e.to_string(),
            format!("the admin token from {} is empty", path.display())
        );
        let missing = dir.path().join("missing");
        let e = AdminToken::read_file(&missing).expect_err("missing");
        assert!(
            e.to_string().starts_with(&format!(
                "cannot read the admin token file {}: ",
                missing.display()
            )),
            "{e}"
        );
    }
}
