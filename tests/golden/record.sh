#!/usr/bin/env bash
# record.sh BUILD_DIR [SRC_DIR] - records the golden corpus: tests/golden/runs/*.sonde, real runs
# of sonde's own programs covering what the reports read (sessions, steps, diffusion records,
# metrics and CPU/memory samples; held and folded sections; CPU samples with stacks; torch
# operators with FLOPs; GPU records through the fake NVML and CUDA libraries; three ranks of one
# job; off-CPU periods). Run by hand, only when the corpus itself must change (a new file-format feature); then
# `check.sh --update` writes the reports' hashes again. Recording is timing-dependent, so the
# .sonde files are kept, not remade by the tests.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "${2:-$(dirname "$0")/../..}" && pwd)
out="$src/tests/golden/runs"
work=$(mktemp -d "${TMPDIR:-/tmp}/sonde-golden-XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
export SONDE_COLLECT_GPU=0
# 1. the demo pipeline: sessions, steps, diffusion steps and blocks, metrics, samples
"$build/examples/pipeline" --steps 4 --blocks 2 --frames 4 --dim 32 > /dev/null
# 2. held sections: more than report_max_sections, the longest held and the rest folded
SONDE_OUTPUT_DIR=sonde-out SONDE_NAME=held SONDE_AUTOTRACE_HOT_CALLS=0 \
    SONDE_REPORT_MAX_SECTIONS=300 "$build/tests/comparator" 3000 > /dev/null
# 3. CPU samples with call stacks (folded, pprof, the profile in every report)
"$build/tools/sonde/sonde" run --quiet -o sonde-out --name sampled -- "$build/tests/hotspots" 2 10
# 4. three ranks of one job (aggregate, merge, diff)
for r in 0 1 2; do
    slow=""; [ $r = 2 ] && slow="step=0.6"
    RANK=$r LOCAL_RANK=$r WORLD_SIZE=3 STAGES_SLOW=$slow "$build/tests/stages" sonde-out job &
done
wait
# 5. GPU counters: NVML through the fake library, 2 devices, sampled by `sonde run`
SONDE_COLLECT_GPU=1 SONDE_NVML_LIBRARY="$build/tests/libfake_nvml_full.so" FAKE_NVML_DEVICES=2 \
    SONDE_GPU_INTERVAL_S=0.05 SONDE_CPU_INTERVAL_S=0.05 \
    "$build/tools/sonde/sonde" run --quiet -o sonde-out --name gpu -- "$build/tests/stages" st
# 6. torch operators with FLOPs and module sections (Debian's python3 has torch)
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
    PYTHONPATH="$build/python" /usr/bin/python3 - <<'PY'
import sonde, sonde.torch, torch
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
with sonde.Profiler({"name": "torch", "output_dir": "sonde-out", "collect_gpu": False,
                     "wait": 1, "warmup": 0, "active": 2, "repeat": 1}, from_env=False) as p:
    ins = sonde.torch.instrument(model)
    ops = sonde.torch.profile_operators()
    for _ in range(4):
        with p.profile("step"):
            model(torch.randn(8, 16)).sum().backward()
        p.step()
    ins.remove()
PY
fi
# 7. off-CPU periods (NAME.offcpu.folded): a program that sleeps and waits, under `sonde run` as
# root (where the periods are followed)
SONDE_COLLECT_GPU=0 "$build/tools/sonde/sonde" run --quiet -o sonde-out --name blocked -- \
    "$build/tests/stages" st
rm -rf "$out" && mkdir -p "$out"
cp sonde-out/*.sonde "$out/"
ls -la "$out"
