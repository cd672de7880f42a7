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
        if s["name"] == "step":  # every duration 15% longer; the sketch is not rescaled: gone
            for k in list(s):
                if k.endswith("_s") and isinstance(s[k], (int, float)):
                    s[k] *= 1.15
            s.pop("sketch", None)
    json.dump(r, open(os.path.join(dst, f), "w"))
PY
    set +e; "$sonde" diff slow$i/base -- slow$i/new --fail-on-regression --format json > slow$i.json; st=$?; set -e
    python3 - slow$i.json $st <<'PY' >> false.txt || fail "15% slower step, try $i: $(cat slow$i.json)"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["correction"] == "holm", d["correction"]
bad = [s["name"] for s in d["sections"] if s["status"] == "regression"]
step = [s for s in d["sections"] if s["name"] == "step"][0]
assert step["runs"] == [5, 5] and step["change"] > 0.05, step
assert step["p_adjusted"] >= step["p"], step
if "step" in bad:
    assert sys.argv[2] == "1" and step["ci"][0] > 0, (sys.argv[2], step)
else:
    # whether these runs could show the 15% at all, by the minimum detectable change the diff
    # itself prints (80% power at Holm's level for the row tested first; null: no p these runs
    # give passes): a miss where it says 10% or less is the tool's (the machine's load, not the
    # tool, spreads the base runs past it)
    mdc = step["mdc"]
    print("MISSED step: +%.1f%%, p = %.3f (adjusted %.3f); could have seen %s (%s)"
          % (100 * step["change"], step["p"], step["p_adjusted"],
             "none" if mdc is None else "%.1f%%" % (100 * mdc),
             "too spread to show it" if mdc is None or mdc > 0.10 else "UNEXPLAINED"))
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
# every try whose runs could show the 15% (by the diff's own minimum detectable change) finds
# it, but one; a miss of base runs spread past that by the load is the machine's
[ "${unexplained:-0}" -le 1 ] || fail "the 15% slower step was missed $unexplained times where the runs could show it (found $found of 10)"
[ "$found" -ge 5 ] || fail "the 15% slower step was found in $found tries of 10: too loaded a machine to tell"
[ "$(wc -l < false.txt)" -le 2 ] || fail "unchanged stages flagged $(wc -l < false.txt) times in 20: $(tr '\n' ' ' < false.txt)"
echo "diff across runs under load: 0 regressions in 10 identical pairs (3 runs a side), the 15% slower step found $found times in 10 (5 runs a side), unchanged stages flagged $(wc -l < false.txt) times in 20"
# the correction for many sections tested at once (issue 62), on planted runs: 10 sections of 6
# runs a side, each run's figure planted. "hot" is 15% slower in every new run (Mann-Whitney
# p = 2 / 924 = 0.002, 0.022 after Holm's x10: a regression either way); "warm" 15% slower but
# for one new run below 4 base runs (p = 24 / 924 = 0.026: a regression alone, not among 10,
# 0.23 after Holm's x9); the 8 others the same.
python3 - slow1/base/r1.json planted <<'PY' || fail "planting the runs of 10 sections"
import json, os, sys
tpl = json.load(open(sys.argv[1]))
one = [s for s in tpl["sections"] if s["name"] == "step"][0]
for side in ("base", "new"):
    os.makedirs(os.path.join(sys.argv[2], side), exist_ok=True)
    for r in range(6):
        secs = []
        for k in range(10):
            name = "hot" if k == 0 else "warm" if k == 1 else "s%d" % k
            v = 0.010 * (1 + 0.01 * r)  # spread over runs: 0.010 ... 0.0105
            if side == "new" and (k == 0 or (k == 1 and r != 0)):
                v *= 1.15
            if side == "new" and k == 1 and r == 0:
                v = 0.01015  # below 4 of the base runs: U = 4, p = 24 / 924
            s = dict(one, name=name, mean_s=v)
            s.pop("sketch", None)
            secs.append(s)
        rep = dict(tpl, sections=secs)
        json.dump(rep, open(os.path.join(sys.argv[2], side, "r%d.json" % r), "w"))
PY
for corr in holm bh none; do
    set +e; "$sonde" diff planted/base -- planted/new --correction $corr --format json > planted-$corr.json; set -e
    python3 - planted-$corr.json $corr <<'PY' || fail "the correction on planted runs ($corr): $(cat planted-$corr.json)"
import json, sys
d = json.load(open(sys.argv[1]))
by = {s["name"]: s for s in d["sections"]}
assert d["correction"] == sys.argv[2]
assert by["hot"]["status"] == "regression", by["hot"]
want = "regression" if sys.argv[2] == "none" else "changed"
assert by["warm"]["status"] == want, by["warm"]
assert all(by["s%d" % k]["status"] == "same" for k in range(2, 10)), d["sections"]
assert abs(by["warm"]["p"] - 0.026) < 0.001, by["warm"]["p"]
if sys.argv[2] != "none":  # the smallest p times 10 both ways; warm's x9 (Holm), x5 (BH)
    assert abs(by["hot"]["p_adjusted"] - 10 * by["hot"]["p"]) < 1e-9, by["hot"]
    k = 9 if sys.argv[2] == "holm" else 5
    assert abs(by["warm"]["p_adjusted"] - k * by["warm"]["p"]) < 1e-9, by["warm"]
    assert by["warm"]["p_adjusted"] > 0.05
    assert all(0 < by["s%d" % k]["mdc"] < 0.1 for k in range(2, 10)), d["sections"]
PY
done
"$sonde" diff planted/base -- planted/new > planted.txt || true
grep -q "^s2 .*no change detected (could have seen [0-9.]*%)" planted.txt ||
    fail "no minimum detectable change printed: $(cat planted.txt)"
echo "the correction: hot found at x10 (Holm, BH), warm (p 0.026) only without one; 'could have seen' printed"
