//! How time is written in JSON (status, events, drills, the audit log, recordings, the drill
//! state file): instants ([`Millis`]) as RFC 3339 strings in UTC with milliseconds
//! (`"2026-11-29T06:02:11.204Z"`, as webhooks write them), durations as seconds, a number
//! (`0.001380194`; [`seconds`]). Both read back what older versions wrote too: Unix
//! milliseconds for an instant, a humantime string (`"1ms 380us 194ns"`, `"5s"`) for a
//! duration.

use std::fmt;
use std::time::{Duration, UNIX_EPOCH};

use serde::de::{self, Visitor};
use serde::{Deserializer, Serialize, Serializer};

use super::Millis;

impl Serialize for Millis {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.rfc3339())
    }
}

impl<'de> serde::Deserialize<'de> for Millis {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(MillisVisitor)
    }
}

struct MillisVisitor;

impl Visitor<'_> for MillisVisitor {
    type Value = Millis;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a time: RFC 3339 (\"2026-11-29T06:02:11.204Z\") or Unix milliseconds")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Millis, E> {
        if v > Millis::MAX.0 {
            return Err(E::custom(format!(
                "a time after {} (Unix milliseconds {v})",
                Millis::MAX.rfc3339()
            )));
        }
        Ok(Millis(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Millis, E> {
        let v = u64::try_from(v).map_err(|_| E::custom(format!("a time before 1970: {v}")))?;
        self.visit_u64(v)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Millis, E> {
        let t = humantime::parse_rfc3339(v).map_err(|e| E::custom(format!("'{v}': {e}")))?;
        let since = t
            .duration_since(UNIX_EPOCH)
            .map_err(|_| E::custom(format!("'{v}': before 1970")))?;
        Ok(Millis(u64::try_from(since.as_millis()).unwrap_or(u64::MAX)))
    }
}

/// A [`Duration`] as seconds, a number (`serde(with = "seconds")`); reads a number of
/// seconds or a humantime string (`"1ms 380us"`, `"5s"`).
pub mod seconds {
    use super::*;

    /// Writes `d` as seconds (fractional).
    ///
    /// # Errors
    /// Those of the serializer.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    /// Reads seconds (a number) or a humantime string.
    ///
    /// # Errors
    /// Neither, or a negative number.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        d.deserialize_any(SecondsVisitor)
    }

    /// `Option<Duration>` as seconds or `null` (`serde(with = "seconds::option")`).
    pub mod option {
        use super::*;

        /// Writes `d` as seconds, or `null`.
        ///
        /// # Errors
        /// Those of the serializer.
        pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
            match d {
                Some(d) => s.serialize_some(&d.as_secs_f64()),
                None => s.serialize_none(),
            }
        }

        /// Reads seconds, a humantime string, or `null`.
        ///
        /// # Errors
        /// See [`super::deserialize`].
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
            d.deserialize_option(OptionVisitor)
        }

        struct OptionVisitor;

        impl<'de> Visitor<'de> for OptionVisitor {
            type Value = Option<Duration>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration in seconds, or null")
            }

            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }

            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }

            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                super::deserialize(d).map(Some)
            }
        }
    }

    struct SecondsVisitor;

    impl Visitor<'_> for SecondsVisitor {
        type Value = Duration;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a duration: seconds (a number) or a string like \"5s\"")
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Duration, E> {
            Duration::try_from_secs_f64(v).map_err(|e| E::custom(format!("{v} seconds: {e}")))
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
            Ok(Duration::from_secs(v))
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
            u64::try_from(v)
                .map(Duration::from_secs)
                .map_err(|_| E::custom(format!("{v} seconds: negative")))
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
            humantime::parse_duration(v).map_err(|e| E::custom(format!("'{v}': {e}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Sample {
        at: Millis,
        #[serde(with = "seconds")]
        took: Duration,
        #[serde(default, with = "seconds::option")]
        lookup: Option<Duration>,
    }

    #[test]
    fn times_are_rfc3339_and_durations_seconds_and_old_forms_still_read() {
        let s = Sample {
            at: Millis(1_795_932_131_204),
            took: Duration::from_nanos(1_380_194),
            lookup: None,
        };
        let json = serde_json::to_value(&s).expect("json");
        assert_eq!(
            json,
            serde_json::json!({"at": "2026-11-29T06:02:11.204Z", "took": 0.001380194, "lookup": null})
        );
        let back: Sample = serde_json::from_value(json).expect("round trip");
        assert_eq!(back, s);
        let old: Sample = serde_json::from_str(
            r#"{"at": 1795932131204, "took": "1ms 380us 194ns", "lookup": "2ms"}"#,
        )
        .expect("old forms");
        assert_eq!(
            old,
            Sample {
                lookup: Some(Duration::from_millis(2)),
                ..s
            }
        );
        let e = serde_json::from_str::<Sample>(r#"{"at": "yesterday", "took": 1}"#)
            .expect_err("bad time")
            .to_string();
        assert!(e.contains("'yesterday'"), "{e}");
    }
}
