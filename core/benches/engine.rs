//! Evaluation cost of the pure engine at 10,000 endpoints, three vantage points reporting, in
//! two shapes: 5,000 services of two pools with one endpoint each, and 20 services of two pools
//! with 250 endpoints each (500 per service). Per observation: record it and decide its service
//! when a verdict can change (the inputs are built before the clock starts; one probe in 17
//! fails, never `fall` in a row, and a round of every endpoint moves time on by one interval,
//! so evidence stays fresh as in the daemon; each observation carries its service's handle,
//! resolved once before the clock starts as a probe loop does). Late: the same observations,
//! each arriving after its endpoint's previous result went stale (rounds longer than the
//! freshness window, spread evenly over it), as when the controller runs behind. Per decision:
//! a tick decides every service whose decision time can change (the figure is divided by the
//! number of services).
//!
//! `cargo bench -p gslb-core --bench engine`; the figures go in `docs/benchmarks.md`.

use std::path::Path;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use gslb_core::engine::{Engine, EngineSettings, Input, ServiceHandle};
use gslb_core::model::{
    EndpointId, Millis, Observation, PoolId, ProbeOutcome, ProbeReason, ServiceId, VantageId,
};
use gslb_core::policy::{self, Policy};

const VANTAGES: [&str; 3] = ["aws-ap-northeast-2", "gcp-asia-northeast1", "ncp-kr"];
const POOLS: [&str; 2] = ["seoul", "tokyo"];
/// The policies' probe interval (the default), in milliseconds.
const INTERVAL: u64 = 10_000;

/// Services of two pools with `per_pool` endpoints each.
#[derive(Clone, Copy)]
struct Shape {
    services: usize,
    per_pool: usize,
}

impl Shape {
    fn name(self) -> String {
        format!(
            "engine_{}_services_x_{}_endpoints",
            self.services,
            2 * self.per_pool
        )
    }
}

fn endpoint(s: usize, pool: &str, e: usize) -> String {
    format!("https://{pool}-{e}.svc{s}.example.com/health")
}

fn policy(shape: Shape, s: usize) -> Policy {
    let list = |pool: &str| {
        (0..shape.per_pool)
            .map(|e| format!("\"{}\"", endpoint(s, pool, e)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let text = format!(
        "service = \"svc{s}\"\nhostname = \"svc{s}.example.com\"\n\n\
         [[pools]]\nname = \"seoul\"\npriority = 1\nendpoints = [{}]\n\n\
         [[pools]]\nname = \"tokyo\"\npriority = 2\nendpoints = [{}]\n\n\
         [target.route53]\nhosted_zone_id = \"Z1\"\n\
         [target.route53.pools.seoul]\nvalues = [\"192.0.2.1\"]\n\
         [target.route53.pools.tokyo]\nvalues = [\"192.0.2.2\"]\n",
        list("seoul"),
        list("tokyo"),
    );
    policy::parse(Path::new("bench.toml"), &text).expect("valid")
}

fn outcome(ok: bool) -> ProbeOutcome {
    ProbeOutcome {
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
    }
}

fn observe(s: usize, pool: &str, e: usize, vantage: &str, at: u64, ok: bool) -> Input {
    Input::Observe {
        service: ServiceId(format!("svc{s}")),
        observation: Observation {
            endpoint: EndpointId(endpoint(s, pool, e)),
            vantage: VantageId(vantage.into()),
            at: Millis(at),
            outcome: outcome(ok),
        },
    }
}

/// Every observation of one round, in probe order: each endpoint of `pools` from each vantage
/// point.
fn round(shape: Shape, pools: &[&str], at: u64) -> Vec<Input> {
    let mut inputs = Vec::new();
    for e in 0..shape.per_pool {
        for s in 0..shape.services {
            for v in VANTAGES {
                for p in pools {
                    inputs.push(observe(s, p, e, v, at, true));
                }
            }
        }
    }
    inputs
}

/// Every service adopted, every endpoint healthy from every vantage point at the time returned.
fn warmed(shape: Shape) -> (Engine, u64) {
    let policies = (0..shape.services).map(|s| policy(shape, s));
    let mut engine = Engine::new(policies, &EngineSettings::default());
    let mut now = 1_000_000;
    for s in 0..shape.services {
        engine.step(
            Millis(now),
            &Input::Adopt {
                service: ServiceId(format!("svc{s}")),
                pool: Some(PoolId("seoul".into())),
            },
        );
    }
    for _ in 0..2 {
        now += INTERVAL;
        for input in round(shape, &POOLS, now) {
            engine.step(Millis(now), &input);
        }
    }
    (engine, now)
}

/// The `i`-th input of the rounds after `now`: `inputs` in turn, each round an interval later,
/// every 17th observation a failure.
fn next(inputs: &mut [Input], i: usize, now: u64) -> (Millis, &Input) {
    let n = inputs.len();
    let at = Millis(now + INTERVAL * (1 + (i / n) as u64));
    at_time(inputs, i, at)
}

/// The `i`-th input of late rounds after `now`: as [`next`], but a round takes `round_ms`
/// (longer than the evidence stays fresh) and its observations are spread evenly over it, so
/// every result arrives after the endpoint's previous one went stale and, between two
/// observations, another endpoint's result goes stale: a controller running behind.
fn next_late(inputs: &mut [Input], i: usize, now: u64, round_ms: u64) -> (Millis, &Input) {
    let n = inputs.len() as u64;
    let k = i as u64;
    let at = Millis(now + round_ms * (1 + k / n) + round_ms * (k % n) / n);
    at_time(inputs, i, at)
}

/// Sets the `i`-th input's time to `at` (every 17th observation a failure).
fn at_time(inputs: &mut [Input], i: usize, at: Millis) -> (Millis, &Input) {
    let n = inputs.len();
    let input = &mut inputs[i % n];
    if let Input::Observe { observation, .. } = input {
        observation.at = at;
        observation.outcome.success = !i.is_multiple_of(17);
        observation.outcome.reason = if !i.is_multiple_of(17) {
            ProbeReason::Ok
        } else {
            ProbeReason::Timeout
        };
    }
    (at, input)
}

fn bench_shape(c: &mut Criterion, shape: Shape) {
    let (engine, now) = warmed(shape);
    let mut g = c.benchmark_group(shape.name());
    g.sample_size(20);
    g.throughput(Throughput::Elements(1));
    let mut engine_obs = engine.clone();
    let mut inputs = round(shape, &POOLS, now);
    let handles: Vec<Option<ServiceHandle>> = inputs
        .iter()
        .map(|input| match input {
            Input::Observe { service, .. } => engine_obs.handle(service),
            _ => None,
        })
        .collect();
    let (n, mut i) = (inputs.len(), 0usize);
    g.bench_function("per_observation", |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            let (at, input) = next(&mut inputs, i, now);
            engine_obs.step_handled(at, input, handles[i % n])
        });
    });
    // The same inputs stepped by name, as the daemon steps them: what a handle saves. From
    // the same warmed state and the same first input (continuing the count above would start
    // rounds later than the warmed evidence, all of it stale).
    let mut by_name = engine.clone();
    let mut inputs = round(shape, &POOLS, now);
    let mut j = 0usize;
    g.bench_function("per_observation_by_name", |b| {
        b.iter(|| {
            j = j.wrapping_add(1);
            let (at, input) = next(&mut inputs, j, now);
            by_name.step(at, input)
        });
    });
    // Results running late: each arrives after its endpoint's previous one went stale.
    let mut late = engine.clone();
    let mut inputs = round(shape, &POOLS, now);
    let fresh = late
        .services()
        .next()
        .map_or(0, |s| s.policy().fresh_for().as_millis());
    let round_ms = u64::try_from(fresh).unwrap_or(u64::MAX) + INTERVAL / 2;
    let mut k = 0usize;
    g.bench_function("per_observation_late", |b| {
        b.iter(|| {
            k = k.wrapping_add(1);
            let (at, input) = next_late(&mut inputs, k, now, round_ms);
            late.step_handled(at, input, handles[k % n])
        });
    });
    g.throughput(Throughput::Elements(shape.services as u64));
    g.bench_function("per_tick_all_services", |b| {
        b.iter_batched_ref(
            || engine.clone(),
            |e| e.step(Millis(now + 500), &Input::Tick),
            BatchSize::LargeInput,
        );
    });
    g.finish();
}

fn bench(c: &mut Criterion) {
    bench_shape(
        c,
        Shape {
            services: 5_000,
            per_pool: 1,
        },
    );
    bench_shape(
        c,
        Shape {
            services: 20,
            per_pool: 250,
        },
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
