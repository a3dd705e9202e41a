#!/usr/bin/env bash
# The probe benchmark of issue 6 from a fresh clone: installs blackbox_exporter (Debian package
# prometheus-blackbox-exporter) when it is missing and apt-get can, builds gslb-bench in release
# mode and runs it. Arguments go to gslb-bench, e.g.
#   bash benches/probe-bench.sh                                   # defaults, about two minutes
#   bash benches/probe-bench.sh --endpoints 10000 --interval 1s --duration 30s
# Loopback only; everything it starts stops with it. Not run by CI.
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
cargo build --release --bin gslb-bench
exec "${CARGO_TARGET_DIR:-target}/release/gslb-bench" "$@"
