//! A minimal hand-written DNS responder on 127.0.0.1 (UDP): `A <name>` is 127.0.0.1 with a
//! chosen TTL; everything else is NXDOMAIN. Counts the A queries it answers. (A real
//! authoritative server with a switchable record is [`super::authoritative`].)

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::net::UdpSocket;

/// A running server; it stops with the runtime.
pub struct FakeDns {
    /// Where it listens.
    pub addr: SocketAddr,
    a_queries: Arc<AtomicUsize>,
}

impl FakeDns {
    /// Serves `A name` (lower case, no trailing dot) as 127.0.0.1 with `ttl` seconds.
    pub async fn start(name: &str, ttl: u32) -> FakeDns {
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let addr = socket.local_addr().unwrap();
        let a_queries = Arc::new(AtomicUsize::new(0));
        let counter = a_queries.clone();
        let name = name.to_owned();
        tokio::spawn(async move {
            let mut buf = [0u8; 1500];
            loop {
                let Ok((n, peer)) = socket.recv_from(&mut buf).await else {
                    return;
                };
                if let Some((answer, is_a)) = answer(&buf[..n], &name, ttl, Ipv4Addr::LOCALHOST) {
                    if is_a {
                        counter.fetch_add(1, Ordering::SeqCst);
                    }
                    let _ = socket.send_to(&answer, peer).await;
                }
            }
        });
        FakeDns { addr, a_queries }
    }

    /// A queries answered so far.
    pub fn a_queries(&self) -> usize {
        self.a_queries.load(Ordering::SeqCst)
    }
}

/// The answer to query `q`, and whether it was an A query for the served name.
fn answer(q: &[u8], name: &str, ttl: u32, ip: Ipv4Addr) -> Option<(Vec<u8>, bool)> {
    let mut i = 12;
    let mut labels = Vec::new();
    loop {
        let len = usize::from(*q.get(i)?);
        i += 1;
        if len == 0 {
            break;
        }
        labels.push(String::from_utf8_lossy(q.get(i..i + len)?).to_ascii_lowercase());
        i += len;
    }
    let qtype = u16::from_be_bytes([*q.get(i)?, *q.get(i + 1)?]);
    let question = q.get(12..i + 4)?;
    let known = labels.join(".") == name;
    let is_a = known && qtype == 1;
    let mut r = Vec::new();
    r.extend_from_slice(&q[..2]); // id
    r.push(0x84 | (q[2] & 0x01)); // QR, AA, RD copied
    r.push(if known { 0x00 } else { 0x03 }); // NOERROR / NXDOMAIN
    r.extend_from_slice(&[0, 1]); // QDCOUNT
    r.extend_from_slice(&u16::from(is_a).to_be_bytes()); // ANCOUNT
    r.extend_from_slice(&[0, 0, 0, 0]); // NSCOUNT, ARCOUNT
    r.extend_from_slice(question);
    if is_a {
        r.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1]);
        r.extend_from_slice(&ttl.to_be_bytes());
        r.extend_from_slice(&[0, 4]);
        r.extend_from_slice(&ip.octets());
    }
    Some((r, is_a))
}
