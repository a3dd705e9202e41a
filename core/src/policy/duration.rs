//! Durations as policies and settings write them (`"10s"`, `"1h 30m"`, humantime's syntax),
//! bounded: every duration gslb reads is at most [`MAX`], so no sum of an instant and a
//! configured duration can overflow (`reconcile.resync = "500000000000y"` passed `gslb check`
//! and panicked at start). Use as `#[serde(with = "gslb_core::policy::duration")]` on a
//! [`Duration`] or an `Option<Duration>`.

use std::time::Duration;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The longest duration read: 3,650 days (ten years). Each key's own, tighter range is in
/// its documentation and checked by validation.
pub const MAX: Duration = Duration::from_secs(3650 * 24 * 3600);

/// A duration, or an optional one, whose longest value can be checked.
pub trait Bounded {
    /// The duration, if any.
    fn duration(&self) -> Option<Duration>;
}

impl Bounded for Duration {
    fn duration(&self) -> Option<Duration> {
        Some(*self)
    }
}

impl Bounded for Option<Duration> {
    fn duration(&self) -> Option<Duration> {
        *self
    }
}

/// Writes as humantime does (`"1m 30s"`).
///
/// # Errors
/// The serializer's.
pub fn serialize<T, S>(d: &T, s: S) -> Result<S::Ok, S::Error>
where
    for<'a> humantime_serde::Serde<&'a T>: Serialize,
    S: Serializer,
{
    humantime_serde::serialize(d, s)
}

/// Reads a humantime duration of at most [`MAX`].
///
/// # Errors
/// Not a duration, or longer than [`MAX`] (`... is too long: at most 3650d (ten years)`).
pub fn deserialize<'de, T, D>(d: D) -> Result<T, D::Error>
where
    humantime_serde::Serde<T>: Deserialize<'de>,
    T: Bounded,
    D: Deserializer<'de>,
{
    let value: T = humantime_serde::deserialize(d)?;
    match value.duration() {
        Some(v) if v > MAX => Err(D::Error::custom(format!(
            "{} is too long: at most 3650d (ten years)",
            humantime::format_duration(v)
        ))),
        _ => Ok(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct S {
        #[serde(with = "super")]
        every: Duration,
        #[serde(default, with = "super")]
        after: Option<Duration>,
    }

    #[test]
    fn durations_up_to_ten_years_are_read_and_longer_ones_refused() {
        let s: S = toml::from_str("every = \"3650d\"\nafter = \"1s\"").expect("valid");
        assert_eq!((s.every, s.after), (MAX, Some(Duration::from_secs(1))));
        let err = toml::from_str::<S>("every = \"500000000000y\"").expect_err("too long");
        assert!(
            err.message().contains("is too long: at most 3650d"),
            "{err}"
        );
        let err = toml::from_str::<S>("every = \"1s\"\nafter = \"3651d\"").expect_err("too long");
        assert!(err.message().contains("at most 3650d"), "{err}");
    }
}
