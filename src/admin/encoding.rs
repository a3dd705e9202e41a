//! The large read answers (`/metrics`, `/v1/status`, `/v1/events`): built on tokio's blocking
//! pool, never on the runtime's workers (at 5,000 services a `/metrics` render takes 100-300 ms,
//! which on a 2-worker runtime delayed half the probe loops), and gzip-compressed there when the
//! request accepts it (`Accept-Encoding: gzip`, as Prometheus asks every scrape: about a tenth
//! of the bytes). A request that does not ask gets the uncompressed body. Only these routes use
//! it: the Route 53 vote URLs ([`super::votes`]) always answer their raw string, which Route
//! 53's string-match check reads.

use std::io::{BufWriter, Write};

use flate2::Compression;
use flate2::write::GzEncoder;

use axum::http::header::{ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_TYPE, VARY};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// `Content-Type` of the Prometheus text exposition format 0.0.4.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4";

/// `Content-Type` of the JSON answers.
pub const JSON: &str = "application/json";

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
/// holding a worker), with `Content-Type: content_type` and `Vary: Accept-Encoding`. When
/// `headers` accept gzip ([`accepts_gzip`]), `build` writes through a gzip encoder at the
/// fastest level (flate2's level 1, behind a 64 kB buffer), so an answer serialized piece by
/// piece is never held uncompressed, and the answer has `Content-Encoding: gzip`.
///
/// # Errors
/// None returned: `build` failing (its message) or panicking answers `500`.
pub async fn off_runtime<F>(headers: &HeaderMap, content_type: &'static str, build: F) -> Response
where
    F: FnOnce(&mut dyn Write) -> Result<(), String> + Send + 'static,
{
    let gzip = accepts_gzip(headers);
    answer(gzip, content_type, move || {
        if gzip {
            compressed(build)
        } else {
            let mut body = Vec::new();
            build(&mut body).map(|()| body)
        }
    })
    .await
}

/// As [`off_runtime`], for an answer that can also be rendered whole (the `/metrics` text):
/// uncompressed, the text `whole` returns is the body as is (no copy); compressed, `streamed`
/// writes it through the encoder piece by piece, so it is never held uncompressed.
///
/// # Errors
/// None returned: `streamed` failing (its message) or either panicking answers `500`.
pub async fn rendered_off_runtime<W, S>(
    headers: &HeaderMap,
    content_type: &'static str,
    whole: W,
    streamed: S,
) -> Response
where
    W: FnOnce() -> String + Send + 'static,
    S: FnOnce(&mut dyn Write) -> Result<(), String> + Send + 'static,
{
    let gzip = accepts_gzip(headers);
    answer(gzip, content_type, move || {
        if gzip {
            compressed(streamed)
        } else {
            Ok(whole().into_bytes())
        }
    })
    .await
}

/// The body `make` returns (gzip when `gzip`), made on the blocking pool, with the headers.
async fn answer<F>(gzip: bool, content_type: &'static str, make: F) -> Response
where
    F: FnOnce() -> Result<Vec<u8>, String> + Send + 'static,
{
    let built = tokio::task::spawn_blocking(make)
        .await
        .unwrap_or_else(|e| Err(format!("building the answer stopped: {e}")));
    let body = match built {
        Ok(body) => body,
        Err(e) => {
            tracing::error!(error = %e, "admin API read failed");
            return (StatusCode::INTERNAL_SERVER_ERROR, e).into_response();
        }
    };
    let mut response = body.into_response();
    let h = response.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(VARY, HeaderValue::from_static("accept-encoding"));
    if gzip {
        h.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    response
}

/// What `build` writes, as one gzip member.
fn compressed<F>(build: F) -> Result<Vec<u8>, String>
where
    F: FnOnce(&mut dyn Write) -> Result<(), String>,
{
    let gz = GzEncoder::new(Vec::new(), Compression::fast());
    let mut out = BufWriter::with_capacity(1 << 16, gz);
    build(&mut out)?;
    let finished = out
        .into_inner()
        .map_err(std::io::IntoInnerError::into_error)
        .and_then(GzEncoder::finish);
    finished.map_err(|e| format!("compressing the answer: {e}"))
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;

    use axum::http::{HeaderMap, HeaderValue, header::ACCEPT_ENCODING};

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

    /// Asked with gzip, the body decodes to exactly what the build wrote, however it was
    /// split into writes; asked without, it is that text.
    #[tokio::test]
    async fn a_gzip_answer_decodes_to_the_plain_one() {
        let text: String = (0..20_000)
            .map(|i| format!("line {i} {}\n", i % 7))
            .collect();
        let write = |text: String| {
            move |out: &mut dyn std::io::Write| {
                for chunk in text.as_bytes().chunks(999) {
                    out.write_all(chunk).map_err(|e| e.to_string())?;
                }
                Ok(())
            }
        };
        let body = |r: axum::response::Response| async {
            axum::body::to_bytes(r.into_body(), usize::MAX)
                .await
                .expect("body")
        };
        let plain = super::off_runtime(&HeaderMap::new(), super::JSON, write(text.clone())).await;
        assert_eq!(plain.headers().get("content-encoding"), None);
        assert_eq!(body(plain).await, text.as_bytes());
        let zipped = super::off_runtime(&asking(&["gzip"]), super::JSON, write(text.clone())).await;
        assert_eq!(zipped.headers()["content-encoding"], "gzip");
        let zipped = body(zipped).await;
        assert!(zipped.len() < text.len(), "compressed");
        let mut decoded = String::new();
        flate2::read::GzDecoder::new(&zipped[..])
            .read_to_string(&mut decoded)
            .expect("gzip");
        assert_eq!(decoded, text);
    }
}
