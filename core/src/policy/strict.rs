//! A TOML value read strictly: a table must be a table. serde lets a struct be read from a list
//! of its fields in order, so `probe = ["20s", "10s"]` passed as `[probe]` with `interval =
//! "20s"` and `timeout = "10s"` (issue 28). [`Strict`] reads a `toml::Value` as the value does,
//! except that a struct (a TOML table in the schema) from anything but a table is refused:
//! `must be a table, not a list`. Shared by the policies and the daemon settings
//! ([`super::read_all_with`]).

use serde::de::{
    self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Unexpected,
    Visitor,
};
use toml::Value;

/// A `toml::Value` whose structs must be tables, at every depth.
#[derive(Debug, Clone)]
pub struct Strict(pub Value);

type Error = toml::de::Error;

/// How serde names `value`'s kind in a message.
fn unexpected(value: &Value) -> Unexpected<'_> {
    match value {
        Value::String(s) => Unexpected::Str(s),
        Value::Integer(i) => Unexpected::Signed(*i),
        Value::Float(f) => Unexpected::Float(*f),
        Value::Boolean(b) => Unexpected::Bool(*b),
        Value::Datetime(_) => Unexpected::Other("a date-time"),
        Value::Array(_) => Unexpected::Seq,
        Value::Table(_) => Unexpected::Map,
    }
}

impl<'de> Deserializer<'de> for Strict {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Table(t) => visitor.visit_map(Entries {
                entries: t.into_iter(),
                value: None,
            }),
            Value::Array(a) => visitor.visit_seq(Elements(a.into_iter())),
            other => other.deserialize_any(visitor),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match &self.0 {
            Value::Table(_) => self.deserialize_any(visitor),
            other => Err(de::Error::invalid_type(unexpected(other), &"a table")),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        // TOML has no null: a value that is there is `Some`.
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.0.deserialize_enum(name, variants, visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map identifier ignored_any
    }
}

/// A table's entries, each value read strictly.
struct Entries {
    entries: toml::map::IntoIter<String, Value>,
    value: Option<Value>,
}

impl<'de> MapAccess<'de> for Entries {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        match self.entries.next() {
            Some((key, value)) => {
                self.value = Some(value);
                seed.deserialize(key.into_deserializer()).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, Error> {
        match self.value.take() {
            Some(value) => seed.deserialize(Strict(value)),
            None => Err(de::Error::custom("a value without its key")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

/// A list's elements, each read strictly.
struct Elements(std::vec::IntoIter<Value>);

impl<'de> SeqAccess<'de> for Elements {
    type Error = Error;

    fn next_element_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, Error> {
        self.0
            .next()
            .map(|v| seed.deserialize(Strict(v)))
            .transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Probe {
        interval: String,
        timeout: String,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Policy {
        probe: Probe,
        #[serde(default)]
        endpoints: Vec<String>,
        note: Option<String>,
    }

    fn read(text: &str) -> Result<Policy, Error> {
        let value: Value = toml::from_str(text).expect("TOML");
        Policy::deserialize(Strict(value))
    }

    #[test]
    fn a_list_where_a_table_belongs_is_refused_and_tables_and_lists_read() {
        let ok = read(
            "endpoints = [\"a\"]\nnote = \"n\"\n[probe]\ninterval = \"2s\"\ntimeout = \"1s\"\n",
        )
        .expect("valid");
        assert_eq!(ok.probe.interval, "2s");
        assert_eq!(ok.endpoints, ["a"]);
        assert_eq!(ok.note.as_deref(), Some("n"));
        let err = read("probe = [\"20s\", \"10s\"]\n").expect_err("a list");
        assert!(
            err.to_string()
                .contains("invalid type: sequence, expected a table"),
            "{err}"
        );
    }
}
