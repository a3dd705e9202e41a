//! Evaluation cost of the pure engine with 10,000 pools (5,000 services of two pools, one
//! endpoint each, three vantage points reporting): per observation (record it and decide its
//! service) and per decision (a tick decides every service; the figure is divided by 5,000).
//!
//! `cargo bench --bench engine`; the figures go in `docs/benchmarks.md`.

use std::path::Path;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use gslb_core::engine::{Engine, EngineSettings, Input};
use gslb_core::model::{
    EndpointId, Millis, Observation, PoolId, ProbeOutcome, ProbeReason, ServiceId, VantageId,
};
use gslb_core::policy::{self, Policy};

const SERVICES: usize = 5_000;
const VANTAGES: [&str; 3] = ["aws-ap-northeast-2", "gcp-asia-northeast1", "ncp-kr"];

fn endpoint(s: usize, pool: &str) -> String {
    format!("https://{pool}.svc{s}.example.com/health")
}

fn policy(s: usize) -> Policy {
    let text = format!(
        "service = \"svc{s}\"\nhostname = \"svc{s}.example.com\"\n\n\
         [[pools]]\nname = \"seoul\"\npriority = 1\nendpoints = [\"{}\"]\n\n\
         [[pools]]\nname = \"tokyo\"\npriority = 2\nendpoints = [\"{}\"]\n\n\
         [target.route53]\nhosted_zone_id = \"Z1\"\n\
         [target.route53.pools.seoul]\nvalues = [\"192.0.2.1\"]\n\
         [target.route53.pools.tokyo]\nvalues = [\"192.0.2.2\"]\n",
        endpoint(s, "seoul"),
        endpoint(s, "tokyo"),
    );
    policy::parse(Path::new("bench.toml"), &text).expect("valid")
}

fn observe(s: usize, pool: &str, vantage: &str, at: u64, ok: bool) -> Input {
    Input::Observe {
        service: ServiceId(format!("svc{s}")),
        observation: Observation {
            endpoint: EndpointId(endpoint(s, pool)),
            vantage: VantageId(vantage.into()),
            at: Millis(at),
            outcome: ProbeOutcome {
                success: ok,
                duration: Duration::from_millis(12),
                http_status: ok.then_some(200),
                dns_lookup: None,
                cert_expiry: None,
                reason: if ok {
                    ProbeReason::Ok
                } else {
                    ProbeReason::Timeout
                },
            },
        },
    }
}

/// 10,000 pools, adopted, every endpoint healthy from every vantage point at `now`.
fn warmed() -> (Engine, u64) {
    let mut engine = Engine::new((0..SERVICES).map(policy), &EngineSettings::default());
    let mut now = 1_000_000;
    for s in 0..SERVICES {
        engine.step(
            Millis(now),
            &Input::Adopt {
                service: ServiceId(format!("svc{s}")),
                pool: Some(PoolId("seoul".into())),
            },
        );
    }
    for _ in 0..2 {
        now += 10_000;
        for s in 0..SERVICES {
            for v in VANTAGES {
                for p in ["seoul", "tokyo"] {
                    engine.step(Millis(now), &observe(s, p, v, now, true));
                }
            }
        }
    }
    (engine, now)
}

fn bench(c: &mut Criterion) {
    let (engine, now) = warmed();
    let mut g = c.benchmark_group("engine_10000_pools");
    g.sample_size(20);
    g.throughput(Throughput::Elements(1));
    let mut engine_obs = engine.clone();
    let mut i = 0usize;
    g.bench_function("per_observation", |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            let s = i % SERVICES;
            let v = VANTAGES[i % VANTAGES.len()];
            let at = now + 1 + (i / SERVICES) as u64;
            engine_obs.step(Millis(at), &observe(s, "seoul", v, at, i % 17 != 0))
        });
    });
    g.throughput(Throughput::Elements(SERVICES as u64));
    g.bench_function("per_tick_all_services", |b| {
        b.iter_batched_ref(
            || engine.clone(),
            |e| e.step(Millis(now + 500), &Input::Tick),
            BatchSize::LargeInput,
        );
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
