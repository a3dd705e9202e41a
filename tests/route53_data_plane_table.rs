//! What Route 53 answers in data-plane mode for every count of instances still voting, before
//! and after a failover, measured on the data-plane model (`support::r53_model`) over the
//! checks `gslb provision` made in moto, and the table `docs/route53-data-plane.md` shows
//! ("Losing instances") checked against it.
//!
//! The instances are stand-ins on 127.0.92.0/24 that answer the vote strings an instance
//! answers (the daemons themselves are `tests/route53_data_plane.rs`'s): *serve* for both
//! pools before a failover, *drain* for the PRIMARY and *serve* for the SECONDARY after it. A
//! lost instance takes the connection and closes it unanswered, which a checker counts as a
//! failed request, as it does a dead host, a firewall or a timeout.

mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use support::emulators::{Emulator, Kind};
use support::r53_model::DataPlaneModel;
use support::route53::{create_zone, gslb, sdk};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SECRET: &str = "table-vote-secret-0123456789";

/// What a stand-in answers: per vote path, its body; `None`: it is lost.
type Answers = Arc<Mutex<Option<BTreeMap<String, String>>>>;

/// A stand-in instance: a loopback listener answering `answers`.
struct StandIn {
    addr: SocketAddr,
    answers: Answers,
    task: tokio::task::JoinHandle<()>,
}

impl StandIn {
    async fn start(ip: [u8; 4]) -> Self {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from((ip, 0)))
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let answers: Answers = Arc::default();
        let shared = answers.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let answers = shared.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 8192 {
                        match conn.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let text = String::from_utf8_lossy(&head);
                    let path = text.split_whitespace().nth(1).unwrap_or("").to_owned();
                    let body = {
                        let guard = answers.lock().expect("answers");
                        match guard.as_ref() {
                            None => return, // lost: closed unanswered
                            Some(map) => map.get(&path).cloned().unwrap_or_default(),
                        }
                    };
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = conn.write_all(reply.as_bytes()).await;
                });
            }
        });
        Self {
            addr,
            answers,
            task,
        }
    }

    /// Answers as an instance that votes `seoul` and `tokyo`; `None`: lost.
    fn set(&self, votes: Option<(&str, &str)>) {
        *self.answers.lock().expect("answers") = votes.map(|(seoul, tokyo)| {
            BTreeMap::from([
                (
                    "/v1/vote/api/seoul".to_owned(),
                    format!("gslb-{seoul} {SECRET}"),
                ),
                (
                    "/v1/vote/api/tokyo".to_owned(),
                    format!("gslb-{tokyo} {SECRET}"),
                ),
            ])
        });
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Writes a policy, the secrets and settings listing `stand_ins` (HTTP vote URLs,
/// `failure_threshold = 1`) into `dir`.
fn write_files(dir: &Path, zone: &str, api: &str, stand_ins: &[StandIn]) {
    let policy = format!(
        "service = \"api\"\nhostname = \"api.example.test\"\n{}",
        support::policy::seoul_tokyo_route53(
            "http://127.0.92.250:9/health",
            "http://127.0.92.251:9/health",
            zone
        )
    );
    std::fs::write(dir.join("api.toml"), policy).expect("policy");
    std::fs::create_dir_all(dir.join("secrets")).expect("secrets dir");
    for pool in ["seoul", "tokyo"] {
        std::fs::write(dir.join(format!("secrets/api.{pool}")), SECRET).expect("secret");
    }
    let list: String = stand_ins
        .iter()
        .enumerate()
        .map(|(i, s)| {
            format!(
                "[[route53.data_plane.instances]]\nname = \"i{i}\"\nurl = \"http://{}\"\n",
                s.addr
            )
        })
        .collect();
    let settings = format!(
        "vantage = \"table\"\npolicies = [\"api.toml\"]\n[admin]\nlisten = \"127.0.92.252:0\"\n\
         [route53]\nendpoint_url = \"{api}\"\nrequests_per_second = 50\n[route53.modes]\napi = \"data_plane\"\n\
         [route53.data_plane]\ninstance = \"i0\"\nlisten = \"127.0.92.253:0\"\nsecrets_dir = \"secrets\"\n\
         request_interval = \"10s\"\nfailure_threshold = 1\n{list}"
    );
    std::fs::write(dir.join("gslb.toml"), settings).expect("settings");
}

fn provision(dir: &Path) -> String {
    let out = gslb(dir, &["provision", "--config", "gslb.toml"])
        .output()
        .expect("provision");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// The record Route 53 answers with, `PRIMARY` or `SECONDARY`, once its checkers have seen
/// the stand-ins as they answer now.
async fn answer(client: &aws_sdk_route53::Client, zone: &str) -> &'static str {
    let mut model = DataPlaneModel::load(client, zone, "api.example.test").await;
    // FailureThreshold 1: one round gives every checker's view; a second shows it holds.
    model.run_until(2, |_| false).await;
    match model.answer() {
        "seoul" => "PRIMARY",
        "tokyo" => "SECONDARY",
        other => panic!("unexpected answer {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route53_answers_for_every_count_of_instances_left_before_and_after_a_failover() {
    let moto = Emulator::start(Kind::Moto);
    let client = sdk(&moto.endpoint());
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/route53-data-plane.md"),
    )
    .expect("docs/route53-data-plane.md");
    let mut measured = Vec::new();
    for n in 1..=3u8 {
        let zone = create_zone(&client, "example.test.").await;
        let mut stand_ins = Vec::new();
        for i in 0..n {
            stand_ins.push(StandIn::start([127, 0, 92, 10 * n + i]).await);
        }
        let dir = tempfile::tempdir().expect("tempdir");
        write_files(dir.path(), &zone, &moto.endpoint(), &stand_ins);
        provision(dir.path());
        let raised = provision(dir.path());
        assert!(raised.contains(&format!("threshold {n};")), "{raised}");
        for voting in (0..=n).rev() {
            let mut row = Vec::new();
            for votes in [("serve", "serve"), ("drain", "serve")] {
                for (i, s) in stand_ins.iter().enumerate() {
                    s.set((i < usize::from(voting)).then_some(votes));
                }
                row.push(answer(&client, &zone).await);
            }
            measured.push(format!("| {n} | {voting} | {} | {} |", row[0], row[1]));
        }
    }
    let missing: Vec<&String> = measured
        .iter()
        .filter(|r| !doc.contains(r.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/route53-data-plane.md lacks the measured rows {missing:?}; measured:\n{}",
        measured.join("\n")
    );
    // Fail static both ways while one instance votes; with none, the PRIMARY.
    for r in &measured {
        let cells: Vec<&str> = r.split('|').map(str::trim).collect();
        let expected = if cells[2] == "0" {
            ["PRIMARY", "PRIMARY"]
        } else {
            ["PRIMARY", "SECONDARY"]
        };
        assert_eq!([cells[3], cells[4]], expected, "{r}");
    }
}
