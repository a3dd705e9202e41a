//! The admin API's connections are bounded (issue 28): an idle connection, before its first
//! request or between two, is closed after the header timeout; a request slower than the
//! request timeout gets `408`; a flood holds at most the cap of accepted connections (the rest
//! wait in the kernel's backlog, holding no descriptor of the process) and the next request is
//! served as soon as slots free up. Real loopback sockets; tokio's clock is paused, so the
//! timeouts pass in simulated time.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use gslb::admin::connections::{self, HEADER_TIMEOUT, Limits};
use gslb::admin::{self, AdminState};
use gslb::ops::metrics::Metrics;
use gslb::ops::status::StatusBoard;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

/// The real admin API (no token, loopback) on 127.0.0.1:<free port>.
async fn admin_api() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let state = AdminState {
        board: Arc::new(StatusBoard::default()),
        metrics: Metrics::new(),
        commands: None,
        auth: Default::default(),
        timelines: Default::default(),
        health: Default::default(),
        clock: gslb::io::clock::Clock::system(),
    };
    tokio::spawn(admin::serve(listener, state));
    addr
}

/// `app` within `limits` on 127.0.0.1:<free port>.
async fn serve(app: Router, limits: Limits) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(connections::serve(listener, app, limits));
    addr
}

/// Longest a test waits (simulated) for the server to answer or close.
const PATIENCE: Duration = Duration::from_secs(600);

/// Reads until the peer closes; what was read. Fails when the peer keeps the connection open
/// for [`PATIENCE`].
async fn read_to_close(c: &mut TcpStream) -> String {
    let mut all = Vec::new();
    tokio::time::timeout(PATIENCE, c.read_to_end(&mut all))
        .await
        .expect("the server closes the connection")
        .expect("read");
    String::from_utf8_lossy(&all).into_owned()
}

/// Reads one response head and a body of `Content-Length` bytes.
async fn read_response(c: &mut TcpStream) -> String {
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(PATIENCE, c.read(&mut buf))
            .await
            .expect("an answer")
            .expect("read");
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&all));
        all.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&all).into_owned();
        if let Some(head_end) = text.find("\r\n\r\n") {
            let length = text[..head_end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(str::to_owned)
                })
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if all.len() >= head_end + 4 + length {
                return text;
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn an_idle_connection_is_closed_after_the_header_timeout() {
    let addr = admin_api().await;
    // Nothing sent at all (a slowloris that never starts).
    let mut silent = TcpStream::connect(addr).await.expect("connect");
    let start = Instant::now();
    assert_eq!(read_to_close(&mut silent).await, "");
    assert!(start.elapsed() >= HEADER_TIMEOUT, "{:?}", start.elapsed());
    // Half a request head, never finished.
    let mut slow = TcpStream::connect(addr).await.expect("connect");
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .expect("write");
    let start = Instant::now();
    let answer = read_to_close(&mut slow).await;
    assert!(start.elapsed() >= HEADER_TIMEOUT, "{:?}", start.elapsed());
    assert!(!answer.contains("200 OK"), "{answer}");
    // A kept-alive connection idle after its first request.
    let mut kept = TcpStream::connect(addr).await.expect("connect");
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    let first = read_response(&mut kept).await;
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    let start = Instant::now();
    assert_eq!(read_to_close(&mut kept).await, "");
    assert!(start.elapsed() >= HEADER_TIMEOUT, "{:?}", start.elapsed());
}

#[tokio::test(start_paused = true)]
async fn a_request_slower_than_the_request_timeout_gets_408() {
    let limits = Limits {
        request_timeout: Duration::from_secs(5),
        ..Limits::default()
    };
    let app = Router::new().route(
        "/slow",
        get(|| async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            "late"
        }),
    );
    let addr = serve(app, limits).await;
    let mut c = TcpStream::connect(addr).await.expect("connect");
    c.write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    let start = Instant::now();
    let answer = read_response(&mut c).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "{:?}",
        start.elapsed()
    );
}

/// Connections to `port` that this process has accepted: sockets among its descriptors whose
/// local port is `port`, the listener left out. Connections still in the kernel's backlog hold
/// no descriptor and are not counted; other tests' sockets have other ports.
fn accepted(port: u16) -> usize {
    let inodes: std::collections::BTreeSet<String> = std::fs::read_dir("/proc/self/fd")
        .expect("/proc")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            l.strip_prefix("socket:[")?
                .strip_suffix(']')
                .map(str::to_owned)
        })
        .collect();
    let table = std::fs::read_to_string("/proc/self/net/tcp").expect("/proc/self/net/tcp");
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let local_port = cols
                .get(1)
                .and_then(|a| a.rsplit(':').next())
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            let listening = cols.get(3) == Some(&"0A");
            local_port == Some(port)
                && !listening
                && cols.get(9).is_some_and(|inode| inodes.contains(*inode))
        })
        .count()
}

#[tokio::test(start_paused = true)]
async fn a_flood_holds_at_most_the_cap_and_the_next_request_is_served_once_slots_free() {
    const CAP: usize = 4;
    const FLOOD: usize = 64;
    let limits = Limits {
        max_connections: CAP,
        ..Limits::default()
    };
    let app = Router::new().route("/healthz", get(|| async { "ok" }));
    let addr = serve(app, limits).await;
    let mut flood = Vec::new();
    for _ in 0..FLOOD {
        flood.push(TcpStream::connect(addr).await.expect("connect"));
    }
    // Let the server accept what it will.
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    let held = accepted(addr.port());
    assert!(
        (1..=CAP).contains(&held),
        "the server holds {held} connections, cap {CAP}"
    );
    // A request behind the flood waits for a slot (idle connections close after the header
    // timeout), then is served.
    let mut late = TcpStream::connect(addr).await.expect("connect");
    late.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .expect("write");
    let start = Instant::now();
    let answer = read_to_close(&mut late).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let waited = start.elapsed();
    assert!(
        waited >= HEADER_TIMEOUT,
        "served at once despite the cap: {waited:?}"
    );
    let held = accepted(addr.port());
    assert!(
        held <= CAP,
        "the server holds {held} connections, cap {CAP}"
    );
}
