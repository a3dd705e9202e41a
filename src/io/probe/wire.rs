//! HTTP/1.1 on the wire for probes: the request's bytes, built once per target, and the
//! response read from any byte stream (plain TCP or TLS): its head parsed by `httparse`, its
//! body framed by `Content-Length`, chunked transfer coding or the end of the connection
//! (RFC 9112 §6.3), and kept only up to [`BODY_LIMIT`].
//!
//! A probe sends one request per connection (`Connection: close`) and needs only the status,
//! a `Location` to follow and the start of the body: no pool, no keep-alive, no request body,
//! no compression. Reading the response takes one buffer (allocation) per probe.
//!
//! Must not: read a head over [`HEAD_LIMIT`] or a chunk-size line over [`LINE_LIMIT`] (a
//! malformed or hostile answer is an error, never unbounded memory), or perform I/O other than
//! reading the stream it is given.

use std::io;
use std::ops::Range;

use tokio::io::{AsyncRead, AsyncReadExt};

/// Bytes of the body read and searched for `body_contains`: 64 KiB (the limit documented on
/// `ProbeSpec::body_contains`; Route 53 string matching looks at only the first 5,120 bytes).
pub const BODY_LIMIT: usize = 64 * 1024;

/// The `User-Agent` probes send, e.g. `gslb-probe/0.1.0`.
pub const USER_AGENT: &str = concat!("gslb-probe/", env!("CARGO_PKG_VERSION"));

/// Largest response head read: 64 KiB (hyper's default read buffer limit is larger, about
/// 400 KiB; a health endpoint's head is well under 1 KiB).
pub(crate) const HEAD_LIMIT: usize = 64 * 1024;

/// Largest chunk-size line (size, extensions and CRLF): 4 KiB.
pub(crate) const LINE_LIMIT: usize = 4 * 1024;

/// Bytes of chunked framing (size lines with their extensions, the CRLF after each chunk,
/// trailers) read beyond one per body byte: 16 KiB (hyper's limits for chunk extensions and for
/// trailers are 16 KiB each). With [`HEAD_LIMIT`] for all heads, interim ones included, a
/// probe reads at most about `HEAD_LIMIT + 2 x BODY_LIMIT + FRAMING_ALLOWANCE` (208 KiB) of one
/// response, however hostile the origin.
pub(crate) const FRAMING_ALLOWANCE: usize = 16 * 1024;

/// Header slots tried first when parsing a response head: 64, on the stack. A head with more
/// headers is parsed again with one slot per line it holds: the number of headers is bounded
/// only by [`HEAD_LIMIT`], as in Go's client (blackbox_exporter) and curl, not by a count
/// (hyper's 100 failed healthy origins that send 120).
const FEW_HEADERS: usize = 64;

/// What is wrong with a response that does not parse. Read errors of the stream itself stay
/// `io::Error`s with their own kind; these are wrapped as [`io::ErrorKind::InvalidData`], which
/// the classifier reports as `other`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WireError {
    /// The status line or a header does not parse.
    #[error("malformed response head: {0}")]
    Head(httparse::Error),
    /// The head, with the interim `1xx` heads before it, is over [`HEAD_LIMIT`] bytes.
    #[error("response head over {HEAD_LIMIT} bytes")]
    HeadTooLarge,
    /// Chunked framing over [`FRAMING_ALLOWANCE`] bytes more than the body.
    #[error("chunked framing over {FRAMING_ALLOWANCE} bytes more than the body")]
    Framing,
    /// `Content-Length` is not a number, or two of them differ: reported when the body is
    /// read (a status that is not expected is judged without it).
    #[error("invalid Content-Length")]
    ContentLength,
    /// A chunk-size line does not parse or is over [`LINE_LIMIT`] bytes.
    #[error("malformed chunked body")]
    Chunk,
}

impl From<WireError> for io::Error {
    fn from(e: WireError) -> Self {
        io::Error::new(io::ErrorKind::InvalidData, e)
    }
}

/// The request a probe sends, e.g. `GET /health HTTP/1.1`, `Host: <authority>`,
/// `User-Agent: gslb-probe/<version>`, `Accept: */*`, `Connection: close`. `target` is the path
/// and query (`/` when empty); `host` the `Host` header's value.
pub(crate) fn request(target: &str, host: &str) -> Box<[u8]> {
    let target = if target.is_empty() { "/" } else { target };
    format!(
        "GET {target} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {USER_AGENT}\r\nAccept: */*\r\n\
         Connection: close\r\n\r\n"
    )
    .into_bytes()
    .into_boxed_slice()
}

/// How the body of a response ends (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// No body: a `1xx`, `204` or `304` status.
    Empty,
    /// `Content-Length` bytes.
    Length(u64),
    /// Chunked transfer coding (the last coding of `Transfer-Encoding`).
    Chunked,
    /// Until the server closes the connection (no length, or a transfer coding other than
    /// chunked last).
    UntilClose,
    /// An invalid `Content-Length`: the body cannot be read ([`WireError::ContentLength`]).
    Invalid,
}

/// A response head: the status, a `Location` header when there is one, and the body's framing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) status: u16,
    pub(crate) location: Option<String>,
    pub(crate) framing: Framing,
}

/// A response being read from `stream`: bytes read but not yet consumed stay in `buf`.
pub(crate) struct Response<'s, S> {
    stream: &'s mut S,
    buf: Vec<u8>,
    /// Start of the bytes in `buf` not consumed yet.
    at: usize,
    /// Bytes of interim (`1xx`) heads consumed.
    interim: usize,
    /// Bytes of chunked framing consumed (lines and their terminators).
    framing: usize,
}

impl<'s, S: AsyncRead + Unpin> Response<'s, S> {
    /// A response about to be read from `stream`.
    pub(crate) fn new(stream: &'s mut S) -> Self {
        Self {
            stream,
            buf: Vec::with_capacity(2048),
            at: 0,
            interim: 0,
            framing: 0,
        }
    }

    /// Reads the final response head, skipping interim `1xx` answers (`100 Continue`,
    /// `103 Early Hints`); all of them together count toward [`HEAD_LIMIT`].
    ///
    /// # Errors
    /// The stream's read error; `UnexpectedEof` when it ends before a whole head;
    /// `InvalidData` ([`WireError`]) for a head that does not parse or is too large.
    pub(crate) async fn head(&mut self) -> io::Result<Head> {
        loop {
            match parse_head(&self.buf[self.at..]).map_err(WireError::Head)? {
                Some((head, len)) => {
                    self.at += len;
                    if !(100..200).contains(&head.status) || head.status == 101 {
                        return Ok(head);
                    }
                    self.interim += len;
                    if self.interim >= HEAD_LIMIT {
                        return Err(WireError::HeadTooLarge.into());
                    }
                }
                None => {
                    if self.interim + self.buf.len() - self.at >= HEAD_LIMIT {
                        return Err(WireError::HeadTooLarge.into());
                    }
                    self.fill().await?;
                }
            }
        }
    }

    /// Reads the body framed by `framing` to its end, or until [`BODY_LIMIT`] bytes of it were
    /// read; returns them when `keep` (else an empty vector: the body is read and dropped).
    ///
    /// # Errors
    /// The stream's read error; `UnexpectedEof` when it ends before the framing says;
    /// `InvalidData` ([`WireError::Chunk`]) for a malformed chunked body.
    pub(crate) async fn body(&mut self, framing: Framing, keep: bool) -> io::Result<Vec<u8>> {
        let mut body = Body {
            keep,
            seen: 0,
            data: Vec::new(),
        };
        match framing {
            Framing::Empty => {}
            Framing::Length(len) => {
                let len = usize::try_from(len).unwrap_or(usize::MAX);
                self.take(len, &mut body).await?;
            }
            Framing::UntilClose => {
                while !body.full() {
                    if self.at == self.buf.len() {
                        match self.read().await {
                            Ok(0) => break,
                            Ok(_) => {}
                            // A TLS peer that closes without `close_notify`: for a body that
                            // the close delimits, that is its end (curl and Go's client, so
                            // blackbox_exporter, accept it; rustls reports it as an unexpected
                            // end). A truncated body can only lack `body_contains`.
                            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
                            Err(e) => return Err(e),
                        }
                    }
                    self.take(self.buf.len() - self.at, &mut body).await?;
                }
            }
            Framing::Chunked => self.chunks(&mut body).await?,
            Framing::Invalid => return Err(WireError::ContentLength.into()),
        }
        Ok(body.data)
    }

    /// Chunked transfer coding: size lines (hex, extensions ignored), data and CRLF, until the
    /// last (zero-size) chunk and its trailer section, or a full body; the framing read may
    /// exceed the body by [`FRAMING_ALLOWANCE`] bytes at most.
    async fn chunks(&mut self, body: &mut Body) -> io::Result<()> {
        loop {
            let line = self.line(body).await?;
            let size = self.buf[line]
                .split(|&b| b == b';')
                .next()
                .unwrap_or_default();
            let size = std::str::from_utf8(size)
                .ok()
                .map(str::trim)
                .and_then(|s| usize::from_str_radix(s, 16).ok())
                .ok_or(WireError::Chunk)?;
            if size == 0 {
                // Trailer fields, up to the empty line that ends the message.
                while !self.line(body).await?.is_empty() {}
                return Ok(());
            }
            self.take(size, body).await?;
            if body.full() {
                return Ok(());
            }
            if !self.line(body).await?.is_empty() {
                return Err(WireError::Chunk.into());
            }
        }
    }

    /// Consumes `len` bytes into `body`, stopping early once it is full.
    async fn take(&mut self, mut len: usize, body: &mut Body) -> io::Result<()> {
        while len > 0 && !body.full() {
            if self.at == self.buf.len() && self.read().await? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            let n = len.min(self.buf.len() - self.at);
            body.push(&self.buf[self.at..self.at + n]);
            self.at += n;
            len -= n;
        }
        Ok(())
    }

    /// The next line of chunked framing without its CRLF (or bare LF), consumed and counted
    /// against [`FRAMING_ALLOWANCE`] beyond the `body` read so far: where it lies in `buf`
    /// (valid until the next read).
    async fn line(&mut self, body: &Body) -> io::Result<Range<usize>> {
        loop {
            if let Some(end) = self.buf[self.at..].iter().position(|&b| b == b'\n') {
                let cr = end > 0 && self.buf[self.at + end - 1] == b'\r';
                let line = self.at..self.at + end - usize::from(cr);
                self.at += end + 1;
                self.framing += end + 1;
                if self.framing > FRAMING_ALLOWANCE + body.seen {
                    return Err(WireError::Framing.into());
                }
                return Ok(line);
            }
            if self.buf.len() - self.at > LINE_LIMIT {
                return Err(WireError::Chunk.into());
            }
            self.fill().await?;
        }
    }

    /// Reads more bytes; the end of the stream is `UnexpectedEof`.
    async fn fill(&mut self) -> io::Result<()> {
        match self.read().await? {
            0 => Err(io::ErrorKind::UnexpectedEof.into()),
            _ => Ok(()),
        }
    }

    /// Reads what the stream has (at least one byte unless it ended: 0), dropping the bytes
    /// already consumed first so the buffer does not grow with the body.
    async fn read(&mut self) -> io::Result<usize> {
        if self.at > 0 {
            self.buf.drain(..self.at);
            self.at = 0;
        }
        self.buf.reserve(2048);
        self.stream.read_buf(&mut self.buf).await
    }
}

/// The body read so far: its first [`BODY_LIMIT`] bytes when kept, else only how many.
struct Body {
    keep: bool,
    seen: usize,
    data: Vec<u8>,
}

impl Body {
    fn full(&self) -> bool {
        self.seen >= BODY_LIMIT
    }

    fn push(&mut self, bytes: &[u8]) {
        let room = BODY_LIMIT - self.seen;
        let bytes = &bytes[..bytes.len().min(room)];
        self.seen += bytes.len();
        if self.keep {
            self.data.extend_from_slice(bytes);
        }
    }
}

/// Parses the response head at the start of `buf`: its [`Head`] and length when it is whole,
/// `None` when more bytes are needed. Obsolete line folding (RFC 9112 §5.2: a header value
/// continued on a line that starts with a space or tab) is accepted, as a user agent must; the
/// continuation stays in the value, whose ends are trimmed where it is read.
fn parse_head(buf: &[u8]) -> Result<Option<(Head, usize)>, httparse::Error> {
    let mut few = [httparse::EMPTY_HEADER; FEW_HEADERS];
    match parse_with(&mut few, buf) {
        Err(httparse::Error::TooManyHeaders) => {
            let lines = buf.iter().filter(|&&b| b == b'\n').count();
            let mut many = vec![httparse::EMPTY_HEADER; lines];
            parse_with(&mut many, buf)
        }
        parsed => parsed,
    }
}

fn parse_with<'b>(
    headers: &mut [httparse::Header<'b>],
    buf: &'b [u8],
) -> Result<Option<(Head, usize)>, httparse::Error> {
    let mut parsed = httparse::Response::new(headers);
    let status = httparse::ParserConfig::default()
        .allow_obsolete_multiline_headers_in_responses(true)
        .parse_response(&mut parsed, buf)?;
    Ok(match status {
        httparse::Status::Complete(len) => Some((interpret(&parsed), len)),
        httparse::Status::Partial => None,
    })
}

/// The head's status, `Location` and framing (RFC 9112 §6.3: a `Transfer-Encoding` wins over
/// `Content-Length`, and reads to the close unless its last coding is `chunked`; a
/// `Content-Length` list must repeat one number).
fn interpret(parsed: &httparse::Response<'_, '_>) -> Head {
    let status = parsed.code.unwrap_or_default();
    let mut location = None;
    let mut length: Option<Option<u64>> = None;
    let mut chunked: Option<bool> = None;
    for h in parsed.headers.iter() {
        if h.name.eq_ignore_ascii_case("location") {
            location = std::str::from_utf8(h.value)
                .ok()
                .map(|v| v.trim().to_owned());
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            let last = h.value.rsplit(|&b| b == b',').next().unwrap_or_default();
            chunked = Some(last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if h.name.eq_ignore_ascii_case("content-length") {
            for item in h.value.split(|&b| b == b',') {
                let n = std::str::from_utf8(item.trim_ascii())
                    .ok()
                    .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|v| v.parse::<u64>().ok());
                length = match length {
                    Some(seen) if seen != n => Some(None),
                    _ => Some(n),
                };
            }
        }
    }
    let framing = match (status, chunked, length) {
        (100..=199 | 204 | 304, ..) => Framing::Empty,
        (_, Some(true), _) => Framing::Chunked,
        (_, Some(false), _) | (_, None, None) => Framing::UntilClose,
        (_, None, Some(Some(n))) => Framing::Length(n),
        (_, None, Some(None)) => Framing::Invalid,
    };
    Head {
        status,
        location,
        framing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read(answer: &[u8], keep: bool) -> io::Result<(Head, Vec<u8>)> {
        let mut stream = answer;
        let mut response = Response::new(&mut stream);
        let head = response.head().await?;
        let body = response.body(head.framing, keep).await?;
        Ok((head, body))
    }

    fn kind(r: io::Result<(Head, Vec<u8>)>) -> io::ErrorKind {
        r.expect_err("the answer must not read").kind()
    }

    #[test]
    fn the_request_asks_for_one_answer_on_a_closing_connection() {
        let r = request("/health?deep=1", "seoul.example.test:8443");
        let text = std::str::from_utf8(&r).unwrap();
        assert!(
            text.starts_with("GET /health?deep=1 HTTP/1.1\r\nHost: seoul.example.test:8443\r\n")
        );
        assert!(text.contains(&format!("User-Agent: {USER_AGENT}\r\n")));
        assert!(text.ends_with("Connection: close\r\n\r\n"));
        assert!(
            std::str::from_utf8(&request("", "h"))
                .unwrap()
                .starts_with("GET / HTTP/1.1\r\n")
        );
    }

    #[tokio::test]
    async fn a_content_length_body_is_read_to_its_length() {
        let (head, body) = read(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello and more",
            true,
        )
        .await
        .unwrap();
        assert_eq!((head.status, head.framing), (200, Framing::Length(5)));
        assert_eq!(body, b"hello");
    }

    #[tokio::test]
    async fn a_chunked_body_is_decoded_with_extensions_and_trailers() {
        let answer =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 3\r\n\r\n\
            5;name=x\r\nok re\r\nB\r\ngion=seoul\n\r\n0\r\nX-Trailer: 1\r\n\r\n";
        let (head, body) = read(answer, true).await.unwrap();
        assert_eq!(head.framing, Framing::Chunked);
        assert_eq!(body, b"ok region=seoul\n");
    }

    #[tokio::test]
    async fn a_repeated_length_is_one_length_and_an_invalid_one_spares_the_status() {
        let (head, body) = read(b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok!", true)
            .await
            .unwrap();
        assert_eq!(
            (head.framing, body.as_slice()),
            (Framing::Length(2), &b"ok"[..])
        );
        let mut stream = &b"HTTP/1.1 503 Busy\r\nContent-Length: x\r\n\r\n"[..];
        let head = Response::new(&mut stream).head().await.unwrap();
        assert_eq!((head.status, head.framing), (503, Framing::Invalid));
    }

    #[tokio::test]
    async fn a_transfer_coding_other_than_chunked_last_reads_to_the_close() {
        let answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\nContent-Length: 2\r\n\r\nall of it";
        let (head, body) = read(answer, true).await.unwrap();
        assert_eq!(
            (head.framing, body.as_slice()),
            (Framing::UntilClose, &b"all of it"[..])
        );
    }

    #[tokio::test]
    async fn a_body_without_length_ends_with_the_connection() {
        let (head, body) = read(b"HTTP/1.0 200 OK\r\n\r\nok region=tokyo\n", true)
            .await
            .unwrap();
        assert_eq!(head.framing, Framing::UntilClose);
        assert_eq!(body, b"ok region=tokyo\n");
    }

    #[tokio::test]
    async fn interim_answers_are_skipped_and_no_body_statuses_have_none() {
        let answer = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n\
            HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n";
        let (head, body) = read(answer, true).await.unwrap();
        assert_eq!((head.status, head.framing), (204, Framing::Empty));
        assert!(body.is_empty());
    }

    #[tokio::test]
    async fn a_redirect_names_its_location() {
        let (head, _) = read(
            b"HTTP/1.1 302 Found\r\nLocation:  /elsewhere \r\nContent-Length: 0\r\n\r\n",
            false,
        )
        .await
        .unwrap();
        assert_eq!(head.location.as_deref(), Some("/elsewhere"));
    }

    #[tokio::test]
    async fn only_the_first_body_limit_bytes_are_kept_and_the_rest_is_not_read() {
        let mut answer = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
            2 * BODY_LIMIT
        )
        .into_bytes();
        // Half the announced body: reading past the limit would hit the end and fail.
        answer.resize(answer.len() + BODY_LIMIT + 10, b'a');
        let (_, body) = read(&answer, true).await.unwrap();
        assert_eq!(body.len(), BODY_LIMIT);
        let (_, dropped) = read(&answer, false).await.unwrap();
        assert!(dropped.is_empty(), "a body not kept is read and dropped");
    }

    /// `what`, then `repeat` again and again (`times` times in all), then `end`.
    fn endless(what: &[u8], repeat: &[u8], times: usize, end: &[u8]) -> Vec<u8> {
        let mut v = what.to_vec();
        for _ in 0..times {
            v.extend_from_slice(repeat);
        }
        v.extend_from_slice(end);
        v
    }

    #[tokio::test]
    async fn a_hostile_origin_cannot_make_a_probe_read_without_bound() {
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        let cases = [
            // Interim answers for ever: together they are one head over the limit.
            endless(
                b"",
                b"HTTP/1.1 100 Continue\r\n\r\n",
                5_000,
                b"HTTP/1.1 200 OK\r\n\r\n",
            ),
            // Trailers for ever.
            endless(
                chunked,
                b"0\r\n",
                1,
                &[
                    b"X-Trailer: aaaaaaaaaaaaaaaaaaaaaaaa\r\n".repeat(1_000),
                    b"\r\n".to_vec(),
                ]
                .concat(),
            ),
            // 4 KiB of extensions (or padding) for each byte of body.
            endless(
                chunked,
                &[b"1;".as_slice(), &[b'e'; 4_000], b"\r\nx\r\n"].concat(),
                50,
                b"0\r\n\r\n",
            ),
        ];
        for answer in cases {
            let err = read(&answer, true).await.expect_err("must stop early");
            assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
        }
        // Small chunks of an honest body stay well within the allowance.
        let honest = endless(chunked, b"8\r\nregion=a\r\n", 5_000, b"0\r\n\r\n");
        let (_, body) = read(&honest, true).await.unwrap();
        assert_eq!(body.len(), 40_000);
    }

    #[tokio::test]
    async fn an_answer_cut_short_is_an_unexpected_end() {
        use io::ErrorKind::UnexpectedEof;
        assert_eq!(kind(read(b"", true).await), UnexpectedEof);
        assert_eq!(
            kind(read(b"HTTP/1.1 200 OK\r\nContent-Le", true).await),
            UnexpectedEof
        );
        let short = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nok";
        assert_eq!(kind(read(short, false).await), UnexpectedEof);
        let chunk = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nok";
        assert_eq!(kind(read(chunk, true).await), UnexpectedEof);
    }

    #[tokio::test]
    async fn a_malformed_answer_is_invalid_data() {
        use io::ErrorKind::InvalidData;
        assert_eq!(
            kind(read(b"SSH-2.0-OpenSSH_9.6\r\n\r\n", true).await),
            InvalidData
        );
        let lengths = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok";
        assert_eq!(kind(read(lengths, true).await), InvalidData);
        let sign = b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok";
        assert_eq!(kind(read(sign, true).await), InvalidData);
        let size = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        assert_eq!(kind(read(size, true).await), InvalidData);
        let crlf = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokX\r\n0\r\n\r\n";
        assert_eq!(kind(read(crlf, true).await), InvalidData);
        let mut huge = b"HTTP/1.1 200 OK\r\nX-Pad: ".to_vec();
        huge.resize(HEAD_LIMIT + 10, b'a');
        let err = read(&huge, true).await.expect_err("over the head limit");
        assert_eq!(err.kind(), InvalidData);
        assert!(err.to_string().contains("head over"), "{err}");
    }
}
