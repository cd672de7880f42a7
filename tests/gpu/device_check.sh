#!/bin/bash
# device_check.sh BUILD LIBS - sonde's GPU paths on a machine with a GPU (CI has none). BUILD is
# a Release build made elsewhere for the GPU machine's python3 (its minor version), LIBS a folder
# of the shared libraries the build links that the machine may lack (libyaml, libdw, libelf and
# theirs). Runs gpu_check.py in process (NVML, CUPTI, track_cuda, Python frames) and through
# torch.profiler's CUDA activity, `sonde run` from outside on the same training, and make
# bench's bench_sample Python cases and ab_sample.py's alternating rounds of sonde run's ways
# (not with SKIP_BENCH=1), and with SUITES=DIR the torch and
# compat Python suites on that machine's torch; everything it wrote goes to
# $OUT/gpu.tgz. Exit status: the
# number of checks that failed. What the last run found: docs/integrations.md.
# Made here for the lent machines' Python 3.12 (2026-11-27): cmake -S . -B build-dev
# -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF -DPython3_EXECUTABLE=$HOME/.pyenv/versions/
# 3.12.1/bin/python3, cmake --build build-dev; LIBS: libdw.so.1, libelf.so.1, libjansson.so.4,
# libyaml-0.so.2, libbz2.so.1.0 and liblzma.so.5 copied (cp -L) from /lib/x86_64-linux-gnu into
# .devlibs; every device call carries both (["build-dev", ".devlibs"]): a call that carries
# neither finds them gone.
set -u
B=${1:-build-dev}
LIBS=${2:-.devlibs}
OUT=${OUT:-$(mktemp -d)}
export LD_LIBRARY_PATH=$PWD/$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONPATH=$PWD/$B/python PYTHONUNBUFFERED=1
# the build tree's libsonde.so for --sample-python-in-thread (its own path is this machine's)
[ -n "${SONDE_LIBRARY:-}" ] || export SONDE_LIBRARY=$(ls "$PWD/$B"/libsonde.so.*.* 2>/dev/null | head -1)
W=$(mktemp -d)
PY=$(command -v python3)
SONDE=$PWD/$B/tools/sonde/sonde
fails=0
note() { echo "== $*"; }

note "machine"
uname -r; nproc; cat /proc/sys/kernel/perf_event_paranoid 2>&1
nvidia-smi -L 2>&1 | head -4
"$PY" -c 'import sys, torch, sonde; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.is_available(), sonde.__file__)' || exit 99

note "in process: NVML, CUPTI, track_cuda, instrument, Python frames"
timeout 150 "$PY" tests/gpu/gpu_check.py inproc "$W/inproc"; fails=$((fails + $?))
grep -i -E "gpu|cuda|nvml|cupti|warn" "$W/inproc/inproc.txt" | head -30

note "in process: torch.profiler's CUDA activity folded in (profile_operators)"
timeout 150 "$PY" tests/gpu/gpu_check.py ops "$W/ops"; fails=$((fails + $?))

note "from outside: sonde run on the same training, no sonde in it"
timeout 150 "$SONDE" run --name outside -o "$W/outside" --interval 0.05 -- "$PY" tests/gpu/gpu_check.py plain "$W/outside"
"$PY" - "$W/outside" <<'EOF' || fails=$((fails + 1))
import json, sys
d = sys.argv[1]
r = json.load(open(d + "/outside.json"))
gpu = [c for c in r.get("counters", []) if c["name"].lower().startswith("gpu")]
for c in gpu:
    print("   %-36s samples %4d  mean %10.2f  max %10.2f" % (c["name"], c["samples"], c["mean"], c["max"]))
folded = open(d + "/outside.folded").read().splitlines()
py = sum(int(l.rsplit(" ", 1)[1]) for l in folded if "train_step" in l)
total = sum(int(l.rsplit(" ", 1)[1]) for l in folded)
print("   samples %d, under train_step %d" % (total, py))
for w in r.get("warnings", [])[:10]:
    print("   warning:", w)
ok = any("util" in c["name"] and c["max"] > 0 for c in gpu) and py > 0
print("ok: outside" if ok else "FAIL: outside (GPU utilization or Python frames missing)")
sys.exit(0 if ok else 1)
EOF

tar czf "$OUT/gpu.tgz" -C "$W" --exclude='*.sonde' . 2>/dev/null # before the bench, the longest

if [ -n "${SUITES:-}" ]; then # the Python suites on this machine's torch (SUITES=REFERENCE_DIR:
    # the reference documents for the compat suites; LIBS holds libfake_nvml_full.so for them)
    for t in test_torch test_torch_profiler; do
        note "tests/python/$t.py on this torch"
        TMPDIR=$W timeout 300 "$PY" "tests/python/$t.py" 2>&1 | tail -40
        fails=$((fails + ${PIPESTATUS[0]}))
    done
    for doc in diffulex inferix cache_dit torch_decorator artifex; do
        note "tests/python/test_compat_$doc.py"
        TMPDIR=$W REFERENCE_DOCS_DIR=$PWD/$SUITES SONDE_NVML_LIBRARY=$PWD/$LIBS/libfake_nvml_full.so \
            FAKE_NVML_DEVICES=4 timeout 200 "$PY" "tests/python/test_compat_$doc.py" 2>&1 | tail -25
        fails=$((fails + ${PIPESTATUS[0]}))
    done
fi

[ -n "${SKIP_BENCH:-}" ] && { echo "device_check: $fails failed"; exit "$fails"; }
note "bench_sample: what sampling costs a Python program (issue 39's 2%)"
timeout 240 "$PWD/$B/bench/bench_sample" "$SONDE" --dir "$W/bench" --python "$PY" tests/e2e/pyshares.py
note "ab_sample: sonde run's ways in alternating rounds (what decides its default for Python)"
timeout 200 "$PY" tests/gpu/ab_sample.py "$SONDE" "$PY" 16
echo "device_check: $fails failed"
exit "$fails"
