//! `[[notify.webhooks]]`: webhook sinks for switches, holds and drills (see
//! [`crate::ops::notify`]).
//!
//! A webhook URL is often a secret (a Slack incoming-webhook URL is its own credential), so it can
//! come from a file (`url_file`) or an environment variable (`url_env`) instead of the settings
//! file, and it is never logged or printed: [`WebhookUrl`]'s `Debug` is redacted and errors name
//! the key, never the value.

use gslb_core::policy::file::read_text;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `[notify]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifySettings {
    /// The webhook sinks, each an array entry `[[notify.webhooks]]`. Default none.
    #[serde(default)]
    pub webhooks: Vec<WebhookSettings>,
}

/// One `[[notify.webhooks]]` entry, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookSettings {
    /// The sink's name: the `sink` label of `gslb_webhook_deliveries_total` and the log field.
    /// 1 to 64 characters of `a-z`, `0-9`, `_`, `-`; unique.
    pub name: String,
    /// The URL, inline. Exactly one of `url`, `url_file`, `url_env` is required; prefer the
    /// other two for secret URLs (Slack's).
    #[serde(default)]
    pub url: Option<WebhookUrl>,
    /// A file holding the URL (contents trimmed); relative to the settings file.
    #[serde(default)]
    pub url_file: Option<PathBuf>,
    /// An environment variable holding the URL, e.g. `SLACK_WEBHOOK_URL`. Not `GSLB_*`: those
    /// are settings keys.
    #[serde(default)]
    pub url_env: Option<String>,
    /// The payload: `json` (gslb's documented schema, default) or `slack` (an incoming-webhook
    /// message with `text` and `blocks`).
    #[serde(default)]
    pub format: WebhookFormat,
    /// Which events to send. Default all: `["switch", "hold", "drill"]`.
    #[serde(default = "default_events")]
    pub events: Vec<NotifyKind>,
    /// Timeout of one attempt (connect, send, response). Default 5 s; 100 ms to 5 min.
    #[serde(default = "default_timeout", with = "gslb_core::policy::duration")]
    pub timeout: Duration,
    /// Attempts per message, the first included. Default 5; 1 to 20.
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    /// The first retry's backoff cap; it doubles per retry up to `max_backoff`, with full
    /// jitter (AWS Architecture Blog, "Exponential Backoff and Jitter"). Default 1 s.
    #[serde(default = "default_backoff", with = "gslb_core::policy::duration")]
    pub backoff: Duration,
    /// The longest backoff, and the longest `Retry-After` obeyed. Default 60 s: Slack's
    /// limits on incoming webhooks are per second and per minute (api.slack.com/docs/rate-limits),
    /// so its `Retry-After` stays within a minute. At most 1 h.
    #[serde(default = "default_max_backoff", with = "gslb_core::policy::duration")]
    pub max_backoff: Duration,
    /// Messages waiting per sink; when full the oldest is dropped (as Prometheus' alert
    /// notification queue does). Default 256; 1 to 100 000.
    #[serde(default = "default_queue")]
    pub queue: usize,
}

/// A webhook URL: its `Debug` never shows it.
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct WebhookUrl(pub String);

impl std::fmt::Debug for WebhookUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookUrl(<redacted>)")
    }
}

/// The payload format of a sink.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WebhookFormat {
    /// gslb's JSON schema (`docs/notifications.md`).
    #[default]
    Json,
    /// A Slack incoming-webhook message.
    Slack,
}

/// What a sink is told about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NotifyKind {
    /// The serving pool changed (automatic or by a drill).
    Switch,
    /// The engine entered a hold that needs attention (see [`crate::ops::notify`]).
    Hold,
    /// A drill override started, ended, expired, completed or was skipped.
    Drill,
}

impl NotifyKind {
    /// `switch`, `hold` or `drill`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Switch => "switch",
            Self::Hold => "hold",
            Self::Drill => "drill",
        }
    }
}

/// A sink ready to run: its URL resolved. Its `Debug` leaves the URL out.
#[derive(Clone)]
pub struct Webhook {
    /// The name (metric label, log field).
    pub name: String,
    /// The URL (secret: never log it; reqwest errors carry it unless stripped).
    pub url: url::Url,
    /// The payload format.
    pub format: WebhookFormat,
    /// The events sent.
    pub events: Vec<NotifyKind>,
    /// Timeout of one attempt.
    pub timeout: Duration,
    /// Attempts per message.
    pub max_attempts: u32,
    /// The first backoff cap.
    pub backoff: Duration,
    /// The longest backoff and `Retry-After`.
    pub max_backoff: Duration,
    /// Queue capacity.
    pub queue: usize,
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook")
            .field("name", &self.name)
            .field("url", &"<redacted>")
            .field("format", &self.format)
            .field("events", &self.events)
            .field("timeout", &self.timeout)
            .field("max_attempts", &self.max_attempts)
            .field("backoff", &self.backoff)
            .field("max_backoff", &self.max_backoff)
            .field("queue", &self.queue)
            .finish()
    }
}

/// The largest `url_file` read: 64 KiB (a URL is at most a few KiB).
pub const MAX_URL_FILE: u64 = 64 << 10;

/// A webhook URL could not be resolved. Names the key, never the URL.
#[derive(Debug, thiserror::Error)]
pub enum WebhookUrlError {
    /// `url_file` is unreadable.
    #[error("notify.webhooks[{index}].url_file: cannot read {}: {reason}", path.display())]
    Unreadable {
        /// The entry.
        index: usize,
        /// The file.
        path: PathBuf,
        /// Why (e.g. `No such file or directory`).
        reason: String,
    },
    /// `url_env` is not set.
    #[error("notify.webhooks[{index}].url_env: {var} is not set")]
    Unset {
        /// The entry.
        index: usize,
        /// The variable.
        var: String,
    },
    /// The URL found is not an http(s) URL.
    #[error("notify.webhooks[{index}].{key}: does not hold an http(s) URL")]
    NotHttp {
        /// The entry.
        index: usize,
        /// `url`, `url_file` or `url_env`.
        key: &'static str,
    },
}

impl NotifySettings {
    /// Checks every entry; the message names `notify.webhooks[i].key` and the reason.
    ///
    /// # Errors
    /// The first problem found.
    pub fn check(&self) -> Result<(), String> {
        let mut names = std::collections::BTreeSet::new();
        for (i, w) in self.webhooks.iter().enumerate() {
            let key = |k: &str| format!("notify.webhooks[{i}].{k}");
            let valid_name = (1..=64).contains(&w.name.len())
                && w.name.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-'
                });
            if !valid_name {
                return Err(format!(
                    "{}: '{}' must be 1 to 64 characters of a-z, 0-9, '_' and '-'",
                    key("name"),
                    w.name
                ));
            }
            if !names.insert(&w.name) {
                return Err(format!("{}: '{}' is used twice", key("name"), w.name));
            }
            let sources = [w.url.is_some(), w.url_file.is_some(), w.url_env.is_some()];
            if sources.iter().filter(|s| **s).count() != 1 {
                return Err(format!(
                    "notify.webhooks[{i}]: set exactly one of url, url_file and url_env"
                ));
            }
            if let Some(u) = &w.url
                && !is_http(&u.0)
            {
                return Err(format!("{}: not an http(s) URL", key("url")));
            }
            if let Some(v) = &w.url_env
                && (v.is_empty() || v.starts_with("GSLB_"))
            {
                return Err(format!(
                    "{}: '{v}' must be a non-empty variable name outside GSLB_* (those are settings keys), e.g. SLACK_WEBHOOK_URL",
                    key("url_env")
                ));
            }
            if w.events.is_empty() {
                return Err(format!(
                    "{}: lists no event (switch, hold, drill); remove the sink instead",
                    key("events")
                ));
            }
            if w.timeout < Duration::from_millis(100) || w.timeout > Duration::from_secs(300) {
                return Err(format!("{}: must be between 100ms and 5m", key("timeout")));
            }
            if !(1..=20).contains(&w.max_attempts) {
                return Err(format!("{}: must be between 1 and 20", key("max_attempts")));
            }
            if w.backoff.is_zero() || w.backoff > w.max_backoff {
                return Err(format!(
                    "{}: must be more than 0 and at most max_backoff",
                    key("backoff")
                ));
            }
            if w.max_backoff > Duration::from_secs(3600) {
                return Err(format!("{}: must be at most 1h", key("max_backoff")));
            }
            if !(1..=100_000).contains(&w.queue) {
                return Err(format!("{}: must be between 1 and 100000", key("queue")));
            }
        }
        Ok(())
    }

    /// Makes `url_file` paths relative to the settings file's folder `base`.
    pub(super) fn relative_to(&mut self, base: &Path) {
        for w in &mut self.webhooks {
            if let Some(p) = w.url_file.as_mut().filter(|p| p.is_relative()) {
                *p = base.join(&*p);
            }
        }
    }

    /// Resolves every sink's URL (reading `url_file`, or `url_env` through `env`). Call once
    /// at start, after [`NotifySettings::check`] (through `Settings::load`).
    ///
    /// # Errors
    /// [`WebhookUrlError`]; each is a configuration error (exit code 2).
    pub fn resolve(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Vec<Webhook>, WebhookUrlError> {
        self.webhooks
            .iter()
            .enumerate()
            .map(|(index, w)| {
                let (key, raw) = match (&w.url, &w.url_file, &w.url_env) {
                    (Some(u), _, _) => ("url", u.0.clone()),
                    (_, Some(path), _) => (
                        "url_file",
                        read_text(path, MAX_URL_FILE).map_err(|reason| {
                            WebhookUrlError::Unreadable {
                                index,
                                path: path.clone(),
                                reason,
                            }
                        })?,
                    ),
                    (_, _, Some(var)) => (
                        "url_env",
                        env(var).ok_or_else(|| WebhookUrlError::Unset {
                            index,
                            var: var.clone(),
                        })?,
                    ),
                    (None, None, None) => ("url", String::new()),
                };
                let url = url::Url::parse(raw.trim())
                    .ok()
                    .filter(|u| is_http(u.as_str()))
                    .ok_or(WebhookUrlError::NotHttp { index, key })?;
                Ok(Webhook {
                    name: w.name.clone(),
                    url,
                    format: w.format,
                    events: w.events.clone(),
                    timeout: w.timeout,
                    max_attempts: w.max_attempts,
                    backoff: w.backoff,
                    max_backoff: w.max_backoff,
                    queue: w.queue,
                })
            })
            .collect()
    }
}

fn is_http(u: &str) -> bool {
    url::Url::parse(u)
        .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some())
}

fn default_events() -> Vec<NotifyKind> {
    vec![NotifyKind::Switch, NotifyKind::Hold, NotifyKind::Drill]
}
fn default_timeout() -> Duration {
    Duration::from_secs(5)
}
fn default_max_attempts() -> u32 {
    5
}
fn default_backoff() -> Duration {
    Duration::from_secs(1)
}
fn default_max_backoff() -> Duration {
    Duration::from_secs(60)
}
fn default_queue() -> usize {
    256
}
