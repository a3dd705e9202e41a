//! How the property tests run (issue 26): with a fixed seed by default, so CI explores the same
//! cases every run and a failure is reproducible; with `GSLB_PROPTEST_SEED=<n>` a seed of one's
//! own (`.ci/run` runs the engine's properties a second time with a seed from the commit, so
//! each commit explores new cases). A failure prints its seed, and its case is persisted in
//! `proptest-regressions/<name>.txt` and replayed first by every later run.

use proptest::prelude::*;
use proptest::test_runner::{
    Config, FileFailurePersistence, RngAlgorithm, TestError, TestRng, TestRunner,
};

/// The seed when `GSLB_PROPTEST_SEED` does not give one: proptest's own deterministic seed.
const FIXED: &str = "fixed (proptest's deterministic seed)";

/// Runs `test` over `strategy` for `cases` cases; panics with the minimal failing case, the
/// seed and how to run it again. `name` names the regression file.
pub fn run<S: Strategy>(
    name: &str,
    cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    let seed = std::env::var("GSLB_PROPTEST_SEED")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    let rng = match seed {
        Some(n) => {
            let mut bytes = [0u8; 32];
            for (i, chunk) in bytes.chunks_mut(8).enumerate() {
                chunk.copy_from_slice(&n.rotate_left(i as u32 * 16).to_le_bytes());
            }
            TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
        }
        None => TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    };
    let path: &'static str = Box::leak(format!("proptest-regressions/{name}.txt").into_boxed_str());
    let config = Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(path))),
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(config, rng);
    if let Err(e) = runner.run(&strategy, test) {
        let seed = seed.map_or_else(|| FIXED.to_owned(), |n| n.to_string());
        let again = match &e {
            TestError::Fail(..) => {
                format!("seed {seed}; the case is saved in {path} and replayed first from now on")
            }
            TestError::Abort(..) => format!("seed {seed}"),
        };
        panic!("{e}\n{again}");
    }
}
