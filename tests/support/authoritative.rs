//! A real authoritative DNS server (hickory-server) on 127.0.0.1 (UDP) with a switchable A
//! record: one primary zone held in memory, its SOA and one A record for a name in it, whose
//! address [`Authoritative::set_address`] replaces while the server runs (bumping the SOA
//! serial), as a provider's name servers do once a change has propagated.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use hickory_server::ServerFuture;
use hickory_server::authority::{AuthorityObject, Catalog, ZoneType};
use hickory_server::proto::rr::rdata::{A, SOA};
use hickory_server::proto::rr::{LowerName, Name, RData, Record, RecordSet, RrKey};
use hickory_server::store::in_memory::InMemoryAuthority;
use tokio::net::UdpSocket;
use tokio::sync::Mutex;

/// A running server; it stops when dropped.
pub struct Authoritative {
    /// Where it listens (UDP).
    pub addr: SocketAddr,
    zone: Arc<InMemoryAuthority>,
    origin: Name,
    name: Name,
    ttl: u32,
    serial: Mutex<u32>,
    _server: ServerFuture<Catalog>,
}

impl Authoritative {
    /// Serves zone `zone` (e.g. `example.test.`) with `A name` (a fully qualified name in it,
    /// e.g. `api.example.test.`) as `address`, `ttl` seconds. Panics on a malformed name (a
    /// test's own constant).
    pub async fn start(zone: &str, name: &str, ttl: u32, address: Ipv4Addr) -> Authoritative {
        let origin = Name::from_ascii(zone).expect("zone name");
        let name = Name::from_ascii(name).expect("record name");
        assert!(origin.zone_of(&name), "{name} is not in zone {origin}");
        let authority = InMemoryAuthority::empty(origin.clone(), ZoneType::Primary, false);
        let zone = Arc::new(authority);
        let mut catalog = Catalog::new();
        catalog.upsert(
            LowerName::new(&origin),
            vec![zone.clone() as Arc<dyn AuthorityObject>],
        );
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let addr = socket.local_addr().unwrap();
        let mut server = ServerFuture::new(catalog);
        server.register_socket(socket);
        let dns = Authoritative {
            addr,
            zone,
            origin,
            name,
            ttl,
            serial: Mutex::new(0),
            _server: server,
        };
        dns.set_address(address).await;
        dns
    }

    /// Answers `address` from now on: replaces the A record set and bumps the SOA serial.
    pub async fn set_address(&self, address: Ipv4Addr) {
        let mut serial = self.serial.lock().await;
        *serial += 1;
        // Refresh, retry and expire (s) only matter to secondaries, of which there are none;
        // the minimum, the negative-answer TTL (RFC 2308), is the record's TTL.
        let soa = SOA::new(
            self.origin.prepend_label("ns").expect("name server name"),
            self.origin
                .prepend_label("hostmaster")
                .expect("mailbox name"),
            *serial,
            3600,
            600,
            86400,
            self.ttl,
        );
        let soa = Record::from_rdata(self.origin.clone(), self.ttl, RData::SOA(soa));
        let a = Record::from_rdata(self.name.clone(), self.ttl, RData::A(A(address)));
        let mut records = self.zone.records_mut().await;
        for record in [soa, a] {
            let key = RrKey::new(record.name().into(), record.record_type());
            records.insert(key, Arc::new(RecordSet::from(record)));
        }
    }
}
