# cuda.sh - the e2e case `cuda`, sourced by run.sh (index: README.md), which gives it
# $work (its folder, removed at the end), $build, $src, $sonde, $asan and the helpers check,
# fail and expect; it exits non-zero at the first failure, 77 when it cannot run here.
# shellcheck shell=bash
cd "$work"
app="$build/tests/cuda_app"
# The fake CUPTI makes 5 kernels, a copy and a set, each with its runtime call
SONDE_CUDA_ACTIVITY=1 SONDE_CUPTI_LIBRARY="$build/tests/libfake_cupti_ok.so" "$app" out gpu \
    || fail "cuda_app exited $?"
check trace out/gpu.trace.json.gz
python3 - out/gpu.json out/gpu.trace.json.gz <<'PY'
import gzip, json, sys
r = json.load(open(sys.argv[1]))
g = r["gpu_activity"]
assert (g["kernels"], g["memcpy"], g["memset"]) == (5, 1, 1), g
assert g["memcpy_bytes"] == 1 << 20 and g["memset_bytes"] == 4096, g
assert g["linked_to_sections"] == 6, g  # the set was launched outside every section
by_sec = {s["name"]: s["count"] for s in g["kernels_by_section"]}
assert by_sec == {"prefill": 2, "decode": 3}, by_sec
top = {k["name"]: (k["count"], round(k["mean_s"] * 1e6)) for k in g["top_kernels"]}
# the C++ kernel CUPTI names mangled (_Z11gemm_kernelPKfS0_Pfi), demangled as PyTorch shows it
GEMM = "gemm_kernel(float const*, float const*, float*, int)"
assert top == {GEMM: (2, 300), "attn_kernel": (3, 100)}, top
assert r["warnings"] == [], r["warnings"]
ev = json.load(gzip.open(sys.argv[2], "rt"))
names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e.get("name") == "thread_name"}
kern = [e for e in ev if e.get("cat") == "kernel"]
assert len(kern) == 5 and all(names[(e["pid"], e["tid"])] == "GPU 0 stream 7" for e in kern), kern
k0 = kern[0]
assert k0["args"]["grid"] == [128, 2, 1] and k0["args"]["block"] == [256, 1, 1], k0
assert k0["args"]["launched_by"] == "prefill" and k0["name"] == GEMM, k0
copies = [e for e in ev if e.get("cat") == "gpu_memcpy"]
assert [e["name"] for e in copies] == ["Memcpy HtoD"] and copies[0]["args"]["bytes"] == 1 << 20
# each launch is a flow from the launching thread to the GPU work, 10 us or 5 us later
starts = {e["id"]: e for e in ev if e.get("ph") == "s"}
ends = {e["id"]: e for e in ev if e.get("ph") == "f"}
assert len(starts) == 7 and starts.keys() == ends.keys(), (len(starts), len(ends))
for i in starts:
    lag = ends[i]["ts"] - starts[i]["ts"]
    assert 4 < lag < 12, ("launch to start", lag)  # CUPTI's clock moved onto the run's
prefill = [e for e in ev if e.get("name") == "prefill"][0]
launch = starts[k0["args"]["correlation"]]
assert prefill["ts"] <= launch["ts"] <= prefill["ts"] + prefill["dur"], (prefill, launch)
assert launch["tid"] == prefill["tid"]
print("cuda: 5 kernels, 1 copy, 1 set on GPU tracks, 7 launch flows, kernels by section")
PY
grep -q "^CUDA: 5 kernels" out/gpu.txt || fail "the text summary lacks the CUDA line: $(cat out/gpu.txt)"
"$build/tools/sonde/sonde" export out/gpu.sonde --format tensorboard -o tb --quiet
check tensorboard tb gpu out/gpu.json
# the GPU tracks in Perfetto's protobuf trace, as in the JSON one
"$build/tools/sonde/sonde" export out/gpu.sonde --format perfetto --quiet
python3 "$src/tests/e2e/pftrace.py" compare out/gpu.pftrace out/gpu.trace.json.gz > pf.txt ||
    fail "gpu.pftrace differs from the JSON trace"
python3 "$src/tests/e2e/pftrace.py" out/gpu.pftrace | python3 -c 'import json, sys
t = json.load(sys.stdin)
k = [s for s in t["slices"] if s["cat"] == "kernel"]
names = {t["tracks"][str(s["track"])]["name"] for s in k}
assert len(k) == 5 and names == {"GPU 0 stream 7"}, (len(k), names)
print("cuda: 5 kernels on GPU 0 stream 7 in gpu.pftrace")' || fail "gpu.pftrace GPU tracks"
python3 - out/gpu.html <<'PY'
import re, sys
h = open(sys.argv[1]).read()
assert "CUDA kernels (GPU time)" in h, "no CUDA card"
rows = re.findall(r'<table id="cuda-kernels".*?</table>', h, re.S)[0]
assert rows.index("gemm_kernel(float const*, float const*, float*, int)") < rows.index("attn_kernel"), \
    "kernels not by GPU time, or the C++ name not demangled"
sec = re.findall(r'<table id="cuda-sections".*?</table>', h, re.S)[0]
assert "<td>prefill</td><td>2</td>" in sec and "<td>decode</td><td>3</td>" in sec, sec
print("cuda: the HTML report has the CUDA card and tables")
PY
# under `sonde run`, the program's CUDA activity joins the run's report
SONDE_CUDA_ACTIVITY=1 SONDE_CUPTI_LIBRARY="$build/tests/libfake_cupti_ok.so" \
    "$build/tools/sonde/sonde" run --quiet --name watched -o runs -- "$app" ignored ignored \
    || fail "sonde run cuda_app exited $?"
python3 -c 'import json, sys
g = json.load(open(sys.argv[1]))["gpu_activity"]
assert (g["kernels"], g["linked_to_sections"]) == (5, 6), g
print("cuda under sonde run: merged into the run report")' runs/watched.json || fail "sonde run lost the CUDA activity"
# sonde diff compares kernels too: attn_kernel 50% slower is a regression, gemm_kernel is not
for v in 100 150; do
    CUDA_APP_DECODE=8 CUDA_APP_ATTN_US=$v SONDE_CUDA_ACTIVITY=1 \
        SONDE_CUPTI_LIBRARY="$build/tests/libfake_cupti_ok.so" "$app" out "attn$v" || fail "cuda_app attn$v"
done
set +e
"$build/tools/sonde/sonde" diff out/attn100.sonde out/attn150.sonde --per-instance --fail-on-regression --format json > diff.json
st=$?
set -e
[ $st = 1 ] || fail "sonde diff exited $st on a kernel regression"
python3 -c 'import json, sys
rows = {r["name"]: r for r in json.load(open(sys.argv[1]))["sections"]}
a = rows["cuda:attn_kernel"]
assert a["status"] == "regression" and abs(a["change"] - 0.5) < 1e-6 and a["count"] == [8, 8], a
g = rows["cuda:gemm_kernel(float const*, float const*, float*, int)"]
assert g["status"] == "same", g
print("cuda: sonde diff names the slower kernel, p=%.2g" % a["p"])' diff.json || fail "diff of kernels"
# a missing or failing CUPTI leaves the run and its report intact, and says why
cuda_fails() { # NAME LIBRARY EXPECTED-TEXT
    SONDE_CUDA_ACTIVITY=1 SONDE_CUPTI_LIBRARY="$2" "$app" out "$1" || fail "cuda_app $1 exited $?"
    python3 - "out/$1.json" "$3" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert {s["name"]: s["count"] for s in r["sections"]} == {"prefill": 1, "decode": 3}, r["sections"]
assert "gpu_activity" not in r
w = [x for x in r["warnings"] if x.startswith("cuda activity: ")]
assert len(w) == 1 and sys.argv[2] in w[0], (w, sys.argv[2])
print("cuda, failing: " + w[0])
PY
}
cuda_fails missing "$work/nonexistent/libcupti.so" "cannot load $work/nonexistent/libcupti.so"
cuda_fails broken "$build/tests/libfake_cupti_fail.so" \
    "cuptiActivityEnable(CONCURRENT_KERNEL): CUPTI_ERROR_NOT_INITIALIZED (is there a GPU"
cuda_fails old "$build/tests/libfake_cupti_old.so" "this libsonde was built against version"
# this machine's own libcupti, when it has one (without a GPU it cannot enable activity)
for real in /usr/local/cuda/lib64/libcupti.so /usr/local/cuda/lib/libcupti.so; do
    if [ -e "$real" ] && ! ls /dev/nvidia0 > /dev/null 2>&1; then
        cuda_fails real "$real" "cuptiActivityEnable"
        break
    fi
done
# issue 63: sonde analyze gpu on tests/e2e/planted.c's run, whose GPU figures are known by
# construction: 10 steps of gemm 300 us, attn 100 us and bwd 200 us on one stream, each
# launched after the one before ended (so every gap is the CPU's: host wait), step 6 waiting
# 1 s in "data_wait", hot_spin burning 0.1 s of CPU in "backward" of steps 4 and 5
SONDE_SAMPLE_HZ=499 SONDE_CUDA_ACTIVITY=1 SONDE_CUPTI_LIBRARY="$build/tests/libfake_cupti_ok.so" \
    "$build/tests/planted" gp run || fail "planted exited $?"
"$sonde" analyze gpu gp/run.sonde --format json -o gp.json || fail "sonde analyze gpu exited $?"
"$sonde" analyze gpu gp/run.sonde > gp.txt || fail "sonde analyze gpu (text) exited $?"
python3 - gp.json gp/run.folded gp/run.sqlite <<'PY' || fail "sonde analyze gpu's figures: $(cat gp.txt)"
import json, sqlite3, sys
a = json.load(open(sys.argv[1]))
(d,) = a["devices"]
ns = lambda s: round(s * 1e9)
assert d["entries"] == 30 and ns(d["compute_s"]) == 6000000, d  # 10 x 600 us, exactly
assert ns(d["non_compute_s"]) == 0 and ns(d["communication_s"]) == ns(d["memory_s"]) == 0, d
assert ns(d["idle_s"]) == ns(d["span_s"]) - 6000000, d
assert ns(d["host_wait_s"]) == ns(d["idle_s"]) and d["kernel_wait_s"] == d["other_wait_s"] == 0, d
# each step's 600 us of kernels, exactly, and the fake's launch delay, 10 us, every time
steps = d["steps"]
assert [s["number"] for s in steps] == list(range(10)), steps
assert all(ns(s["compute_s"]) == 600000 and ns(s["span_s"]) - ns(s["idle_s"]) == 600000
           for s in steps), steps
assert max(steps, key=lambda s: s["idle_s"])["number"] == 6, steps  # its 1 s data_wait
L = d["launches"]
assert L["count"] == 30 and L["over_cutoff"] == 0 and ns(L["p50_s"]) == ns(L["max_s"]) == 10000, L
k = {x["name"]: (x["calls"], ns(x["total_s"]), ns(x["p50_s"]), ns(x["max_s"])) for x in a["kernels"]}
assert k == {"gemm_kernel": (10, 3000000, 300000, 300000), "bwd_kernel": (10, 2000000, 200000, 200000),
             "attn_kernel": (10, 1000000, 100000, 100000)}, k
assert a["host_waits"] == 29 and ns(a["host_waits_s"]) == ns(d["host_wait_s"]), a["host_waits"]
secs = [c for c in a["causes"] if c["from"] == "section"]
assert secs[0]["what"] == "data_wait" and secs[0]["waits"] == 1, secs[:2]
assert 1.0 <= secs[0]["idle_s"] < 1.2, secs[0]  # its 1 s sleep
assert secs[1]["what"] == "backward" and secs[1]["idle_s"] >= 0.2, secs[1]  # hot_spin's 0.2 s
# the sections' own parts of the host waits add up to them, to the nanosecond or so
assert abs(sum(c["idle_s"] for c in secs) - a["host_waits_s"]) < 1e-6, secs
# hot_spin's samples in the host waits, counted apart from the run's SQL tables (the waits as
# HTA defines them, the samples whose innermost frame is hot_spin): the same, +-1 sample; most
# of its samples (the rest fell while its step's bwd_kernel ran)
spin = [c for c in a["causes"] if c["from"] == "samples" and c["what"].startswith("hot_spin")]
folded = sum(int(l.rsplit(" ", 1)[1]) for l in open(sys.argv[2]) if ";hot_spin" in l)
sql = sqlite3.connect(sys.argv[3]).execute("""
WITH g AS (SELECT start_ns, launch_ns, LAG(end_ns) OVER (ORDER BY start_ns) AS prev_end
           FROM gpu WHERE stream = 7),
     w AS (SELECT prev_end AS a, start_ns AS b FROM g
           WHERE prev_end IS NOT NULL AND launch_ns > prev_end AND start_ns - prev_end >= 50000)
SELECT count(*) FROM samples s
JOIN stacks st ON st.stack = s.stack AND st.run_id = s.run_id
JOIN frames f ON f.frame = st.frame AND f.run_id = st.run_id
JOIN w ON s.t_ns >= w.a AND s.t_ns < w.b WHERE f.name LIKE 'hot_spin%'""").fetchone()[0]
assert spin and abs(spin[0]["samples"] - sql) <= 1 and spin[0]["waits"] == 2, (spin, sql)
assert sql >= 0.8 * folded > 0, (sql, folded)
print("analyze gpu: idle %.3f s all host wait; data_wait %.3f s; hot_spin %d samples (SQL: %d, "
      "of %d)" % (d["idle_s"], secs[0]["idle_s"], spin[0]["samples"], sql, folded))
PY
grep -q "^    data_wait  .* in 1 wait(s)$" gp.txt || fail "the text names data_wait: $(cat gp.txt)"
# the run's own reports carry the same (NAME.json gpu_activity.analysis, NAME.txt's CUDA part)
"$sonde" export gp/run.sonde --format json,txt -o gprep --quiet || fail "sonde export exited $?"
python3 - gp.json gprep/run.json <<'PY' || fail "NAME.json's gpu_activity.analysis"
import json, sys
a, r = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["gpu_activity"]["analysis"]
strip = lambda d: {k: v for k, v in d.items() if k != "steps"}
assert [strip(x) for x in r["devices"]] == [strip(x) for x in a["devices"]], (r, a)
assert r["host_waits_s"] == a["host_waits_s"], (r, a)
assert r["causes"][0] == a["causes"][0] and len(r["kernels"]) == 3, r
# the report keeps every step where there are ten or fewer (else the ten idlest, idlest first)
assert r["devices"][0]["steps"] == a["devices"][0]["steps"], r["devices"][0]["steps"]
PY
grep -q "^    data_wait  .* in 1 wait(s)$" gprep/run.txt || fail "NAME.txt lacks the host waits' causes"
"$app" nogpu plain || fail "cuda_app without CUDA activity exited $?"
expect 2 "nogpu/plain.sonde: no CUDA activity in the run" "$sonde" analyze gpu nogpu/plain.sonde
expect 2 "--min-idle-us x: expected microseconds" "$sonde" analyze gpu gp/run.sonde --min-idle-us x
expect 2 "dma: unknown analysis (gpu)" "$sonde" analyze dma gp/run.sonde
# the ranks' GPUs side by side in sonde aggregate: three ranks of planted.c through the fake
# CUPTI, whose forward sleeps 2 + 40 * RANK ms a step: the same 6 ms of kernels on each, the GPU
# idle the longer the higher the rank (by 0.4 s a rank over 10 steps), rank 2 named
for r in 0 1 2; do
    SONDE_CUDA_ACTIVITY=1 SONDE_CUPTI_LIBRARY="$build/tests/libfake_cupti_ok.so" \
        SONDE_FORMATS=json "$build/tests/planted" gpr job $r 3 || fail "planted rank $r exited $?"
done
"$sonde" aggregate gpr --format json -o gpr.json || fail "sonde aggregate of GPU ranks exited $?"
"$sonde" aggregate gpr > gpr.txt || fail "sonde aggregate (text) exited $?"
python3 - gpr.json <<'PY' || fail "the ranks' GPU figures: $(cat gpr.txt)"
import json, sys
g = {x["rank"]: x for x in json.load(open(sys.argv[1]))["gpu"]}
assert sorted(g) == [0, 1, 2] and all(round(x["compute_s"] * 1e9) == 6000000 for x in g.values()), g
assert g[1]["idle_s"] - g[0]["idle_s"] > 0.3 and g[2]["idle_s"] - g[1]["idle_s"] > 0.3, g
print("aggregate: GPU idle by rank %s" % ["%.3f" % g[r]["idle_s"] for r in (0, 1, 2)])
PY
grep -q "^  the most idle: rank 2, " gpr.txt || fail "the text names rank 2: $(cat gpr.txt)"
