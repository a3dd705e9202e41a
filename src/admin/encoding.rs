//! The large read answers (`/metrics`, `/v1/status`, `/v1/events`): built on tokio's blocking
//! pool, never on the runtime's workers (at 5,000 services a `/metrics` render takes 100-300 ms,
//! which on a 2-worker runtime delayed half the probe loops), gzip-compressed there when the
//! request accepts it (`Accept-Encoding: gzip`, as Prometheus asks every scrape: about a tenth
//! of the bytes), and streamed: the build writes into chunks of 64 KiB that go to the
//! connection as they fill, so no answer is ever held whole (uncompressed, `/metrics` is 16.9
//! MB and `/v1/status` 15.5 MB at 5,000 services x 2 endpoints). A request that does not ask
//! for gzip gets the uncompressed body. Only these routes use it: the Route 53 vote URLs
//! ([`super::votes`]) always answer their raw string, which Route 53's string-match check
//! reads.

use std::io::{self, BufWriter, Write};

use flate2::Compression;
use flate2::write::GzEncoder;
use futures_util::StreamExt as _;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use axum::body::{Body, Bytes};
use axum::http::header::{ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_TYPE, VARY};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// `Content-Type` of the Prometheus text exposition format 0.0.4.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4";

/// `Content-Type` of the JSON answers.
pub const JSON: &str = "application/json";

/// Bytes of a body chunk (64 KiB): the build's bytes are sent once a chunk is full, and the
/// last, shorter one when the build ends.
const CHUNK: usize = 64 * 1024;

/// Full chunks waiting for the connection at most (4, i.e. 256 KiB): a build that is further
/// ahead of the client waits, on the blocking pool, until the connection takes one.
const CHUNKS_AHEAD: usize = 4;

/// Whether `headers` accept a gzip body: an `Accept-Encoding` coding `gzip` (or `x-gzip`),
/// case-insensitive, whose quality is not 0 (RFC 9110 §12.5.3). `*` is not taken as gzip.
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';').map(str::trim);
            let name = parts.next().unwrap_or_default();
            let refused = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            (name.eq_ignore_ascii_case("gzip") || name.eq_ignore_ascii_case("x-gzip")) && !refused
        })
}

/// The answer `build` writes, built on the blocking pool (the calling task waits without
/// holding a worker) and streamed: `build`'s writer sends a chunk of 64 KiB to the connection
/// each time one is full, waiting while 4 chunks are not taken yet, so the process holds at
/// most about 5 chunks of the answer (plus what `build` holds itself). With `Content-Type:
/// content_type` and `Vary: Accept-Encoding`. When `headers` accept gzip ([`accepts_gzip`]),
/// `build` writes through a gzip encoder at the fastest level (flate2's level 1, behind a 64
/// KiB buffer) into the same chunks, and the answer has `Content-Encoding: gzip`.
///
/// A client that goes away (the body dropped) makes the next write of `build` fail (an I/O
/// error of kind `BrokenPipe`), which ends the build.
///
/// # Errors
/// None returned. `build` failing (its message) or panicking before the first chunk was sent
/// (the answer's first 64 KiB, compressed when asked) answers `500` with the message.
/// Once a chunk has gone, the status and headers have too: a later failure is logged and
/// aborts the body (the connection is closed before the end of the chunked body, which a
/// client reads as an incomplete answer, never as a complete shorter one).
pub async fn off_runtime<F>(headers: &HeaderMap, content_type: &'static str, build: F) -> Response
where
    F: FnOnce(&mut dyn Write) -> Result<(), String> + Send + 'static,
{
    let gzip = accepts_gzip(headers);
    let (tx, chunks) = mpsc::channel(CHUNKS_AHEAD);
    let task = tokio::task::spawn_blocking(move || {
        let mut out = Chunks {
            tx,
            held: Vec::new(),
        };
        if gzip {
            compressed(&mut out, build)?;
        } else {
            build(&mut out)?;
        }
        out.flush().map_err(|e| e.to_string())
    });
    let mut building = Building {
        chunks,
        task: Some(task),
    };
    let first = building.next().await;
    if let Some(Err(e)) = first {
        return (StatusCode::INTERNAL_SERVER_ERROR, e).into_response();
    }
    let rest = futures_util::stream::unfold(building, |mut b| async move {
        b.next().await.map(|item| (item, b))
    });
    let mut response =
        Body::from_stream(futures_util::stream::iter(first).chain(rest)).into_response();
    let h = response.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(VARY, HeaderValue::from_static("accept-encoding"));
    if gzip {
        h.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    response
}

/// An answer being built: the chunks sent so far, then the build's outcome.
struct Building {
    chunks: mpsc::Receiver<Bytes>,
    /// `None` once its outcome was taken.
    task: Option<JoinHandle<Result<(), String>>>,
}

impl Building {
    /// The next chunk; after the last, the build's failure (logged) if it failed or panicked;
    /// then `None`.
    async fn next(&mut self) -> Option<Result<Bytes, String>> {
        if let Some(chunk) = self.chunks.recv().await {
            return Some(Ok(chunk));
        }
        // Every sender is gone: the build returned (or unwound), so this waits for nothing.
        let outcome = self.task.take()?.await;
        let e = outcome
            .unwrap_or_else(|e| Err(format!("building the answer stopped: {e}")))
            .err()?;
        tracing::error!(error = %e, "admin API read failed");
        Some(Err(e))
    }
}

/// The writer of an answer's body: holds up to [`CHUNK`] bytes, sends each full chunk
/// (`flush` sends what it holds), waiting while [`CHUNKS_AHEAD`] chunks are not taken yet.
/// Runs on the blocking pool (`blocking_send`).
struct Chunks {
    tx: mpsc::Sender<Bytes>,
    held: Vec<u8>,
}

impl Write for Chunks {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.held.capacity() == 0 {
            self.held.reserve_exact(CHUNK);
        }
        let taken = data.len().min(CHUNK - self.held.len());
        self.held.extend_from_slice(&data[..taken]);
        if self.held.len() == CHUNK {
            self.flush()?;
        }
        Ok(taken)
    }

    /// # Errors
    /// `BrokenPipe` when the body was dropped (the client went away).
    fn flush(&mut self) -> io::Result<()> {
        if self.held.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::take(&mut self.held));
        self.tx.blocking_send(chunk).map_err(|_| {
            io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the client stopped reading the answer",
            )
        })
    }
}

/// Writes what `build` writes to `out` as one gzip member.
fn compressed<F>(out: &mut Chunks, build: F) -> Result<(), String>
where
    F: FnOnce(&mut dyn Write) -> Result<(), String>,
{
    let gz = GzEncoder::new(out, Compression::fast());
    let mut text = BufWriter::with_capacity(CHUNK, gz);
    build(&mut text)?;
    let finished = text
        .into_inner()
        .map_err(io::IntoInnerError::into_error)
        .and_then(GzEncoder::finish);
    finished
        .map(drop)
        .map_err(|e| format!("compressing the answer: {e}"))
}

#[cfg(test)]
mod tests {
    use std::io::{Read as _, Write};
    use std::time::Duration;

    use axum::body::Bytes;
    use axum::http::{HeaderMap, HeaderValue, header::ACCEPT_ENCODING};
    use axum::response::Response;
    use http_body_util::BodyExt as _;

    fn asking(values: &[&'static str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(ACCEPT_ENCODING, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn gzip_is_accepted_when_listed_with_a_quality_above_zero() {
        for yes in [
            &["gzip"][..],
            &["deflate, gzip"],
            &["GZIP;q=0.5"],
            &["br", "x-gzip"],
            &["gzip ; q=1.0, identity"],
        ] {
            assert!(super::accepts_gzip(&asking(yes)), "{yes:?}");
        }
        for no in [
            &[][..],
            &["identity"],
            &["gzip;q=0"],
            &["*"],
            &["br, deflate"],
            &["gzipped"],
        ] {
            assert!(!super::accepts_gzip(&asking(no)), "{no:?}");
        }
    }

    /// On a current-thread runtime (one worker), a build that waits for another task of the
    /// same runtime completes only when it runs off the runtime's thread.
    #[test]
    fn the_answer_is_built_without_holding_the_runtime() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            // Runs only when the runtime's one thread is free.
            let other = tokio::spawn(async move { tx.send(()) });
            let answer = super::off_runtime(&HeaderMap::new(), super::JSON, move |out| {
                // Fails (after the deadline) only if the other task could not run meanwhile.
                rx.recv_timeout(std::time::Duration::from_secs(30))
                    .map_err(|e| format!("the runtime was held: {e}"))?;
                out.write_all(b"built").map_err(|e| e.to_string())
            })
            .await;
            other.await.expect("other task").expect("sent");
            assert_eq!(answer.status(), 200);
            let body = axum::body::to_bytes(answer.into_body(), 1 << 20)
                .await
                .expect("body");
            assert_eq!(&body[..], b"built");
        });
    }

    /// `lines` lines of numbers that compress to about half (far less compressible than a
    /// repeated byte, so a gzip answer spans several chunks too).
    fn numbers(lines: u64) -> String {
        (0..lines)
            .map(|i| format!("line {i} {}\n", i.wrapping_mul(2_654_435_761) % 1_000_003))
            .collect()
    }

    /// A build that writes `text` in pieces of 999 bytes.
    fn writing(text: String) -> impl FnOnce(&mut dyn Write) -> Result<(), String> + Send {
        move |out| {
            for piece in text.as_bytes().chunks(999) {
                out.write_all(piece).map_err(|e| e.to_string())?;
            }
            Ok(())
        }
    }

    /// Every data frame of `answer`'s body, in order, and whether the body ended in an error.
    async fn frames(answer: Response) -> (Vec<Bytes>, Option<String>) {
        let mut body = answer.into_body();
        let mut frames = Vec::new();
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(frame) => frames.push(frame.into_data().expect("only data frames")),
                Err(e) => return (frames, Some(e.to_string())),
            }
        }
        (frames, None)
    }

    /// An answer many chunks long arrives whole and in order, in chunks of at most 64 KiB:
    /// plain without asking, and asked with gzip, a body (itself several chunks) that decodes
    /// to exactly the same text.
    #[tokio::test]
    async fn a_large_answer_arrives_whole_in_chunks_plain_and_gzip() {
        let text = numbers(100_000);
        assert!(text.len() > 20 * super::CHUNK, "{} bytes", text.len());

        let plain = super::off_runtime(&HeaderMap::new(), super::JSON, writing(text.clone())).await;
        assert_eq!(plain.headers().get("content-encoding"), None);
        assert_eq!(plain.headers()["vary"], "accept-encoding");
        let (chunks, error) = frames(plain).await;
        assert_eq!(error, None);
        assert!(chunks.len() > 20, "{} chunks", chunks.len());
        assert!(chunks.iter().all(|c| c.len() <= super::CHUNK));
        assert_eq!(chunks.concat(), text.as_bytes());

        let zipped =
            super::off_runtime(&asking(&["gzip"]), super::JSON, writing(text.clone())).await;
        assert_eq!(zipped.headers()["content-encoding"], "gzip");
        assert_eq!(zipped.headers()["content-type"], super::JSON);
        let (chunks, error) = frames(zipped).await;
        assert_eq!(error, None);
        assert!(chunks.len() > 3, "{} chunks", chunks.len());
        assert!(chunks.iter().all(|c| c.len() <= super::CHUNK));
        let zipped = chunks.concat();
        assert!(zipped.len() < text.len(), "compressed");
        let mut decoded = String::new();
        flate2::read::GzDecoder::new(&zipped[..])
            .read_to_string(&mut decoded)
            .expect("gzip");
        assert_eq!(decoded, text);
    }

    /// A client that drops the body after the first chunk ends the build: its next writes fail
    /// (`BrokenPipe`) instead of waiting forever for room or writing the rest; plain and gzip.
    #[tokio::test]
    async fn a_client_that_goes_away_stops_the_build() {
        for gzip in [false, true] {
            let headers = if gzip {
                asking(&["gzip"])
            } else {
                HeaderMap::new()
            };
            let (stopped, seen) = std::sync::mpsc::channel();
            let answer = super::off_runtime(&headers, super::JSON, move |out| {
                // About 100 times what the channel holds even compressed: bounded, so a build
                // the drop does not stop ends, and the test fails instead of hanging.
                let line = numbers(20_000);
                let error = (0..100).find_map(|_| out.write_all(line.as_bytes()).err());
                let _ = stopped.send(error.as_ref().map(std::io::Error::kind));
                error.map_or(Ok(()), |e| Err(e.to_string()))
            })
            .await;
            assert_eq!(answer.status(), 200);
            let mut body = answer.into_body();
            let first = body.frame().await.expect("a first chunk").expect("data");
            assert!(!first.into_data().expect("data").is_empty());
            drop(body);
            let seen =
                tokio::task::spawn_blocking(move || seen.recv_timeout(Duration::from_secs(30)))
                    .await
                    .expect("waited");
            assert_eq!(
                seen,
                Ok(Some(std::io::ErrorKind::BrokenPipe)),
                "gzip: {gzip}"
            );
        }
    }

    /// A build failing or panicking before its first chunk answers 500 with the message;
    /// failing after chunks were sent aborts the body (an error, never a shorter complete
    /// answer); an empty build answers an empty 200.
    #[tokio::test]
    async fn a_failure_is_a_500_before_the_first_chunk_and_an_aborted_body_after() {
        let failing = |after: usize| {
            move |out: &mut dyn Write| {
                out.write_all(&vec![b'x'; after])
                    .map_err(|e| e.to_string())?;
                Err("the board went away".to_owned())
            }
        };
        for after in [0, super::CHUNK - 1] {
            let answer = super::off_runtime(&HeaderMap::new(), super::JSON, failing(after)).await;
            assert_eq!(answer.status(), 500, "after {after} bytes");
            let body = axum::body::to_bytes(answer.into_body(), 1 << 20)
                .await
                .expect("body");
            assert_eq!(&body[..], b"the board went away");
        }
        let panicking = super::off_runtime(&HeaderMap::new(), super::JSON, |_| panic!("bug")).await;
        assert_eq!(panicking.status(), 500);

        let late =
            super::off_runtime(&HeaderMap::new(), super::JSON, failing(3 * super::CHUNK)).await;
        assert_eq!(late.status(), 200);
        let (chunks, error) = frames(late).await;
        assert_eq!(chunks.concat(), vec![b'x'; 3 * super::CHUNK]);
        assert!(error.is_some_and(|e| e.contains("the board went away")));

        let empty = super::off_runtime(&HeaderMap::new(), super::JSON, |_| Ok(())).await;
        assert_eq!(empty.status(), 200);
        assert_eq!(frames(empty).await, (Vec::new(), None));
    }
}
