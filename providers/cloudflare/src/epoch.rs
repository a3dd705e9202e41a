//! The writer's epoch stamped in a load balancer's `description`: Cloudflare has no
//! compare-and-set (no ETag, no If-Match), so a cluster writer marks what it writes with its
//! epoch (fencing token) and checks the mark on read-back. A write from an older writer that
//! lands late shows a smaller epoch on the next read.
//!
//! The mark is `[gslb-epoch=N]`, appended to (or replacing the previous mark in) the human
//! text, which is kept as written, [`crate::MANAGED_TAG`] included. Pure text functions only.

/// What opens the mark: `[gslb-epoch=` then the decimal epoch then `]`.
pub const MARK: &str = "[gslb-epoch=";

/// The epoch in `description`, or `None` when it carries no well-formed mark (the last mark
/// wins if several were pasted by hand).
pub fn read(description: Option<&str>) -> Option<u64> {
    let d = description?;
    let start = d.rfind(MARK)? + MARK.len();
    let end = start + d[start..].find(']')?;
    d[start..end].parse().ok()
}

/// `description` with its mark (if any) replaced by one for `epoch`, the rest of the text
/// kept: `web LB [gslb-managed]` becomes `web LB [gslb-managed] [gslb-epoch=15]`.
pub fn stamp(description: Option<&str>, epoch: u64) -> String {
    let text = description.unwrap_or_default();
    let kept = match text.find(MARK) {
        Some(start) => {
            let end = text[start..]
                .find(']')
                .map_or(text.len(), |e| start + e + 1);
            format!("{}{}", &text[..start], &text[end..])
        }
        None => text.to_owned(),
    };
    let kept = kept.trim_end();
    if kept.is_empty() {
        format!("{MARK}{epoch}]")
    } else {
        format!("{kept} {MARK}{epoch}]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_keeps_the_human_text_and_replaces_the_previous_mark() {
        let first = stamp(Some("web LB [gslb-managed]"), 12);
        assert_eq!(first, "web LB [gslb-managed] [gslb-epoch=12]");
        assert_eq!(read(Some(&first)), Some(12));
        let second = stamp(Some(&first), 15);
        assert_eq!(second, "web LB [gslb-managed] [gslb-epoch=15]");
        assert_eq!(read(Some(&second)), Some(15));
        assert_eq!(stamp(None, 3), "[gslb-epoch=3]");
    }

    #[test]
    fn a_missing_or_malformed_mark_reads_as_no_epoch() {
        assert_eq!(read(None), None);
        assert_eq!(read(Some("web LB [gslb-managed]")), None);
        assert_eq!(read(Some("x [gslb-epoch=abc]")), None);
        assert_eq!(read(Some("x [gslb-epoch=12")), None);
    }
}
