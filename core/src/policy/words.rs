//! serde's messages in the policy's own words: "must be an integer, not the string \"3\""
//! instead of "invalid type: string \"3\", expected u32". Shared by the daemon settings.

/// `message` (a serde or toml deserialisation error) about `key`, in the policy's words. A
/// message it does not recognise is returned as it is.
pub fn reason(message: &str, key: &str) -> String {
    // A choice (`failback = "manual"`) given a number, a list or an empty table: toml's words
    // for it are "unit variant" and "wanted exactly 1 element".
    if message.starts_with("invalid type: unit variant")
        || message.starts_with("wanted exactly 1 element")
    {
        return "must be one of its choices, written as a string".to_owned();
    }
    if let Some(field) = between(message, "missing field `", "`") {
        return format!("{field} is required and missing");
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        let (got, expected) = rest.split_once(", expected ").unwrap_or((rest, ""));
        let expected = expected.replace('`', "\"");
        let got = got.replace('`', "\"");
        return format!("must be {expected}, not {got}");
    }
    let (body, out_of_range) = match message.strip_prefix("invalid value: ") {
        Some(b) => (Some(b), true),
        None => (message.strip_prefix("invalid type: "), false),
    };
    match body.and_then(|b| b.split_once(", expected ")) {
        Some((got, expected)) => format!(
            "must be {}, not {}",
            expected_words(expected, key, out_of_range),
            got_words(got)
        ),
        None => message.to_owned(),
    }
}

/// A message of the TOML reader itself (a value TOML cannot hold) in the policy's words:
/// an integer beyond 64 bits (`... as i128, expected any valid TOML value`), a float beyond
/// `f64`. Any other message is returned as it is.
pub fn toml_reason(message: &str) -> String {
    let message = message.trim_end();
    if let Some(n) = between(message, "integer `", "` as i128") {
        return format!(
            "the integer {n} is out of range (TOML integers are 64-bit: at most {})",
            i64::MAX
        );
    }
    if message.contains("floating-point number overflowed") {
        return "a number too large (at most about 1.8e308)".to_owned();
    }
    message.to_owned()
}

/// The text between `open` and the next `close` in `s`.
fn between<'a>(s: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = s.find(open)? + open.len();
    let len = s[start..].find(close)?;
    Some(&s[start..start + len])
}

/// What serde expected, as a policy author would say it; lists say what they list, by key.
/// An unsigned integer `out_of_range` (an integer was given) says its range.
fn expected_words(expected: &str, key: &str, out_of_range: bool) -> String {
    let last = key.rsplit('.').next().unwrap_or(key);
    let last = last.split('[').next().unwrap_or(last);
    let words = match expected.trim() {
        "a nonzero u8" | "a nonzero u16" | "a nonzero u32" if out_of_range => {
            return integer_range(expected.trim().trim_start_matches("a nonzero "))
                .replacen("from 0", "from 1", 1);
        }
        "a nonzero u8" | "a nonzero u16" | "a nonzero u32" | "a nonzero u64"
        | "a nonzero usize" => "an integer of 1 or more",
        "u8" | "u16" | "u32" | "u64" | "usize" if out_of_range => return integer_range(expected),
        "u8" | "u16" | "u32" | "u64" | "usize" => "an integer",
        "i8" | "i16" | "i32" | "i64" | "isize" => "an integer",
        "f32" | "f64" => "a number",
        "a boolean" => "true or false",
        "a string" | "a borrowed string" | "a character" => "a string",
        "a duration" => "a duration like \"30s\" or \"1m 30s\"",
        "socket address" => "an address and port like \"127.0.0.1:9464\"",
        "a sequence" | "a list" => list_of(last),
        e if e.starts_with("struct ") || e == "a map" => "a table",
        e if e.starts_with("a ") || e.starts_with("an ") => e,
        _ => return format!("a value of the kind {last} takes"),
    };
    words.to_owned()
}

/// Integers of unsigned type `ty`: "an integer from 0 to <max>".
fn integer_range(ty: &str) -> String {
    let max = match ty.trim() {
        "u8" => u64::from(u8::MAX),
        "u16" => u64::from(u16::MAX),
        "u32" => u64::from(u32::MAX),
        _ => return "an integer of 0 or more".to_owned(),
    };
    format!("an integer from 0 to {max}")
}

/// The list a key holds.
fn list_of(key: &str) -> &'static str {
    match key {
        "endpoints" => "a list of endpoint URLs",
        "expected_status" => "a list of HTTP status codes",
        "values" => "a list of addresses",
        "nameservers" => "a list of name servers like \"192.0.2.53:53\"",
        "pools" => "a list of [[pools]] tables",
        k if k.ends_with("pools") => "a list of pool names",
        "policies" => "a list of policy files or folders",
        _ => "a list",
    }
}

/// What was found, as serde's `Unexpected` wrote it: `string "3"` -> `the string "3"`.
fn got_words(got: &str) -> String {
    let got = got.trim();
    let value = |prefix: &str| {
        got.strip_prefix(prefix)
            .map(|v| v.trim().trim_matches('`').to_owned())
    };
    if let Some(v) = value("string ") {
        format!("the string {v}")
    } else if let Some(v) = value("integer ") {
        format!("the integer {v}")
    } else if let Some(v) = value("floating point ") {
        format!("the number {v}")
    } else if let Some(v) = value("boolean ") {
        v
    } else {
        match got {
            "sequence" => "a list".to_owned(),
            "map" => "a table".to_owned(),
            other => other.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::reason;

    #[test]
    fn rust_type_names_become_the_policys_words() {
        for (message, key, want) in [
            (
                "invalid type: string \"3\", expected u32",
                "health.fall",
                "must be an integer, not the string \"3\"",
            ),
            (
                "invalid value: integer `-1`, expected u32",
                "health.rise",
                "must be an integer from 0 to 4294967295, not the integer -1",
            ),
            (
                "invalid value: string \"3 sec\", expected a duration",
                "probe.interval",
                "must be a duration like \"30s\" or \"1m 30s\", not the string \"3 sec\"",
            ),
            (
                "invalid type: string \"seoul\", expected a sequence",
                "target.cloudflare.default_pools",
                "must be a list of pool names, not the string \"seoul\"",
            ),
            (
                "unknown variant `sometimes`, expected `auto` or `manual`",
                "failback",
                "must be \"auto\" or \"manual\", not \"sometimes\"",
            ),
            (
                "invalid type: integer `1`, expected a boolean",
                "probe.tls_verify",
                "must be true or false, not the integer 1",
            ),
            (
                "missing field `hostname`",
                "",
                "hostname is required and missing",
            ),
        ] {
            let got = reason(message, key);
            assert_eq!(got, want, "{message}");
            assert!(!got.contains("u32") && !got.contains("expected"), "{got}");
        }
    }
}
