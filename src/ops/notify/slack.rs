//! A [`Notification`] as a Slack incoming-webhook message: `{"text": ..., "blocks": [...]}`
//! (Block Kit: a header, a section of fields, the reasons, a context line). A shadow-mode
//! message's header ends `(shadow)` and its text is the `[shadow]` summary.
//!
//! Pure. Limits from Slack's Block Kit reference: header text at most 150 characters, a
//! section's text at most 3000, a field at most 2000; `text` is the notification fallback.
//! Text from operators (drill actor and reason) and reasons are escaped (`&`, `<`, `>`, as
//! Slack's "Formatting text" asks) so they cannot form links or mentions.

use serde_json::{Value, json};

use super::message::Notification;
use crate::config::NotifyKind;
use gslb_core::policy::Mode;

const HEADER_MAX: usize = 150;
const SECTION_MAX: usize = 3000;
const FIELD_MAX: usize = 2000;

/// The Slack message for `n`.
pub fn payload(n: &Notification) -> Value {
    let icon = match n.kind {
        NotifyKind::Switch => ":twisted_rightwards_arrows:",
        NotifyKind::Hold => ":double_vertical_bar:",
        NotifyKind::Drill => ":construction:",
    };
    let mut fields = vec![field("Service", &n.service.0)];
    if let Some(rule) = n.rule {
        fields.push(field("Rule", rule));
    }
    if let Some(from) = &n.from {
        fields.push(field("From", &from.0));
    }
    if let Some(to) = &n.to {
        fields.push(field("To", &to.0));
    }
    let mut detail = n
        .reasons
        .iter()
        .map(|r| format!("• {}", escape(r)))
        .collect::<Vec<_>>();
    if let Some(d) = &n.drill {
        fields.push(field("Drill", &format!("{} ({})", d.id, d.change)));
        fields.push(field("Action", &format!("{} {}", d.action, d.pool)));
        fields.push(field("Started by", &d.actor));
        fields.push(field("Expires", &d.expires));
        detail.push(format!("*Reason:* {}", escape(&d.reason)));
        if let (Some(by), Some(why)) = (&d.ended_by, &d.end_reason) {
            detail.push(format!("*Ended by {}:* {}", escape(by), escape(why)));
        }
    }
    let shadow = match n.mode {
        Mode::Enforce => "",
        Mode::Shadow => " (shadow)",
    };
    let mut blocks = vec![
        json!({"type": "header", "text": {"type": "plain_text", "text": truncate(&format!("{} {}{shadow}", n.service, n.kind.as_str()), HEADER_MAX)}}),
        json!({"type": "section", "text": {"type": "mrkdwn", "text": truncate(&format!("{icon} {}", escape(&n.summary)), SECTION_MAX)}, "fields": fields}),
    ];
    if !detail.is_empty() {
        blocks.push(json!({"type": "section", "text": {"type": "mrkdwn", "text": truncate(&detail.join("\n"), SECTION_MAX)}}));
    }
    blocks.push(json!({"type": "context", "elements": [{"type": "mrkdwn", "text": format!("gslb · vantage {} · {}", escape(&n.vantage.0), n.at)}]}));
    json!({ "text": escape(&n.summary), "blocks": blocks })
}

fn field(label: &str, value: &str) -> Value {
    json!({"type": "mrkdwn", "text": truncate(&format!("*{label}*\n{}", escape(value)), FIELD_MAX)})
}

/// Slack's three control characters in message text.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// At most `max` characters, an ellipsis marking a cut.
fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut t: String = s.chars().take(max - 1).collect();
    t.push('…');
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operator_text_is_escaped_and_long_text_cut() {
        assert_eq!(escape("<@here> & co"), "&lt;@here&gt; &amp; co");
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("abc", 4), "abc");
    }
}
