# diffgate.sh - the e2e case `diffgate`, sourced by run.sh (index: README.md), which gives it
# $work (its folder, removed at the end), $build, $src, $sonde, $asan and the helpers check,
# fail and expect; it exits non-zero at the first failure, 77 when it cannot run here.
# shellcheck shell=bash
# issue 20: sonde diff across repeated runs, on the sleep-based stage program with two CPU
# burners beside it: 10 pairs of identical sides (3 runs each) give no regression, and a 10%
# slowdown of one stage (5 runs a side) is found in every try whose base runs could show it
# but one (Welch's t of their run means against the same 10% longer over 2.306: a machine
# loaded past that spreads them, as `ctest -j2` beside two burners did, p = 0.42), and in
# at least 5 of 10, each miss still measured as a slowdown over the 5% threshold (one
# disturbed run among five can leave p = 0.095: seen twice in CI); the two unchanged stages, tested 20 times at p < 0.05, may be
# flagged at most twice (a burst of load on one side of a 5-run pair can reach p = 0.008).
# The slowdown is planted in the reports, not in the sleeps (issue 36): under a loaded
# machine a 1 ms longer sleep drowned in the wake-up delays (a `make test` beside two more
# busy loops measured +2.4% for the planted +10%). Each "new" run is a base run's report with
# its step's durations made 10% longer: the noise is the machine's (the base runs'), the
# slowdown exactly 10%. (Planting it into other real runs of the program left it to the load:
# a CI run beside busy loops measured +3.5%, the new runs faster than the base ones.) A try
# misses only when the base runs themselves spread over more than 10%.
cd "$work"
python3 -c 'while True: pass' & burn1=$!
python3 -c 'while True: pass' & burn2=$!
trap '[ "$BASHPID" != "$$" ] || { kill $burn1 $burn2 2> /dev/null; rm -rf "$work"; }' EXIT
for i in $(seq 1 10); do
    for r in 1 2 3; do # interleaved, so a drift of the machine falls on both sides
        "$build/tests/stages" same$i/base r$r
        "$build/tests/stages" same$i/new r$r
    done
    set +e; "$sonde" diff same$i/base -- same$i/new --fail-on-regression > same$i.txt 2>&1; st=$?; set -e
    [ $st = 0 ] || fail "identical sides, try $i: exit $st $(cat same$i.txt)"
done
found=0
: > false.txt
for i in $(seq 1 10); do
    for r in 1 2 3 4 5; do
        "$build/tests/stages" slow$i/base r$r
    done
    python3 - slow$i/base slow$i/new <<'PY' || fail "planting the slower step, try $i"
import json, os, sys
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst, exist_ok=True)
for f in sorted(os.listdir(src)):
    if not f.endswith(".json"):
        continue
    r = json.load(open(os.path.join(src, f)))
    for s in r["sections"]:
        if s["name"] == "step":  # every duration 10% longer; the sketch is not rescaled: gone
            for k in list(s):
                if k.endswith("_s") and isinstance(s[k], (int, float)):
                    s[k] *= 1.1
            s.pop("sketch", None)
    json.dump(r, open(os.path.join(dst, f), "w"))
PY
    set +e; "$sonde" diff slow$i/base -- slow$i/new --fail-on-regression --format json > slow$i.json; st=$?; set -e
    python3 - slow$i.json $st slow$i/base <<'PY' >> false.txt || fail "10% slower step, try $i: $(cat slow$i.json)"
import json, math, os, statistics, sys
d = json.load(open(sys.argv[1]))
bad = [s["name"] for s in d["sections"] if s["status"] == "regression"]
step = [s for s in d["sections"] if s["name"] == "step"][0]
assert step["runs"] == [5, 5] and step["change"] > 0.05, step
if "step" in bad:
    assert sys.argv[2] == "1" and step["ci"][0] > 0, (sys.argv[2], step)
else:
    # whether these base runs could show the 10% at all: Welch's t of the step's run means
    # against the same made 10% longer, under the critical 2.306 (df 8, p 0.05) when they spread
    # too much (the machine's load, not the tool)
    base = sys.argv[3]
    means = [[x for x in json.load(open(os.path.join(base, f)))["sections"]
              if x["name"] == "step"][0]["mean_s"] for f in sorted(os.listdir(base))
             if f.endswith(".json")]
    mu, sd = statistics.mean(means), statistics.stdev(means)
    t = 0.1 * mu / math.sqrt((sd * sd + (1.1 * sd) ** 2) / len(means)) if sd > 0 else math.inf
    print("MISSED step: +%.1f%%, p = %.3f; the base runs' t for 10%% %.2f (%s)"
          % (100 * step["change"], step["p"], t,
             "too spread to show it" if t < 2.306 else "UNEXPLAINED"))
for name in bad:
    if name != "step":
        print(name)
PY
    if grep "^MISSED" false.txt; then
        grep -q "^MISSED.*UNEXPLAINED" false.txt && unexplained=$((${unexplained:-0} + 1))
        sed -i '/^MISSED/d' false.txt
    else
        found=$((found + 1))
    fi
done
# every try whose base runs could show the 10% finds it, but one; a miss of base runs
# spread past that by the load is the machine's (a loaded CI run missed two of ten so)
[ "${unexplained:-0}" -le 1 ] || fail "the 10% slower step was missed $unexplained times where the base runs could show it (found $found of 10)"
[ "$found" -ge 5 ] || fail "the 10% slower step was found in $found tries of 10: too loaded a machine to tell"
[ "$(wc -l < false.txt)" -le 2 ] || fail "unchanged stages flagged $(wc -l < false.txt) times in 20: $(tr '\n' ' ' < false.txt)"
echo "diff across runs under load: 0 regressions in 10 identical pairs (3 runs a side), the 10% slower step found $found times in 10 (5 runs a side), unchanged stages flagged $(wc -l < false.txt) times in 20"
