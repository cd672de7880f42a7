# fork.sh - the e2e case `fork`, sourced by run.sh (index: README.md), which gives it
# $work (its folder, removed at the end), $build, $src, $sonde, $asan and the helpers check,
# fail and expect; it exits non-zero at the first failure, 77 when it cannot run here.
# shellcheck shell=bash
cd "$work"
# 10 children forked while 4 threads record: none hangs, each keeps profiling into its own
# fork-pidN.json, and a child that execs or _exits leaves no file
"$build/tests/forky" out 10 > pids.txt || fail "forky failed"
[ "$(wc -l < pids.txt)" = 10 ] || fail "expected 10 child pids: $(cat pids.txt)"
while read -r pid; do
    check count "out/fork-pid$pid.json" child_work 100
    check absent "out/fork-pid$pid.json" background
done < pids.txt
n=$(ls out/*.sonde | wc -l)
[ "$n" = 11 ] || fail "expected the parent's file and 10 children's, found: $(ls out)"
check count out/fork.json outer 1
check absent out/fork.json child_work
# a fork while another thread is inside sonde_destroy: the child's sonde_destroy returns
# (it waited forever on the lock the parent's thread held); the parent's run is whole
"$build/tests/forky" d destroy || fail "forky destroy: the child hung or failed"
check count d/fork.json work 1000000
# with CPU samples: each child samples itself (its sampler started again after the fork),
# its burning in child_work; the parent's samples hold none of the children's. Through
# perf_event_open, then through the timers on the threads' CPU clocks (perf refused)
for way in perf timer; do
    pre=; [ $way = timer ] && pre="$build/tests/libnoperf.so"
    FORKY_BURN_MS=300 SONDE_SAMPLE_HZ=999 LD_PRELOAD=$pre "$build/tests/forky" s$way 3 > pids.txt ||
        fail "forky with CPU samples ($way) failed"
    python3 - s$way $way $(cat pids.txt) <<'PY' || fail "CPU samples across a fork ($way)"
import json, sys
d, way, pids = sys.argv[1], sys.argv[2], sys.argv[3:]
assert len(pids) == 3, pids
for pid in pids:
    p = json.load(open("%s/fork-pid%s.json" % (d, pid)))["profile"]
    assert p["method"] == ("timer_signal" if way == "timer" else "perf_event"), p["method"]
    sec = {s["name"]: s["samples"] for s in p["sections"]}
    # 300 ms of CPU at 999 Hz: up to about 300 samples (the kernel's frequency mode starts a
    # new process's event slowly: CI saw 136), nearly all in child_work
    assert 50 <= sec.get("child_work", 0) <= 450 and sec["child_work"] >= 0.9 * p["samples"], (pid, sec, p["samples"])
parent = json.load(open("%s/fork.json" % d))
assert "child_work" not in {s["name"] for s in parent.get("profile", {}).get("sections", [])}, parent["profile"]["sections"]
print("CPU samples across a fork (%s): each child's own, in child_work" % way)
PY
done
