# hostile.sh - the e2e case `hostile`, sourced by run.sh (index: README.md), which gives it
# $work (its folder, removed at the end), $build, $src, $sonde, $asan and the helpers check,
# fail and expect; it exits non-zero at the first failure, 77 when it cannot run here.
# shellcheck shell=bash
# issue 14: misuse and hostile input must never crash the host, write elsewhere, hang or lie
cd "$work"
status() { set +e; "$@" > out.txt 2> err.txt; echo $? > rc.txt; set -e; cat rc.txt; }
# 1. a section begun while the schedule paused recording, still open at exit(5)
[ "$(status "$build/tests/hostile" paused_open out)" = 5 ] ||
    fail "paused_open exited $(cat rc.txt), not 5: $(cat err.txt)"
python3 - out/paused_open.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert [s["count"] for s in r["sections"] if s["name"] == "step"] == [1], r["sections"]
assert any("(paused by the schedule)" in w for w in r["warnings"]), r["warnings"]
PY
#    ... and one dropped for want of a buffer, still open at sonde_destroy
[ "$(status "$build/tests/hostile" dropped_open out)" = 0 ] ||
    fail "dropped_open exited $(cat rc.txt): $(cat err.txt)"
grep -q "begin: SONDE_EDROPPED" out.txt || fail "dropped_open: $(cat out.txt)"
grep -q "destroy: SONDE_EOPEN" out.txt || fail "dropped_open: $(cat out.txt)"
[ -s out/dropped_open.json ] || fail "dropped_open wrote no report"
# 2. a stack overflow: the flush still runs (on the thread's alternate stack) and the file
#    holds the 1,000 sections recorded before it; the host dies of its SIGSEGV as before
st=$(status "$build/tests/hostile" overflow out)
[ "$st" = 139 ] || fail "overflow exited $st, not 139 (SIGSEGV): $(cat err.txt)"
"$sonde" export out/overflow.sonde --format json -o ov > /dev/null
check count ov/overflow.json before_overflow 1000 --unclean
# 11. a dropped END does not stretch its section to the run's end: counted apart, left out
[ "$(status "$build/tests/hostile" lost_end out)" = 0 ] ||
    fail "lost_end exited $(cat rc.txt): $(cat err.txt)"
python3 "$src/tests/e2e/sonde_edit.py" lose_end out/lost_end.sonde lost_end.sonde
"$sonde" export lost_end.sonde --format json,csv,txt -o lost > /dev/null
python3 - lost/lost_end.json lost/lost_end.txt lost/lost_end.instances.csv <<'PY'
import csv, json, sys
r = json.load(open(sys.argv[1]))
x = [s for s in r["sections"] if s["name"] == "x"][0]
assert x["max_s"] < 0.1, x  # 0.3 s and more when the lost end closed it at the run's end
# the 2,000 x inside the x that lost its end are outermost now: each is in x's total once
assert x["count"] == 2000, x
assert abs(x["total_s"] - x["mean_s"] * x["count"]) <= 1e-6 * x["total_s"], x
assert r["summary"]["sections_end_lost"] >= 1, r["summary"]
assert any("lost their end" in w for w in r["warnings"]), r["warnings"]
assert "Sections whose end was dropped:" in open(sys.argv[2]).read()
flags = [row["flags"] for row in csv.DictReader(open(sys.argv[3]))]
assert flags.count("end_lost") == r["summary"]["sections_end_lost"], flags.count("end_lost")
print("lost_end: %d section(s) lost their end, x max %.1f us" % (r["summary"]["sections_end_lost"], x["max_s"] * 1e6))
PY
# 3. two threads destroying at once: one does, the other is told it is destroyed
[ "$(status timeout 60 "$build/tests/hostile" double_destroy out)" = 0 ] ||
    fail "double_destroy exited $(cat rc.txt) (124: it hung): $(cat err.txt)"
grep -Eq "destroy: (SONDE_OK SONDE_ESTATE|SONDE_ESTATE SONDE_OK)" out.txt ||
    fail "double_destroy: $(cat out.txt)"
# 4. a run name read from a file (.sonde INFO, JSON run.name) is one path component
python3 "$src/tests/e2e/sonde_edit.py" name out/double_destroy.sonde evil.sonde "../../../x"
python3 - out/double_destroy.json evil.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["run"]["name"] = "../../../y"
json.dump(r, open(sys.argv[2], "w"))
PY
mkdir -p deep/a/b/c
"$sonde" export evil.sonde --format json,txt,html,tensorboard -o deep/a/b/c/out > /dev/null
"$sonde" report evil.json -o deep/a/b/c/fromjson.html > /dev/null
(cd deep/a/b/c && "$sonde" report ../../../../evil.sonde > /dev/null)
[ -s deep/a/b/c/out/.._.._.._x.json ] || fail "export: $(ls -R deep)"
[ -s deep/a/b/c/out/plugins/profile/.._.._.._x/*.pt.trace.json.gz ] || fail "tensorboard: $(ls -R deep)"
[ -s .._.._.._x.html ] || fail "report beside its input: $(ls)"
found=$(find "$work" \( -name 'x.*' -o -name 'y.*' -o -name x -o -name y \) -print)
[ -z "$found" ] || fail "a name from a file wrote outside its directory: $found"
# 5. a planted OUTDIR/plugins symlink is not followed
mkdir -p planted elsewhere && ln -s ../elsewhere planted/plugins
set +e; "$sonde" export out/double_destroy.sonde --format tensorboard -o planted 2> err.txt
rc=$?; set -e
[ $rc = 2 ] && grep -q "symlink" err.txt || fail "plugins symlink: rc=$rc $(cat err.txt)"
[ -z "$(ls -A elsewhere)" ] || fail "wrote through the planted symlink: $(ls -R elsewhere)"
# 5b. issue 36 #12: configuration values read back from a file are checked as `--set` checks
# them: out of a key's range (2^64-1 samples per counter once wrapped a buffer size and
# wrote past it), each is the key's default, and every report is the untouched file's
cp out/double_destroy.sonde plain.sonde
cp plain.sonde crafted.sonde
for kv in max_data_points=18446744073709551615 trace_max_events=18446744073709551615 \
          report_max_sections=-1 html_max_spans=3 bottleneck_threshold=nan with_stack=7; do
    python3 "$src/tests/e2e/sonde_edit.py" info crafted.sonde crafted.tmp "config.${kv%%=*}" "${kv#*=}"
    mv crafted.tmp crafted.sonde
done
"$sonde" export crafted.sonde --format all -o crafted_out --quiet || fail "export of crafted values"
"$sonde" export plain.sonde --format all -o plain_out --quiet
for ext in txt csv samples.csv pftrace; do # (the run's own name: double_destroy)
    cmp -s "crafted_out/double_destroy.$ext" "plain_out/double_destroy.$ext" ||
        fail "crafted configuration values changed NAME.$ext"
done
cmp -s <(zcat crafted_out/double_destroy.trace.json.gz) <(zcat plain_out/double_destroy.trace.json.gz) ||
    fail "crafted configuration values changed the trace"
# the HTML report up to its table of the recorded configuration (which shows the file's values)
cmp -s <(sed '/config-table/,$d' crafted_out/double_destroy.html) \
       <(sed '/config-table/,$d' plain_out/double_destroy.html) ||
    fail "crafted configuration values changed the HTML report"
"$sonde" merge crafted.sonde plain.sonde -o crafted_merged.trace.json.gz > /dev/null ||
    fail "merge of crafted values"
# 6. merge and aggregate never overwrite an input, nor follow a symlink at -o
cp out/double_destroy.sonde a.sonde
cp a.sonde a.orig
set +e; "$sonde" merge a.sonde -o a.sonde 2> err.txt; rc=$?; set -e
[ $rc = 2 ] && grep -q "is the input" err.txt && cmp -s a.sonde a.orig ||
    fail "merge over its input: rc=$rc $(cat err.txt)"
set +e; "$sonde" aggregate a.sonde -o a.sonde 2> err.txt; rc=$?; set -e
[ $rc = 2 ] && grep -q "is the input" err.txt && cmp -s a.sonde a.orig ||
    fail "aggregate over its input: rc=$rc $(cat err.txt)"
echo "precious" > victim.txt && ln -s victim.txt agg.txt
"$sonde" aggregate a.sonde -o agg.txt > /dev/null
[ "$(cat victim.txt)" = precious ] && [ ! -L agg.txt ] && grep -q double_destroy agg.txt ||
    fail "aggregate -o followed a symlink: $(cat victim.txt)"
# 7. no id or thread index in a crafted file sizes an array: each of these took gigabytes
for f in site_id_huge site_id_sparse thread_index_huge event_id_sparse; do
    python3 - "$sonde" "$src/tests/fuzz/corpus/sonde/$f.sonde" <<'PY'
import resource, subprocess, sys
subprocess.run([sys.argv[1], "summary", sys.argv[2]], stdout=subprocess.DEVNULL,
               stderr=subprocess.DEVNULL)
kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
assert kb < 100 * 1024, "%s: %d KB" % (sys.argv[2], kb)
PY
done
# 8. a world size read from a file does not size the output: 16 missing ranks named, the rest
#    counted
for ws in 100000000 1e308; do
    python3 - out/double_destroy.json ws.json $ws <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["run"]["world_size"] = float(sys.argv[3])
r["run"]["rank"] = 3
json.dump(r, open(sys.argv[2], "w"))
PY
    timeout 60 "$sonde" aggregate ws.json > agg.out || fail "aggregate, world size $ws"
    [ "$(grep -c "missing rank" agg.out)" = 16 ] && grep -q "more of the" agg.out &&
        [ "$(wc -l < agg.out)" -lt 60 ] || fail "world size $ws: $(head -c 2000 agg.out)"
done
# 15. non-finite numbers in options are refused
for v in nan inf -nan; do
    set +e; "$sonde" diff out/double_destroy.json out/double_destroy.json --threshold $v \
        > /dev/null 2> err.txt; rc=$?; set -e
    [ $rc = 2 ] && grep -q -- "--threshold" err.txt || fail "--threshold $v: rc=$rc $(cat err.txt)"
done
# 13, 14. names from a file: no formula in a CSV cell, valid UTF-8, no terminal escape printed
"$build/tests/hostile" names names > /dev/null
python3 - names/names.csv names/names.txt <<'PY'
import csv, sys
raw = open(sys.argv[1], "rb").read()
raw.decode("utf-8")  # valid UTF-8, or this raises
cells = [row[0] for row in csv.reader(open(sys.argv[1], encoding="utf-8"))][1:]
for c in cells:
    assert c[:1] not in ("=", "+", "-", "@", "\t", "\r"), cells
assert "'=HYPERLINK(\"http://x\")" in cells and "'@SUM(1)" in cells and "'-2+3" in cells, cells
txt = open(sys.argv[2], "rb").read()
assert b"\x1b" not in txt and b"\x07" not in txt and b"\xc2\x9b" not in txt, txt
assert b"\\x1b]0;pwned" in txt, txt
# a TAB in a name would shift the text table's columns: written \x09
assert b"tab\tshift" not in txt and b"tab\\x09shift" in txt, txt
PY
# the HTML report: valid UTF-8 (invalid bytes as U+FFFD, as in JSON and CSV), no control
# character, markup escaped
python3 - names/names.html <<'PY' || fail "names in the HTML report"
import sys
raw = open(sys.argv[1], "rb").read()
text = raw.decode("utf-8")  # valid UTF-8, or this raises
assert "bad\ufffd\ufffdutf8" in text, "no U+FFFD for the invalid bytes"
assert not any(ord(c) < 32 and c not in "\t\n\r" for c in text), "a control character"
assert "html<b>" not in text and "html&lt;b&gt;&amp;" in text, "markup not escaped"
PY
# the flight recorder's line on stderr: a trigger's reason carries no terminal escape and
# cannot forge a line of its own
"$build/tests/hostile" trigger trig > out.txt 2> err.txt || fail "trigger: $(cat err.txt)"
grep -q "trigger: SONDE_OK" out.txt || fail "trigger: $(cat out.txt)"
python3 - err.txt <<'PY' || fail "the flight recorder's stderr line: $(cat err.txt)"
import sys
t = open(sys.argv[1], "rb").read()
assert b"\x1b" not in t and b"\x07" not in t, t
assert b"\\x1b]0;pwned" in t, t
assert not any(l.startswith(b"sonde: forged") for l in t.splitlines()), t
PY
# 18.6: a report that cannot be written (here NAME.json is a directory) is named on stderr
# with the reason and how to make it again; sonde_destroy returns the code; the .sonde stays
mkdir -p unwritable/names.json
"$build/tests/hostile" names unwritable > out.txt 2> err.txt
grep -q "destroy: SONDE_EIO" out.txt || fail "unwritable report: $(cat out.txt)"
grep -q "the reports of run names were not all written: .*unwritable/names.json.*sonde export unwritable/names.sonde" err.txt ||
    fail "unwritable report, stderr: $(cat err.txt)"
[ -s unwritable/names.sonde ] && [ -s unwritable/names.csv ] || fail "unwritable report: $(ls unwritable)"
# a line break in a name is written \n (\r, \u2028): no report line can be forged
"$sonde" summary names/names.sonde > sum.out 2>&1
"$sonde" aggregate names/names.sonde > agg.out 2>&1
"$sonde" diff names/names.sonde names/names.sonde > diff.out 2>&1 || true
python3 - names/names.txt sum.out agg.out diff.out <<'PY'
import sys
for f in sys.argv[1:]:
    t = open(f, "rb").read()
    assert b"\x1b" not in t and b"\xc2\x9b" not in t, (f, t)
    lines = t.decode("utf-8").splitlines()  # splits at \r and U+2028 too
    forged = [l for l in lines if "forged" in l and
              not any(p in l for p in ("ok\\nWarning", "cr\\rWarning", "ls\\u2028Warning"))]
    assert not forged, (f, forged)
    assert "ok\\nWarning: forged" in t.decode("utf-8"), (f, t)
PY
# ... and a '|' in a name does not add a cell to a markdown row
for cmd in "diff names/names.sonde names/names.sonde" "aggregate names/names.sonde"; do
    "$sonde" $cmd --format markdown > md.out 2> /dev/null || true
    grep -q '^| cell\\|split | ' md.out || fail "sonde $cmd --format markdown: $(grep cell md.out)"
done
# 17. error paths give back what they took (the ASan build runs this with leak detection:
#     a leak there changes the exit status)
echo "not a report" > bad.txt
for cmd in "aggregate a.sonde bad.txt" "merge a.sonde bad.txt -o m.trace.json.gz" \
           "merge a.sonde" "aggregate a.sonde --by rank" "diff a.sonde bad.txt"; do
    set +e; "$sonde" $cmd > /dev/null 2> err.txt; rc=$?; set -e
    [ $rc = 2 ] || fail "sonde $cmd: rc=$rc (2 expected) $(head -c 3000 err.txt)"
done
# 9. a FIFO among the runs of a directory is skipped, one named on the command line refused
mkdir -p runs && cp a.sonde runs/r0.sonde && mkfifo runs/fifo.sonde runs/fifo.json
timeout 60 "$sonde" aggregate runs > /dev/null || fail "aggregate with a FIFO in the directory"
timeout 60 "$sonde" merge runs -o merged.trace.json.gz > /dev/null ||
    fail "merge with a FIFO in the directory"
set +e; timeout 60 "$sonde" summary runs/fifo.sonde 2> err.txt; rc=$?; set -e
[ $rc = 2 ] && grep -q "not a regular file" err.txt || fail "summary of a FIFO: rc=$rc $(cat err.txt)"
