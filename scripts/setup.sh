#!/usr/bin/env bash
# setup.sh - installs the Debian packages sonde needs to build and test, when they are missing.
# Called by every make target; does nothing when all are present. Needs root (or sudo) to install.
set -euo pipefail
pkgs=(cmake make gcc g++ clang libclang-rt-14-dev pkg-config zlib1g-dev libcmocka-dev libyaml-dev libjansson-dev libdw-dev libelf-dev python3 python3-dev binutils libsqlite3-0)
# `setup.sh test`: also what the tests use (a headless browser for the HTML report, Open MPI,
# PyTorch for Debian's python3, for sonde.torch's tests, protoc to decode .pftrace, perf and xz
# to compare sonde run's CPU samples with, strace to count how often a file is opened, and the
# sqlite3 shell for the SQL export's queries and golden dumps, and a Prometheus server and
# promtool for the metrics endpoint's)
# `setup.sh browser`: only what make bench's HTML benchmark adds (Chromium, puppeteer-core).
[ "${1:-}" = browser ] && pkgs+=(chromium)
[ "${1:-}" = test ] && pkgs+=(chromium openmpi-bin libopenmpi-dev python3-venv python3-torch protobuf-compiler linux-perf
    xz-utils strace sqlite3 prometheus)
# the browser test's driver, puppeteer-core, from the npm registry (the version
# tests/browser/package-lock.json pins), with the machine's Node.js, else Debian's
browser_deps() {
    [ "${1:-}" = test ] || [ "${1:-}" = browser ] || return 0
    local dir
    dir="$(cd "$(dirname "$0")/.." && pwd)/tests/browser"
    [ -f "$dir/node_modules/puppeteer-core/package.json" ] && return 0
    echo "sonde setup: installing puppeteer-core into tests/browser/node_modules"
    if ! (cd "$dir" && npm ci --no-audit --no-fund > /tmp/sonde-npm.log 2>&1); then
        echo "sonde setup: npm ci in tests/browser failed; see /tmp/sonde-npm.log" >&2
        tail -5 /tmp/sonde-npm.log >&2
        exit 1
    fi
}
if { [ "${1:-}" = test ] || [ "${1:-}" = browser ]; } && ! { command -v node && command -v npm; } > /dev/null; then
    pkgs+=(nodejs npm)
fi
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    browser_deps "${1:-}"
    exit 0
fi
echo "sonde setup: installing ${missing[*]}"
if [ "$(id -u)" = 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
else
    echo "sonde setup: missing Debian packages: ${missing[*]}" >&2
    echo "sonde setup: run as root, or: apt-get install ${missing[*]}" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if ! "${SUDO[@]}" apt-get install -y -q "${missing[@]}" >/tmp/sonde-setup.log 2>&1; then
    "${SUDO[@]}" apt-get update -q >>/tmp/sonde-setup.log 2>&1 || true
    if ! "${SUDO[@]}" apt-get install -y -q "${missing[@]}" >>/tmp/sonde-setup.log 2>&1; then
        echo "sonde setup: apt-get install ${missing[*]} failed; see /tmp/sonde-setup.log" >&2
        tail -5 /tmp/sonde-setup.log >&2
        exit 1
    fi
fi
browser_deps "${1:-}"
