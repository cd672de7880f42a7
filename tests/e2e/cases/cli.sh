# cli.sh - the e2e case `cli`, sourced by run.sh (index: README.md), which gives it
# $work (its folder, removed at the end), $build, $src, $sonde, $asan and the helpers check,
# fail and expect; it exits non-zero at the first failure, 77 when it cannot run here.
# shellcheck shell=bash
cd "$work"
# issue 18: a trace budget (trace_max_events) keeps the longest sections whole and folds the
# rest into slices, nesting intact, and the reports say what was folded
SONDE_OUTPUT_DIR=budget SONDE_TRACE_MAX_EVENTS=30 "$build/examples/pipeline" --steps 12 \
    --blocks 3 --frames 2 --dim 16 --quiet --name budget
"$sonde" summary budget/budget.sonde > bud_sonde.txt
"$sonde" summary budget/budget.json > bud_json.txt
[ "$(grep '^Trace:' bud_sonde.txt)" = "$(grep '^Trace:' bud_json.txt)" ] && grep -q "^Trace: " bud_sonde.txt ||
    fail "trace budget lines: $(grep '^Trace' bud_sonde.txt bud_json.txt)"
python3 - budget/budget.trace.json.gz budget/budget.json <<'PY' || fail "trace budget"
import collections, gzip, json, sys
ev = json.load(gzip.open(sys.argv[1], "rt"))
r = json.load(open(sys.argv[2]))["summary"]
xs = [e for e in ev if e.get("ph") == "X" and e["cat"] in ("section", "folded")]
kept = [e for e in xs if e["cat"] == "section"]
folded = [e for e in xs if e["cat"] == "folded"]
assert len(xs) <= 30 and folded, (len(xs), len(folded))
assert r["trace_sections"] == r["sections"] and r["trace_sections_folded"] == r["sections"] - len(kept), r
cut = r["trace_folded_under_s"] * 1e6
assert all(e["dur"] >= cut - 0.001 for e in kept), cut
for e in folded:  # "NAME x N (T ms)" or "N sections (T ms)", N in args
    assert (" x %d (" % e["args"]["sections"]) in e["name"] or e["name"].startswith("%d sections" % e["args"]["sections"]), e
# per thread, intervals nest or are apart: never a partial overlap
by = collections.defaultdict(list)
for e in xs:
    by[e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
for iv in by.values():
    iv.sort(key=lambda a: (a[0], -a[1]))
    stack = []
    for a, b in iv:
        while stack and stack[-1] <= a + 0.0015:
            stack.pop()
        assert not stack or b <= stack[-1] + 0.0015, (a, b, stack[-1])
        stack.append(b)
print("trace budget: %d of %d sections kept whole, %d folded into %d slices, under %.1f us"
      % (len(kept), r["sections"], r["trace_sections_folded"], len(folded), cut))
PY
# sonde export --set trace_max_events: the same run's trace under another budget, the
# reports saying so; keys the reports do not read, and bad values, are refused by name
"$sonde" export budget/budget.sonde --format json,trace --set trace_max_events=80 -o bud80 --quiet
python3 - budget/budget.json bud80/budget.json bud80/budget.trace.json.gz <<'PY' || fail "export --set trace_max_events"
import gzip, json, sys
a, b = (json.load(open(p))["summary"] for p in sys.argv[1:3])
xs = [e for e in json.load(gzip.open(sys.argv[3], "rt")) if e.get("ph") == "X" and e["cat"] in ("section", "folded")]
assert len(xs) <= 80 and b["trace_sections_folded"] < a["trace_sections_folded"], (len(xs), a, b)
print("export --set trace_max_events=80: %d of %d sections folded, against %d at 30" % (b["trace_sections_folded"], b["sections"], a["trace_sections_folded"]))
PY
expect 2 "--set trace_max_events: " "$sonde" export budget/budget.sonde --set trace_max_events=abc -o bud80
expect 2 "--set min_duration_s: acts while recording" "$sonde" export budget/budget.sonde --set min_duration_s=1 -o bud80
expect 2 "--set trace_max_event: no such key; did you mean trace_max_events" "$sonde" export budget/budget.sonde --set trace_max_event=5 -o bud80
expect 2 "--set trace_max_events: expected KEY=VALUE" "$sonde" export budget/budget.sonde --set trace_max_events -o bud80
# issue 18: held sections (report_max_sections): a run with more sections than the limit
# holds the longest and folds the rest as it is read; its reports give the same statistics
# and counts as the whole run read with no limit, and its trace nests and accounts for all
SONDE_OUTPUT_DIR=held SONDE_NAME=held SONDE_AUTOTRACE_HOT_CALLS=0 SONDE_REPORT_MAX_SECTIONS=300 \
    SONDE_FORMATS=json,trace,csv SONDE_COLLECT_GPU=0 "$build/tests/comparator" 20000 > /dev/null
"$sonde" export held/held.sonde --format json --set report_max_sections=0 -o held_all --quiet
python3 - held/held.json held_all/held.json held/held.trace.json.gz held/held.instances.csv <<'PY' || fail "held sections"
import csv, gzip, json, sys
h, a = (json.load(open(p)) for p in sys.argv[1:3])
hs, as_ = h["summary"], a["summary"]
rows = list(csv.DictReader(open(sys.argv[4])))
assert len(rows) == hs["sections"], (len(rows), hs["sections"])  # every one, not the held ones
assert hs["sections"] == as_["sections"] and hs["sections_held"] < hs["sections"], (hs, as_)
assert as_["sections_held"] == as_["sections"], as_
def table(r):
    return {s["name"]: (s["count"], round(s["total_s"], 9), round(s["self_s"], 9), s["p50_s"], s["max_s"]) for s in r["sections"]}
assert table(h) == table(a), (table(h), table(a))
for x, y in zip(h["sessions"], a["sessions"]):
    assert table(x) == table(y), (x["name"], table(x), table(y))
ev = json.load(gzip.open(sys.argv[3], "rt"))
xs = [e for e in ev if e.get("ph") == "X" and e["cat"] in ("section", "folded")]
kept = [e for e in xs if e["cat"] == "section"]
folded = [e for e in xs if e["cat"] == "folded"]
assert len(kept) == hs["sections_held"] <= 100 and folded, (len(kept), len(folded))
assert sum(e["args"]["sections"] for e in folded) <= hs["trace_sections_folded"], hs
assert hs["trace_sections_folded"] == hs["sections"] - hs["sections_held"], hs
assert all("report_max_sections" in e["args"]["why"] for e in folded), folded[0]
print("held sections: %d of %d held, %d folded into %d slices; statistics equal to the whole run's"
      % (hs["sections_held"], hs["sections"], hs["trace_sections_folded"], len(folded)))
PY
check trace held/held.trace.json.gz > /dev/null || fail "held sections: the trace does not nest"
# sonde diff --per-instance reads every instance of a held run, not only the held ones
"$sonde" diff held/held.sonde held/held.sonde --per-instance --format json > held_diff.json
python3 - held_diff.json held/held.json <<'PY' || fail "held sections: diff --per-instance"
import json, sys
rows = {r["name"]: r for r in json.load(open(sys.argv[1]))["sections"]}
want = {s["name"]: s["count"] for s in json.load(open(sys.argv[2]))["sections"]}
for name, n in want.items():
    assert rows[name]["count"] == [n, n], (name, rows[name]["count"], n)
print("held sections: sonde diff --per-instance compares all %d instances" % sum(want.values()))
PY
# issue 59: the recorder ends the file with its SUMMARY record, so the reading decodes each
# event once; read twice instead (SONDE_READ_SUMMARY=0), every format is the same bytes
python3 - held/held.sonde <<'PY' || fail "held sections: no SUMMARY record before END"
import struct, sys
d = open(sys.argv[1], "rb").read()
off, types = 16, []
while off + 12 <= len(d):
    types.append(d[off])
    off += 12 + struct.unpack("<I", d[off + 4:off + 8])[0]
assert 19 in types and types.index(19) < types.index(9), types[-6:]
PY
"$sonde" export held/held.sonde --format all -o held_once --quiet
SONDE_READ_SUMMARY=0 "$sonde" export held/held.sonde --format all -o held_twice --quiet
diff -r held_once held_twice > /dev/null ||
    fail "held sections: read with its SUMMARY record and without, the reports differ: $(diff -rq held_once held_twice)"
echo "held sections: read once (SUMMARY) and twice, the $(find held_once -type f | wc -l) files alike"
# its instances CSV is written as the file is read (one reading, not two): sonde export's
# is the library's byte for byte, and holds the rows of the run read with no limit
"$sonde" export held/held.sonde --format instances -o held_exp --quiet
cmp held/held.instances.csv held_exp/held.instances.csv ||
    fail "held sections: sonde export's instances CSV differs from the library's"
"$sonde" export held/held.sonde --format instances --set report_max_sections=0 -o held_all2 --quiet
[ "$(sort held_exp/held.instances.csv | md5sum)" = "$(sort held_all2/held.instances.csv | md5sum)" ] ||
    fail "held sections: the instances CSV's rows are not those of the run held whole"
# a write that fails as the file is read (a file-size limit) fails that file alone
expect 2 "cannot write held_lim/held.instances.csv: File too large" \
    bash -c 'ulimit -f 64; exec "$0" export held/held.sonde --format instances,json -o held_lim' "$sonde"
[ "$(ls -A held_lim)" = "held.json" ] || fail "held sections: a failed instances CSV left $(ls -A held_lim)"
if command -v strace > /dev/null; then
    # LeakSanitizer cannot run under ptrace: a sanitizer build's leak check is left out here
    noleak="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
    ASAN_OPTIONS=$noleak strace -f -e trace=openat -o held_strace.txt "$sonde" export held/held.sonde \
        --format instances -o held_exp --quiet
    opens=$(grep -c 'held/held.sonde"' held_strace.txt || true)
    [ "$opens" = 1 ] || fail "held sections: sonde export --format instances opened the file $opens times"
    ASAN_OPTIONS=$noleak strace -f -e trace=openat -o held_strace.txt "$sonde" diff held/held.sonde held/held.sonde \
        --per-instance --format json > /dev/null
    # each side: once to tell a .sonde file from a JSON report by its first bytes, once to
    # read it (a third time, to read it again for the instances, before)
    opens=$(grep -c 'held/held.sonde"' held_strace.txt || true)
    [ "$opens" = 4 ] || fail "held sections: sonde diff --per-instance of a run against itself opened it $opens times"
    echo "held sections: the instances CSV and diff --per-instance in one reading of the file"
elif [ -n "${CI:-}" ]; then
    fail "strace is missing (scripts/setup.sh test installs it): under CI how often the file is read is checked"
else
    echo "held sections: no strace here: how often the file is read is not checked"
fi
# issue 18: Perfetto's protobuf trace (NAME.pftrace) decodes with protoc and shows what the
# JSON trace of the same run shows, folding included; sonde export writes it byte for byte
command -v protoc > /dev/null || fail "protoc missing: apt-get install protobuf-compiler"
for run in budget plain; do
    limit=30; [ $run = plain ] && limit=0
    SONDE_OUTPUT_DIR=pf SONDE_FORMATS=json,trace,perfetto SONDE_TRACE_MAX_EVENTS=$limit \
        "$build/examples/pipeline" --steps 12 --blocks 3 --frames 2 --dim 16 --quiet --name $run
    protoc --decode_raw < pf/$run.pftrace > /dev/null || fail "protoc cannot decode $run.pftrace"
    python3 "$src/tests/e2e/pftrace.py" plain pf/$run.pftrace pf/$run.plain  # inflated
    protoc --decode_raw < pf/$run.plain > pf/$run.raw || fail "protoc cannot decode its packets"
    # (denoising: the longest section of its thread, so kept whole under any budget; a
    # denoise_step is not always, under ASan's timing)
    grep -q '5: "denoise-worker-0"' pf/$run.raw && grep -q '2: "denoising"' pf/$run.raw ||
        fail "$run.pftrace: no thread or section names: $(head -40 pf/$run.raw)"
    python3 "$src/tests/e2e/pftrace.py" compare pf/$run.pftrace pf/$run.trace.json.gz > pf/$run.cmp ||
        fail "$run.pftrace differs from the JSON trace"
    echo "pftrace $run: $(cat pf/$run.cmp), $(stat -c %s pf/$run.pftrace) bytes"
    cp pf/$run.pftrace pf/$run.first
    "$sonde" export pf/$run.sonde --format perfetto --quiet
    cmp pf/$run.pftrace pf/$run.first || fail "sonde export wrote another $run.pftrace"
done
grep -q '"folded": 0,' pf/plain.cmp && ! grep -q '"folded": 0,' pf/budget.cmp ||
    fail "folding: $(cat pf/plain.cmp pf/budget.cmp)"
# a .sonde file of format version 1 (before events carried arguments) is still read whole
[ "$(od -A n -t u4 -j 8 -N 4 "$src/tests/fuzz/corpus/sonde/minimal.sonde" | tr -d ' ')" = 1 ] \
    || fail "tests/fuzz/corpus/sonde/minimal.sonde is no longer a version 1 file"
expect 0 "" "$sonde" summary "$src/tests/fuzz/corpus/sonde/minimal.sonde"
grep -q "^decode  *10 " out.txt || fail "version 1 file misread: $(cat out.txt)"
# the threat model: `sonde run` runs its argument vector, never a shell; neither the library
# nor the CLI imports a shell-running call or an outgoing network one; the one listening
# socket, the metrics endpoint's, is made only when metrics_port asks (a run without it makes
# no socket at all)
expect 127 "cannot run touch pwned; true" "$sonde" run -o shellcheck -- "touch pwned; true"
[ ! -e pwned ] || fail "sonde run went through a shell"
imports=$( { nm -D --undefined-only "$build/libsonde.so"; nm --undefined-only "$sonde"; } |
    awk '{print $NF}' | sed 's/@.*//' | grep -xE "accept|connect|system|popen" || true)
[ -z "$imports" ] || fail "network or shell calls imported: $imports"
if command -v strace > /dev/null; then
    # (LeakSanitizer cannot stop the world under a tracer: off for this one run)
    ASAN_OPTIONS=detect_leaks=0 strace -f -qq -e trace=socket,bind,listen -o sock.trace \
        "$sonde" run --quiet -o nosock -- \
        "$build/examples/pipeline" --steps 1 --blocks 1 --frames 2 --dim 8 --quiet > /dev/null
    ! grep -qE "(socket|bind|listen)\(" sock.trace ||
        fail "a run without metrics_port made a socket: $(grep -E '(socket|bind|listen)\(' sock.trace | head -3)"
elif [ "${CI:-}" = true ]; then
    fail "strace is missing (scripts/setup.sh test installs it)"
fi
expect 0 "" "$sonde" --help
for c in export summary config demo run; do grep -q "^  $c " out.txt || fail "--help lacks $c"; done
grep -q "^  export .*html" out.txt || fail "--help does not list html among export's formats"
expect 0 "" "$sonde" --version
grep -q "^sonde [0-9]" out.txt || fail "--version"
expect 0 "" "$sonde" help export
grep -q "usage: sonde export" out.txt || fail "help export"
expect 0 "" "$sonde" summary --help
grep -q "usage: sonde summary" out.txt || fail "summary --help"
expect 2 'unknown command "sumary" (did you mean "summary"?)' "$sonde" sumary
expect 2 "unknown option --fromat (did you mean --format?)" "$sonde" export --fromat json x.sonde
# export regenerates exactly what the library wrote
"$build/examples/pipeline" --steps 3 --blocks 2 --frames 4 --dim 32 --quiet
expect 0 "" "$sonde" export sonde-out/pipeline.sonde -o again
grep -qx "again/pipeline.html" out.txt || fail "export did not list the HTML report: $(cat out.txt)"
for f in json csv instances.csv txt trace.json.gz html; do
    cmp -s sonde-out/pipeline.$f again/pipeline.$f || fail "export: pipeline.$f differs from the library's"
done
expect 0 "" "$sonde" export sonde-out/pipeline.sonde --format samples -o again --quiet
head -1 again/pipeline.samples.csv | grep -q "^counter,unit,source,t_s,value$" || fail "samples csv"
# TensorBoard: the trace where `tensorboard --logdir tb` finds it, the path printed
expect 0 "" "$sonde" export sonde-out/pipeline.sonde --format tensorboard -o tb
grep -q "^tb/plugins/profile/pipeline/.*_[0-9]*\.pt\.trace\.json\.gz$" out.txt || fail "tensorboard path: $(cat out.txt)"
check tensorboard tb pipeline sonde-out/pipeline.json
# with a schedule the TensorBoard trace holds the steps the window recorded, under PyTorch's
# numbers (steps from 0): skip 1, wait 1, warm up 1, then steps 3, 4 and 5
SONDE_FORMATS=json,tensorboard SONDE_OUTPUT_DIR=sched "$build/examples/pipeline" --steps 10 --blocks 2 \
    --frames 4 --dim 32 --quiet --profile-skip-first 1 --profile-wait 1 --profile-warmup 1 \
    --profile-active 3 --profile-repeat 1
python3 - sched <<'PY'
import glob, gzip, json, sys
ev = json.load(gzip.open(glob.glob(sys.argv[1] + "/plugins/profile/pipeline/*.pt.trace.json.gz")[0]))["traceEvents"]
steps = [e["name"] for e in ev if e["name"].startswith("ProfilerStep#")]
assert steps == ["ProfilerStep#3", "ProfilerStep#4", "ProfilerStep#5"], steps
r = json.load(open(sys.argv[1] + "/pipeline.json"))
assert r["steps"]["active"] == [False] * 3 + [True] * 3 + [False] * 4, r["steps"]
w = r["schedule"]["windows"][0]
assert (w["first_step"], w["last_step"]) == (3, 5), w
PY
# summary from the .sonde file and from the JSON report print the same
"$sonde" summary sonde-out/pipeline.sonde > a.txt
"$sonde" summary sonde-out/pipeline.json > b.txt
cmp -s a.txt b.txt || fail "summary of .sonde and .json differ: $(diff a.txt b.txt)"
"$sonde" summary --sort count --top 2 sonde-out/pipeline.json > c.txt
[ "$(sed -n 5p c.txt | awk '{print $1}')" = denoise_block ] || fail "--sort count: $(cat c.txt)"
grep -q "^... 6 more section names" c.txt || fail "--top 2: $(cat c.txt)"
# the table fits 100 columns; --wide gives every column
awk '/^Name / {t=1} /^Run duration/ {t=0} t && length($0) > 100 {print; bad=1} END {exit bad}' \
    sonde-out/pipeline.txt || fail "the text table is wider than 100 columns"
grep -q "^Name .* Count .* P99 .*%Run$" sonde-out/pipeline.txt || fail "table header: $(head -3 sonde-out/pipeline.txt)"
"$sonde" summary --wide sonde-out/pipeline.sonde | grep -q "^Name .* Min .* Max .* P50 .*%Run$" || fail "--wide lacks Min and Max"
# bad input: exact exit codes and messages naming the file
expect 2 "nothere.sonde: No such file or directory" "$sonde" export nothere.sonde
echo "just text" > notes.sonde
expect 2 "notes.sonde: a text file; expected a .sonde file or a NAME.json report" "$sonde" summary notes.sonde
expect 2 "notes.sonde: a text file; expected a .sonde file (the recording)" "$sonde" export notes.sonde
# export reads recordings only: a directory and a JSON report are named as what they are
# (they were "not a regular file" and "bad magic")
expect 2 "sonde-out is a directory; expected a .sonde file (the recording) (e.g. sonde-out/NAME.sonde)" \
    "$sonde" export sonde-out
expect 2 "pipeline.json: a sonde JSON report, not a recording" "$sonde" export sonde-out/pipeline.json
# ... and JSON of another kind, past the 256 bytes looked at (ASan: they were read past)
python3 -c 'import json; print(json.dumps({"data": "x" * 400}))' > other.json
expect 2 "other.json: not a .sonde file; expected a .sonde file (the recording)" \
    "$sonde" export other.json
sed 's/"schema_version":1/"schema_version":2/' sonde-out/pipeline.json > v2.json
expect 2 "v2.json: a sonde report of schema_version 2; this sonde reads version 1" "$sonde" summary v2.json
size=$(stat -c %s sonde-out/pipeline.sonde)
head -c $((size - 5)) sonde-out/pipeline.sonde > torn.sonde
expect 0 "torn last record" "$sonde" export torn.sonde -o torn
[ -f torn/pipeline.json ] || fail "torn export wrote nothing"
expect 2 "--sort fast: expected total, self, count or mean" "$sonde" summary --sort fast sonde-out/pipeline.json
# every command takes both kinds of run it documents; the demo's report holds a counter with
# several values, which a JSON report carries without its samples
for f in sonde-out/pipeline.sonde sonde-out/pipeline.json; do
    expect 0 "" "$sonde" summary "$f"
    expect 0 "" "$sonde" report "$f" -o "kinds-${f##*.}.html"
    grep -q "latent_rms" "kinds-${f##*.}.html" || fail "report of $f lacks the counter"
    expect 0 "" "$sonde" aggregate "$f"
    expect 0 "" "$sonde" diff "$f" "$f"
done
# aggregate sums throughput by unit name, whatever order each rank listed its units in
mkdir -p agg
for r in 0 1; do
    RANK=$r WORLD_SIZE=2 SONDE_FORMATS=json SONDE_OUTPUT_DIR=agg "$build/examples/pipeline" \
        --steps 2 --blocks 2 --frames 4 --dim 32 --quiet
done
python3 - agg/pipeline-rank1.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["throughput"] = r["throughput"][::-1]  # tokens first, as a rank whose unit is tokens lists them
json.dump(r, open(sys.argv[1], "w"))
PY
expect 0 "" "$sonde" aggregate agg/pipeline-rank0.json agg/pipeline-rank1.json
python3 - out.txt agg/pipeline-rank0.json agg/pipeline-rank1.json <<'PY'
import json, re, sys
out = open(sys.argv[1]).read()
ranks = [{t["unit"]: t["per_s"] for t in json.load(open(f))["throughput"]} for f in sys.argv[2:]]
for unit in ("frames", "tokens"):
    got = float(re.search(r"throughput summed over ranks: ([0-9.]+) %s/s" % unit, out).group(1))
    want = sum(r[unit] for r in ranks)
    assert abs(got - want) <= 0.01 * want, (unit, got, want, out)
PY
# the wrong kind of input: what it is and what was expected
for c in summary report; do
    expect 2 "sonde-out is a directory; expected a .sonde file or a NAME.json report (e.g. sonde-out/NAME.sonde)" "$sonde" $c sonde-out
done
mkdir -p emptyruns
expect 2 "emptyruns: no run in the directory (NAME.json or NAME.sonde)" "$sonde" diff sonde-out/pipeline.json emptyruns
expect 2 "nomatch/*.sonde: matches no file" "$sonde" diff sonde-out/pipeline.json -- "nomatch/*.sonde"
expect 2 "3 runs given: put -- between the base runs and the new ones" "$sonde" diff a b c
expect 2 "pipeline.csv: a CSV or text file; expected a .sonde file or a NAME.json report" "$sonde" summary sonde-out/pipeline.csv
expect 2 "pipeline.trace.json.gz: a gzip file (a .trace.json.gz trace?); expected" "$sonde" report sonde-out/pipeline.trace.json.gz
gzip -dc sonde-out/pipeline.trace.json.gz > plain.trace.json
expect 2 "plain.trace.json: a Chrome trace, not a sonde report" "$sonde" summary plain.trace.json
expect 2 "two runs are needed, BASE and NEW; got only sonde-out/pipeline.sonde" "$sonde" diff sonde-out/pipeline.sonde
# config
expect 0 "" "$sonde" config --list
for k in buffer_mb gpu_interval_s warmup memory_every_n_steps SONDE_GPU_DEVICES --profile-wait; do
    grep -qF -- "$k" out.txt || fail "config --list lacks $k"
done
printf 'profiling:\n  warmup: 2\n  active: 3\n' > ok.yaml
expect 0 "" "$sonde" config --check ok.yaml
printf 'profiling:\n  warmpu: 2\n' > bad.yaml
expect 2 'bad.yaml:2:3: unknown key "warmpu" (did you mean "warmup"?)' "$sonde" config --check bad.yaml
# a misspelt format is suggested as a misspelt key is (it was not)
printf 'formats: jsn,html\n' > badfmt.yaml
expect 2 'badfmt.yaml:1:10: formats: unknown format "jsn" (did you mean "json"?)' \
    "$sonde" config --check badfmt.yaml
# demo
expect 0 "" "$sonde" demo --steps 2 --blocks 2 --frames 4 --dim 32 --quiet --name clidemo
[ -f sonde-out/clidemo.json ] || fail "sonde demo wrote no report"
# run: a program that forks workers that allocate and burn CPU; its status comes back
cat > work.sh <<'SH'
#!/bin/sh
python3 -c 'import time; b = bytearray(150 * 1024 * 1024); b[::4096] = b"x" * len(b[::4096]); time.sleep(0.6)' &
python3 -c 'import time; t = time.time(); exec("while time.time() - t < 0.6: pass")' &
wait
exit 7
SH
chmod +x work.sh
expect 7 "ended with exit 7" "$sonde" run --name tree -o runs --interval 0.05 -- ./work.sh
grep -q "^sonde run: profiling ./work.sh (pid [0-9]*); reports in runs/tree.\* when it exits$" err.txt \
    || fail "sonde run did not say what it was doing: $(cat err.txt)"
python3 - runs/tree.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
c = {x["name"]: x for x in r["counters"]}
assert c["processes"]["max"] >= 3, c["processes"]         # the script and its two workers
assert c["rss MiB"]["max"] >= 150, c["rss MiB"]           # summed over the tree
assert c["process cpu %"]["max"] >= 50, c["process cpu %"]
procs = [k for k in r["system"] if k.startswith("process_")]
assert len(procs) >= 3, r["system"]
tracks = [k for k in c if k.startswith("pid ") and k.endswith(" rss MiB")]
assert len(tracks) >= 3, tracks                           # each process on its own track
run = [s for s in r["sections"] if s["name"] == "run"][0]
assert run["count"] == 1 and run["metadata"]["exit"] == ["exit 7"], run
assert not [v for k, v in r["system"].items() if k.startswith("process_") and v.startswith("sonde ")], \
    r["system"]                                           # named after exec, not sonde's fork
# the recorded configuration names every format (it named only the first seven before)
assert r["config"]["formats"] == "json,csv,txt,trace,html,folded,pprof,offcpu", r["config"]["formats"]
print("sonde run: %d processes, %.0f MiB peak RSS" % (c["processes"]["max"], c["rss MiB"]["max"]))
PY
# issue 36 #11: `sonde export FILE` with no --format writes every format the run was
# configured with again, folded and pprof included (their names were lost from the file),
# and the off-CPU periods' folded stacks where they were followed (as root here)
[ -s runs/tree.folded ] && [ -s runs/tree.pb.gz ] || fail "sonde run wrote no folded or pprof"
off=$([ -f runs/tree.offcpu.folded ] && echo 1 || echo 0)
rm -f runs/tree.folded runs/tree.pb.gz runs/tree.offcpu.folded
"$sonde" export runs/tree.sonde --quiet
[ -s runs/tree.folded ] && [ -s runs/tree.pb.gz ] || fail "export without --format: $(ls runs)"
[ "$off" = 0 ] || [ -s runs/tree.offcpu.folded ] || fail "export wrote no offcpu.folded"
# the live display starts with the first samples, says how long the run has gone, and speaks
# of steps only when there are some
expect 0 "" "$sonde" run --name live -o runs --display --interval 0.05 -- sleep 0.4
grep -q "^=== sonde: live | 0\.[0-9] s ===$" err.txt || fail "live display: $(cat err.txt)"
check trace runs/tree.trace.json.gz
# a program that links libsonde records into the same run: one report holds both
expect 0 "" "$sonde" run --name joined -o runs -- "$build/examples/minimal"
python3 - runs/joined.json runs/joined.trace.json.gz <<'PY'
import gzip, json, sys
r = json.load(open(sys.argv[1]))
counts = {s["name"]: s["count"] for s in r["sections"]}
assert counts == {"run": 1, "decode": 10, "load_model": 1}, counts
assert [s["name"] for s in r["sessions"]] == ["inference"] and r["steps"]["count"] == 10
pids = {t["pid"] for t in r["threads"]}
assert len(pids) == 2, r["threads"]
ev = json.load(gzip.open(sys.argv[2], "rt"))
ev = ev["traceEvents"] if isinstance(ev, dict) else ev  # the object form: the run has CPU samples
procs = [e for e in ev if e.get("name") == "process_name"]
# each process named once: the run, the recording child, and any other process the CPU samples
# were taken in (under ASan, one more of the child's)
named = [e["pid"] for e in procs]
assert len(named) == len(set(named)) and pids <= set(named) and len(named) >= 2, procs
run = [s for s in r["sections"] if s["name"] == "run"][0]
dec = [s for s in r["sections"] if s["name"] == "decode"][0]
assert dec["total_s"] < run["total_s"]                    # on the run's clock
print("sonde run + libsonde child: one report, processes", sorted(pids))
PY
# 14.12: the reports made again from joined.sonde hold the program's sections too
"$sonde" export runs/joined.sonde --format json,txt -o again > /dev/null
"$sonde" summary runs/joined.sonde > again/summary.txt
"$sonde" report runs/joined.sonde -o again/report.html > /dev/null
python3 - runs/joined.json again/joined.json again/summary.txt again/report.html <<'PY'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
ca = {s["name"]: s["count"] for s in a["sections"]}
cb = {s["name"]: s["count"] for s in b["sections"]}
assert ca == cb, (ca, cb)
for f in sys.argv[3:]:
    t = open(f).read()
    assert "decode" in t and "load_model" in t, f
print("export, summary and report of joined.sonde: the program's sections are in", sorted(cb))
PY
expect 137 "ended with signal 9" "$sonde" run -o runs -- sh -c 'kill -9 $$'
expect 127 "cannot run /nonexistent/prog" "$sonde" run -o runs -- /nonexistent/prog
expect 2 "no command" "$sonde" run -o runs --
# SIGTERM sent to sonde reaches the program, which ends as it would have; also while sonde is
# still starting: the child it forwarded the signal to has ended before being told to exec
# (sonde died of SIGPIPE writing to it, exit 141, at 2-5 ms here). In a shell of its own and a
# folder of its own, without this shell's EXIT trap: around these background commands, killed
# as they start, this case's folder was once in a few runs removed under it (their waits said
# "No record of process"; 2026-11-29, a CI run's ASan stage)
cat > sigterm.sh <<'SH'
set -u
sonde=$1
"$sonde" run -o runs --quiet -- sleep 30 & spid=$!
sleep 0.5
kill -TERM $spid
wait $spid; st=$?
[ $st = 143 ] || { echo "SIGTERM forwarded: sonde exited $st, expected 143"; exit 1; }
for dly in 0 0.001 0.002 0.003 0.005 0.008 0.012 0.02; do
    "$sonde" run -o runs --quiet -- sleep 30 & spid=$!
    sleep $dly
    kill -TERM $spid
    wait $spid; st=$?
    [ $st = 143 ] || { echo "SIGTERM $dly s after sonde run started: exited $st, expected 143"; exit 1; }
done
SH
mkdir -p sigterm
(cd sigterm && env -u BASH_ENV bash ../sigterm.sh "$sonde") > sigterm.out 2>&1 ||
    fail "SIGTERM forwarding: $(cat sigterm.out)"
# sonde diff: a time's change is -100% at the least, whatever the interval of noisy runs (a
# base side of 1x, 1x and 30x gave [-480.6%, +299.3%] with --test welch); a folder given
# with its trailing slash makes no "//" in the paths printed
python3 - sonde-out/pipeline.json <<'PY' || fail "planting the diff's runs"
import copy, json, os, sys
r = json.load(open(sys.argv[1]))
for side, factors in (("base", (1, 1, 30)), ("new", (1, 1, 1))):
    os.makedirs("dg/" + side, exist_ok=True)
    for i, f in enumerate(factors):
        x = copy.deepcopy(r)
        for s in x["sections"]:
            for k in ("mean_s", "total_s", "self_s", "min_s", "max_s", "p50_s", "p90_s", "p99_s"):
                if isinstance(s.get(k), (int, float)):
                    s[k] *= f
            s.pop("sketch", None)
        json.dump(x, open("dg/%s/run%d.json" % (side, i), "w"))
PY
"$sonde" diff dg/base/ -- dg/new/ --test welch --format json > dg.json 2> dg.err ||
    fail "sonde diff of planted runs: $(cat dg.err)"
python3 -c 'import json, sys
rows = json.load(open(sys.argv[1]))["sections"]
assert rows and all(r["ci"][0] >= -1 for r in rows if r.get("ci")), [(r["name"], r.get("ci")) for r in rows]' dg.json ||
    fail "sonde diff: a change's interval below -100%"
"$sonde" diff dg/base/ -- dg/new/ --test welch > dg.txt 2>&1 || true
! grep -q "//" dg.txt || fail "sonde diff printed a double slash: $(grep // dg.txt)"
# profiling off: sonde run runs the command, writes nothing, and says so (it was silent)
expect 0 "sonde run: profiling is off" env SONDE_ENABLED=0 "$sonde" run -o off -- true
[ ! -e off ] || fail "sonde run with profiling off wrote $(ls off)"
# sonde export RUN.sonde merges only the run's own RUN.pidN.sonde: not a file another run
# of that name left there, nor one another user planted (it merged any such file)
pipeline=("$build/examples/pipeline" --steps 2 --blocks 2 --frames 4 --dim 32 --quiet)
"$sonde" run --quiet -o own --name job -- "${pipeline[@]}" > /dev/null
"$sonde" run --quiet -o other --name job -- "${pipeline[@]}" > /dev/null
cp other/job.pid*.sonde own/job.pid999999.sonde
expect 0 "own/job.pid999999.sonde: of another run (run id" "$sonde" export own/job.sonde \
    --format json -o ownx
check count ownx/job.json denoise_step 2
if [ "$(id -u)" = 0 ]; then
    rm own/job.pid999999.sonde
    cp own/job.pid[0-9]*.sonde own/job.pid999998.sonde && chown nobody own/job.pid999998.sonde
    expect 0 "own/job.pid999998.sonde: owned by uid $(id -u nobody), not by the run's owner" \
        "$sonde" export own/job.sonde --format json -o ownx
    check count ownx/job.json denoise_step 2
fi
# a consumer of the reading named on the command line (docs/architecture.md): the pipeline's
# "video ready" instants, each inside a decode section
"$sonde" summary sonde-out/pipeline.sonde --table instants-by-section > tab.txt ||
    fail "sonde summary --table exited $?"
grep -q "^decode  *[1-9][0-9]*  video ready x[1-9]" tab.txt || fail "summary --table: $(cat tab.txt)"
expect 2 "--table instants-by-sectoin: no such table (did you mean instants-by-section?); the tables: instants-by-section" \
    "$sonde" summary sonde-out/pipeline.sonde --table instants-by-sectoin
