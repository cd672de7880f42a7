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
# issue 62: the parent's report names its workers' files (JSON run.workers, the text report)
python3 - out/fork.json pids.txt <<'PY' || fail "the parent's report does not list its workers"
import json, sys
run = json.load(open(sys.argv[1]))["run"]
want = sorted("fork-pid%s.sonde" % ln.strip() for ln in open(sys.argv[2]))
assert run["workers"] == want, (run.get("workers"), want)
PY
"$sonde" summary out/fork.sonde | grep -q "^Workers (forked, their own runs): fork-pid" ||
    fail "sonde summary does not name the workers: $("$sonde" summary out/fork.sonde)"
# issue 62: merge labels the children workers of the parent's rank (their files name the
# parent's pid), after it, rather than ranks of their own
"$sonde" merge out -o out.trace.json.gz > merge.txt || fail "merge of a forking run: $(cat merge.txt)"
grep -q "1 rank(s) and 10 worker(s)" merge.txt || fail "merge: $(cat merge.txt)"
python3 - out.trace.json.gz pids.txt <<'PY' || fail "merge's worker labels"
import gzip, json, sys
ev = json.load(gzip.open(sys.argv[1], "rt"))
names = {e["pid"]: e["args"]["name"] for e in ev if e.get("name") == "process_name"}
pids = [ln.strip() for ln in open(sys.argv[2])]
ranks = [n for n in names.values() if " worker " not in n]
workers = sorted(n.split(" worker pid ")[1].split(" ")[0] for n in names.values() if " worker " in n)
assert len(ranks) == 1 and ranks[0].startswith("rank 0 ("), names
assert workers == sorted(pids), (workers, pids)
assert all(n.startswith("rank 0 worker pid ") for n in names.values() if " worker " in n), names
order = {e["pid"]: e["args"]["sort_index"] for e in ev if e.get("name") == "process_sort_index"}
print("merge: rank 0 and its 10 workers,", "sort indexes", sorted(set(order.values())))
PY
"$sonde" aggregate out > agg.txt || fail "aggregate of a forking run: $(cat agg.txt)"
grep -q "1 report(s), run \"fork\", world size 1" agg.txt || fail "aggregate: $(cat agg.txt)"
[ "$(grep -c "worker of rank 0: out/fork-pid[0-9]*.json (pid [0-9]*), left out" agg.txt)" = 10 ] ||
    fail "aggregate did not name the 10 workers of rank 0: $(cat agg.txt)"
! grep -q "^  rank 1 " agg.txt || fail "aggregate counted a worker as a rank: $(cat agg.txt)"
# a fork while another thread is inside sonde_destroy: the child's sonde_destroy returns
# (it waited forever on the lock the parent's thread held); the parent's run is whole
"$build/tests/forky" d destroy || fail "forky destroy: the child hung or failed"
check count d/fork.json work 1000000
# issue 62: a worker whose own SIGTERM handler, installed after sonde's, calls _exit when its
# parent sends it (a PyTorch DataLoader worker's): sonde's handler is put in front of it again
# at the writer's next pass, so the worker's 100 sections are in its file (0 before)
"$build/tests/forky" term sigterm > pid.txt || fail "forky sigterm: the child hung or failed"
"$sonde" export "term/fork-pid$(cat pid.txt).sonde" --format json -o term --quiet ||
    fail "the SIGTERMed worker's file: $(ls term)"
check count "term/fork-pid$(cat pid.txt).json" child_work 100
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
