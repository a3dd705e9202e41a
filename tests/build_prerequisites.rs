//! What building gslb needs, kept true: the manifest's `rust-version` is at least every locked
//! dependency's own, and protoc with its well-known `.proto` files is installed and proven the
//! same way on a developer's machine (`.ci/install-tools.sh`) and in the image's build stage
//! (the Dockerfile), by `.ci/check-protoc.sh`.
//!
//! Only one toolchain can be had here, so the minimum Rust version is not proven by building with
//! it: this test derives the floor from the dependencies, and `cargo clippy` (whose
//! `incompatible_msrv` lint reads `rust-version`) refuses a standard-library API newer than it.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(root().join(relative))
        .unwrap_or_else(|e| panic!("reading {relative}: {e}"))
}

/// `"1.94.1"` -> `(1, 94, 1)`; a missing patch is 0.
fn version(text: &str) -> (u64, u64, u64) {
    let mut parts = text.split('.').map(|p| {
        p.parse::<u64>()
            .unwrap_or_else(|e| panic!("version {text:?}: {e}"))
    });
    let mut next = || parts.next().unwrap_or(0);
    (next(), next(), next())
}

#[test]
fn rust_version_is_at_least_every_locked_dependencys() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // The packages this platform builds: a fresh machine's registry holds only those (a build
    // downloads no other platform's crates), and `--offline` must not need the others.
    let rustc = Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("rustc -vV");
    let host = String::from_utf8_lossy(&rustc.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
        .expect("rustc names its host");
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--locked", "--offline"])
        .args(["--filter-platform", &host])
        .current_dir(root())
        .output()
        .expect("cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let packages = meta["packages"].as_array().expect("packages");
    let ours = packages
        .iter()
        .find(|p| p["name"] == "gslb")
        .and_then(|p| p["rust_version"].as_str())
        .expect("gslb declares rust-version");
    let floor = packages
        .iter()
        .filter_map(|p| {
            let v = p["rust_version"].as_str()?;
            Some((version(v), format!("{} {}", p["name"], p["version"])))
        })
        .max()
        .expect("some dependency declares rust-version");
    assert!(
        version(ours) >= floor.0,
        "rust-version {ours} in Cargo.toml is below {} which {} needs",
        format_args!("{}.{}.{}", floor.0.0, floor.0.1, floor.0.2),
        floor.1
    );
    // Let-chains (`if let .. && ..`), used throughout, are stable from 1.88 in edition 2024.
    assert!(version(ours) >= (1, 88, 0), "let-chains need 1.88");
}

#[test]
fn the_protoc_proof_passes_here_and_runs_in_both_builds() {
    let out = Command::new("sh")
        .arg(".ci/check-protoc.sh")
        .current_dir(root())
        .output()
        .expect("sh");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let install = read(".ci/install-tools.sh");
    let dockerfile = read("Dockerfile");
    let build = dockerfile.split("\nFROM ").nth(1).expect("a build stage");
    for package in ["protobuf-compiler=3.21.12", "libprotobuf-dev=3.21.12"] {
        assert!(
            install.contains(package),
            "install-tools.sh lacks {package}"
        );
        assert!(build.contains(package), "the build stage lacks {package}");
    }
    assert!(install.contains(".ci/check-protoc.sh"), "install-tools.sh");
    assert!(build.contains("sh .ci/check-protoc.sh"), "the build stage");
}

/// The proof fails, naming the package, where protoc lacks its includes: a protoc that
/// cannot find `google/protobuf/descriptor.proto` stands in for Debian's bare protobuf-compiler.
#[test]
fn the_protoc_proof_names_the_missing_package() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = dir.path().join("protoc");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'google/protobuf/descriptor.proto: File not found.' >&2\nexit 1\n",
    )
    .expect("write");
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = format!("{}:/usr/bin:/bin", dir.path().display());
    let out = Command::new("sh")
        .arg(".ci/check-protoc.sh")
        .env("PATH", path)
        .current_dir(root())
        .output()
        .expect("sh");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("libprotobuf-dev"), "{stderr}");
}
