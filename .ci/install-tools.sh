#!/usr/bin/env bash
# Installs the command-line tools the deployment-file tests run:
#   promtool (Debian package `prometheus`) - `promtool check rules` / `promtool test rules`
#     on deploy/prometheus/.
# Skipped when promtool is already on PATH. Uses sudo only when not root.
set -euo pipefail

if command -v promtool >/dev/null 2>&1; then
    echo "install-tools: promtool already installed ($(command -v promtool))"
    exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
    sudo=(sudo)
fi

echo "install-tools: installing Debian package prometheus (provides promtool)"
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends prometheus
promtool --version
echo "install-tools: done"
