# flight.sh - the e2e case `flight`, sourced by run.sh (index: README.md), which gives it
# $work (its folder, removed at the end), $build, $src, $sonde, $asan and the helpers check,
# fail and expect; it exits non-zero at the first failure, 77 when it cannot run here.
# shellcheck shell=bash
# The flight recorder (docs/flight-recorder.md). The windows' bounds: a first section no more
# than the 2 s window (+0.05) before the trigger, and no less than the steps since it must
# hold (10 ms each at least): a loaded machine makes steps longer, never shorter.
# 10 ms steps, one of 500 ms at a random step;
# with flight_recorder_s 2 and trigger_step_over_median 20, exactly one dump, holding the
# slow step and the ~2 s before it (nothing that began earlier), written 0.5 s after it.
# (20 x the median, not 5: a loaded machine can wake a 10 ms sleep 50 ms late, and the rule
# sees wall time, as it should; 200 ms late is out of reach of the load CI puts on it.)
cd "$work"
fr="$build/tests/flight"
slow=$((230 + RANDOM % 120))
SONDE_TRIGGER_STEP_OVER_MEDIAN=20 "$fr" steps a 400 $slow 0 500 > a.out 2> a.err ||
    fail "flight steps exited $?: $(cat a.err)"
grep -q "^slow step $slow$" a.out || fail "the slow step did not run: $(cat a.out)"
[ "$(ls a | sort | tr '\n' ' ')" = "fl-trigger1.json fl-trigger1.sonde fl-trigger1.trace.json.gz fl-trigger1.txt " ] ||
    fail "expected exactly one dump and its reports, got: $(ls a)"
python3 "$src/tests/e2e/flight_check.py" a fl-trigger1 --slow $slow --reason "x the median" \
    --before-min 1.5 --before-max 2.5
head -1 a/fl-trigger1.txt | grep -q "^Flight recorder dump 1: step $slow took .* (the 2.000 s before the trigger" ||
    fail "the text report's first line: $(head -1 a/fl-trigger1.txt)"
grep -q "flight recorder: step $slow took" a.err || fail "no notice on stderr: $(cat a.err)"
# sonde export regenerates the dump's reports byte for byte
mkdir again
"$sonde" export a/fl-trigger1.sonde --format json,txt -o again --quiet
cmp a/fl-trigger1.json again/fl-trigger1.json || fail "sonde export of the dump differs"
cmp a/fl-trigger1.txt again/fl-trigger1.txt || fail "sonde export of the dump's text differs"
# the API, with flight_recorder_max 1: one dump, the second trigger counted on stderr
"$fr" api b > /dev/null 2> b.err || fail "flight api exited $?: $(cat b.err)"
[ "$(ls b/*.sonde)" = "b/fl-trigger1.sonde" ] || fail "api: dumps $(ls b)"
python3 "$src/tests/e2e/flight_check.py" b fl-trigger1 --reason "asked by the test" \
    --before-min 0.9 --before-max 2.05
grep -q "1 trigger(s) wrote no dump of their own (flight_recorder_max 1)" b.err ||
    fail "the trigger past flight_recorder_max is not counted: $(cat b.err)"
# a dump that does not fit (a file-size limit of 8 KiB here, as a full disk): said on stderr
# as the streaming writer says it, in sonde_destroy's code, and no torn file is left (it was
# silent, exit 0, and the torn dump read as a crashed run)
(ulimit -f 8; expect 1 "flight recorder: writing fz/fl-trigger1.sonde failed: File too large" \
    "$fr" api fz) || exit 1
[ ! -e fz/fl-trigger1.sonde ] || fail "a dump that did not fit left a torn file: $(ls -l fz)"
# a trigger while the first one's dump is being written waits for it: two dumps
"$fr" queue q > /dev/null 2> q.err || fail "flight queue exited $?: $(cat q.err)"
[ "$(ls q/*.sonde | tr '\n' ' ')" = "q/fl-trigger1.sonde q/fl-trigger2.sonde " ] || fail "queue: dumps $(ls q)"
python3 "$src/tests/e2e/flight_check.py" q fl-trigger1 --reason first --before-min 0.9 --before-max 2.05
python3 "$src/tests/e2e/flight_check.py" q fl-trigger2 --reason second --before-min 1.5 --before-max 2.05
# the rules on the program's own figures: a section over its seconds, a counter under its
# value for long enough (once, until it is back over)
SONDE_TRIGGER_SECTION_OVER_S="slow part=0.2" "$fr" section r > /dev/null 2> r.err ||
    fail "flight section exited $?: $(cat r.err)"
[ "$(ls r/*.sonde)" = "r/fl-trigger1.sonde" ] || fail "section rule: dumps $(ls r)"
python3 "$src/tests/e2e/flight_check.py" r fl-trigger1 --no-trace \
    --reason 'section "slow part" took ' --took 300
SONDE_TRIGGER_COUNTER_BELOW="gpu util=20,0.3" "$fr" counter u > /dev/null 2> u.err ||
    fail "flight counter exited $?: $(cat u.err)"
[ "$(ls u/*.sonde)" = "u/fl-trigger1.sonde" ] || fail "counter rule: dumps $(ls u)"
python3 "$src/tests/e2e/flight_check.py" u fl-trigger1 --reason 'counter "gpu util" under 20 for 0.3 s' \
    --before-min 1.7 --before-max 2.05
expect 2 'SONDE_TRIGGER_COUNTER_BELOW: "gpu util=20" is not NAME=VALUE,SECONDS' \
    env SONDE_TRIGGER_COUNTER_BELOW="gpu util=20" "$fr" counter v
expect 2 'SONDE_TRIGGER_SECTION_OVER_S: "x" in "a" is not a number of seconds' \
    env SONDE_TRIGGER_SECTION_OVER_S="a=x" "$fr" section v
# the signal, from `sonde trigger PID`; a process without sonde is refused, not signalled
"$fr" signal c > c.out 2> c.err &
fpid=$!
for i in $(seq 100); do grep -q ready c.out && break; sleep 0.1; done
sleep 1.2
"$sonde" trigger "$fpid" > trig.out || fail "sonde trigger exited $?"
"$sonde" trigger "$fpid" --stop > /dev/null || fail "sonde trigger --stop exited $?"
sleep 30 & other=$!
expect 2 "runs no sonde profiler" "$sonde" trigger $other
kill $other
expect 2 "no such process" "$sonde" trigger 999999999
expect 2 "expected a signal number" "$sonde" trigger "$fpid" --signal NOPE
for i in $(seq 100); do [ -f c/fl-trigger1.txt ] && break; sleep 0.1; done
touch c/stop
wait $fpid || fail "flight signal exited $?: $(cat c.err)"
grep -q "needs on_demand; run fl records with the flight recorder" c.err ||
    fail "a --stop the flight recorder cannot follow was not said: $(cat c.err)"
python3 "$src/tests/e2e/flight_check.py" c fl-trigger1 --reason "signal 12" \
    --before-min 1.0 --before-max 2.05
# two commands sent one after the other both reach the program: the second used to be merged
# into the first while that one waited to be taken (a signal pending is not queued twice);
# this program blocks the signal for half a second, so the first waits for sure (and each
# sonde trigger waits up to 2 s for its signal to be taken: a loaded machine has room)
"$fr" blocked b > b.out 2> b.err &
bpid=$!
for i in $(seq 100); do grep -q ready b.out && break; sleep 0.1; done
"$sonde" trigger "$bpid" > /dev/null || fail "sonde trigger (signal blocked) exited $?"
"$sonde" trigger "$bpid" --stop > /dev/null || fail "sonde trigger --stop (signal blocked) exited $?"
for i in $(seq 100); do [ -f b/fl-trigger1.txt ] && break; sleep 0.1; done
touch b/stop
wait $bpid || fail "flight blocked exited $?: $(cat b.err)"
grep -q "signal 12" b.err && grep -q "needs on_demand" b.err ||
    fail "two commands sent together: one was lost: $(cat b.err)"
echo "two commands sent while the signal waited: both acted on"
# a second flight recorder destroyed leaves the signal with the first, which still records:
# the signal is a dump, not the end of the process (it was: status 140, the window lost)
expect 0 "" "$fr" two two
[ -f two/fl-trigger1.sonde ] || fail "two profilers: the first's dump is missing: $(ls two)"
# the program's own SIGUSR2 handler gets what sonde did not send, `sonde trigger` still
# reaches sonde, and the report says the handler was there
"$fr" chain ch > ch.out 2> ch.err &
cpid=$!
for i in $(seq 100); do grep -q ready ch.out && break; sleep 0.1; done
"$sonde" trigger "$cpid" > /dev/null || fail "sonde trigger (own handler) exited $?"
for i in $(seq 100); do [ -f ch/fl-trigger1.txt ] && break; sleep 0.1; done
touch ch/stop
wait $cpid || fail "flight chain exited $?: $(cat ch.err)"
grep -q "own handler 1" ch.out || fail "the program's own handler: $(cat ch.out)"
[ -f ch/fl-trigger1.sonde ] && [ ! -f ch/fl-trigger2.sonde ] ||
    fail "own handler: one dump expected (sonde trigger's): $(ls ch)"
grep -q "had a handler of the program's" ch/fl-trigger1.json ||
    fail "own handler: the report does not say it"
# a fault's signal is no trigger signal (a real SIGSEGV looped in the handler forever): the
# default is kept with the reason said, and the fault ends the program with its dump (not
# under TSan, whose own handler takes SIGSEGV)
[ -n "${E2E_NO_CRASH:-}" ] || expect 139 "trigger_signal: 11 (Segmentation fault) is a fault's" \
    env SONDE_TRIGGER_SIGNAL=11 "$fr" segv v11
# on_demand: nothing until `sonde trigger PID --start --for 1`, then one second recorded and
# its reports written; again with --start and --stop; the step time after as before
SONDE_ON_DEMAND=1 "$fr" ondemand od > od.out 2> od.err &
fpid=$!
for i in $(seq 100); do grep -q ready od.out && break; sleep 0.1; done
sleep 1.5
[ ! -e od ] || fail "on_demand wrote before a start: $(ls od)"
"$sonde" trigger "$fpid" > /dev/null || fail "a plain sonde trigger exited $?"
"$sonde" trigger "$fpid" --start --for 1 > /dev/null || fail "sonde trigger --start exited $?"
# (a window's end is when its reports are written and said; the next start is recording
# once it says so: on a loaded machine either can come seconds after the signal)
for i in $(seq 300); do grep -q "stopped: od/fl-ondemand1.sonde" od.err && break; sleep 0.1; done
"$sonde" trigger "$fpid" --start > /dev/null
for i in $(seq 300); do grep -q "on demand into od/fl-ondemand2" od.err && break; sleep 0.1; done
sleep 0.5
"$sonde" trigger "$fpid" --stop > /dev/null
for i in $(seq 300); do grep -q "stopped: od/fl-ondemand2.sonde" od.err && break; sleep 0.1; done
sleep 1
touch od/stop
wait $fpid || fail "flight ondemand exited $?: $(cat od.err)"
grep -q "a trigger signal came, but run fl has no flight recorder" od.err ||
    fail "a trigger on_demand cannot follow was not said: $(cat od.err)"
expect 2 "--for goes with --start" "$sonde" trigger 1 --for 2
expect 2 "--start and --stop together" "$sonde" trigger 1 --start --stop
python3 - "$work/od" "$work/od.out" <<'PY' || fail "on_demand: $(cat od.err)"
import json, sys
d, out = sys.argv[1], open(sys.argv[2]).read().split()
def sections(stem):
    r = json.load(open(f"{d}/{stem}.json"))
    assert r["run"]["name"] == stem, r["run"]["name"]
    return {s["name"]: s["count"] for s in r["sections"]}
one, two = sections("fl-ondemand1"), sections("fl-ondemand2")
# 1 s of 10 ms steps, then about 0.5 s: fewer on a loaded machine (later wake-ups), never more
assert set(one) == {"step work"} and 40 <= one["step work"] <= 110, one
assert set(two) == {"step work"} and 10 <= two["step work"] <= 150, two
first, last = float(out[out.index("first100") + 1]), float(out[out.index("last100") + 1])
assert last < first * 2, (first, last)  # sleeps of 10 ms: load moves both, not one alone
print(f"ok on_demand: {one['step work']} then {two['step work']} steps recorded; step "
      f"{first:.2f} ms before, {last:.2f} ms after")
PY
# sonde run --flight-recorder: a program that fails leaves its last seconds (its process
# tree's figures) and nothing else; `sonde trigger` on sonde run asks for them meanwhile
expect 3 "sh ended with exit 3" "$sonde" run --flight-recorder 2 -o sr --name job -- \
    sh -c 'sleep 0.5; exit 3'
python3 - sr <<'PY' || fail "sonde run --flight-recorder: $(cat err.txt)"
import json, os, sys
d = sys.argv[1]
assert sorted(f for f in os.listdir(d) if f.endswith(".sonde")) == ["job-trigger1.sonde"], os.listdir(d)
r = json.load(open(f"{d}/job-trigger1.json"))
assert "sh ended with exit 3" in r["run"]["trigger"]["reason"], r["run"]["trigger"]
assert r["run"]["metadata"]["command"].startswith("sh -c"), r["run"]["metadata"]
assert any(c["name"].endswith("rss MiB") for c in r["counters"]), [c["name"] for c in r["counters"]]
print("ok sonde run --flight-recorder: the failed program's window")
PY
"$sonde" run --flight-recorder 5 -o st --name job2 --quiet -- sleep 3 2> st.err &
spid=$!
sleep 1
"$sonde" trigger "$spid" > /dev/null || fail "sonde trigger on sonde run exited $?"
wait "$spid" || fail "sonde run --flight-recorder -- sleep 3 exited $?: $(cat st.err)"
[ -f st/job2-trigger1.json ] && [ ! -e st/job2.sonde ] || fail "sonde run + trigger: $(ls st)"
# a trigger signal right before sonde_destroy is written (one that came after the writer
# thread's last look, while the run ended, was lost: the dump above was once missing under
# TSan on a loaded machine, the trigger slower than the program)
expect 0 "" "$fr" raiseend re
[ -f re/fl-trigger1.json ] || fail "a signal just before the end: no dump: $(ls re)"
grep -q '"signal 12 (sonde trigger or kill)"' re/fl-trigger1.json ||
    fail "raiseend: the dump's reason: $(grep -o '"reason": *"[^"]*"' re/fl-trigger1.json)"
# run metadata recorded outside any section during a burst that fills the buffer: in the dump
# whatever was dropped (a dropped section end left the writer's count of the thread's open
# sections one too high, and the metadata after it was taken for a section's: 3 runs in 5 lost
# some of the 20 keys)
for i in 1 2 3 4 5; do
    rm -rf bu
    expect 0 "" "$fr" burst bu
    python3 - bu <<'PY' || fail "burst run $i: run metadata lost from the dump"
import json, sys
r = json.load(open(sys.argv[1] + "/fl-trigger1.json"))
keys = sorted(k for k in r["run"]["metadata"] if k.startswith("key"))
assert len(keys) == 20, keys
assert r["run"]["metadata"]["key7"] == "v7", r["run"]["metadata"]
PY
done
echo "ok flight burst: the run's metadata in the dump, 5 runs"
# an exit with a non-zero status writes the window (and its reports) at exit
expect 3 "exit with status 3" "$fr" exit d
python3 "$src/tests/e2e/flight_check.py" d fl-trigger1 --reason "exit with status 3" \
    --before-min 0.9 --before-max 2.05
# ... and a trigger signal while that dump is written is taken, not fatal: the handler is
# given back only after the dumps (it was before them: status 140, no reports)
expect 3 "exit with status 3" "$fr" exitsig xs
[ -f xs/fl-trigger1.json ] || fail "a signal during the exit's dump: no reports: $(ls xs)"
# a forked child records nothing: its exit with status 1 writes no dump (it wrote the
# parent's window, "exit with status 1", under the parent's name)
expect 0 "" "$fr" forkexit fk
grep -q "exited 1" out.txt || fail "forkexit: $(cat out.txt)"
[ ! -e fk/fl-trigger1.sonde ] || fail "a forked child wrote a dump: $(ls fk)"
# SIGSEGV writes the window from the signal handler; the process still dies of it, and
# sonde export writes the reports (not under TSan, whose own handler takes SIGSEGV)
if [ -n "${E2E_NO_CRASH:-}" ]; then echo "e2e flight: passed (no crash part)"; exit 0; fi
expect 139 "the window is in e/fl-trigger1.sonde" "$fr" segv e
"$sonde" export e/fl-trigger1.sonde --format json,trace -o e --quiet
python3 "$src/tests/e2e/flight_check.py" e fl-trigger1 --reason "fatal signal 11 (SIGSEGV)" \
    --unclean --no-trace
# SIGKILL after a dump: what was written stays whole
"$fr" kill f > f.out 2> f.err &
fpid=$!
for i in $(seq 200); do grep -q dumped f.out && break; sleep 0.1; done
grep -q dumped f.out || fail "kill: no dump came: $(cat f.err)"
kill -9 $fpid; wait $fpid || true
python3 "$src/tests/e2e/flight_check.py" f fl-trigger1 --reason "before the kill" \
    --before-min 0.4 --before-max 2.05
"$sonde" export f/fl-trigger1.sonde --format json -o f2 --quiet 2> f2.err
if grep -q "torn\|checksum" f2.err; then
    fail "the dump is torn after SIGKILL: $(cat f2.err)"
fi
