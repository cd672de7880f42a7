# hotfn.sh - the e2e case `hotfn`, sourced by run.sh (index: README.md), which gives it
# $work (its folder, removed at the end), $build, $src, $sonde, $asan and the helpers check,
# fail and expect; it exits non-zero at the first failure, 77 when it cannot run here.
# shellcheck shell=bash
# issue 18: a comparator called 10^7 times under autotrace at its defaults (as llama2.c's
# qsort callback was): the program finishes, every report is written, peak RSS stays under
# 512 MiB, and the comparator's calls after its first autotrace_hot_calls (10,000) are
# counted and summed, every one of them in its count
cd "$work"
SONDE_OUTPUT_DIR=out SONDE_NAME=cmp SONDE_COLLECT_GPU=0 python3 - "$build/tests/comparator" <<'PY' > hot.txt || fail "comparator: $(cat hot.txt)"
import resource, subprocess, sys, time
t = time.monotonic()
out = subprocess.run([sys.argv[1], "10000000"], capture_output=True, text=True)
t = time.monotonic() - t
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(out.stdout.strip(), "exit", out.returncode, "rss_mib %.1f" % rss, "wall_s %.2f" % t)
sys.stderr.write(out.stderr)
assert out.returncode == 0 and rss < 512, (out.returncode, rss)
PY
n=$(awk '/^comparisons/ {print $2}' hot.txt)
for f in cmp.sonde cmp.json cmp.csv cmp.txt cmp.html cmp.trace.json.gz; do
    [ -s "out/$f" ] || fail "comparator: no $f ($(ls out))"
done
python3 - out/cmp.json out/cmp.txt "$n" out/cmp.sonde <<'PY' || fail "comparator report: $(cat out/cmp.txt)"
import json, os, sys
r = json.load(open(sys.argv[1]))
n = int(sys.argv[3])
s = {x["name"]: x for x in r["sections"]}
cmp = s["by_value"]
assert cmp["count"] == n and cmp["aggregated_calls"] == n - 10000, (cmp["count"], cmp["aggregated_calls"], n)
assert cmp["total_s"] > 0 and s["sort_round"]["count"] > 0 and "aggregated_calls" not in s["sort_round"] or s["sort_round"]["aggregated_calls"] == 0
assert "by_value" in open(sys.argv[2]).read()
# one thread: the self times add up to main's whole time (the counted calls' time is
# by_value's; it was sort_round's self time as well, issue 35)
selfs = sum(x["self_s"] for x in r["sections"])
assert abs(selfs / s["main"]["total_s"] - 1) < 0.01, (selfs, s["main"]["total_s"], {k: v["self_s"] for k, v in s.items()})
size = os.path.getsize(sys.argv[4])
assert size < 8 << 20, size
print("comparator: %d calls, %d counted and summed, .sonde %.0f KiB" % (n, cmp["aggregated_calls"], size / 1024))
PY
cat hot.txt
# the hot set does not depend on the machine's load: beside two busy loops (as many as
# the cores CI has), three runs find the comparator hot after exactly its first 10,000 calls
busy() { while :; do :; done; }
busy & b1=$!
busy & b2=$!
for k in 1 2 3; do
    SONDE_OUTPUT_DIR=busy SONDE_NAME=cmp$k SONDE_COLLECT_GPU=0 "$build/tests/comparator" 300000 > /dev/null ||
        { kill $b1 $b2; fail "comparator under load exited $?"; }
done
kill $b1 $b2
wait $b1 $b2 2> /dev/null || true
python3 - busy/cmp1.json busy/cmp2.json busy/cmp3.json <<'PY' || fail "the hot set under load"
import json, sys
got = []
for path in sys.argv[1:]:
    s = {x["name"]: x for x in json.load(open(path))["sections"]}
    got.append((s["by_value"]["count"] - s["by_value"].get("aggregated_calls", 0),
                sorted(n for n, x in s.items() if x.get("aggregated_calls"))))
assert got == [(10000, ["by_value"])] * 3, got
print("hot set under two busy loops: by_value hot after its first 10000 calls in 3 of 3 runs")
PY
