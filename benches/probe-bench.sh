#!/usr/bin/env bash
# The product benchmark (issue 14) from a fresh clone: installs blackbox_exporter (Debian
# package prometheus-blackbox-exporter) when it is missing and apt-get can, builds `gslb` and
# `gslb-bench` in release mode and runs gslb-bench, which drives `gslb run` end to end.
# Arguments go to gslb-bench, e.g.
#   bash benches/probe-bench.sh                                    # 5,000 services x 2 endpoints at 1 s
#   bash benches/probe-bench.sh --per-service 500                  # 20 services x 500 endpoints
#   bash benches/probe-bench.sh detect --rounds 20                 # detection, 1 s / fall 3
#   bash benches/probe-bench.sh --cpu-quota 20 --no-blackbox       # overload
# Loopback only; everything it starts stops with it. Not run by CI (bench/tests/smoke.rs runs
# it at toy size).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v prometheus-blackbox-exporter >/dev/null && ! command -v blackbox_exporter >/dev/null; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
        apt-get update -qq && apt-get install -y -qq prometheus-blackbox-exporter >/dev/null \
            || echo "could not install prometheus-blackbox-exporter: gslb's figures only" >&2
    else
        echo "blackbox_exporter not installed and cannot install it here: gslb's figures only" >&2
    fi
fi
cargo build --release -p gslb -p gslb-bench --bin gslb --bin gslb-bench
exec "${CARGO_TARGET_DIR:-target}/release/gslb-bench" "$@"
