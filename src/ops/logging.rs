//! Log lines as operators read them: the default filter, a JSON line format whose list fields
//! are JSON arrays, and [`List`] to log a list as one plain value.
//!
//! Must not: decide what is logged (the loops do), or print Rust debug text: a field is a pool
//! name, a duration like `90s`, a number, or a list of such (see ARCHITECTURE's style rules).

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// How log lines are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines (colours on a terminal).
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

impl LogFormat {
    /// `text` or `json`, in any case (`--log-format`, `GSLB_LOG_FORMAT`).
    ///
    /// # Errors
    /// Anything else, naming both ways of setting it.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "text" => Ok(Self::Text),
            "json" => Ok(Self::Json),
            _ => {
                Err("expected `text` or `json` (set by --log-format or GSLB_LOG_FORMAT)".to_owned())
            }
        }
    }
}

/// Directives added to every default filter: `rustls-platform-verifier` logs one ERROR line
/// per refused certificate (`failed to verify TLS certificate: ...`), i.e. one per failed
/// probe of a broken origin; the probe's own reason (`tls_expired`, `tls_unknown_issuer`, ...)
/// says the same once, in status, metrics and the decision's reasons. `aws-config`'s
/// credential chain logs a WARN per provider it tried, in Rust debug text
/// (`ProviderError(ProviderError { source: ...`); the Route 53 adapter's own error says once
/// that no credentials were found and where it looked.
pub const QUIET_TARGETS: [&str; 2] = [
    "rustls_platform_verifier=off",
    "aws_config::meta::credentials::chain=error",
];

/// Fields whose value is a list, logged with [`List`]: written as JSON arrays by [`JsonLines`].
pub const LIST_FIELDS: [&str; 6] = [
    "reasons",
    "changed",
    "unchanged",
    "removed",
    "events",
    "plan",
];

/// The filter from `GSLB_LOG` (`gslb_log`, an `EnvFilter` directive such as
/// `info,gslb::daemon::reconcile=debug`) or `default` (`info`, `warn`) when unset; with
/// [`QUIET_TARGETS`] unless `gslb_log` names them itself. Returns the filter and, when
/// `gslb_log` is set but not a valid filter, that value (the default is used instead).
pub fn filter(default: &str, gslb_log: Option<&str>) -> (EnvFilter, Option<String>) {
    let quiet = |directives: &str| {
        let mut out = directives.to_owned();
        for quiet in QUIET_TARGETS {
            let target = quiet.split('=').next().unwrap_or(quiet);
            if !gslb_log.is_some_and(|v| v.contains(target)) {
                out = format!("{out},{quiet}");
            }
        }
        out
    };
    match gslb_log {
        Some(v) if !v.trim().is_empty() => match EnvFilter::try_new(quiet(v)) {
            Ok(f) => (f, None),
            Err(_) => (EnvFilter::new(quiet(default)), Some(v.to_owned())),
        },
        Some(v) => (EnvFilter::new(quiet(default)), Some(v.to_owned())),
        None => (EnvFilter::new(quiet(default)), None),
    }
}

/// A list logged as one field: `["seoul", "tokyo"]` (JSON array text; a JSON array in
/// [`JsonLines`] output when the field is one of [`LIST_FIELDS`]).
pub struct List<'a, T>(pub &'a [T]);

impl<T: fmt::Display> fmt::Display for List<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let items: Vec<Value> = self.0.iter().map(|i| i.to_string().into()).collect();
        f.write_str(&Value::Array(items).to_string())
    }
}

/// One JSON object per line: `timestamp` (RFC 3339, UTC), `level`, `fields` (`message` and
/// the event's fields; [`LIST_FIELDS`] as arrays, integers and booleans as such), `target`.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let meta = event.metadata();
        let line = serde_json::json!({
            "timestamp": humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string(),
            "level": meta.level().as_str(),
            "fields": fields.0,
            "target": meta.target(),
        });
        writeln!(writer, "{line}")
    }
}

#[derive(Default)]
struct Fields(Map<String, Value>);

impl Fields {
    fn text(&mut self, field: &Field, text: String) {
        let value = match serde_json::from_str::<Value>(&text) {
            Ok(list @ Value::Array(_)) if LIST_FIELDS.contains(&field.name()) => list,
            _ => Value::String(text),
        };
        self.0.insert(field.name().to_owned(), value);
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.text(field, format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.text(field, value.to_owned());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.into());
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_owned(), value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), value.into());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn json_decision_lines_carry_pool_names_and_arrays_of_reasons() {
        let buf = Buf::default();
        let out = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .event_format(JsonLines)
            .with_writer(move || out.clone())
            .finish();
        let reasons = ["pool seoul is down".to_owned(), "rule failover".to_owned()];
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(service = "api", active = Some("tokyo"), reasons = %List(&reasons), n = 3, "decision");
            tracing::info!(active = None::<&str>, "no pool");
        });
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let f = &lines[0]["fields"];
        assert_eq!(f["active"], "tokyo", "{text}");
        assert_eq!(f["reasons"], serde_json::json!(reasons), "{text}");
        assert_eq!(
            (f["n"].as_u64(), &f["message"]),
            (Some(3), &"decision".into())
        );
        assert_eq!(lines[0]["level"], "INFO");
        assert!(lines[1]["fields"].get("active").is_none(), "{text}");
        assert!(!text.contains("Some(") && !text.contains("None"), "{text}");
    }

    /// What `filter` lets through of a verifier ERROR line, an `aws-config` credential-chain
    /// WARN line and a gslb INFO line.
    fn logged(gslb_log: Option<&str>) -> String {
        let buf = Buf::default();
        let out = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .event_format(JsonLines)
            .with_env_filter(filter("info", gslb_log).0)
            .with_writer(move || out.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::error!(target: "rustls_platform_verifier::verification::others", "failed to verify TLS certificate: invalid peer certificate: Expired");
            tracing::warn!(target: "aws_config::meta::credentials::chain", "provider failed: ProviderError(ProviderError {{ source: FailedToLoadToken }})");
            tracing::info!(target: "gslb::daemon", "decision");
        });
        String::from_utf8(buf.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn the_default_filter_silences_the_verifiers_per_probe_errors() {
        for gslb_log in [None, Some("debug"), Some("info,gslb=debug")] {
            let text = logged(gslb_log);
            assert!(text.contains("decision"), "{gslb_log:?}: {text}");
            assert!(!text.contains("failed to verify"), "{gslb_log:?}: {text}");
            assert!(!text.contains("ProviderError("), "{gslb_log:?}: {text}");
        }
        let asked = logged(Some("info,rustls_platform_verifier=error"));
        assert!(
            asked.contains("failed to verify"),
            "named in GSLB_LOG: {asked}"
        );
        assert_eq!(
            filter("info", Some("=[")).1.as_deref(),
            Some("=["),
            "bad filter named"
        );
    }
}
