# nvtx.sh - the e2e case `nvtx`, sourced by run.sh (index: README.md), which gives it
# $work (its folder, removed at the end), $build, $src, $sonde, $asan and the helpers check,
# fail and expect; it exits non-zero at the first failure, 77 when it cannot run here.
# shellcheck shell=bash
cd "$work"
# Under an NVTX tool (our injection library, loaded as Nsight's is), every section is a
# range on its own thread in the domain "sonde", every step a mark, every session a range.
NVTX_INJECTION64_PATH="$build/tests/libnvtx_inject.so" NVTX_TEST_LOG="$work/nvtx.log" \
    SONDE_NVTX=1 "$build/tests/nvtxy" out on
grep -q "^init$" nvtx.log || fail "the injection library was not loaded: $(head -3 nvtx.log)"
python3 - nvtx.log out/on.json <<'PY'
import collections, json, sys
log = [l.rstrip("\n").split(" ", 3) for l in open(sys.argv[1])]
rep = json.load(open(sys.argv[2]))
assert ["domain", "sonde"] in log, "no sonde domain: %s" % log[:3]
pushes = collections.Counter(l[3] for l in log if l[0] == "push")
want = {s["name"]: s["count"] for s in rep["sections"]}
assert pushes == want, "NVTX ranges %s, report sections %s" % (dict(pushes), want)
assert all(l[1] == "sonde" for l in log if l[0] in ("push", "pop", "mark", "start", "end"))
# every thread pops what it pushed, in order: ranges nest per thread
depth = collections.Counter()
for l in log:
    if l[0] == "push":
        depth[l[2]] += 1
    elif l[0] == "pop":
        depth[l[2]] -= 1
        assert depth[l[2]] >= 0, "pop without push on thread " + l[2]
assert all(v == 0 for v in depth.values()), "ranges left open: %s" % depth
assert len(depth) == 4, "ranges on %d threads, expected 4" % len(depth)
marks = [" ".join(l[2:]) for l in log if l[0] == "mark"]
assert marks == ["step %d" % i for i in range(rep["steps"]["count"])], marks
starts = {l[2]: l[3] for l in log if l[0] == "start"}
ends = [l[2] for l in log if l[0] == "end"]
assert sorted(starts.values()) == sorted("session " + s["name"] for s in rep["sessions"]), starts
assert sorted(ends) == sorted(starts), "session ranges %s ended %s" % (starts, ends)
print("nvtx: %d ranges on %d threads match the report, %d marks, %d sessions"
      % (sum(pushes.values()), len(depth), len(marks), len(starts)))
PY
# nvtx on without a tool attached: NVTX makes the calls no-ops, the report is the same
SONDE_NVTX=1 "$build/tests/nvtxy" out bare
"$build/tests/nvtxy" out off
python3 - out/bare.json out/off.json <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
ca = {s["name"]: s["count"] for s in a["sections"]}
cb = {s["name"]: s["count"] for s in b["sections"]}
assert ca == cb and ca["inner"] == 300, (ca, cb)
assert a["warnings"] == [] and b["warnings"] == [], (a["warnings"], b["warnings"])
PY
# the key is listed (the output to a file first: grep -q closing the pipe early would end
# sonde with SIGPIPE under pipefail)
"$build/tools/sonde/sonde" config --list > keys.txt
grep -q "^nvtx " keys.txt || fail "sonde config --list lacks nvtx"
