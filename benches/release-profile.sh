#!/usr/bin/env bash
# The release profile by measurement (issue 14, item 6): builds the gslb binary (and
# gslb-bench) in release mode under each candidate profile, each in a target folder of its own
# under $OUT (default /tmp/gslb-profiles; about 3 GB each), and records the build's wall time,
# its CPU time (user + system of cargo and every rustc) and the binary's size; then runs the
# product benchmark with each binary, interleaved, twice, at 2,000 endpoints (4 services x 500,
# resync 1 h, so the figure is the probe path's) and prints CPU per probe and cores used.
# Prints markdown tables. Takes 30-60 min on 2 idle cores. Not run by CI.
#   bash benches/release-profile.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gslb-profiles}
mkdir -p "$OUT"
declare -A ENVS=(
    [default]=""
    [thin]="CARGO_PROFILE_RELEASE_LTO=thin"
    [fat-cgu1]="CARGO_PROFILE_RELEASE_LTO=fat CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1"
    [thin-cgu1]="CARGO_PROFILE_RELEASE_LTO=thin CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1"
)
VARIANTS=${VARIANTS:-default thin fat-cgu1 thin-cgu1}
echo "| profile (over the default) | build wall | build CPU | binary | stripped |"
echo "|---|---|---|---|---|"
for v in $VARIANTS; do
    # A profile in Cargo.toml is overridden by these variables; the default one is restored
    # explicitly so that the table's baseline stays the compiler's default.
    base="CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 CARGO_PROFILE_RELEASE_STRIP=none"
    start=$(date +%s)
    cpu=$( (env $base ${ENVS[$v]} CARGO_TARGET_DIR="$OUT/target-$v" CARGO_INCREMENTAL=0 \
        cargo build -q --release -p gslb -p gslb-bench --bin gslb --bin gslb-bench >"$OUT/$v.log" 2>&1; times) | tail -1 \
        | awk '{ split($1, u, /[ms]/); split($2, s, /[ms]/); print u[1] * 60 + u[2] + s[1] * 60 + s[2] }')
    wall=$(( $(date +%s) - start ))
    cp "$OUT/target-$v/release/gslb" "$OUT/gslb-$v"
    strip -o "$OUT/gslb-$v.stripped" "$OUT/gslb-$v"
    printf "| %s | %d s | %.0f s | %.1f MB | %.1f MB |\n" "$v" "$wall" "$cpu" \
        "$(echo "$(stat -c %s "$OUT/gslb-$v") / 1000000" | bc -l)" \
        "$(echo "$(stat -c %s "$OUT/gslb-$v.stripped") / 1000000" | bc -l)"
done
echo
echo "| profile | round | probes/s | CPU per probe | cores | other processes (cores) |"
echo "|---|---|---|---|---|---|"
bench=$OUT/target-default/release/gslb-bench
for round in 1 2; do
    for v in $VARIANTS; do
        out=$("$bench" --gslb "$OUT/gslb-$v" --endpoints 2000 --per-service 500 --interval 1s \
            --duration 20s --warmup 5s --scrapes 1 --no-blackbox --resync 1h)
        cell() { grep -F "| $1" <<<"$out" | cut -d'|' -f3 | xargs; }
        echo "| $v | $round | $(cell 'probes per second') | $(cell 'CPU per probe, whole') | $(cell 'cores used') | $(cell 'CPU of origins' | awk -F/ '{print $3}' | xargs) |"
    done
done
