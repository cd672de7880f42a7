#!/usr/bin/env bash
# uftrace_compare.sh - uftrace's cost per traced call of the same one-line function that
# bench_autotrace measures: the -pg copy run N times bare and under `uftrace record`, wall time
# over the difference. Prints a line saying so when uftrace is not installed (Debian: uftrace).
# Usage: uftrace_compare.sh BENCH_AUTOTRACE [N]
set -euo pipefail
bin=$1 n=${2:-5000000}
if ! command -v uftrace > /dev/null 2>&1; then
    echo "  uftrace: not installed (apt-get install uftrace for its figure next to ours)"
    exit 0
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/sonde-uftrace-XXXXXX")
trap 'rm -rf "$dir"' EXIT
best() { # command... -> best wall seconds of 3 runs
    local b=""
    for _ in 1 2 3; do
        local t0 t1
        t0=$(date +%s.%N); "$@" > /dev/null 2>&1; t1=$(date +%s.%N)
        b=$(python3 -c "import sys; t=$t1-$t0; b='$b'; print(t if not b else min(t, float(b)))")
    done
    echo "$b"
}
bare=$(best "$bin" --pg "$n")
traced=$(best uftrace record --no-libcall -d "$dir/data" "$bin" --pg "$n")
python3 -c "
bare, traced, n = $bare, $traced, $n
print('  uftrace %s, the -pg copy: +%.2f ns a call (%.2f s bare, %.2f s under uftrace record, '
      'writing included)' % ('$(uftrace --version 2>/dev/null | head -1 | awk '{print $2}')',
                             (traced - bare) / n * 1e9, bare, traced))"
