//! The Prometheus text exposition format 0.0.4, written straight into one output buffer: a
//! family's `# HELP` and `# TYPE` lines, a sample's name, labels and value. Byte for byte what
//! the `prometheus` crate's `TextEncoder` writes for the same series (label pairs sorted by
//! name, `le` last, values in Rust's shortest `f64` form), except non-finite values, written
//! `+Inf`, `-Inf` and `NaN` as the format specifies (the crate writes `inf`).

use std::fmt::Write as _;

/// Writes `# HELP name help` (help escaped: `\` and line feed) and `# TYPE name kind`.
pub(super) fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    out.push_str("# HELP ");
    out.push_str(name);
    out.push(' ');
    escaped(out, help, false);
    out.push_str("\n# TYPE ");
    out.push_str(name);
    out.push(' ');
    out.push_str(kind);
    out.push('\n');
}

/// Writes `{a="x",b="y"` (no closing brace): `names[i]="values[i]"` with each value escaped
/// (`\`, `"` and line feed). Nothing when there are no labels.
pub(super) fn labels<'a>(
    out: &mut String,
    names: &[&str],
    values: impl IntoIterator<Item = &'a str>,
) {
    let mut separator = '{';
    for (name, value) in names.iter().zip(values) {
        out.push(separator);
        out.push_str(name);
        out.push_str("=\"");
        escaped(out, value, true);
        out.push('"');
        separator = ',';
    }
}

/// Writes ` value\n`: an integral value under 2^53 as an integer (what `f64`'s `Display`
/// writes for it, faster), non-finite ones as `+Inf`, `-Inf` or `NaN`.
pub(super) fn value(out: &mut String, v: f64) {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53: every integer below is exact.
    out.push(' ');
    if v.is_nan() {
        out.push_str("NaN");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "+Inf" } else { "-Inf" });
    } else if v.fract() == 0.0 && v.abs() < EXACT && !(v == 0.0 && v.is_sign_negative()) {
        #[allow(clippy::cast_possible_truncation)]
        let _ = write!(out, "{}", v as i64);
    } else {
        let _ = write!(out, "{v}");
    }
    out.push('\n');
}

/// Writes ` n\n` for a count.
pub(super) fn count(out: &mut String, n: u64) {
    let _ = writeln!(out, " {n}");
}

/// Appends `v`, escaping `\` as `\\`, a line feed as `\n` and, when `quote`, `"` as `\"`.
fn escaped(out: &mut String, v: &str, quote: bool) {
    let special = |b: u8| b == b'\\' || b == b'\n' || (quote && b == b'"');
    if !v.bytes().any(special) {
        out.push_str(v);
        return;
    }
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if quote => out.push_str("\\\""),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn values_are_written_as_the_crate_writes_finite_ones() {
        for v in [
            0.0,
            1.0,
            -3.0,
            0.25,
            4_949_565_165.0,
            1e21,
            1.5e-7,
            -0.0,
            1800000000.5,
        ] {
            let mut out = String::new();
            super::value(&mut out, v);
            assert_eq!(out, format!(" {v}\n"), "{v}");
        }
        for (v, text) in [
            (f64::INFINITY, " +Inf\n"),
            (f64::NEG_INFINITY, " -Inf\n"),
            (f64::NAN, " NaN\n"),
        ] {
            let mut out = String::new();
            super::value(&mut out, v);
            assert_eq!(out, text);
        }
    }

    #[test]
    fn label_values_and_help_are_escaped() {
        let mut out = String::new();
        super::labels(&mut out, &["a", "b"], ["x\\y\n\"z\"", "plain"]);
        assert_eq!(out, r#"{a="x\\y\n\"z\"",b="plain""#);
        let mut out = String::new();
        super::header(&mut out, "m", "a \"quoted\" back\\slash\nline", "gauge");
        assert_eq!(
            out,
            "# HELP m a \"quoted\" back\\\\slash\\nline\n# TYPE m gauge\n"
        );
    }
}
