# config.sh - the e2e case `config`, sourced by run.sh (index: README.md), which gives it
# $work (its folder, removed at the end), $build, $src, $sonde, $asan and the helpers check,
# fail and expect; it exits non-zero at the first failure, 77 when it cannot run here.
# shellcheck shell=bash
# --profile* flags through the demo's own argument parser: a step schedule
cd "$work"
"$build/examples/pipeline" --steps 8 --blocks 2 --frames 8 --dim 64 --quiet \
    --profile-wait 1 --profile-warmup 1 --profile-active=2 --profile-repeat 2 --profile-name sched
[ -f sonde-out/sched-cycle1.trace.json.gz ] && [ -f sonde-out/sched-cycle2.trace.json.gz ] \
    || fail "no per-cycle traces: $(ls sonde-out)"
python3 - sonde-out/sched.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
w = r["schedule"]["windows"]
assert [(x["first_step"], x["last_step"]) for x in w] == [(2, 3), (6, 7)], w
counts = {s["name"]: s["count"] for s in r["sections"]}
assert counts == {"denoise_step": 4, "denoise_block": 8}, counts
assert r["steps"]["count"] == 4 and r["steps"]["active"] == [False, False, True, True, False, False, True, True]
print("schedule through flags: windows", w[0]["first_step"], w[1]["first_step"])
PY
python3 "$src/tests/e2e/check.py" trace sonde-out/sched-cycle2.trace.json.gz
# a YAML file through SONDE_CONFIG, below the environment
printf 'profiling:\n  name: fromyaml\n  formats: [json]\n  collect_gpu: false\n' > cfg.yaml
SONDE_CONFIG=cfg.yaml SONDE_OUTPUT_DIR=yamlout "$build/examples/pipeline" --steps 2 --blocks 2 \
    --frames 4 --dim 32 --quiet
[ "$(cd yamlout && ls | sort | tr '\n' ' ')" = "fromyaml.json fromyaml.sonde " ] \
    || fail "SONDE_CONFIG formats not applied: $(ls yamlout)"
# bad input: a clear message and exit 2
set +e
"$build/examples/pipeline" --profile-activites CPU 2>err.txt; rc=$?
set -e
[ $rc = 2 ] && grep -q "unknown flag --profile-activites (did you mean --profile-activities?)" err.txt \
    || fail "bad flag: rc=$rc $(cat err.txt)"
printf 'profiling:\n  buffer_mb: huge\n' > bad.yaml
set +e
SONDE_CONFIG=bad.yaml "$build/examples/pipeline" --steps 1 2>err.txt; rc=$?
set -e
[ $rc = 2 ] && grep -q 'SONDE_CONFIG: bad.yaml:2:14: buffer_mb: "huge" is not a number in 1..65536' err.txt \
    || fail "bad YAML: rc=$rc $(cat err.txt)"
