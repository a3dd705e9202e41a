#!/usr/bin/env bash
# Installs the Route 53 emulators the integration tests start on 127.0.0.1:
#   moto 5.2.5   (moto_server)  - health checks round-trip Inverted/Disabled
#   ministack 1.5.33 (ministack) - exact-match DELETE (CAS), atomic batches, PENDING -> INSYNC
# into a virtualenv at $GSLB_VENV, or <repo root>/.venv when unset. Idempotent: a venv that
# already has both pinned versions is left alone, so re-running costs well under a second.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${GSLB_VENV:-$root/.venv}"
moto_pin="5.2.5"
ministack_pin="1.5.33"

if [ ! -x "$venv/bin/python" ]; then
    echo "install-emulators: creating virtualenv at $venv"
    python3 -m venv "$venv"
fi

installed() {
    "$venv/bin/python" - "$@" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
for spec in sys.argv[1:]:
    name, want = spec.split("==")
    if version(name) != want:
        sys.exit(1)
PY
}

if installed "moto==$moto_pin" "ministack==$ministack_pin" \
    && [ -x "$venv/bin/moto_server" ] && [ -x "$venv/bin/ministack" ]; then
    echo "install-emulators: moto $moto_pin and ministack $ministack_pin already in $venv"
    exit 0
fi

echo "install-emulators: installing moto[server]==$moto_pin ministack==$ministack_pin into $venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "moto[server]==$moto_pin" "ministack==$ministack_pin"
"$venv/bin/moto_server" --help >/dev/null
test -x "$venv/bin/ministack"
echo "install-emulators: done"
