//! A TOML text as written: its syntax errors (each with line, column and the offending
//! text) and where each key is, so a problem found later can say its line. Shared by the
//! daemon settings.

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::error::{Lines, Position};
use super::lenient::Segment;

/// One TOML syntax error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// Where it is.
    pub at: Position,
    /// The parser's message (e.g. `key with no value, expected '='`).
    pub message: String,
    /// The line it is on, trimmed.
    pub text: String,
}

impl SyntaxError {
    /// `not valid TOML: <message>: <line>`, the reason a policy or settings error gives.
    pub fn reason(&self) -> String {
        format!(
            "not valid TOML: {} (in `{}`)",
            self.message.trim_end(),
            self.text
        )
    }
}

/// A parsed TOML document with the spans of its keys.
#[derive(Debug)]
pub struct Source<'t> {
    lines: Lines<'t>,
    doc: Spanned<DeTable<'t>>,
}

impl<'t> Source<'t> {
    /// Parses `text`. Every syntax error is returned, the first of each line (the parser
    /// recovers and goes on).
    ///
    /// # Errors
    /// The syntax errors, in order.
    pub fn parse(text: &'t str) -> Result<Self, Vec<SyntaxError>> {
        let (doc, errors) = DeTable::parse_recoverable(text);
        let lines = Lines::new(text);
        if errors.is_empty() {
            return Ok(Self { lines, doc });
        }
        let mut found: Vec<SyntaxError> = errors
            .into_iter()
            .map(|e| {
                let offset = e.span().map_or(0, |s| s.start);
                let at = lines.position(offset);
                let line = lines.line(at.line);
                SyntaxError {
                    at,
                    message: e.message().to_owned(),
                    text: line.trim().to_owned(),
                }
            })
            .collect();
        // The parser recovers after an error and often trips again on the rest of the same
        // line: one error per line, the first.
        found.dedup_by_key(|e| e.at.line);
        Err(found)
    }

    /// The position of byte `offset` of the text.
    pub fn position(&self, offset: usize) -> Position {
        self.lines.position(offset)
    }

    /// Where `key` (e.g. `pools[1].priority`) is written: its key, or for a list element the
    /// element. `None` when the key is not in the text (a default, a missing key).
    pub fn locate(&self, key: &str) -> Option<Position> {
        let path = Segment::parse(key);
        let root = self.doc.get_ref();
        let mut span = None;
        let mut value: Option<&DeValue<'_>> = None;
        for segment in &path {
            let (s, next) = match (segment, value) {
                (Segment::Key(k), None) => entry(root, k)?,
                (Segment::Key(k), Some(DeValue::Table(t))) => entry(t, k)?,
                (Segment::Index(i), Some(DeValue::Array(a))) => {
                    let v = a.get(*i)?;
                    (v.span(), v.get_ref())
                }
                _ => return None,
            };
            span = Some(s);
            value = Some(next);
        }
        span.map(|s| self.lines.position(s.start))
    }
}

/// The span of `key` in `table` and its value.
fn entry<'a, 't>(
    table: &'a DeTable<'t>,
    key: &str,
) -> Option<(std::ops::Range<usize>, &'a DeValue<'t>)> {
    let (name, v) = table.get_key_value(key)?;
    Some((name.span(), v.get_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "service = \"api\"\n[health]\nfall = \"3\"\n[[pools]]\nname = \"a\"\n[[pools]]\nname = \"b\"\npriority = 1\n";

    #[test]
    fn keys_and_list_elements_are_located() {
        let s = Source::parse(TEXT).expect("valid");
        let at = |k: &str| s.locate(k).map(|p| (p.line, p.column));
        assert_eq!(at("service"), Some((1, 1)));
        assert_eq!(at("health.fall"), Some((3, 1)));
        assert_eq!(at("pools[1].priority"), Some((8, 1)));
        assert_eq!(at("pools[1].region"), None);
        assert_eq!(at("mode"), None);
    }

    #[test]
    fn syntax_errors_have_line_column_and_text() {
        let errors = Source::parse("service = \"api\"\nfall = = 3\n").expect_err("invalid");
        assert_eq!(errors[0].at.line, 2);
        assert!(errors[0].at.column > 1, "{:?}", errors[0]);
        assert_eq!(errors[0].text, "fall = = 3");
        assert!(
            errors[0].reason().starts_with("not valid TOML: "),
            "{:?}",
            errors[0]
        );
    }
}
