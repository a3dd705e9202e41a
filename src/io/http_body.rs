//! Reading an HTTP response body (reqwest) with a bound: a peer that streams without end, or
//! sends more than is of any use, costs at most `limit` bytes of memory.
//!
//! Must not: judge or parse what it reads.

/// What [`read_at_most`] read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Bounded {
    /// The body's first bytes, at most the limit.
    pub bytes: Vec<u8>,
    /// Whether the body went on past the limit (the rest was not read).
    pub truncated: bool,
}

/// Reads `response`'s body until it ends or `limit` bytes are read, whichever comes first.
///
/// # Errors
/// The transfer failed (connection reset, timeout, bad framing) before either.
pub async fn read_at_most(
    response: &mut reqwest::Response,
    limit: usize,
) -> Result<Bounded, reqwest::Error> {
    let mut out = Bounded::default();
    while let Some(chunk) = response.chunk().await? {
        let room = limit - out.bytes.len();
        if chunk.len() > room {
            out.bytes.extend_from_slice(&chunk[..room]);
            out.truncated = true;
            break;
        }
        out.bytes.extend_from_slice(&chunk);
        if out.bytes.len() == limit {
            out.truncated = response.chunk().await?.is_some();
            break;
        }
    }
    Ok(out)
}
