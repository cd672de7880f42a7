#!/usr/bin/env bash
# run.sh - end-to-end tests: the real binaries on real files. Usage: run.sh TEST BUILD_DIR SRC_DIR
#   demo | crash | hostile | config | cli | html | ranks | limits | fork | cxx | compiled_out | install
#   | diffgate | stacks | pyframes | flight | outdir | secure | pidreuse
set -euo pipefail
test=$1 build=$(cd "$2" && pwd) src=$(cd "$3" && pwd)
sonde="$build/tools/sonde/sonde"
work=$(mktemp -d "${TMPDIR:-/tmp}/sonde-e2e-XXXXXX")
# sonde run --sample-in-thread preloads libsonde.so into the program: not an ASan build's, which
# only a program holding ASan's runtime from its start can load (its __asan_* are undefined); a
# sanitizer build's sonde run samples a Python program from outside unless asked
asan=; grep -qE "^SONDE_SANITIZE:[A-Z]*=(address|thread)" "$build/CMakeCache.txt" 2> /dev/null &&
    asan=1
# Only the test's own shell removes its folder: a background subshell (`cmd &`) killed before it
# has reset the traps it inherited runs this one too, and emptied the folder under the test (the
# cli case's SIGTERM loop: "err.txt is gone" in a later check, 1 run in 3)
trap '[ "$BASHPID" != "$$" ] || rm -rf "$work"' EXIT
check() { python3 "$src/tests/e2e/check.py" "$@"; }
fail() { echo "FAIL: $*"; exit 1; }
expect() { # want-status want-stderr-text cmd...: its exit status and what stderr says
    local want=$1 text=$2; shift 2
    set +e; "$@" >out.txt 2>err.txt; local got=$?; set -e
    # err.txt was once gone right after such a command (e2e flight, not reproduced): say where
    [ -f err.txt ] || fail "$*: exited $got; err.txt is gone from $(pwd) ($(ls -A | head -20 | tr '\n' ' '))"
    [ "$got" = "$want" ] || fail "$* exited $got, expected $want: $(cat err.txt)"
    [ -z "$text" ] || grep -qF -- "$text" err.txt || fail "$*: stderr lacks '$text': $(cat err.txt)"
}

case $test in
demo)
    cd "$work"
    "$build/examples/pipeline" --steps 6 --blocks 4 --frames 8 --dim 64 > out.txt
    grep -q "sonde summary: pipeline" out.txt || fail "the demo printed no summary"
    grep -q "sonde-out/pipeline.trace.json.gz" out.txt || fail "the demo did not list its files"
    check demo sonde-out pipeline 6 4
    # threads are told apart: the workers by the names the demo gave them, the main thread by the
    # program's; sonde's sampler is not one of the program's threads
    python3 - sonde-out/pipeline.json sonde-out/pipeline.trace.json.gz sonde-out/pipeline.txt <<'PY'
import gzip, json, sys
r = json.load(open(sys.argv[1]))
names = sorted(t["name"] for t in r["threads"] if t["sections"])
assert names == ["denoise-worker-0", "denoise-worker-1", "pipeline"], names
ev = json.load(gzip.open(sys.argv[2], "rt"))
tn = {e["args"]["name"] for e in ev if e.get("name") == "thread_name"}
assert {"denoise-worker-0", "denoise-worker-1", "pipeline", "steps"} <= tn, tn
assert all(e["tid"] != 0 for e in ev if e.get("cat") == "session"), "a session on tid 0"
head = open(sys.argv[3]).readline()
assert ", 3 threads)" in head, head
PY
    # nothing recorded is dropped: the run's metadata in every report, the diffusion records'
    # timesteps, guidance and block memory, the units recorded in a session's sections
    python3 - sonde-out/pipeline.json sonde-out/pipeline.txt sonde-out/pipeline.html sonde-out/pipeline.trace.json.gz <<'PY'
import gzip, json, sys
r, txt, html = json.load(open(sys.argv[1])), open(sys.argv[2]).read(), open(sys.argv[3]).read()
ev = json.load(gzip.open(sys.argv[4], "rt"))
assert r["run"]["metadata"] == {"model": "toy video diffusion", "latent": "4 blocks x 8 frames x 64"}, r["run"]["metadata"]
assert "Run metadata: model=toy video diffusion, latent=4 blocks x 8 frames x 64\n" in txt, txt
assert 'id="run-table"' in html and "<th>latent</th><td>4 blocks x 8 frames x 64</td>" in html
labels = [e["args"]["labels"] for e in ev if e.get("name") == "process_labels"]
assert labels and "model=toy video diffusion" in labels[0], labels
d = r["diffusion"]
assert d["steps"]["timesteps"] == [1000 * (1 - s / 6) for s in range(6)], d["steps"]["timesteps"]
assert d["steps"]["guidance_scales"] == [7.5] * 6 and d["steps"]["steps"] == list(range(6))
assert len(d["blocks"]["memory_mb"]) == 24 and all(m > 0 for m in d["blocks"]["memory_mb"])
assert "timesteps 1000 to 166.667, guidance 7.5" in txt and "peak block memory 0.004096 MB" in txt, txt
gen = [s for s in r["sessions"] if s["name"] == "generate"][0]
frames = [t for t in r["throughput"] if t["unit"] == r["run"]["unit"]][0]
assert gen["units"] == frames["units"] > 0, (gen["units"], frames)
PY
    # a session's sections carry the samples that fell inside them, as the run's do
    SONDE_CPU_INTERVAL_S=0.01 SONDE_OUTPUT_DIR=res "$build/examples/pipeline" --steps 12 --blocks 4 --frames 32 --dim 128 --quiet
    python3 - res/pipeline.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
run = {s["name"]: s["resources"]["samples"] for s in r["sections"]}
sess = {x["name"]: x["resources"]["samples"] for s in r["sessions"] for x in s["sections"]}
assert sess == run, (sess, run)   # each name lives in one session here
assert max(run.values()) > 0, run
PY
    # a second run never overwrites the first
    "$build/examples/pipeline" --steps 2 --blocks 2 --frames 4 --dim 32 --quiet
    [ -f sonde-out/pipeline-2.json ] || fail "second run with the same name was not suffixed"
    check count sonde-out/pipeline.json denoise_step 6
    check count sonde-out/pipeline-2.json denoise_step 2
    # symlinks planted at the output paths are never followed, and files get 0644 less the umask
    mkdir -p planted/sonde-out && cd planted
    echo "precious" > victim.txt
    ln -s ../victim.txt sonde-out/pipeline.json
    (umask 027; "$build/examples/pipeline" --steps 2 --blocks 2 --frames 4 --dim 32 --quiet)
    [ "$(cat victim.txt)" = precious ] || fail "a report was written through a planted symlink"
    [ -f sonde-out/pipeline.json ] && [ ! -L sonde-out/pipeline.json ] || fail "pipeline.json is not a new regular file"
    ln -s ../victim.txt sonde-out/planted.sonde
    "$build/examples/pipeline" --steps 2 --blocks 2 --frames 4 --dim 32 --quiet --name planted
    [ "$(cat victim.txt)" = precious ] || fail "the recording was written through a planted symlink"
    [ -f sonde-out/planted-2.sonde ] || fail "a planted NAME.sonde did not move the run to NAME-2: $(ls sonde-out)"
    for f in pipeline.json pipeline.sonde pipeline.html; do
        m=$(stat -c %a "sonde-out/$f"); [ "$m" = 640 ] || fail "$f has mode $m under umask 027, expected 640"
    done
    cd ..
    ;;
secure)
    # A setuid program linking libsonde reads none of its caller's SONDE_* variables (nor RANK
    # and the like): a SONDE_NVML_LIBRARY would run the caller's code as root, a SONDE_CONFIG
    # would print a root-only file in its "unknown key" error, a SONDE_OUTPUT_DIR would put
    # root's files where the caller chooses
    if [ "$(id -u)" != 0 ]; then
        [ "${CI:-}" = true ] && fail "secure needs root to make a setuid program (CI runs as root)"
        echo "SKIP: secure needs root to make a setuid program"
        exit 77
    fi
    # a folder nobody can reach (CI's TMPDIR is inside the clone's private folder)
    d=$(mktemp -d /tmp/sonde-secure-XXXXXX)
    trap '[ "$BASHPID" != "$$" ] || rm -rf "$work" "$d"' EXIT
    chmod 755 "$d"
    cp "$build/examples/pipeline" "$d/pipeline" && chown root:root "$d/pipeline" && chmod 4755 "$d/pipeline"
    printf '#include <stdio.h>\n__attribute__((constructor)) static void ran(void)\n{ FILE *f = fopen("%s/evil-ran", "w"); if (f) fclose(f); }\n' "$d" > "$d/evil.c"
    cc -shared -fPIC -o "$d/evil.so" "$d/evil.c" || fail "cannot build the planted library"
    printf 'root:$6$SECRETHASH$:19000:0:99999:7:::\n' > "$d/shadow" && chmod 600 "$d/shadow"
    mkdir "$d/cwd" && chmod 777 "$d/cwd"
    cd "$d/cwd"
    set +e
    setpriv --reuid=nobody --regid=nogroup --clear-groups env SONDE_NVML_LIBRARY="$d/evil.so" \
        SONDE_CONFIG="$d/shadow" SONDE_OUTPUT_DIR="$d/chosen" SONDE_COLLECT_GPU=1 \
        "$d/pipeline" --steps 2 --blocks 2 --frames 4 --dim 32 --quiet > out.txt 2> err.txt
    rc=$?
    set -e
    [ $rc = 0 ] || fail "the setuid pipeline exited $rc: $(cat err.txt)"
    [ ! -e "$d/evil-ran" ] || fail "SONDE_NVML_LIBRARY loaded the caller's library into a setuid program"
    ! grep -q SECRETHASH err.txt out.txt || fail "SONDE_CONFIG printed a root-only file: $(cat err.txt)"
    [ ! -e "$d/chosen" ] || fail "SONDE_OUTPUT_DIR was followed in a setuid program: $(ls -R "$d/chosen")"
    grep -q "ignored: this program runs setuid" err.txt || fail "nothing said the environment was ignored: $(cat err.txt)"
    [ "$(grep -c "ignored: this program runs setuid" err.txt)" = 1 ] || fail "said more than once: $(cat err.txt)"
    [ -s sonde-out/pipeline.json ] || fail "the setuid run wrote no reports in its own default place: $(ls -R)"
    # the same program run by root itself (not AT_SECURE) still reads the environment
    SONDE_OUTPUT_DIR="$d/chosen" "$d/pipeline" --steps 2 --blocks 2 --frames 4 --dim 32 --quiet
    [ -s "$d/chosen/pipeline.json" ] || fail "SONDE_OUTPUT_DIR ignored without AT_SECURE"
    ;;
pidreuse)
    # `sonde trigger PID` checks the process, waits up to 2 s for a pending signal to be taken,
    # then sends: a process that took PID meanwhile must not get it (it got it: SIGUSR2 ended it,
    # 4 runs in 5 here). tests/e2e/pidreuse.c arranges the reuse in a PID namespace of its own;
    # with the pidfd sonde trigger holds from before its checks, the newcomer always lives.
    if [ "$(id -u)" != 0 ] || ! command -v unshare > /dev/null; then
        [ "${CI:-}" = true ] && fail "pidreuse needs root and unshare (CI runs as root)"
        echo "SKIP: pidreuse needs root and unshare(1) for a PID namespace of its own"
        exit 77
    fi
    cd "$work"
    for i in 1 2 3; do
        set +e
        unshare --pid --fork --mount-proc "$build/tests/pidreuse" "$sonde" "$build/tests/flight" \
            "$work/pr$i" > pr.out 2> pr.err
        st=$?
        set -e
        [ $st = 0 ] || fail "pid reuse, try $i (exit $st): $(cat pr.out pr.err)"
        echo "try $i: $(cat pr.out)"
    done
    ;;
outdir)
    # In a sticky world-writable directory (/tmp) another user's symlink or directory on the way
    # to the output directory is never used, whatever fs.protected_symlinks says: a root program
    # with the default ./sonde-out would write its reports where the link points
    if [ "$(id -u)" != 0 ]; then
        [ "${CI:-}" = true ] && fail "outdir needs root to plant another user's entries (CI runs as root)"
        echo "SKIP: outdir needs root to plant another user's symlink"
        exit 77
    fi
    cd "$work"
    mkdir shared secret && chmod 1777 shared && chmod 700 secret
    echo precious > secret/pipeline.json
    ln -s ../secret shared/sonde-out && chown -h nobody shared/sonde-out
    pipeline=("$build/examples/pipeline" --steps 2 --blocks 2 --frames 4 --dim 32 --quiet)
    (cd shared && expect 1 "sonde-out is a symlink owned by uid $(id -u nobody) in a sticky world-writable directory" \
        "${pipeline[@]}") || exit 1
    [ "$(ls secret)" = pipeline.json ] && [ "$(cat secret/pipeline.json)" = precious ] ||
        fail "the run wrote through another user's symlink: $(ls secret)"
    # a directory another user made there: refused too (they could swap it for a link)
    mkdir shared/theirs && chown nobody shared/theirs
    (cd shared && expect 1 "theirs is a directory owned by uid" env SONDE_OUTPUT_DIR=theirs/out \
        "${pipeline[@]}") || exit 1
    [ -z "$(ls shared/theirs)" ] || fail "the run wrote into another user's directory: $(ls shared/theirs)"
    # with the flight recorder, refused at the start too (not only when a dump comes); sonde
    # export goes through the same walk
    (cd shared && expect 1 "cannot create output directory ./sonde-out: ./sonde-out is a symlink" \
        env SONDE_FLIGHT_RECORDER_S=5 SONDE_TRIGGER_SECTION_OVER_S="denoise_step=0.000001" \
        "${pipeline[@]}") || exit 1
    "${pipeline[@]}" --name mine > /dev/null
    expect 2 "shared/sonde-out is a symlink owned by uid" "$sonde" export sonde-out/mine.sonde \
        --format json -o shared/sonde-out
    [ "$(ls secret)" = pipeline.json ] || fail "a dump or export wrote through the link: $(ls secret)"
    # the caller's own symlink, and root's, are followed as before
    rm shared/sonde-out && ln -s ../secret shared/sonde-out
    (cd shared && "${pipeline[@]}" --name ours) || fail "the caller's own symlink was refused"
    [ -f secret/ours.json ] || fail "the caller's own symlink was not followed: $(ls secret)"
    ;;
crash)
    cd "$work"
    expect_status() { # want cmd...
        local want=$1; shift
        set +e; "$@" 2>err.txt; local got=$?; set -e
        [ "$got" = "$want" ] || fail "$* exited $got, expected $want ($(cat err.txt))"
    }
    # SIGSEGV with the default action: the process still dies of SIGSEGV (128+11), and all
    # 1,000 sections recorded before it are in the file.
    expect_status 139 "$build/tests/crashy" segv 1000 out
    "$build/tests/readback" out/segv.sonde out/segv.json
    check count out/segv.json work 1000 --unclean
    expect_status 134 "$build/tests/crashy" abort 500 out
    "$build/tests/readback" out/abort.sonde out/abort.json
    check count out/abort.json work 500 --unclean
    # the host's own SIGTERM handler still runs (it exits 3), after sonde flushed
    expect_status 3 "$build/tests/crashy" term 250 out
    grep -q "host handler ran" err.txt || fail "the host's SIGTERM handler did not run"
    "$build/tests/readback" out/term.sonde out/term.json
    check count out/term.json work 250 --unclean
    # the host's handler as it was installed: no SA_RESTART (read fails with EINTR), and
    # SA_RESETHAND (the second SIGTERM is the default action: the process ends, after a flush)
    set +e; timeout -k 5 60 "$build/tests/crashy" eintr 100 out > eintr.txt 2> err.txt; got=$?; set -e
    [ "$got" = 143 ] && [ "$(cat eintr.txt)" = eintr ] ||
        fail "crashy eintr exited $got: $(cat eintr.txt err.txt)"
    # 200 SIGINTs the host's handler survives while 4 threads record: every section is kept
    # (the handler's flush waits for the writer's pass; before, it raced the pass recycling a
    # chunk and lost a chunk of sections in one run in two here: issue 36 #8), 4 runs
    for k in 1 2 3 4; do
        rm -f out/survive.*
        expect_status 0 "$build/tests/crashy" survive 250000 out
        check count out/survive.json survived 1000000
    done
    # exit() without sonde_destroy: the reports are written at exit
    expect_status 0 "$build/tests/crashy" exit 300 out
    check count out/exit.json work 300
    # 8 threads recorded before the crash on another thread: every completed section is there
    expect_status 139 "$build/tests/crashy" threads 20000 out
    "$build/tests/readback" out/threads.sonde out/threads.json
    check count out/threads.json "thread work" 160000 --unclean
    # 8 threads crashing at once: the others wait for the first one's flush (before, the second
    # re-raised at once and killed the flush: 65-149 k of 160 k kept)
    for k in 1 2 3; do
        rm -f out/together.*
        expect_status 139 "$build/tests/crashy" together 20000 out
        "$build/tests/readback" out/together.sonde out/together.json
        check count out/together.json "thread work" 160000 --unclean
    done
    # a torn file (cut mid-record) is read up to the tear, with a warning
    size=$(stat -c %s out/segv.sonde)
    head -c $((size - 7)) out/segv.sonde > out/torn.sonde
    "$build/tests/readback" out/torn.sonde out/torn.json
    python3 - out/torn.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert any("torn" in w for w in r["warnings"]), r["warnings"]
n = [s for s in r["sections"] if s["name"] == "work"][0]["count"]
assert 900 <= n <= 1000, n
print("torn file read up to the tear: %d sections" % n)
PY
    # not a .sonde file: a clear message and exit 2
    echo "hello" > out/bogus.sonde
    set +e; "$build/tests/readback" out/bogus.sonde out/x.json 2>err.txt; rc=$?; set -e
    [ $rc = 2 ] && grep -q "bogus.sonde: not a .sonde file" err.txt || fail "bad magic: rc=$rc $(cat err.txt)"
    ;;
hostile)
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
    ;;
config)
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
    ;;
cli)
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
    # the threat model: `sonde run` runs its argument vector, never a shell, and neither the
    # library nor the CLI imports a network call or a shell-running one
    expect 127 "cannot run touch pwned; true" "$sonde" run -o shellcheck -- "touch pwned; true"
    [ ! -e pwned ] || fail "sonde run went through a shell"
    imports=$( { nm -D --undefined-only "$build/libsonde.so"; nm --undefined-only "$sonde"; } |
        awk '{print $NF}' | sed 's/@.*//' | grep -xE "socket|bind|listen|accept|accept4|connect|system|popen" || true)
    [ -z "$imports" ] || fail "network or shell calls imported: $imports"
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
    # SIGTERM sent to sonde reaches the program, which ends as it would have
    "$sonde" run -o runs --quiet -- sleep 30 & spid=$!
    sleep 0.5
    kill -TERM $spid
    set +e; wait $spid; st=$?; set -e
    [ $st = 143 ] || fail "SIGTERM forwarded: sonde exited $st, expected 143"
    # ... also while sonde is still starting: the child it forwarded the signal to has ended
    # before being told to exec (sonde died of SIGPIPE writing to it, exit 141, at 2-5 ms here)
    for dly in 0 0.001 0.002 0.003 0.005 0.008 0.012 0.02; do
        "$sonde" run -o runs --quiet -- sleep 30 & spid=$!
        sleep $dly
        kill -TERM $spid
        set +e; wait $spid; st=$?; set -e
        [ $st = 143 ] || fail "SIGTERM $dly s after sonde run started: exited $st, expected 143"
    done
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
    ;;
html)
    # The HTML report in a real browser: headless Chromium loads it from disk, the test reads
    # the DOM after load and the console, and keeps a screenshot in the build folder.
    command -v chromium >/dev/null || fail "chromium is not installed (scripts/setup.sh test installs it)"
    cd "$work"
    # with CPU samples, for the flame graph
    SONDE_SAMPLE_HZ=999 "$build/examples/pipeline" --steps 8 --blocks 4 --frames 8 --dim 1024 --quiet
    "$build/tests/escape" "$work/sonde-out"
    browse() { # page.html dom-out; a browser that fails to start is tried again (twice)
        for attempt in 1 2 3; do
            chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
                --disable-background-networking --disable-component-update --disable-sync \
                --user-data-dir="$work/profile$attempt" --enable-logging=stderr --v=0 \
                --virtual-time-budget=2000 --dump-dom "file://$1" > "$2" 2> "$2.log" || true
            grep -q 'data-ready="1"' "$2" && return 0   # parsed to the end, script ran
            echo "chromium attempt $attempt did not finish the page: $(tail -3 "$2.log")"
        done
    }
    browse "$work/sonde-out/pipeline.html" dom.html
    browse "$work/sonde-out/escape.html" dom2.html
    python3 - dom.html dom2.html sonde-out/pipeline.json <<'PY'
import json, re, sys
dom, dom2 = open(sys.argv[1]).read(), open(sys.argv[2]).read()
r = json.load(open(sys.argv[3]))
assert 'data-ready="1"' in dom and 'data-ready="1"' in dom2, "the page's script did not run"
for id_ in ["cards", "run-table", "recommendations", "timeline-view", "time-axis", "timeline-canvas", "stage-chart", "step-breakdown", "flame", "step-chart", "stats-table", "system-table", "config-table"]:
    assert 'id="%s"' % id_ in dom, "missing #" + id_
# the page carries every section, and the CPU samples, in its data block
data = json.loads(re.search(r'<script type="application/json" id="sonde-data">(.*?)</script>', dom, re.S).group(1))
assert data["spans"]["n"] == data["spans"]["total"] == r["summary"]["sections"], (data["spans"]["n"], r["summary"]["sections"])
assert sum(data["spans"]["d"]) > 0 and len(data["spans"]["t"]) == data["spans"]["n"]
assert data["profile"]["samples"] == r["profile"]["samples"] > 0, "no CPU samples for the flame graph"
names = {t["name"] for t in data["threads"]}
assert {"pipeline", "denoise-worker-0", "denoise-worker-1"} <= names, names
# the configuration is folded away, the run's metadata is at the top, microseconds are µs
assert '<details id="configuration"><summary>' in dom
assert dom.index('id="run-table"') < dom.index('id="recommendations"')
assert " us<" not in dom and " us " not in dom.split('id="sonde-data"')[0], "microseconds written us"
table = dom[dom.index('id="stats-table"'):]
table = table[:table.index("</table>")]
rows = re.findall(r"<tr><td>([^<]*)</td>", table)
assert sorted(rows) == sorted(s["name"] for s in r["sections"]), rows
assert len(data["counters"]) >= 1, "no counter chart"
# hostile names are text, never markup: no element was made from them
assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom2
assert "<script>alert(1)" not in dom2 and "<img src=" not in dom2
assert "&lt;img src=x onerror=alert(2)&gt;" in dom2
print("html report: %d sections in the page's data, %d table rows, escaping holds" % (data["spans"]["n"], len(rows)))
PY
    for log in dom.html.log dom2.html.log; do
        if grep -E "Uncaught|CONSOLE.*(Error|error)" "$log"; then fail "script errors in the page ($log)"; fi
    done
    # sonde report writes the same page from the .sonde file
    "$build/tools/sonde/sonde" report sonde-out/pipeline.sonde -o again.html > /dev/null
    cmp -s again.html sonde-out/pipeline.html || fail "sonde report differs from the library's NAME.html"
    # the page as an instrument, driven through puppeteer-core: tests/browser/report.test.js
    [ -f "$src/tests/browser/node_modules/puppeteer-core/package.json" ] ||
        fail "puppeteer-core is not installed (scripts/setup.sh test installs it)"
    node "$src/tests/browser/report.test.js" sonde-out/pipeline.html sonde-out/escape.html "$build/tests" ||
        fail "the HTML report in the browser (screenshots in $build/tests)"
    # a run of 10^6 sections: the page carries every one, in at most 30 MB (make bench times how
    # soon Chromium paints it: bench/bench_html.js)
    "$build/tests/manyspans" big many 1000000 || fail "manyspans exited $?"
    python3 - big/many.html <<'PY' || fail "the HTML report of 10^6 sections"
import json, os, re, sys
size = os.path.getsize(sys.argv[1])
data = json.loads(re.search(r'<script type="application/json" id="sonde-data">(.*?)</script>', open(sys.argv[1]).read(), re.S).group(1))
assert data["spans"]["n"] == data["spans"]["total"] == 1000000, (data["spans"]["n"], data["spans"]["total"])
assert size <= 30 * 1000 * 1000, size
print("html report of 10^6 sections: %.1f MB, every section in it" % (size / 1e6))
PY
    ;;
ranks)
    cd "$work"
    # torchrun-style variables, 3 ranks at once; rank 2's steps are 60% slower (the stages sleep,
    # so three ranks on two cores keep their timings)
    for r in 0 1 2; do
        slow=""; [ $r = 2 ] && slow="step=0.6"
        RANK=$r LOCAL_RANK=$r WORLD_SIZE=3 STAGES_SLOW=$slow "$build/tests/stages" tr job &
    done
    wait
    [ -f tr/job-rank0.json ] && [ -f tr/job-rank2.sonde ] || fail "no -rankN files: $(ls tr)"
    "$sonde" aggregate tr > agg.txt
    grep -E "^step .* rank 2 " agg.txt || fail "rank 2 not named the straggler: $(cat agg.txt)"
    "$sonde" aggregate tr --format json -o agg.json
    python3 - agg.json <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
assert a["ranks"] == 3 and a["world_size"] == 3 and a["notes"] == [], a["notes"]
row = [r for r in a["rows"] if r["name"] == "step"][0]
assert row["slowest_rank"] == 2 and row["over_median"] > 0.3, row
print("aggregate: step slowest on rank 2, %+.0f%% over the median" % (100 * row["over_median"]))
PY
    # issue 18: the ranks' quantile sketches merge: percentiles of every instance of every rank,
    # within the sketch's 1% of the exact ones from the instances themselves
    for r in 0 1 2; do "$sonde" export tr/job-rank$r.sonde --format csv -o csv --quiet; done
    python3 - agg.json csv/job-rank0.instances.csv csv/job-rank1.instances.csv csv/job-rank2.instances.csv <<'PY'
import csv, json, math, sys
a = json.load(open(sys.argv[1]))
for row in a["rows"]:
    d = sorted(float(x["duration_s"]) for f in sys.argv[2:] for x in csv.DictReader(open(f))
               if x["name"] == row["name"])
    got = row["instances"]
    assert got["count"] == len(d) == row["count"] and got["relative_error"] == 0.01, (row, len(d))
    for q in (50, 90, 99):
        want = d[math.floor(q / 100 * (len(d) - 1))]
        assert abs(got["p%d_s" % q] - want) <= 0.01 * want + 1e-12, (row["name"], q, got, want)
print("aggregate: %d names' p50/p90/p99 over 3 ranks within 1%% of the exact ones" % len(a["rows"]))
PY
    # a report whose sketch is damaged is refused, naming the section and what is wrong
    python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
r["sections"][0]["sketch"]["buckets"].append([5000, 1])
json.dump(r, open("badsketch.json", "w"))' tr/job-rank0.json
    expect 2 '.sketch: a bucket is not [index 0..2200, count >= 0]' "$sonde" aggregate badsketch.json
    # missing, duplicate and foreign reports are named, not mixed in silently
    mkdir odd && cp tr/job-rank0.json tr/job-rank2.json odd/ && cp tr/job-rank2.json odd/copy.json
    cp sonde-out/../tr/job-rank1.json odd/ 2>/dev/null || true
    "$build/tests/stages" sonde-out other
    cp sonde-out/other.json odd/
    "$sonde" aggregate odd > odd.txt
    grep -q "duplicate rank 2" odd.txt || fail "duplicate rank not named: $(cat odd.txt)"
    # ... and counted once: a copy of rank 2's report beside the three ranks changes no count
    mkdir dup && cp tr/job-rank0.json tr/job-rank1.json tr/job-rank2.json dup/ &&
        cp tr/job-rank2.json dup/job-rank2-copy.json
    "$sonde" aggregate tr --format json -o dup-want.json && "$sonde" aggregate dup --format json -o dup-got.json ||
        fail "aggregate dup exited $?"
    python3 -c 'import json, sys
want, got = (json.load(open(f)) for f in sys.argv[1:3])
assert {r["name"]: r["count"] for r in got["rows"]} == {r["name"]: r["count"] for r in want["rows"]}, (got["rows"], want["rows"])
assert any("duplicate rank 2" in n and "left out" in n for n in got["notes"]), got["notes"]' dup-want.json dup-got.json ||
        fail "a duplicate rank was counted twice"
    grep -q 'is run "other"' odd.txt || fail "foreign run not named: $(cat odd.txt)"
    "$sonde" aggregate tr --by session --format markdown | grep -q "| generate |" || fail "--by session"
    # the per-rank layout of the profiler decorator and Inferix: OUT/rank_N/ holding each rank's
    # run, Chrome traces (not runs) beside them; aggregate and merge read the rank directories
    mkdir -p perrank/rank_0 perrank/rank_1 perrank/rank_2
    for r in 0 1 2; do cp tr/job-rank$r.sonde perrank/rank_$r/; done
    printf '{"traceEvents": [{"ph": "X", "name": "aten::mm", "ts": 1, "dur": 2}]}\n' \
        > perrank/trace_rank_0.json
    cp perrank/trace_rank_0.json perrank/rank_0.1795638593875419340.pt.trace.json
    "$sonde" aggregate perrank --format json -o perrank.json
    python3 -c 'import json, sys; a = json.load(open(sys.argv[1])); assert a["ranks"] == 3, a' perrank.json ||
        fail "aggregate of rank_N directories: $(cat perrank.json)"
    expect 0 "" "$sonde" merge perrank -o perrank.trace.json.gz
    grep -q "3 rank(s)" out.txt || fail "merge of rank_N directories: $(cat out.txt)"
    mkdir -p norun
    expect 2 "norun: no .sonde file there, nor in its rank_* directories" "$sonde" merge norun -o x.trace.json.gz
    # TensorBoard: the ranks are three workers of one run, "job"
    for r in 0 1 2; do "$sonde" export tr/job-rank$r.sonde --format tensorboard -o tb --quiet; done
    check tensorboard tb job tr/job-rank0.json tr/job-rank1.json tr/job-rank2.json
    "$sonde" merge tr -o merged.trace.json.gz > /dev/null
    python3 - merged.trace.json.gz 3 <<'PY'
import gzip, json, sys
ev = json.load(gzip.open(sys.argv[1], "rt"))
procs = sorted(e["args"]["name"] for e in ev if e.get("name") == "process_name")
assert len(procs) == int(sys.argv[2]) and all(p.startswith("rank ") for p in procs), procs
print("merge:", procs)
PY
    check trace merged.trace.json.gz
    # diff, one run a side: nothing can be tested, the threshold decides. A 2x slowdown of the
    # step stage (20 instances: its mean moves little, and no scheduling delay on a loaded
    # machine brings a 10 ms sleep near 20 ms) is a regression "over threshold, not tested"; two unchanged runs are not, at a threshold above what one 20 ms sleep can
    # overshoot on this loaded machine (seen: +20%). Specificity under load, with statistics
    # across runs: the diffgate test.
    "$build/tests/stages" sonde-out base
    "$build/tests/stages" sonde-out again
    STAGES_SLOW=step=1 "$build/tests/stages" sonde-out slow
    set +e; "$sonde" diff sonde-out/base.sonde sonde-out/again.sonde --threshold 50% --fail-on-regression > same.txt; st=$?; set -e
    [ $st = 0 ] || fail "unchanged runs reported a regression: $(cat same.txt)"
    set +e; "$sonde" diff sonde-out/base.sonde sonde-out/slow.sonde --threshold 10% --fail-on-regression > slow.txt; st=$?; set -e
    [ $st = 1 ] || fail "the slowdown was not a regression (exit $st): $(cat slow.txt)"
    grep -q "^step .*REGRESSION (over threshold, not tested)" slow.txt || fail "step is not the regression: $(cat slow.txt)"
    "$sonde" diff sonde-out/base.sonde sonde-out/slow.sonde --threshold 10% --format json | python3 -c '
import json, sys
d = json.load(sys.stdin)
bad = [s["name"] for s in d["sections"] if s["status"] == "regression"]
step = [s for s in d["sections"] if s["name"] == "step"][0]
assert "step" in bad and not step["tested"], d
assert d["schema"] == "sonde-diff" and "across runs" in d["test"]
print("diff, one run a side: regressions", bad)'
    # 20: a 4x slowdown of a stage run once, one run a side, fails the gate from .sonde and .json
    STAGES_SLOW=load=3 "$build/tests/stages" sonde-out slowload
    for ext in sonde json; do
        set +e; "$sonde" diff sonde-out/base.$ext sonde-out/slowload.$ext --fail-on-regression > gate.txt 2>&1; st=$?; set -e
        [ $st = 1 ] && grep -q "^load .*REGRESSION" gate.txt || fail "4x slower load from .$ext: exit $st $(cat gate.txt)"
    done
    # sonde bench: the repeated runs in one command, each section's mean ± sd over them
    "$sonde" bench --runs 3 --warmup 1 -o bench -- "$build/tests/stages" ignored ignored > bench.txt 2> bench.err
    grep -q "^step .* 3 .*ms ±" bench.txt && grep -q "3 run(s) after 1 warm-up" bench.txt ||
        fail "bench: $(cat bench.txt bench.err)"
    [ "$(ls bench/*.json | wc -l)" = 3 ] && [ -f bench/warmup/stages-warmup1.json ] || fail "bench files: $(ls -R bench)"
    expect 0 "" "$sonde" diff bench -- bench --min-runs 3
    expect 2 "bench/stages-1.sonde exists" "$sonde" bench --runs 3 -o bench -- "$build/tests/stages" x y
    # instance-level tests stay, labelled; --min-runs, --strict and the same-program warning
    "$sonde" diff sonde-out/base.sonde sonde-out/slow.sonde --per-instance | grep -q "assumes independent instances" \
        || fail "--per-instance is not labelled"
    set +e; "$sonde" diff sonde-out/base.sonde sonde-out/slow.sonde --min-runs 3 2> err.txt; st=$?; set -e
    [ $st = 2 ] && grep -q "the base side has 1 run" err.txt || fail "--min-runs: exit $st $(cat err.txt)"
    "$build/examples/pipeline" --steps 2 --blocks 1 --frames 2 --dim 16 --quiet --profile-name pipeline
    set +e; "$sonde" diff sonde-out/base.sonde sonde-out/pipeline.sonde > other.txt 2> err.txt; st=$?; set -e
    [ $st = 0 ] && grep -q "different programs: stages (base) and pipeline (new)" err.txt ||
        fail "no warning for another program: $(cat err.txt)"
    "$sonde" run --quiet --name sleeper -o sonde-out -- sleep 0.1
    "$sonde" diff sonde-out/base.sonde sonde-out/sleeper.sonde 2> err.txt > /dev/null || true
    grep -q "the two sides share 0 of their section names" err.txt || fail "no warning for disjoint sections: $(cat err.txt)"
    set +e; "$sonde" diff sonde-out/base.sonde sonde-out/pipeline.sonde --strict > /dev/null 2> err.txt; st=$?; set -e
    [ $st = 2 ] && grep -q -- "--strict" err.txt || fail "--strict: exit $st $(cat err.txt)"
    # MPI: 4 ranks, rank 2 slower in "compute"; ranks line up on sonde_sync
    if [ -x "$build/examples/ranks" ] && command -v mpirun > /dev/null; then
        # (Open MPI's own allocations are still held at exit: leak detection is for sonde's)
        OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
            ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" mpirun --oversubscribe -np 4 "$build/examples/ranks" "$work/mpi" > mpi.txt 2>&1 \
            || fail "mpirun: $(cat mpi.txt)"
        "$sonde" aggregate mpi > magg.txt
        grep -E "^compute .* rank 2 " magg.txt || fail "MPI: rank 2 not the straggler: $(cat magg.txt)"
        "$sonde" merge mpi -o mpi.trace.json.gz | grep -q "aligned on sonde_sync" || fail "merge did not use sonde_sync"
        python3 - mpi.trace.json.gz <<'PY'
import gzip, json, sys
ev = json.load(gzip.open(sys.argv[1], "rt"))
names = {e["pid"]: e["args"]["name"] for e in ev if e.get("name") == "process_name"}
assert len(names) == 4, names
sync = {}
for e in ev:
    if e.get("ph") == "i" and e.get("name") == "sonde.sync":
        sync.setdefault(e["pid"], []).append(e["ts"])
r0 = [p for p, n in names.items() if n.startswith("rank 0 ")][0]
r3 = [p for p, n in names.items() if n.startswith("rank 3 ")][0]
gaps = [abs(a - b) for a, b in zip(sorted(sync[r0]), sorted(sync[r3]))]
# Microseconds. 4 ranks share 2 cores here, so a rank can leave the barrier a scheduler slice
# (a few ms) after another (2.1 ms seen in CI): the bound is one 20 ms "compute" step, so a merge
# that lined the ranks up on the wrong sync (a step apart) still fails.
assert len(gaps) == 4 and max(gaps) < 20000, gaps
print("MPI merge: 4 ranks, rank 0 and rank 3 steps within %.0f us of each other" % max(gaps))
PY
    else
        echo "MPI part skipped: Open MPI is not installed (scripts/setup.sh test installs it)"
        [ -z "${CI:-}" ] || fail "CI must run the MPI part"
    fi
    # ranks that disagree on the world size: said, with who says what (it said "world size 4"
    # and two phantom missing ranks, no word of the disagreement)
    mkdir -p ws && cd ws
    for r in 0:2 1:4; do
        RANK=${r%:*} WORLD_SIZE=${r#*:} "$build/examples/pipeline" --steps 2 --blocks 2 --frames 4 \
            --dim 32 --quiet --name job
    done
    "$sonde" aggregate sonde-out > agg.txt 2>&1 || fail "aggregate of disagreeing ranks: $(cat agg.txt)"
    grep -q "world size disagrees: sonde-out/job-rank0.json (rank 0) says 2, sonde-out/job-rank1.json (rank 1) says 4; the largest, 4, is used" agg.txt ||
        fail "the world sizes' disagreement was not said: $(cat agg.txt)"
    cd ..
    ;;
fork)
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
    ;;
limits)
    cd "$work"
    # a file-size limit: sonde's writes get EFBIG, the host runs to its own end (exit 7)
    set +e; "$build/tests/limits" fsize out > fsize.txt 2> fsize.err; st=$?; set -e
    [ $st = 7 ] || fail "RLIMIT_FSIZE: the host exited $st (153 would be SIGXFSZ), expected 7: $(cat fsize.err)"
    grep -q "destroy: input/output error" fsize.txt || fail "RLIMIT_FSIZE: no error reported: $(cat fsize.txt)"
    grep -q "writing out/fsize.sonde stopped after [0-9]* bytes: File too large; the [0-9]* events recorded after that were dropped" fsize.err || fail "RLIMIT_FSIZE: no one-line message: $(cat fsize.err)"
    "$build/tests/readback" out/fsize.sonde fsize.json
    # issue 14.16: the file still ends cleanly (room is kept for its end), every event is either
    # in it or counted as dropped (400,000 sections of two events), and nothing says "crashed"
    ended() {
        python3 - "$1" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
n, d = r["summary"]["sections"], r["summary"]["dropped_events"]
lost = r["summary"]["sections_end_lost"]  # a BEGIN in the file whose END was dropped
assert n > 5000 and d > 0, (n, d)
assert 2 * n + lost + d == 800000, (n, lost, d)
assert not any("did not end cleanly" in w for w in r["warnings"]), r["warnings"]
assert any("events recorded after that were dropped" in w for w in r["warnings"]), r["warnings"]
print("%s: %d sections in the file, %d events counted as dropped, the file ends cleanly" % (sys.argv[2], n, d))
PY
    }
    ended fsize.json RLIMIT_FSIZE || fail "RLIMIT_FSIZE: $(cat fsize.err)"
    # disk full: a 256 KiB tmpfs mounted in a private mount namespace (a user namespace when
    # there is one, else as root); sonde's writes get ENOSPC, the host runs to its own end
    mkdir -p disk
    full() {
        unshare "$@" sh -c 'mount -t tmpfs -o size=256k tmpfs "$1" || exit 99
            "$2" full "$1/out"; st=$?; cp "$1/out/full.sonde" "$3/full.sonde"; exit $st' \
            sh "$work/disk" "$build/tests/limits" "$work" > full.txt 2> full.err
    }
    set +e; full -Urm; st=$?; [ $st = 99 ] || [ $st = 1 ] && { full -m; st=$?; }; set -e
    if [ $st = 99 ] || [ $st = 1 ]; then
        echo "SKIP disk full: no tmpfs can be mounted here ($(tail -1 full.err))"
    else
        [ $st = 7 ] || fail "disk full: the host exited $st, expected 7: $(cat full.err)"
        grep -q "destroy: input/output error" full.txt || fail "disk full: no error reported: $(cat full.txt)"
        grep -q "writing .*full.sonde stopped after [0-9]* bytes: No space left on device" full.err || fail "disk full: no one-line message: $(cat full.err)"
        "$build/tests/readback" full.sonde full.json
        ended full.json "disk full" || fail "disk full: $(cat full.err)"
    fi
    # 100 million edges through 64 MiB of buffers: RSS stays under the buffers plus 40 MiB
    "$build/tests/limits" bound out > bound.txt
    python3 - bound.txt <<'PY'
import sys
w = open(sys.argv[1]).read().split()
rss_mib = int(w[1]) / 1024
assert rss_mib < 64 + 40, rss_mib
print("100 M edges: peak RSS %.1f MiB with 64 MiB of buffers" % rss_mib)
PY
    # 4 M instants, 4 M steps and 4 M samples of a counter: the report holds at most
    # report_max_records (1 M) of each, and counts every one (90 MiB; 461 MiB holding every one)
    "$build/tests/limits" records out
    python3 - "$sonde" out/records.sonde <<'PY'
import resource, subprocess, sys
out = subprocess.run([sys.argv[1], "summary", sys.argv[2]], check=True, capture_output=True,
                     text=True).stdout
rss_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
assert "4000000 steps" in out and "(4000000 samples)" in out, out
assert rss_mib < 128, rss_mib
print("4 M instants, steps and counter samples: sonde summary peaks at %.1f MiB" % rss_mib)
PY
    # 4 M sections that each carry metadata, held to 300,000: folded like the others, their
    # name's metadata kept (19 MiB; 416 MiB when every one was held for its metadata)
    "$build/tests/limits" tagged out
    python3 - "$sonde" out/tagged.sonde <<'PY'
import json, resource, subprocess, sys
subprocess.run([sys.argv[1], "export", sys.argv[2], "--set", "report_max_sections=300000",
                "--format", "json", "-o", "tagged", "--quiet"], check=True)
rss_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
(s,) = json.load(open("tagged/tagged.json"))["sections"]
assert s["count"] == 4000000, s["count"]
assert s["metadata"] == {"batch": [str(i) for i in range(16)] + ["..."]}, s["metadata"]
assert rss_mib < 64, rss_mib
print("4 M sections with metadata: sonde export peaks at %.1f MiB" % rss_mib)
PY
    # issue 35 #8: writing every report grows linearly with the names and with the instances
    # (JSON's per-name metadata once scanned every held section for each name): CPU time of
    # `sonde export --format all` at 4x the names and at 4x the instances, against the base,
    # at most 6x (quadratic would be 16x; 3.7-4.1x here)
    for a in "500 200" "2000 200" "500 800"; do "$build/tests/limits" wide out $a; done
    python3 - "$sonde" <<'PY'
import resource, subprocess, sys
def cpu(f):  # the least of two runs: CPU time, not wall time, so load does not count
    best = None
    for _ in range(2):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.argv[1], "export", "out/%s.sonde" % f, "--format", "all", "-o", "wide",
                        "--quiet"], check=True)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
        best = t if best is None else min(best, t)
    return best
base, names, inst = cpu("wide-500-200"), cpu("wide-2000-200"), cpu("wide-500-800")
assert names < 6 * base and inst < 6 * base, (base, names, inst)
print("every report: %.2f s CPU for 500 names x 200; 4x the names %.2f s (x%.1f), 4x the "
      "instances %.2f s (x%.1f)" % (base, names, names / base, inst, inst / base))
PY
    # 10,000 short-lived threads: every section kept, memory flat
    "$build/tests/limits" churn out > churn.txt
    python3 - churn.txt <<'PY'
import sys
w = open(sys.argv[1]).read().split()
early, late, sections, dropped = int(w[1]), int(w[3]), int(w[5]), int(w[7])
assert sections == 30000 and dropped == 0, (sections, dropped)
assert late - early < 8 * 1024, (early, late)   # KiB
print("10,000 threads: %d sections, RSS %d -> %d KiB" % (sections, early, late))
PY
    # 14.18 SIGKILL: a section completed more than flush_interval_s before the kill is on disk
    # (the writer's pass and scheduling on 2 loaded cores: 0.5 s of margin), at two intervals
    for iv in 0.25 1; do
        rm -rf out/kill*.sonde
        SONDE_FLUSH_INTERVAL_S=$iv "$build/tests/limits" kill out > kill.txt &
        kpid=$!
        sleep 3
        killed=$(date +%s%N)
        kill -KILL $kpid
        wait $kpid 2>/dev/null || true
        "$build/tests/readback" out/kill.sonde kill.json
        python3 - kill.txt kill.json $killed $iv <<'PY'
import json, sys
killed, iv = int(sys.argv[3]), float(sys.argv[4])
lines = [tuple(map(int, l.split())) for l in open(sys.argv[1]) if len(l.split()) == 2]
r = json.load(open(sys.argv[2]))
n = r["summary"]["sections"]
bound = iv + 0.5
before = [done for t, done in lines if t <= killed - bound * 1e9]
assert before and n >= before[-1], (iv, n, before[-1:])
# the window actually lost: from the last progress line the file covers to the kill
covered = [t for t, done in lines if done <= n]
print("SIGKILL at flush_interval_s %.2f: %d sections on disk, all %d done %.2f s before the kill "
      "are; the file covers the program up to %.2f s before the kill"
      % (iv, n, before[-1], bound, (killed - covered[-1]) / 1e9 if covered else float("nan")))
PY
    done
    ;;
diffgate)
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
    ;;
cxx)
    "$build/tests/cxx_scope" "$work"
    check count "$work/cxx.json" "cxx outer" 5
    check count "$work/cxx.json" "inner" 5
    ;;
compiled_out)
    out=$("$build/tests/compiled_out")
    [ "$out" = "45" ] || fail "compiled-out program printed $out"
    if nm "$build/tests/compiled_out" | grep -q "sonde"; then
        fail "a -DSONDE_DISABLE build still references sonde: $(nm "$build/tests/compiled_out" | grep sonde)"
    fi
    echo "compiled out: no sonde symbol in the binary"
    ;;
stacks)
    cd "$work"
    # issue 19: `sonde run` samples the program's CPU time with call stacks. hotspots spends 70%
    # of each thread's work in hot70, 20% in warm20, 10% in cool10 (CPU samples: what the load
    # on the machine does to its wall time does not move them)
    hs="$build/tests/hotspots"
    for th in 1 4; do
        "$sonde" run --quiet -o st --name hs$th -- "$hs" $th 40 || fail "sonde run hotspots $th exited $?"
        python3 - st/hs$th.json st/hs$th.folded $th <<'PY' || fail "hotspots, $th thread(s)"
import json, sys
r = json.load(open(sys.argv[1]))
p = r["profile"]
f = {x["name"]: x for x in p["functions"]}
n = p["samples"]
assert n >= 200 and p["hz"] == 999, p
# the program's rusage is in the run's metadata, and the samples agree with its CPU time
meta = r["run"]["metadata"]
cpu = float(meta["cpu_user_s"]) + float(meta["cpu_system_s"])
assert float(meta["peak_rss_mib"]) > 0 and int(meta["page_faults_minor"]) > 0, meta
assert abs(n / 999.0 - cpu) <= 0.15 * cpu, (n, cpu)
got = {k: 100.0 * f[k]["self"] / n for k in ("hot70", "warm20", "cool10")}
for k, want in (("hot70", 70), ("warm20", 20), ("cool10", 10)):
    assert abs(got[k] - want) <= 5, (k, got)
assert f["work"]["total"] >= 0.95 * n and f["work"]["self"] <= 0.02 * n, f["work"]
lines = [l.rsplit(" ", 1) for l in open(sys.argv[2]).read().splitlines()]
assert sum(int(c) for _, c in lines) == n, (sum(int(c) for _, c in lines), n)
assert all(s.startswith("hotspots;") for s, _ in lines), lines[:3]
hot = [(s, int(c)) for s, c in lines if s.endswith(";hot70")]
# a sample on hot70's first or last instruction (its frame not yet made, or already undone)
# finds work's caller where work should be, as any frame-pointer unwinder does (docs/stacks.md):
# at most 1% of hot70's samples, never another shape
whole = sum(c for s, c in hot if s.endswith(";work;hot70"))
edge = sum(c for s, c in hot if not s.endswith(";work;hot70"))
assert hot and edge <= 0.01 * (whole + edge), hot[:5]
assert all(s.endswith(";work;hot70") or s.split(";")[-2] in ("start_thread", "main", "__libc_start_call_main")
           for s, _ in hot), hot[:5]
print("hotspots, %s thread(s): %d samples, self %s" % (sys.argv[3], n, {k: round(v, 1) for k, v in got.items()}))
PY
        grep -q "^CPU samples: " st/hs$th.txt && grep -q "^  hot70 " st/hs$th.txt || fail "text report: $(cat st/hs$th.txt)"
        # pprof's profile.proto: decoded by protoc, and by our own reader to the same shares
        gzip -dc st/hs$th.pb.gz > st/hs$th.pb && protoc --decode_raw < st/hs$th.pb > /dev/null ||
            fail "protoc cannot decode hs$th.pb.gz"
        python3 - st/hs$th.pb st/hs$th.json "$src/tests/e2e" <<'PY' || fail "hs$th.pb.gz"
import json, sys
sys.path.insert(0, sys.argv[3])
import pprof
p = pprof.read(sys.argv[1])
# with the off-CPU periods' two types after the CPU's where they were followed (as root)
assert p["types"][:2] == [("samples", "count"), ("cpu", "nanoseconds")] and p["types"][2:] in (
    [], [("off_cpu_periods", "count"), ("off_cpu", "nanoseconds")]), p["types"]
total, self_ = 0, {}
for sa in p["samples"]:
    vals = sa["values"]
    if vals[2:] and vals[3]:  # an off-CPU stack's sample: no CPU sample in it
        assert vals[:2] == [0, 0] and vals[2] > 0, vals
        continue
    assert vals[1] == vals[0] * p["period"] and not any(vals[2:]), vals  # count times the period
    total += vals[0]
    name = pprof.leaf(p, sa)[0]
    self_[name] = self_.get(name, 0) + vals[0]
want = json.load(open(sys.argv[2]))["profile"]
assert total == want["samples"], (total, want["samples"])
# by name, as the leaf names above are: two functions of one name in two objects (libc's and
# ld.so's strcmp, both sampled once in an ASan run of 9a44b71) are one name here
by_name = {}
for f in want["functions"]:
    by_name[f["name"]] = by_name.get(f["name"], 0) + f["self"]
for name, n in by_name.items():
    assert self_.get(name, 0) == n, (name, n, self_.get(name))
print("pprof: %d samples, hot70 %.1f%% self" % (total, 100.0 * self_["hot70"] / total))
PY
    done
    # the same top functions by self time as perf record -g + perf report --no-children
    # (--all-user: user space alone, as sonde samples; a loaded machine otherwise puts the
    # kernel's interrupt exits among perf's top functions)
    if command -v perf > /dev/null && perf record -q --all-user -F 999 -g -o perf.data -- "$hs" 1 20 > /dev/null 2> perf.err; then
        perf report -i perf.data --no-children --stdio 2> /dev/null |
            awk '/^ +[0-9.]+%/ && n < 3 {print $NF; n++}' | sort > perf.top
        python3 -c 'import json, sys
f = json.load(open(sys.argv[1]))["profile"]["functions"]
print("\n".join(sorted(x["name"] for x in f[:3])))' st/hs1.json > sonde.top
        cmp -s perf.top sonde.top || fail "top functions: perf says $(tr '\n' ' ' < perf.top), sonde $(tr '\n' ' ' < sonde.top)"
        echo "top 3 functions by self samples, as perf report has them: $(tr '\n' ' ' < sonde.top)"
        # and on programs nobody here wrote: xz compressing 8 MB, python3 running a loop, gcc -O2
        # on a large C file (its time is in cc1, which gcc starts). perf
        # records the same run sonde samples (python's time moves between its functions from
        # one run to the next by several points). Functions of stripped objects are addresses in
        # both: "liblzma.so.5+0x1692b" here, "0x000000000001692b" in perf. Every function in
        # either top 5 must have the same self share within 4 points (two samplings of about
        # 2,000 samples differ by 1.1 points as one standard deviation), or within 4.5 such
        # deviations when fewer samples make that wider (a loaded machine: about 700 each)
        head -c 6000000 /dev/urandom | base64 > xzin.txt
        # a large C file for gcc -O2: 1,500 functions of loops, branches and arithmetic
        python3 -c 'import sys
for i in range(1500):
    print("int f%d(int *a, int n) { int s = %d; for (int i = 0; i < n; i++) { if (a[i] %% %d) s += a[i] * %d; else s ^= a[i] >> (i & 7); } return s; }" % (i, i, i % 13 + 2, i % 7 + 1))
print("int main(void) { return 0; }")' > big.c
        for prog in xz py gcc; do
            case $prog in
            xz) command -v xz > /dev/null || { echo "xz comparison skipped: no xz"; continue; }
                set -- xz -6 -T1 -k -c xzin.txt ;;
            py) set -- python3 -c 's = 0
for i in range(8000000): s += i * i % 7' ;;
            gcc) set -- gcc -O2 -c big.c -o big.o ;;
            esac
            # (perf names the function that holds an inlined one: so does sonde without inlines;
            # 997 Hz, not sonde's 999, so that perf's timer does not fall into step with the
            # counter whose signal samples a Python program in its threads)
            SONDE_SAMPLE_INLINE=0 perf record -q --all-user -F 997 -g -o $prog.data -- "$sonde" run --quiet \
                -o cmp --name $prog -- "$@" > /dev/null 2>&1
            # the process with the most samples (python3's shim runs bash and pyenv first)
            comm=$(awk '{n = split($0, w, " "); c[substr($0, 1, index($0, ";") - 1)] += w[n]}
                END {for (k in c) if (c[k] > best) {best = c[k]; top = k}; print top}' \
                cmp/$prog.folded)
            # the samples of every process but sonde's own (sonde samples only its child's),
            # then each function's count in the process
            perf report -i $prog.data --sort comm -n --no-children -g none --stdio 2> /dev/null |
                awk '/^ +[0-9.]+%/ && $3 !~ /^sonde/ {n += $2} END {print n, "samples"}' > $prog.perf
            # less the samples perf took in sonde's own handler (the unwinder in libgcc_s, the
            # loader's _dl_find_object it asks, libsonde), which sonde's samples never hold (at
            # 999 Hz each, perf found the handler in 15% of its samples once in a loaded run)
            perf report -i $prog.data --comm "$comm" -n --no-children -g none --stdio 2> /dev/null |
                awk '/^ +[0-9.]+%/ && ($3 ~ /libgcc_s|libsonde/ || $NF == "_dl_find_object") {
                        h += $2; next }
                    /^ +[0-9.]+%/ && n < 40 {print $2, $NF; n++}
                    END {print h + 0, "handler"}' >> $prog.perf
            python3 - cmp/$prog.json $prog.perf $prog "$comm" <<'PY' || fail "$prog: top functions differ from perf's"
import json, re, sys
def norm(n):
    m = re.match(r"^(?:.*\+)?0x0*([0-9a-f]+)$", n)
    return "0x" + m.group(1) if m else n
p = json.load(open(sys.argv[1]))["profile"]
ours = {norm(f["name"]): 100.0 * f["self"] / p["samples"] for f in p["functions"]}
top = [norm(f["name"]) for f in p["functions"][:5]]
theirs = {}
order = []
n_perf = 0
for line in open(sys.argv[2]):
    count, name = line.split()
    if name == "samples":
        n_perf = int(count)
        continue
    if name == "handler":
        n_perf -= int(count)
        continue
    theirs[norm(name)] = int(count)
    order.append(norm(name))
assert len(order) >= 5 and n_perf > 0, (n_perf, order)
theirs = {k: 100.0 * v / n_perf for k, v in theirs.items()}
def within(name):
    # two samplings of one run: a share's difference has a standard deviation of
    # sqrt(q (1 - q) (1/n + 1/n_perf)); 4.5 of those (a false alarm once in 10^5), 4 points at least
    a, b = ours.get(name, 0), theirs.get(name, 0)
    q = (a + b) / 200.0
    tol = max(4.0, 450.0 * (q * (1 - q) * (1.0 / p["samples"] + 1.0 / n_perf)) ** 0.5)
    return abs(a - b) <= tol
bad = [(n, ours.get(n), theirs.get(n)) for n in set(top) | set(order[:5]) if not within(n)]
assert not bad, ("process %s, %d samples here, %d in perf" % (sys.argv[4], p["samples"], n_perf), bad,
                 sorted(ours.items(), key=lambda x: -x[1])[:8], order[:8])
print("%s: top 5 by self samples %s, each within 4 points (or 4.5 standard deviations) of perf's share of the same run" % (sys.argv[3], " ".join(top)))
PY
        done
    else
        echo "perf comparison skipped: perf record cannot run here ($(head -1 perf.err 2> /dev/null))"
    fi
    # code no file holds (issue 39): a loop in anonymous memory named in /tmp/perf-PID.map (as
    # a JIT names its code) and clock_gettime in the vDSO; no sample stays a bare 0x address
    if [ "$("$build/tests/jitvdso" jv)" != skip ]; then
        python3 - jv/jitvdso.json jv/jitvdso.folded <<'PY' || fail "jitvdso: JIT and vDSO frames unnamed"
import json, sys
p = json.load(open(sys.argv[1]))["profile"]
sec = {s["name"]: s for s in p["sections"]}
jit, vdso = sec["jit"], sec["vdso"]
top = jit["functions"][0]
assert top["name"] == "jit_spin_loop" and top["self"] >= 0.9 * jit["samples"], jit["functions"][:3]
obj = {f["name"]: f["object"] for f in p["functions"]}
assert obj["jit_spin_loop"].startswith("perf-") and obj["jit_spin_loop"].endswith(".map"), obj
in_vdso = sum(f["self"] for f in vdso["functions"] if obj.get(f["name"]) == "[vdso]")
assert in_vdso >= 0.7 * vdso["samples"], vdso["functions"][:4]
assert "__vdso_clock_gettime" in obj or "clock_gettime" in obj, sorted(obj)[:20]
leaves = [l.rsplit(" ", 1)[0].split(";")[-1] for l in open(sys.argv[2])]
assert not [l for l in leaves if l.startswith("0x7f")], leaves
print("JIT and vDSO: %d of %d jit samples in jit_spin_loop (perf map), %d of %d in the vDSO"
      % (top["self"], jit["samples"], in_vdso, vdso["samples"]))
PY
    fi
    # libsonde's own sampler (sample_hz, with_stack): every thread's samples, each in the
    # innermost section open on its thread: "step" holds "decode" (hot70) and "prefill" (warm20),
    # cool10 runs outside every section
    # (4early: the threads exist before sonde_create, so they are found, not inherited;
    # 1timer, 4timer: perf_event_open refused, as perf_event_paranoid 3 would, so timers on the
    # threads' CPU clocks take the samples)
    # A timer's signal comes at the kernel's tick (250 Hz on Debian's kernels), standing for the
    # 1/hz periods since the last (its weight): 1,500 samples at 999 Hz are about 375 draws, so
    # the timers run twice the rounds, and each share is held to 5 points or 4 standard
    # deviations of its draws (profile.draws, which the Chrome trace's distinct sample times
    # confirm), whichever is wider (a CI run under load had hot70 at 64.6% at 30 rounds: 2.3
    # standard deviations of some 375 draws of 1,500 samples)
    for th in 1 4 4early 1timer 4timer; do
        case $th in 1*) set -- SONDE_WITH_STACK=1 ;; *) set -- SONDE_SAMPLE_HZ=499 ;; esac
        case $th in *early) mode=early ;; *) mode= ;; esac
        rounds=30
        case $th in *timer) set -- "$@" LD_PRELOAD="$build/tests/libnoperf.so"; rounds=60 ;; esac
        env "$@" "$build/tests/hotsections" lib lib$th ${th%%[a-z]*} $rounds $mode ||
            fail "hotsections $th exited $?"
        # formats json,txt: sampling writes NAME.folded and NAME.pb.gz too, as sonde run does
        # (the text report points at NAME.folded), and sonde export of the file again
        [ -s lib/lib$th.folded ] && gzip -t lib/lib$th.pb.gz ||
            fail "hotsections $th: no lib$th.folded or lib$th.pb.gz beside the reports"
        rm -rf again2
        "$sonde" export lib/lib$th.sonde -o again2 --quiet && cmp -s lib/lib$th.folded again2/lib$th.folded ||
            fail "sonde export lib$th.sonde (its own formats) wrote another lib$th.folded"
        "$sonde" export lib/lib$th.sonde --format json,folded,trace,html -o again --quiet ||
            fail "sonde export lib$th.sonde"
        python3 - lib/lib$th.json again/lib$th.json lib/lib$th.folded $th \
            again/lib$th.trace.json.gz <<'PY' || fail "hotsections, $th thread(s)"
import gzip, json, math, sys
r = json.load(open(sys.argv[1]))
p = r["profile"]
n = p["samples"]
assert p["hz"] == (999 if sys.argv[4].startswith("1") else 499) and n >= 300, (p["hz"], n)
assert p["method"] == ("timer_signal" if sys.argv[4].endswith("timer") else "perf_event"), p["method"]
ts = json.load(gzip.open(sys.argv[5], "rt"))["samples"]
assert len(ts) == n and all(s["weight"] == 1 for s in ts), (len(ts), n)
draws = p["draws"]
assert draws == len({(s["tid"], s["ts"]) for s in ts}), (draws, len(ts))
# perf_event: a sample a draw; the timers: 999 or 499 Hz on a tick of 100 to 1000 Hz (at 100,
# about a tenth)
assert n / 20 <= draws <= n and (draws == n or sys.argv[4].endswith("timer")), (draws, n)
said = "the shares below have the precision of that many draws" in open(
    sys.argv[1][:-len(".json")] + ".txt").read()
assert said == (draws < n), ("the text report on the draws", said, draws, n)
said = "%d samples at %d Hz from %d signals at the kernel's tick" % (n, p["hz"], draws) in open(
    sys.argv[2][:-len(".json")] + ".html").read()
assert said == (draws < n), ("the HTML report on the draws", said, draws, n)
def near(got, want):
    return abs(got - want) <= max(5, 400 * math.sqrt(want / 100 * (1 - want / 100) / draws))
f = {x["name"]: x for x in p["functions"]}
got = {k: 100.0 * f[k]["self"] / n for k in ("hot70", "warm20", "cool10")}
for k, want in (("hot70", 70), ("warm20", 20), ("cool10", 10)):
    assert near(got[k], want), (k, got, draws)
sec = {s["name"]: s for s in p["sections"]}
share = {k: 100.0 * s["samples"] / n for k, s in sec.items()}
assert near(share["decode"], 70) and near(share["prefill"], 20), (share, draws)
assert share.get("step", 0) <= 1, share  # its time is its children's: they are innermost
assert near(100.0 * p["in_sections"] / n, 90), (p["in_sections"], n, draws)
for name, fn in (("decode", "hot70"), ("prefill", "warm20")):
    top = sec[name]["functions"][0]
    assert top["name"] == fn and top["self"] >= 0.97 * sec[name]["samples"], (name, top)
# the samples are in the .sonde: sonde export makes the same profile again
again = json.load(open(sys.argv[2]))["profile"]
assert again["sections"] == p["sections"] and again["functions"] == p["functions"], "export differs"
assert again["lines"] == p["lines"] and p["lines"][0]["function"] == "hot70", p["lines"][:3]
lines = [l.rsplit(" ", 1) for l in open(sys.argv[3]).read().splitlines()]
assert sum(int(c) for _, c in lines) == n
assert r["warnings"] == [], r["warnings"]
print("libsonde sampler, %s thread(s): %d samples (%d draws), self %s, by section %s" % (
      sys.argv[4], n, draws, {k: round(v, 1) for k, v in got.items()},
      {k: round(v, 1) for k, v in share.items()}))
PY
        grep -q "^  decode  .* in hot70 " lib/lib$th.txt || fail "text report: $(cat lib/lib$th.txt)"
    done
    # every thread was sampled: four threads of the same work at half the rate give twice the
    # samples of one (CPU time, whatever the load), where one thread alone would give half
    # (the timers too: their samples stand for the CPU time they cover, past the kernel's tick).
    # 1.3-2.7: the same work took 25% more CPU time in one run than in another of the same
    # session (the machine's speed varies; CI of 9f2d2b8: 1408 samples alone, 2212 on four),
    # and a thread left out would give 0.5
    python3 -c 'import json, sys
for runs in (("1", "4", "4early"), ("1timer", "4timer")):
    n = [json.load(open("lib/lib%s.json" % t))["profile"]["samples"] for t in runs]
    assert all(1.3 <= x / n[0] <= 2.7 for x in n[1:]), (runs, n)
    print("samples of %s threads: %s" % (", ".join(runs), n))' || fail "not every thread was sampled"
    # two runs as one (a run joined by a program's file, as sonde run and sonde export join
    # them): the CPU profiles are built again over the merged sections, each section's samples
    # the sum of both runs'; also with only the longest sections held in the run's file
    # (report_max_sections 2: its samples placed as its sections were built, the joined file's
    # found in its sections)
    mkdir -p joined && cp lib/lib4.sonde joined/lib4.sonde &&
        cp lib/lib4early.sonde joined/lib4.pid1.sonde
    for held in 0 2; do
        "$sonde" export joined/lib4.sonde --format json -o joined/held$held --quiet \
            --set report_max_sections=$held || fail "export of joined runs, report_max_sections $held"
    done
    python3 - lib/lib4.json lib/lib4early.json joined/held0/lib4.json joined/held2/lib4.json <<'PY' ||
import json, sys
a, b = (json.load(open(f))["profile"] for f in sys.argv[1:3])
want = {}
for p in (a, b):
    for s in p["sections"]:
        want[s["name"]] = want.get(s["name"], 0) + s["samples"]
for f in sys.argv[3:]:
    p = json.load(open(f))["profile"]
    got = {s["name"]: s["samples"] for s in p["sections"]}
    assert p["samples"] == a["samples"] + b["samples"] and got == want, (f, got, want)
print("two runs joined: %d samples, by section %s, with every section held and with 2" % (
      a["samples"] + b["samples"], want))
PY
        fail "the CPU profile of two runs joined"
    # samples whose stacks are not in the file (a program that ended before writing them) are
    # left out with a warning that counts them, not silently
    python3 "$src/tests/e2e/sonde_edit.py" drop lib/lib1.sonde lib/nostacks.sonde 13
    "$sonde" export lib/nostacks.sonde --format json -o nostacks --quiet || fail "sonde export nostacks.sonde"
    python3 - lib/lib1.json nostacks <<'PY' || fail "samples without their stacks"
import glob, json, sys
n = json.load(open(sys.argv[1]))["profile"]["samples"]
r = json.load(open(glob.glob(sys.argv[2] + "/*.json")[0]))
assert "profile" not in r or r["profile"]["samples"] == 0, r["profile"]
w = r["warnings"]
assert any(x.startswith("%d CPU sample(s) are left out: their stacks are not in the file" % n) for x in w), (n, w)
print("samples without stacks: the warning counts %d" % n)
PY
    # both refused (perf_event_open, timer_create): the run goes on, its report says why
    NOPERF_TIMERS=1 LD_PRELOAD="$build/tests/libnoperf.so" SONDE_SAMPLE_HZ=999 "$build/tests/hotsections" lib refused 1 2 ||
        fail "hotsections without perf_event_open exited $?"
    python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
assert "profile" not in r and r["sections"], r.keys()
w = [x for x in r["warnings"] if "no CPU samples with call stacks: perf_event_open: Permission denied" in x]
assert w and "perf_event_paranoid" in w[0] and "timer_create: Operation not permitted" in w[0], r["warnings"]' lib/refused.json || fail "refused: $(grep -o '"warnings".*' lib/refused.json)"
    # the samples in the Chrome trace (its object form: stackFrames and samples), on the time
    # axis of the sections: a sample inside a "decode" span of its thread is in hot70
    "$sonde" export lib/lib1.sonde --format trace -o tr --quiet || fail "sonde export --format trace"
    python3 - tr/lib1.trace.json.gz lib/lib1.json <<'PY' || fail "CPU samples in the Chrome trace"
import bisect, gzip, json, sys
t = json.load(gzip.open(sys.argv[1], "rt"))
p = json.load(open(sys.argv[2]))["profile"]
sf, samples = t["stackFrames"], t["samples"]
assert sum(s["weight"] for s in samples) == p["samples"], (len(samples), p["samples"])
def leaf(s):
    return sf[s["sf"]]["name"]
def chain(i):
    out = []
    while i:
        out.append(sf[i]["name"])
        i = sf[i].get("parent")
    return out[::-1]
assert all(chain(s["sf"])[-2:] == ["work", leaf(s)] for s in samples if leaf(s) in ("hot70", "warm20")), "stacks"
hot = sum(leaf(s) == "hot70" for s in samples) / len(samples)
assert abs(hot - 0.70) <= 0.05, hot
spans = sorted((e["ts"], e["ts"] + e["dur"], e["tid"]) for e in t["traceEvents"] if e.get("ph") == "X" and e["name"] == "decode")
starts = [s[0] for s in spans]
inside = [leaf(s) for s in samples
          if (lambda k: k >= 0 and spans[k][0] <= s["ts"] < spans[k][1] and spans[k][2] == s["tid"])(bisect.bisect_right(starts, s["ts"]) - 1)]
assert len(inside) >= 0.6 * len(samples) and inside.count("hot70") >= 0.97 * len(inside), (len(inside), len(samples), inside.count("hot70"))
print("Chrome trace: %d samples with their stacks; %d inside decode spans, %.1f%% of them in hot70" % (len(samples), len(inside), 100.0 * inside.count("hot70") / len(inside)))
PY
    # code without frame pointers (tests/e2e/nofp.c, -O2 -fomit-frame-pointer): the kernel's
    # frame-pointer walk loses burn's callers; with sample_cfi the call frame information finds
    # them. 300 rounds (about 0.8 s of burn): under ASan the program's start-up alone takes
    # about 30 ms of CPU outside burn, 22% of the samples of 40 rounds (a fresh-clone run of 97b48d0)
    SONDE_SAMPLE_CFI=1 "$sonde" run --quiet -o st --name nofp -- "$build/tests/nofp" 300
    "$sonde" run --quiet -o st --name nofp_fp -- "$build/tests/nofp" 300
    python3 - st/nofp.json st/nofp.folded st/nofp_fp.folded <<'PY' || fail "unwinding by the call frame information"
import json, sys
# without sample_cfi, the frame pointers alone: burn's callers are lost
fp = [l.rsplit(" ", 1)[0] for l in open(sys.argv[3])]
assert not any(s.endswith(";level2;burn") for s in fp), fp[:5]
p = json.load(open(sys.argv[1]))["profile"]
burn = [l.rsplit(" ", 1) for l in open(sys.argv[2]) if l.rsplit(" ", 1)[0].endswith(";burn")]
n = sum(int(c) for _, c in burn)
whole = sum(int(c) for s, c in burn if s.endswith(";main;level1;level2;burn"))
assert n >= 0.9 * p["samples"] and whole >= 0.95 * n, (n, whole, p["samples"], burn[:3])
assert p["method"] == "perf_event" and p["cfi_unwound"] >= whole, p["cfi_unwound"]
print("call frame information: %d of %d samples in burn under main;level1;level2" % (whole, n))
PY
    # sonde run's trace: the samples of each process of the tree under its own process, named by
    # its command
    "$sonde" run --quiet -o st --name tree -- sh -c "'$build/tests/nofp' 20; '$build/tests/inlined' 3"
    python3 - st/tree.trace.json.gz <<'PY' || fail "the trace's processes of samples"
import gzip, json, sys
t = json.load(gzip.open(sys.argv[1], "rt"))
names = {e["pid"]: e["args"]["name"] for e in t["traceEvents"] if e.get("name") == "process_name"}
pids = {s["pid"] for s in t["samples"]}
assert pids <= set(names) and {"nofp", "inlined"} <= {names[p] for p in pids}, (names, pids)
print("trace: samples under %s" % sorted(names[p] for p in pids))
PY
    # from the DWARF: a function inlined into another is a frame of its own, under its caller,
    # and each function says where it is defined (tests/e2e/inlined.c, built -O2 -g). 40 rounds:
    # under ASan the start-up's samples were 19% of 10 rounds' (inner_hot 80.9%, a fresh-clone
    # run of b069d11)
    "$sonde" run --quiet -o st --name inl -- "$build/tests/inlined" 40
    SONDE_SAMPLE_INLINE=0 "$sonde" run --quiet -o st --name noinl -- "$build/tests/inlined" 40
    python3 - st/inl.json st/inl.folded "$src/tests/e2e/inlined.c" lib/lib1.json "$src/tests/e2e/hotwork.h" st/noinl.json st/inl.pb.gz "$src/tests/e2e" <<'PY' || fail "inlined frames and where functions are defined"
import json, sys
p = json.load(open(sys.argv[1]))["profile"]
f = {x["name"]: x for x in p["functions"]}
src = open(sys.argv[3]).read().splitlines()
def line_of(lines, text):
    return next(i + 1 for i, l in enumerate(lines) if text in l)
hot = 100.0 * f["inner_hot"]["self"] / p["samples"]
assert abs(hot - 90) <= 7, ("inner_hot's self share", hot)
for name, decl in (("inner_hot", "double inner_hot(long n)"), ("outer_work", "double outer_work(long n)")):
    assert f[name]["file"].endswith("tests/e2e/inlined.c") and f[name]["line"] == line_of(src, decl), f[name]
for l in open(sys.argv[2]):
    stack, count = l.rsplit(" ", 1)
    if stack.endswith(";inner_hot"):
        assert stack.endswith(";outer_work;inner_hot"), stack
# the lines the samples were running: inner_hot's loop (its for and its body) holds 90%
loop = line_of(src, "double inner_hot(long n)") + 3
in_loop = sum(l["self"] for l in p["lines"] if l["function"] == "inner_hot" and l["line"] in (loop, loop + 1))
assert in_loop >= 0.8 * p["samples"] and all(l["file"].endswith("inlined.c") for l in p["lines"][:3]), p["lines"][:4]
# pprof's profile has the same lines (pprof -lines): the innermost location of each sample
sys.path.insert(0, sys.argv[8])
import pprof
pp = pprof.read(sys.argv[7])
by_line = {}
for sa in pp["samples"]:
    by_line[pprof.leaf(pp, sa)] = by_line.get(pprof.leaf(pp, sa), 0) + sa["values"][0]
for l in p["lines"]:
    assert by_line.get((l["function"], l["line"]), 0) == l["self"], (l, by_line)
assert sum(by_line.values()) == p["samples"], (sum(by_line.values()), p["samples"])
fns = {x["name"]: x for x in pp["functions"].values()}
assert fns["inner_hot"]["filename"].endswith("tests/e2e/inlined.c") and fns["inner_hot"]["start_line"] == f["inner_hot"]["line"], fns["inner_hot"]
h = {x["name"]: x for x in json.load(open(sys.argv[4]))["profile"]["functions"]}
work = open(sys.argv[5]).read().splitlines()
for name in ("hot70", "warm20", "cool10"):
    assert h[name]["file"].endswith("tests/e2e/hotwork.h") and h[name]["line"] == line_of(work, "void %s(void)" % name), h[name]
# sample_inline 0: the function that holds the inlined one takes its samples, as in perf report
q = json.load(open(sys.argv[6]))["profile"]
names = {x["name"]: x["self"] for x in q["functions"]}
# (under ASan its leak check at exit takes 2-3% of the samples, in the sanitizer's runtime: a
# fresh-clone run of 4337aca had 1125 of 1160 in outer_work; those are not the program's)
runtime = sum(v for k, v in names.items() if k.startswith(("__lsan", "__asan", "__sanitizer")))
assert "inner_hot" not in names and names["outer_work"] >= 0.97 * (q["samples"] - runtime), names
print("DWARF: inner_hot %.1f%% self under outer_work, each defined where the source says" % hot)
PY
    # C++ names as written in the source, in the table and in the folded stacks
    "$sonde" run --quiet -o st --name cxx -- "$build/tests/hotspots_cxx" 10
    grep -q '"name":"dec::Model<double>::matmul(long)"' st/cxx.json ||
        fail "C++ names not demangled: $(grep -o '"functions":.\{200\}' st/cxx.json)"
    grep -q ";main;dec::Model<double>::matmul(long) " st/cxx.folded ||
        fail "folded C++ stack: $(cat st/cxx.folded)"
    # --sample-hz 0: no sampling; a bad rate is refused
    "$sonde" run --quiet --sample-hz 0 -o st --name off -- "$hs" 1 1
    [ ! -e st/off.folded ] && ! grep -q '"profile"' st/off.json || fail "--sample-hz 0 sampled"
    expect 2 "--sample-hz abc: expected 0 (off) to 10000" "$sonde" run --sample-hz abc -- true
    # --sample-in-thread with no libsonde.so where SONDE_LIBRARY says: the program is not started
    expect 2 "--sample-in-thread: SONDE_LIBRARY=/nonexistent/libsonde.so: No such file" \
        env SONDE_LIBRARY=/nonexistent/libsonde.so "$sonde" run -o nolib --sample-in-thread -- true
    [ -z "$(ls nolib 2> /dev/null)" ] || fail "--sample-in-thread without a library ran: $(ls nolib)"
    expect 2 "--sample-python-in-thread: SONDE_LIBRARY=/nonexistent/libsonde.so: No such file" \
        env SONDE_LIBRARY=/nonexistent/libsonde.so "$sonde" run -o nolib --sample-python-in-thread \
        -- true
    [ -z "$(ls nolib 2> /dev/null)" ] || fail "--sample-python-in-thread without a library ran"
    # a command that cannot start: exit 127, one line, no reports
    expect 127 "cannot run /nonexistent/prog" "$sonde" run -o gone --name gone -- /nonexistent/prog
    [ "$(wc -l < err.txt)" = 1 ] && [ -z "$(ls gone 2> /dev/null)" ] ||
        fail "a command that cannot start: $(cat err.txt; ls gone)"
    ;;
pyframes)
    cd "$work"
    # issue 39: the Python frames of every CPU sample, read from outside by `sonde run
    # --sample-outside` (its default) and taken in the threads (--sample-python-in-thread), on each
    # interpreter these machines have (Debian's 3.11 and pyenv's newest 3.11, 3.12, 3.13): the
    # shares of hot70/warm20/cool10 within 5 points of 70/20/10 and of the program's own
    # measure, the stacks <module>;main;FUNCTION;spin, where each is defined, the lines run; and
    # the off-CPU time of threads that sleep, wait on a queue and on a lock for planted times.
    # In process, test_sonde.py runs the same program on each interpreter (versions.sh).
    pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}
    ran=0
    mkdir -p py
    # the way the Python frames are read here: in the kernel unless it refuses BPF maps to this
    # user (not root; a kernel without them, said); the verifier refusing the program fails
    SONDE_SAMPLE_PYTHON=2 "$sonde" run --quiet -o py --name bpfprobe -- true ||
        fail "sonde run true exited $?"
    way=kernel
    if grep -q 'sample_python 2 (the Python frames read in the kernel)' py/bpfprobe.json; then
        grep -q 'bpf(BPF_MAP_CREATE)' py/bpfprobe.json ||
            fail "the BPF program refused: $(grep -o '"warnings".*' py/bpfprobe.json)"
        way=sampler
        echo "the kernel refuses BPF maps here: the Python frames are read by the sampler"
    fi
    for py in /usr/bin/python3.11 \
              $(for v in 3.11 3.12 3.13; do ls -d "$pyenv_root"/versions/$v.*/bin/python$v 2>/dev/null |
                                             sort -V | tail -1; done); do
        [ -x "$py" ] || continue
        label=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')@$(dirname "$py")
        "$sonde" run --quiet --sample-outside -o py --name run$ran -- "$py" \
            "$src/tests/e2e/pyshares.py" 2 > py/measured$ran.txt || fail "sonde run $py exited $?"
        grep -q '"method": *"perf_event"' py/run$ran.json || fail "--sample-outside $py: not perf"
        python3 "$src/tests/e2e/pyframes_check.py" py/run$ran.json py/run$ran.folded \
            py/measured$ran.txt "$label" || fail "Python frames of $py"
        # read in the kernel at each sample where it allows (root: CI), else by the sampler's
        # thread; and by the sampler's thread when asked (sample_python 3), with the same shares
        grep -q "\"python_frames\": *\"$way\"" py/run$ran.json ||
            fail "$py: Python frames not read by the $way: $(grep -o '"python_frames":[^,]*' py/run$ran.json)"
        SONDE_SAMPLE_PYTHON=3 "$sonde" run --quiet --sample-outside -o py --name smp$ran -- "$py" \
            "$src/tests/e2e/pyshares.py" 2 > py/msmp$ran.txt || fail "sonde run $py exited $?"
        grep -q '"python_frames": *"sampler"' py/smp$ran.json ||
            fail "$py: sample_python 3 not read by the sampler"
        python3 "$src/tests/e2e/pyframes_check.py" py/smp$ran.json py/smp$ran.folded \
            py/msmp$ran.txt "$label, read by the sampler (sample_python 3)" ||
            fail "Python frames of $py read by the sampler"
        # the same taken in the program's threads (--sample-python-in-thread: libsonde.so
        # preloaded samples each thread of a Python process on its own CPU-clock counter, no
        # sampler woken a sample), its file RUN.pidN.samples.sonde merged into the run's profile
        if [ -z "$asan" ]; then
            "$sonde" run --quiet --sample-python-in-thread -o py --name thr$ran -- "$py" \
                "$src/tests/e2e/pyshares.py" 2 > py/mthr$ran.txt || fail "sonde run $py exited $?"
            grep -q '"method": *"counter_signal"' py/thr$ran.json && ls py/thr$ran.pid*.samples.sonde \
                > /dev/null || fail "sonde run $py: not taken in the threads"
            python3 "$src/tests/e2e/pyframes_check.py" py/thr$ran.json py/thr$ran.folded \
                py/mthr$ran.txt "$label, in the threads (--sample-python-in-thread)" ||
                fail "Python frames of $py in the threads"
        fi
        # off-CPU time: threads blocked for planted times, under their Python functions
        "$sonde" run --quiet --sample-outside -o py --name off$ran -- "$py" \
            "$src/tests/e2e/pyoffcpu.py" ||
            fail "sonde run pyoffcpu $py exited $?"
        "$sonde" export py/off$ran.sonde --format perfetto -o py --quiet ||
            fail "export perfetto of off$ran"
        python3 "$src/tests/e2e/pyoffcpu_check.py" py/off$ran.json "$label" ||
            fail "off-CPU time of $py"
        ran=$((ran + 1))
    done
    [ "$ran" -gt 0 ] || fail "no CPython 3.11-3.13 on this machine"
    # where the kernel refuses the BPF program (an unprivileged user: nobody, through setpriv,
    # with a copy of sonde it can reach, in /tmp: TMPDIR, the build tree, may be a private
    # directory's): sample_python 1 reads the frames by the sampler's thread and says nothing, 2
    # says why; both runs have their Python frames
    if [ "$(id -u)" = 0 ] && [ -x /usr/bin/python3 ] && command -v setpriv > /dev/null; then
        nob=$(mktemp -d /tmp/sonde-nobody-XXXXXX)
        chmod 755 "$nob" && mkdir -m 777 "$nob/out" && cp "$sonde" "$src/tests/e2e/pyshares.py" "$nob/" &&
            chmod 755 "$nob/sonde" && chmod 644 "$nob/pyshares.py" || fail "cannot set up $nob"
        for m in 1 2; do
            (cd "$nob/out" && setpriv --reuid=65534 --regid=65534 --clear-groups \
                env SONDE_SAMPLE_PYTHON=$m "$nob/sonde" run --quiet --sample-outside -o . \
                --name nobody$m -- /usr/bin/python3 "$nob/pyshares.py" 0.5 > measured$m.txt) ||
                fail "sonde run as nobody, sample_python $m: exit $?"
        done
        python3 - "$nob/out" <<'PY' || fail "the kernel's refusal of the BPF program"
import json, sys
for m in (1, 2):
    r = json.load(open("%s/nobody%d.json" % (sys.argv[1], m)))
    p, w = r["profile"], [x for x in r.get("warnings", []) if "sample_python" in x]
    assert p["python_frames"] == "sampler", (m, p["python_frames"])
    if m == 1:
        assert not w, w
    else:
        assert len(w) == 1 and "bpf(BPF_MAP_CREATE): " in w[0] and \
            "read by the sampler's thread at each sample instead" in w[0], w
    py = [f for f in p["functions"] if f["name"] in ("hot70", "warm20", "cool10")]
    assert len(py) == 3, [f["name"] for f in p["functions"]][:10]
print("refused by the kernel (nobody): the Python frames read by the sampler, said with 2")
PY
        rm -rf "$nob"
    else
        echo "not run: the BPF program refused (needs root, /usr/bin/python3 and setpriv)"
    fi
    # where sonde run takes a program's samples: from outside by default, Python's too (named
    # so, or a script whose #! line names it), and when asked (--sample-outside,
    # SONDE_SAMPLE_IN_THREAD=0); in the threads when asked (SONDE_SAMPLE_IN_THREAD=1), and
    # those of the Python processes with --sample-python-in-thread, whatever the command (a
    # shell script that starts Python); the threads' cases not in a sanitizer build (whose
    # libsonde.so only a program built so can load)
    { echo '#!/usr/bin/env -S python3 -u'; cat "$src/tests/e2e/pyshares.py"; } > py/shebang.py
    printf '#!/bin/sh\nexec python3 "$@"\n' > py/viash
    chmod +x py/shebang.py py/viash
    k=0
    for how in "perf_event - ./py/shebang.py" "perf_event - /usr/bin/python3 py/shebang.py" \
               "counter_signal --sample-python-in-thread ./py/viash py/shebang.py" \
               "perf_event --sample-outside ./py/shebang.py" \
               "perf_event SONDE_SAMPLE_IN_THREAD=0 ./py/shebang.py" \
               "counter_signal SONDE_SAMPLE_IN_THREAD=1 ./py/viash py/shebang.py"; do
        set -- $how
        want=$1 opt=$2
        shift 2
        envs=() flags=()
        case $opt in -) ;; --*) flags=("$opt") ;; *) envs=("$opt") ;; esac
        [ -n "$asan" ] && [ "$want" = counter_signal ] && continue
        expect 0 "" env ${envs[@]+"${envs[@]}"} "$sonde" run ${flags[@]+"${flags[@]}"} -o py \
            --name where$k -- "$@" 0.3
        grep -q "\"method\": *\"$want\"" py/where$k.json ||
            fail "sonde run $how: $(grep -o '"method": *"[a-z_]*"' py/where$k.json)"
        if [ "$want" = counter_signal ]; then
            grep -qE "CPU samples taken in (its|their) threads" err.txt ||
                fail "sonde run $how did not say where: $(cat err.txt)"
        fi
        k=$((k + 1))
    done
    echo "sonde run's samples: from outside unless asked, in the threads when asked"
    # with --sample-python-in-thread the Python processes of the tree sample themselves and sonde
    # run samples the rest from outside, one sample a moment: a shell child is sampled (from outside), a Python
    # child killed by SIGKILL keeps the samples sonde run took of it (its own are lost with
    # it), and the samples match the tree's CPU time, none counted twice
    if [ -z "$asan" ]; then
        "$sonde" run --quiet --sample-python-in-thread -o py --name mix -- /usr/bin/python3 \
            "$src/tests/e2e/pymix.py" \
            > py/mix.out || fail "sonde run pymix exited $?"
        python3 - py/mix.json py/mix.folded "$(cat py/mix.out)" <<'PY' || fail "pymix's samples"
import json, sys
r = json.load(open(sys.argv[1]))
p, meta = r["profile"], r["run"]["metadata"]
cpu = float(meta["cpu_user_s"]) + float(meta["cpu_system_s"])
by = {}
for line in open(sys.argv[2]):
    stack, n = line.rsplit(" ", 1)
    by[stack.split(";")[0]] = by.get(stack.split(";")[0], 0) + int(n)
ratio = p["samples"] / (cpu * p["hz"])
assert 0.75 <= ratio <= 1.25, ("samples against the tree's CPU time", p["samples"], cpu, ratio)
assert by.get("sh", 0) >= 50, ("the shell child, from outside", by)
spin = sum(int(l.rsplit(" ", 1)[1]) for l in open(sys.argv[2]) if ";main;spin" in l)
assert spin >= 100, ("the program's own loop, with its Python frames", spin)
killed = sys.argv[3].strip()
assert any(killed in w for w in r.get("warnings", [])) or killed in open(sys.argv[1]).read(), \
    "the killed child is not named"
print("pymix: %d samples for %.2f s of CPU (x%.2f), sh %d, spin %d, killed child %s said"
      % (p["samples"], cpu, ratio, by.get("sh", 0), spin, killed))
PY
    fi
    # a code object whose name has a space (code.replace) loses only its own frame: the samples
    # in it keep main above it and spin below it (they kept no Python frame at all)
    "$sonde" run --quiet -o py --name spacey -- /usr/bin/python3 "$src/tests/e2e/pyspacey.py" ||
        fail "sonde run pyspacey exited $?"
    python3 - py/spacey.folded <<'PY' || fail "a code named with a space took its sample's frames"
import sys
total = in_main = 0
for line in open(sys.argv[1]):
    stack, n = line.rsplit(" ", 1)
    total += int(n)
    in_main += int(n) if ";main;spin" in stack else 0
assert total >= 100 and in_main >= 0.8 * total, (in_main, total)
print("pyspacey: %d of %d samples keep main's and spin's frames" % (in_main, total))
PY
    # a program that gives SIGPROF a handler of its own (a profiler on setitimer) after its
    # sampling began: its handler gets its own timer's signals alone (about 100 in its second of
    # CPU, 103-120 by the kernel's tick; with sonde's counters still signalling it, 197), the
    # samples in its threads go on with a real-time signal, its Python frames with them, a
    # warning says so, and the timer it leaves running at exit does not end it by SIGPROF
    if [ -z "$asan" ]; then
        "$sonde" run --quiet --sample-python-in-thread -o py --name ownprof -- /usr/bin/python3 \
            "$src/tests/e2e/pyownprof.py" > py/ownprof.out || fail "sonde run pyownprof exited $?"
        python3 - py/ownprof.json "$(cat py/ownprof.out)" py/ownprof.folded <<'PY' || fail "pyownprof"
import json, sys
r = json.load(open(sys.argv[1]))
_, calls, _, own = sys.argv[2].split()
loop = sum(int(l.rsplit(" ", 1)[1]) for l in open(sys.argv[3]) if ";own_loop" in l)
assert loop >= 300, ("its loop's samples with its Python frames, after it took SIGPROF", loop)
calls, own = int(calls), int(own)
# its timer alone gives 103-120 calls for "own" 100 (the kernel's tick rounds it); with sonde's
# counters signalling it too, 197
assert calls <= 1.5 * own + 10, ("its handler got signals of sonde's", calls, own)
run = [x for x in r["sections"] if x["name"] == "run"][0]
assert run["metadata"]["exit"] == ["exit 0"], ("it ended otherwise", run["metadata"])
said = [w for w in r.get("warnings", []) if "SIGPROF a handler of its own" in w]
assert said, ("no warning says the sampling in its threads stopped", r.get("warnings"))
print("pyownprof: its handler ran %d times, its timer accounts for %d; %d samples in own_loop; %s"
      % (calls, own, loop, said[0][:60]))
PY
    fi
    # threads on the smallest stacks Python allows, deep in calls through C: the handler, which
    # runs on the sampled thread's stack, unwinds only where it has the room it needs, else the
    # sample keeps the interrupted instruction and the Python frames (the program died by
    # SIGSEGV there before: 13-15 KiB of its stack went to the handler). The depth: 14 levels
    # (about 11 KiB of Debian's 3.11) short of the one at which the program alone dies
    if [ -z "$asan" ]; then
        alone=$(/usr/bin/python3 "$src/tests/e2e/pytinystack.py" --alone)
        "$sonde" run --quiet --sample-python-in-thread -o py --name tinystack -- /usr/bin/python3 \
            "$src/tests/e2e/pytinystack.py" $((alone - 14)) 1.5 > py/tinystack.out ||
            fail "sonde run pytinystack (depth $((alone - 14)) of $alone) exited $?"
        python3 - py/tinystack.json py/tinystack.folded "$(cat py/tinystack.out)" $alone <<'PY' || fail "pytinystack"
import json, sys
r = json.load(open(sys.argv[1]))
assert sys.argv[3].strip() == "ok", ("its threads did not end", sys.argv[3])
total = sum(int(l.rsplit(" ", 1)[1]) for l in open(sys.argv[2]))
leaf = sum(int(l.rsplit(" ", 1)[1]) for l in open(sys.argv[2]) if ";deep;leaf" in l)
assert leaf >= 0.5 * total and leaf >= 300, ("its leaf with its Python callers", leaf, total)
said = [w for w in r.get("warnings", []) if "too little room" in w]
assert said, ("no warning counts the samples kept without their native callers", r.get("warnings"))
print("pytinystack: alone it reaches depth %s; at 14 short of it %d of %d samples in leaf under "
      "its Python callers; %s" % (sys.argv[4], leaf, total, said[0][:70]))
PY
    fi
    # a torch program under sonde run as it is (issue 39): the Python function that called the
    # heavy operator stands above its native frames (BLAS, ATen) in the samples
    if /usr/bin/python3 -c "import torch" 2> /dev/null; then
        loop=$("$sonde" run --quiet -o py --name torchmm -- /usr/bin/python3 \
            "$src/tests/e2e/pytorchmm.py") || fail "sonde run pytorchmm exited $?"
        python3 - py/torchmm.json py/torchmm.folded "$loop" <<'PY' || fail "pytorchmm"
import json, sys
r = json.load(open(sys.argv[1]))
p = r["profile"]
loop_cpu = float(sys.argv[3])
native = {f["name"] for f in p["functions"] if not f["object"].endswith(".py")}
mm, inner = 0, {}
for line in open(sys.argv[2]):
    stack, n = line.rsplit(" ", 1)
    fr, n = stack.split(";"), int(n)
    if "heavy_matmul" not in fr:
        continue
    i = fr.index("heavy_matmul")
    assert fr[i - 1] == "main", ("heavy_matmul's caller", fr[:i + 1])
    mm += n
    k = fr[i + 1] if i + 1 < len(fr) else None
    inner[k] = inner.get(k, 0) + n
want = 0.6 * loop_cpu * p["hz"]
assert mm >= want, ("samples under heavy_matmul against its loop's CPU", mm, loop_cpu, want)
nat = sum(n for k, n in inner.items() if k in native)
assert nat >= 0.9 * mm, ("inward of heavy_matmul: native frames", inner)
print("pytorchmm: %d samples under heavy_matmul for %.2f s of its loop's CPU, %d of them with "
      "native frames inward (%s)" % (mm, loop_cpu, nat, p["method"]))
PY
    else
        echo "pytorchmm: skipped, /usr/bin/python3 has no torch"
    fi
    # a program that ends by os._exit (no atexit handler runs) under --sample-in-thread: its
    # samples are written as it exits (inject.c's _exit), and its exit status is sonde's
    if [ -z "$asan" ]; then
        set +e
        "$sonde" run --quiet --sample-in-thread -o py --name osexit -- /usr/bin/python3 -c '
import os
x = 0
for i in range(6000000):  # about 0.4 s of user time, which the counters count
    x ^= i
os._exit(3)'
        got=$?
        set -e
        [ "$got" = 3 ] || fail "os._exit(3) under --sample-in-thread: sonde run exited $got"
        python3 - py/osexit.json <<'PY' || fail "os._exit under --sample-in-thread"
import json, sys
p = json.load(open(sys.argv[1]))["profile"]
assert p["samples"] >= 200 and p["method"] == "counter_signal", (p["samples"], p.get("method"))
assert any(f["name"] == "<module>" for f in p["functions"]), "no Python frames"
print("os._exit under --sample-in-thread: %d samples written" % p["samples"])
PY
        # SIGTERM, and the program ends by os._exit or replaces itself by exec a moment later,
        # while the samples are being written (as a multiprocessing pool's worker does, sent
        # SIGTERM by the pool's terminate() as it takes its sentinel and leaves by os._exit): the
        # process waits until they are written, in the program's own process and in a forked
        # one (before, os._exit cut the writing short: no END record, the samples' stacks lost)
        for how in exit exec; do
            for where in self fork; do
                for delay in 0.001 0.004; do
                    set +e
                    "$sonde" run --quiet --sample-in-thread -o py/term --name $how$where -- \
                        /usr/bin/python3 - $how $where $delay <<'PY' > /dev/null 2>&1
import os, signal, sys, time
how, where, delay = sys.argv[1], sys.argv[2], float(sys.argv[3])
if where == "fork" and os.fork():
    os.wait()
    sys.exit(0)
x = 0
for i in range(8000000):  # about 0.5 s of user time (a forked child's first 0.1 s unsampled)
    x ^= i
os.kill(os.getpid(), signal.SIGTERM)
t = time.perf_counter()
while time.perf_counter() - t < delay:
    pass
if how == "exec":
    os.execv("/bin/true", ["true"])
os._exit(0)
PY
                    got=$?
                    set -e
                    # ended by SIGTERM (143) once they are written, or by its own os._exit
                    [ "$got" = 0 ] || [ "$got" = 143 ] ||
                        fail "SIGTERM, then $how ($where, $delay s): sonde run exited $got"
                    txt=$(ls py/term/$how$where*.txt | sort -V | tail -1)
                    ! grep -E "did not end cleanly|are left out" "$txt" ||
                        fail "SIGTERM, then $how ($where, $delay s): samples lost"
                    grep -q "^CPU samples: [0-9]\{3,\} " "$txt" ||
                        fail "SIGTERM, then $how ($where, $delay s): $(grep "CPU samples" "$txt")"
                done
            done
        done
        echo "SIGTERM, then os._exit or exec while the samples are written: every file ended cleanly"
        # a forked child's first moments are sampled: its file begun at its writer's first
        # pass 5 ms after the fork, not 100 ms (which left a child spinning 0.15 s of CPU a third
        # of its samples: 0.54 samples a CPU period for the run; 0.74-0.80 now, 0.90 without the
        # fork: the child's own file begun and ended unsampled; 0.65 once beside a full ctest -j2
        # on this VM's two CPUs, the writer's first pass waiting for a CPU: 0.60 is the bound)
        # (and one whose exec failed first goes on sampled: the exec held the writer's lock
        # and gives it back, its file begun at the writer's pass after that)
        for early in plain execfail; do
            "$sonde" run --quiet --sample-in-thread -o py/term --name $early -- /usr/bin/python3 \
                -c '
import os, sys
if os.fork() == 0:
    if sys.argv[1] == "execfail":
        try:
            os.execv("/nonexistent/program", ["program"])
        except OSError:
            pass
    x, i = 0, 0
    while os.times().user < 0.15:
        for i in range(10000):
            x ^= i
    os._exit(0)
os.wait()' $early || fail "sonde run of a forked child's 0.15 s ($early) exited $?"
            ! grep "did not end cleanly" py/term/$early.txt || fail "a forked child ($early)"
            python3 "$src/tests/e2e/samples_per_cpu.py" py/term/$early.json 0.60 1.12 \
                "a forked child's first 0.15 s ($early)" || fail "a forked child's first moments"
        done
    fi
    # a shell that forks and execs the program, and one that execs it in its own place: each
    # image's samples are written before exec replaces it (inject.c's exec functions), so every
    # file ends cleanly (no "did not end cleanly" warning) and the program's samples are there
    if [ -z "$asan" ]; then
        for how in fork exec; do
            "$sonde" run --quiet --sample-in-thread -o py --name sh$how -- /bin/bash -c \
                "$([ $how = exec ] && echo exec) /usr/bin/python3 -c 'x = 0
for i in range(6000000):
    x ^= i'; true" || fail "--sample-in-thread bash ($how) exited $?"
            ! grep -q "did not end cleanly" py/sh$how.txt ||
                fail "--sample-in-thread bash ($how): $(grep "did not end cleanly" py/sh$how.txt)"
            python3 -c 'import json, sys
p = json.load(open(sys.argv[1]))["profile"]
assert p["samples"] >= 200 and any(f["name"] == "<module>" for f in p["functions"]), p["samples"]
print("bash, %s of python3 under --sample-in-thread: %d samples, every file ended cleanly"
      % (sys.argv[2], p["samples"]))' py/sh$how.json $how || fail "--sample-in-thread bash ($how)"
        done
    fi
    # a run joined by a program that sampled too: the profiles are built again as one (each
    # function once, its samples summed), here a run joined by its own copy
    mkdir -p py/twice && cp py/run0.sonde py/twice/run0.sonde &&
        cp py/run0.sonde py/twice/run0.pid1.samples.sonde
    "$sonde" export py/twice/run0.sonde --format json --quiet || fail "export of a joined profile"
    python3 - py/run0.json py/twice/run0.json <<'PY' || fail "a joined run's profile"
import json, sys
one, two = (json.load(open(f))["profile"] for f in sys.argv[1:3])
assert two["samples"] == 2 * one["samples"], (one["samples"], two["samples"])
names = lambda p: sorted((f["name"], f.get("object", "")) for f in p["functions"])
assert names(one) == names(two), "the functions of both are one table"
self1 = {(f["name"], f.get("object", "")): f["self"] for f in one["functions"]}
assert all(f["self"] == 2 * self1[(f["name"], f.get("object", ""))] for f in two["functions"])
print("a run joined by its copy: %d samples, %d functions, each self count doubled"
      % (two["samples"], len(two["functions"])))
PY
    # C calling back into Python (sorted calling key), its native stack whole (sample_cfi):
    # each run of the evaluation loop is replaced by the Python frames it ran, the C code of
    # sorted kept between main and key, the interpreter's start (Py_RunMain) outside <module>
    for py in /usr/bin/python3.11 \
              $(ls -d "$pyenv_root"/versions/3.1[23].*/bin/python3.1[23] 2>/dev/null | sort -V); do
        [ -x "$py" ] || continue
        cb=callback$(basename "$py")
        SONDE_SAMPLE_CFI=1 "$sonde" run --quiet --sample-outside -o py --name $cb -- "$py" \
            "$src/tests/e2e/pycallback.py" || fail "sonde run pycallback $py exited $?"
        python3 - py/$cb.folded "$py" <<'PY' || fail "interleaved frames, $py"
import sys
lines = [(s.split(";"), int(n)) for s, n in (l.rsplit(" ", 1) for l in open(sys.argv[1]))]
key = [(f, n) for f, n in lines if "key" in f and "main" in f]
whole = sum(n for f, n in key if f.index("key") > f.index("main") + 1 and "Py_RunMain" in f
            and f.index("Py_RunMain") < f.index("<module>") < f.index("main"))
total = sum(n for _, n in key)
assert total >= 100 and whole >= 0.6 * total, (sys.argv[2], whole, total, key[:2])
best = max(key, key=lambda x: x[1])[0]
between = best[best.index("main") + 1:best.index("key")]
print("%s: %d of %d samples in key interleaved, e.g. main;%s;key" % (
    sys.argv[2], whole, total, ";".join(between)))
PY
    done
    # the processes a Python program starts: forked workers (the interpreter's memory copied)
    # and spawned ones (a new interpreter exec'd) spend most of the run's CPU in worker_spin
    # (both again taken in their threads: each exec'd interpreter has libsonde.so preloaded
    # and its own RUN.pidN.samples.sonde, each forked one goes on as RUN.pidN.samples-pidM;
    # the pool ends them by SIGTERM, which the injected profiler writes its samples on)
    for method in fork spawn $([ -n "$asan" ] || echo fork-in-thread spawn-in-thread); do
        in_thread=--sample-outside; [ "$method" = ${method%-in-thread} ] || in_thread=--sample-in-thread
        "$sonde" run --quiet $in_thread -o py --name workers_$method -- /usr/bin/python3 \
            "$src/tests/e2e/pyworkers.py" ${method%-in-thread} ||
            fail "sonde run pyworkers $method exited $?"
        python3 - py/workers_$method.folded $method <<'PY' || fail "Python frames of $method workers"
import sys
lines = [l.rsplit(" ", 1) for l in open(sys.argv[1]).read().splitlines()]
total = sum(int(n) for _, n in lines)
spin = sum(int(n) for s, n in lines if ";worker_spin;" in s or s.endswith(";worker_spin"))
assert spin >= 0.5 * total, (sys.argv[2], spin, total)
print("%s workers: %d of %d samples under worker_spin" % (sys.argv[2], spin, total))
PY
    done
    # sonde run --sample-python-in-thread (each Python process sampled in its threads, the tree
    # from outside),
    # the program's own process the busiest: its file, merged first, holds most samples, and
    # each worker's moments are still counted once (its samples from outside over the span it
    # sampled itself left out: the merge asked that only while most of the run's samples were
    # from outside, and counted the workers twice, 1.24 samples a CPU period)
    if [ -z "$asan" ]; then
        "$sonde" run --quiet --sample-python-in-thread -o py --name workers_default -- /usr/bin/python3 \
            "$src/tests/e2e/pyworkers.py" spawn 60000000 || fail "sonde run pyworkers exited $?"
        python3 "$src/tests/e2e/samples_per_cpu.py" py/workers_default.json 0.75 1.12 \
            "spawn workers, both ways at once" || fail "spawn workers sampled both ways"
    fi
    # an interpreter whose frames are not read (3.10) keeps its native stacks
    py310=$(ls -d "$pyenv_root"/versions/3.10.*/bin/python3.10 2>/dev/null | sort -V | tail -1)
    if [ -n "$py310" ]; then
        "$sonde" run --quiet --sample-outside -o py --name old -- "$py310" \
            "$src/tests/e2e/pyshares.py" 1 > /dev/null
        ! grep -q ";hot70" py/old.folded && grep -q "_PyEval_EvalFrameDefault" py/old.folded ||
            fail "3.10: $(head -3 py/old.folded)"
        grep -q "^Warning: process [0-9]*: CPython before 3.11 (.*libpython3.10.*has no Py_Version)" \
            py/old.txt || fail "3.10: no warning: $(grep -i warning py/old.txt)"
        echo "3.10: native frames only, and the report says why"
    fi
    # the stress: frames, threads, generators, coroutines, code objects made and dropped as
    # fast as Python can, sampled at 4999 Hz, in process (CPython embedded in a libsonde
    # program: the reader under ASan in the ASan build, 30 s there) and from outside
    secs=${E2E_PYSTRESS_SECONDS:-10}
    if [ -x "$build/tests/pystress" ]; then
        ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" timeout $((secs * 4 + 60)) \
            "$build/tests/pystress" "$secs" stress "$src/tests/e2e/pystress.py" > stress.txt ||
            fail "pystress exited $?: $(tail -5 stress.txt)"
        python3 "$src/tests/e2e/pystress_check.py" stress/pystress.json stress/pystress.folded \
            "in process, $secs s at 4999 Hz ($(cat stress.txt))" || fail "pystress in process"
        # the same taken in the threads (sample_in_thread: each thread's CPU-clock counter
        # signals it, 4999 times a second of its CPU) and on the timers' fallback
        # (perf_event_open refused, tests/fakes/noperf.c, preloaded into pystress alone: in
        # the ASan build the fake is instrumented, and only a program holding ASan's runtime
        # can load it): the Python frames read by the SIGPROF handler, in the sampled thread
        # itself, each half as long
        stress_in_thread() { # DIR METHOD LABEL ENV...
            local dir=$1 method=$2 label=$3
            shift 3
            mkdir -p "$dir"
            ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" timeout $((secs * 2 + 60)) \
                env "$@" "$build/tests/pystress" "$((secs / 2))" "$dir" \
                "$src/tests/e2e/pystress.py" > stress.txt ||
                fail "pystress $label exited $?: $(tail -5 stress.txt)"
            grep -q "\"method\":\"$method\"" "$dir/pystress.json" ||
                fail "pystress $label: not $method"
            python3 "$src/tests/e2e/pystress_check.py" "$dir/pystress.json" \
                "$dir/pystress.folded" "in process $label, $((secs / 2)) s ($(cat stress.txt))" ||
                fail "pystress in process $label"
        }
        stress_in_thread stress-counter counter_signal "on the counters" SONDE_SAMPLE_IN_THREAD=1
        stress_in_thread stress-timer timer_signal "on the timers" \
            LD_PRELOAD="$build/tests/libnoperf.so"
    else
        echo "in process: skipped (no CPython library to embed: install python3-dev)"
    fi
    timeout $((secs * 4 + 60)) "$sonde" run --quiet --sample-hz 4999 --sample-outside -o stress \
        --name outside -- \
        /usr/bin/python3 "$src/tests/e2e/pystress.py" "$secs" > stress.txt ||
        fail "sonde run pystress exited $?"
    python3 "$src/tests/e2e/pystress_check.py" stress/outside.json stress/outside.folded \
        "from outside, $secs s at 4999 Hz ($(cat stress.txt))" || fail "pystress from outside"
    # and under sonde run --sample-in-thread (libsonde.so preloaded: not in the ASan build)
    if [ -z "$asan" ]; then
        timeout $((secs * 2 + 60)) "$sonde" run --quiet --sample-hz 4999 --sample-in-thread \
            -o stress --name injected -- /usr/bin/python3 "$src/tests/e2e/pystress.py" \
            "$((secs / 2))" > stress.txt || fail "sonde run --sample-in-thread pystress exited $?"
        grep -q '"method":"counter_signal"' stress/injected.json ||
            fail "pystress under --sample-in-thread: not counter_signal"
        python3 "$src/tests/e2e/pystress_check.py" stress/injected.json stress/injected.folded \
            "sonde run --sample-in-thread, $((secs / 2)) s at 4999 Hz ($(cat stress.txt))" ||
            fail "pystress under sonde run --sample-in-thread"
    fi
    ;;
cuda)
    cd "$work"
    app="$build/tests/cuda_app"
    # The fake CUPTI makes 5 kernels, a copy and a set, each with its runtime call
    SONDE_CUDA_ACTIVITY=1 SONDE_CUPTI_LIBRARY="$build/tests/libfake_cupti_ok.so" "$app" out gpu \
        || fail "cuda_app exited $?"
    check trace out/gpu.trace.json.gz
    python3 - out/gpu.json out/gpu.trace.json.gz <<'PY'
import gzip, json, sys
r = json.load(open(sys.argv[1]))
g = r["gpu_activity"]
assert (g["kernels"], g["memcpy"], g["memset"]) == (5, 1, 1), g
assert g["memcpy_bytes"] == 1 << 20 and g["memset_bytes"] == 4096, g
assert g["linked_to_sections"] == 6, g  # the set was launched outside every section
by_sec = {s["name"]: s["count"] for s in g["kernels_by_section"]}
assert by_sec == {"prefill": 2, "decode": 3}, by_sec
top = {k["name"]: (k["count"], round(k["mean_s"] * 1e6)) for k in g["top_kernels"]}
# the C++ kernel CUPTI names mangled (_Z11gemm_kernelPKfS0_Pfi), demangled as PyTorch shows it
GEMM = "gemm_kernel(float const*, float const*, float*, int)"
assert top == {GEMM: (2, 300), "attn_kernel": (3, 100)}, top
assert r["warnings"] == [], r["warnings"]
ev = json.load(gzip.open(sys.argv[2], "rt"))
names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e.get("name") == "thread_name"}
kern = [e for e in ev if e.get("cat") == "kernel"]
assert len(kern) == 5 and all(names[(e["pid"], e["tid"])] == "GPU 0 stream 7" for e in kern), kern
k0 = kern[0]
assert k0["args"]["grid"] == [128, 2, 1] and k0["args"]["block"] == [256, 1, 1], k0
assert k0["args"]["launched_by"] == "prefill" and k0["name"] == GEMM, k0
copies = [e for e in ev if e.get("cat") == "gpu_memcpy"]
assert [e["name"] for e in copies] == ["Memcpy HtoD"] and copies[0]["args"]["bytes"] == 1 << 20
# each launch is a flow from the launching thread to the GPU work, 10 us or 5 us later
starts = {e["id"]: e for e in ev if e.get("ph") == "s"}
ends = {e["id"]: e for e in ev if e.get("ph") == "f"}
assert len(starts) == 7 and starts.keys() == ends.keys(), (len(starts), len(ends))
for i in starts:
    lag = ends[i]["ts"] - starts[i]["ts"]
    assert 4 < lag < 12, ("launch to start", lag)  # CUPTI's clock moved onto the run's
prefill = [e for e in ev if e.get("name") == "prefill"][0]
launch = starts[k0["args"]["correlation"]]
assert prefill["ts"] <= launch["ts"] <= prefill["ts"] + prefill["dur"], (prefill, launch)
assert launch["tid"] == prefill["tid"]
print("cuda: 5 kernels, 1 copy, 1 set on GPU tracks, 7 launch flows, kernels by section")
PY
    grep -q "^CUDA: 5 kernels" out/gpu.txt || fail "the text summary lacks the CUDA line: $(cat out/gpu.txt)"
    "$build/tools/sonde/sonde" export out/gpu.sonde --format tensorboard -o tb --quiet
    check tensorboard tb gpu out/gpu.json
    # the GPU tracks in Perfetto's protobuf trace, as in the JSON one
    "$build/tools/sonde/sonde" export out/gpu.sonde --format perfetto --quiet
    python3 "$src/tests/e2e/pftrace.py" compare out/gpu.pftrace out/gpu.trace.json.gz > pf.txt ||
        fail "gpu.pftrace differs from the JSON trace"
    python3 "$src/tests/e2e/pftrace.py" out/gpu.pftrace | python3 -c 'import json, sys
t = json.load(sys.stdin)
k = [s for s in t["slices"] if s["cat"] == "kernel"]
names = {t["tracks"][str(s["track"])]["name"] for s in k}
assert len(k) == 5 and names == {"GPU 0 stream 7"}, (len(k), names)
print("cuda: 5 kernels on GPU 0 stream 7 in gpu.pftrace")' || fail "gpu.pftrace GPU tracks"
    python3 - out/gpu.html <<'PY'
import re, sys
h = open(sys.argv[1]).read()
assert "CUDA kernels (GPU time)" in h, "no CUDA card"
rows = re.findall(r'<table id="cuda-kernels".*?</table>', h, re.S)[0]
assert rows.index("gemm_kernel(float const*, float const*, float*, int)") < rows.index("attn_kernel"), \
    "kernels not by GPU time, or the C++ name not demangled"
sec = re.findall(r'<table id="cuda-sections".*?</table>', h, re.S)[0]
assert "<td>prefill</td><td>2</td>" in sec and "<td>decode</td><td>3</td>" in sec, sec
print("cuda: the HTML report has the CUDA card and tables")
PY
    # under `sonde run`, the program's CUDA activity joins the run's report
    SONDE_CUDA_ACTIVITY=1 SONDE_CUPTI_LIBRARY="$build/tests/libfake_cupti_ok.so" \
        "$build/tools/sonde/sonde" run --quiet --name watched -o runs -- "$app" ignored ignored \
        || fail "sonde run cuda_app exited $?"
    python3 -c 'import json, sys
g = json.load(open(sys.argv[1]))["gpu_activity"]
assert (g["kernels"], g["linked_to_sections"]) == (5, 6), g
print("cuda under sonde run: merged into the run report")' runs/watched.json || fail "sonde run lost the CUDA activity"
    # sonde diff compares kernels too: attn_kernel 50% slower is a regression, gemm_kernel is not
    for v in 100 150; do
        CUDA_APP_DECODE=8 CUDA_APP_ATTN_US=$v SONDE_CUDA_ACTIVITY=1 \
            SONDE_CUPTI_LIBRARY="$build/tests/libfake_cupti_ok.so" "$app" out "attn$v" || fail "cuda_app attn$v"
    done
    set +e
    "$build/tools/sonde/sonde" diff out/attn100.sonde out/attn150.sonde --per-instance --fail-on-regression --format json > diff.json
    st=$?
    set -e
    [ $st = 1 ] || fail "sonde diff exited $st on a kernel regression"
    python3 -c 'import json, sys
rows = {r["name"]: r for r in json.load(open(sys.argv[1]))["sections"]}
a = rows["cuda:attn_kernel"]
assert a["status"] == "regression" and abs(a["change"] - 0.5) < 1e-6 and a["count"] == [8, 8], a
g = rows["cuda:gemm_kernel(float const*, float const*, float*, int)"]
assert g["status"] == "same", g
print("cuda: sonde diff names the slower kernel, p=%.2g" % a["p"])' diff.json || fail "diff of kernels"
    # a missing or failing CUPTI leaves the run and its report intact, and says why
    cuda_fails() { # NAME LIBRARY EXPECTED-TEXT
        SONDE_CUDA_ACTIVITY=1 SONDE_CUPTI_LIBRARY="$2" "$app" out "$1" || fail "cuda_app $1 exited $?"
        python3 - "out/$1.json" "$3" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert {s["name"]: s["count"] for s in r["sections"]} == {"prefill": 1, "decode": 3}, r["sections"]
assert "gpu_activity" not in r
w = [x for x in r["warnings"] if x.startswith("cuda activity: ")]
assert len(w) == 1 and sys.argv[2] in w[0], (w, sys.argv[2])
print("cuda, failing: " + w[0])
PY
    }
    cuda_fails missing "$work/nonexistent/libcupti.so" "cannot load $work/nonexistent/libcupti.so"
    cuda_fails broken "$build/tests/libfake_cupti_fail.so" \
        "cuptiActivityEnable(CONCURRENT_KERNEL): CUPTI_ERROR_NOT_INITIALIZED (is there a GPU"
    cuda_fails old "$build/tests/libfake_cupti_old.so" "this libsonde was built against version"
    # this machine's own libcupti, when it has one (without a GPU it cannot enable activity)
    for real in /usr/local/cuda/lib64/libcupti.so /usr/local/cuda/lib/libcupti.so; do
        if [ -e "$real" ] && ! ls /dev/nvidia0 > /dev/null 2>&1; then
            cuda_fails real "$real" "cuptiActivityEnable"
            break
        fi
    done
    ;;
autotrace)
    cd "$work"
    traced="$build/tests/traced"
    counts() { # JSON -> "name=count" lines, sorted
        python3 -c 'import json, sys
for s in sorted(json.load(open(sys.argv[1]))["sections"], key=lambda s: s["name"]):
    print("%s=%d" % (s["name"], s["count"]))' "$1"
    }
    run_traced() { # NAME [VAR=VALUE...]: the automatic profiler, configured from the environment
        local name=$1; shift
        env SONDE_OUTPUT_DIR=out SONDE_NAME="$name" SONDE_FORMATS=json,trace SONDE_COLLECT_GPU=0 \
            SONDE_COLLECT_CPU=0 SONDE_COLLECT_MEMORY=0 "$@" "$traced" || fail "traced $name exited $?"
        counts "out/$name.json" > "$name.txt"
    }
    # every call: global and static functions, recursion, a thread, C++ names demangled
    # (a template, a member, an exception unwinding through an instrumented frame), longjmp
    run_traced all SONDE_AUTOTRACE_EXCLUDE='excluded_*' SONDE_WITH_STACK=1
    cat > want.txt <<'TXT'
cpp_entry=1
double ns::twice<double>(double)=1
fast_leaf=1000
fib=25
helper_static=17
int ns::twice<int>(int)=4
jumper=1
jumper_inner=1
ns::Widget::run(int)=1
ns::thrower(int)=1
run=1
slow_step=1
worker=1
TXT
    diff want.txt all.txt || fail "traced sections differ from the calls made"
    python3 - out/all.trace.json.gz out/all.json <<'PY'
import gzip, json, sys
ev = json.load(gzip.open(sys.argv[1], "rt"))
ev = ev["traceEvents"] if isinstance(ev, dict) else ev  # the object form: the run has CPU samples
leaf = [e for e in ev if e.get("name") == "fast_leaf"]
assert leaf and leaf[0]["args"]["file"].endswith("tests/autotrace/traced.c"), leaf[:1]
assert leaf[0]["args"]["line"] > 0 and leaf[0]["args"]["function"] == "fast_leaf", leaf[0]
r = json.load(open(sys.argv[2]))
helper = [s for s in r["sections"] if s["name"] == "helper_static"][0]
assert helper["threads"] == 2, helper  # main's and the worker's calls
print("autotrace: source file and line of static and C++ functions, 2 threads")
PY
    # a library loaded with dlopen after tracing began: its functions, static too, are named
    run_traced plugin TRACED_PLUGIN="$build/tests/libtraced_plugin.so" SONDE_AUTOTRACE_INCLUDE='plugin_*'
    [ "$(cat plugin.txt | tr '\n' ' ')" = "plugin_static=2 plugin_work=1 " ] || fail "dlopen: $(cat plugin.txt)"
    # include: only the named functions (by name)
    run_traced inc SONDE_AUTOTRACE_INCLUDE='fib, worker'
    [ "$(cat inc.txt | tr '\n' ' ')" = "fib=25 worker=1 " ] || fail "include: $(cat inc.txt)"
    # exclude by source file: every function of traced_cpp.cpp goes
    run_traced nocpp SONDE_AUTOTRACE_EXCLUDE='*traced_cpp.cpp'
    grep -q "ns::\|cpp_entry" nocpp.txt && fail "exclude by file kept: $(cat nocpp.txt)"
    grep -q "^fib=25$" nocpp.txt || fail "exclude by file: $(cat nocpp.txt)"
    # maximum depth 3: run (1), fib (2), fib (3): 1 + 2 fib calls
    run_traced deep SONDE_AUTOTRACE_MAX_DEPTH=3 SONDE_AUTOTRACE_INCLUDE='fib,run'
    [ "$(cat deep.txt | tr '\n' ' ')" = "fib=3 run=1 " ] || fail "max depth: $(cat deep.txt)"
    # and the reports say how many calls the limit left out (22 of fib's 25, at least)
    python3 -c 'import json, re, sys
w = [x for x in json.load(open(sys.argv[1]))["warnings"] if "autotrace_max_depth (3)" in x]
assert len(w) == 1 and int(re.match(r"autotrace: (\d+) calls nested deeper", w[0]).group(1)) >= 22, w' out/deep.json ||
        fail "max depth: no warning in the report"
    # minimum duration 1 ms: the 2 ms slow_step stays, the 1,000 sub-microsecond fast_leaf calls
    # are left out and counted (a few may outlast 1 ms when the thread is preempted: TSan, a
    # loaded machine)
    run_traced short SONDE_MIN_DURATION_S=0.001 SONDE_AUTOTRACE_INCLUDE='slow_step,fast_leaf'
    python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
kept = {s["name"]: s["count"] for s in r["sections"]}
out = r["summary"]["short_sections_left_out"]
assert kept.get("slow_step") == 1, kept
assert kept.get("fast_leaf", 0) + out == 1000 and out >= 980, (kept, out)' out/short.json \
        || fail "min duration: $(cat short.txt)"
    # a program's own profiler, attached; after detach nothing more is traced
    "$traced" attach out > attach.out || fail "traced attach exited $?"
    grep -q "excluded 1 " attach.out || fail "attach: $(cat attach.out)"
    counts out/attached.json > attached.txt
    grep -v "^excluded" want.txt | diff - attached.txt || fail "attached profiler's sections differ"
    # manual: no automatic profiler, no file
    mkdir manual && (cd manual && SONDE_AUTOTRACE=manual "$traced") && [ -z "$(ls manual)" ] \
        || fail "SONDE_AUTOTRACE=manual still wrote $(ls manual)"
    # hot calls' accounting (src/record/ftrace.h) on recursion and on a mostly-tiny function that
    # sometimes does deep work: with hot calls counted and with every call recorded, one
    # thread's self times add up to its traced time, no total exceeds it, a recursive function's
    # total is its outermost calls', and the deep work is deep's, not check's (hot_s 100 us, not
    # the default 1 us: under TSan a fib call takes over 1 us, and fib must be hot in every build)
    for hot in default 0; do
        calls=(SONDE_AUTOTRACE_HOT_S=0.0001)
        [ $hot = 0 ] && calls=(SONDE_AUTOTRACE_HOT_CALLS=0)
        env SONDE_OUTPUT_DIR=out SONDE_NAME="shapes_$hot" SONDE_FORMATS=json SONDE_COLLECT_GPU=0 \
            SONDE_COLLECT_CPU=0 SONDE_COLLECT_MEMORY=0 "${calls[@]}" "$build/tests/shapes" \
            > /dev/null || fail "shapes $hot exited $?"
    done
    python3 - out/shapes_default.json out/shapes_0.json <<'PY' || fail "hot calls' accounting"
import json, sys
runs = [{s["name"]: s for s in json.load(open(f))["sections"]} for f in sys.argv[1:]]
roots = ("fib_rounds", "parity_rounds", "check_rounds")
for s, how in zip(runs, ("hot calls counted", "every call recorded")):
    traced = sum(s[r]["total_s"] for r in roots)
    selfs = sum(x["self_s"] for x in s.values())
    assert abs(selfs / traced - 1) < 0.01, (how, "self times sum to", selfs, "of", traced,
                                          {k: x["self_s"] for k, x in s.items()})
    for x in s.values():
        assert x["total_s"] <= traced * (1 + 1e-6) and x["self_s"] >= 0, (how, x)
    # a driver's children are its outermost calls: their totals and its self make its total
    for root, kids in (("fib_rounds", ["fib"]), ("parity_rounds", ["is_even", "spin"]),
                       ("check_rounds", ["check"])):
        parts = sum(s[k]["total_s"] for k in kids) + s[root]["self_s"]
        assert abs(parts / s[root]["total_s"] - 1) < 0.01, (how, root, parts, s[root])
    print("autotrace shapes %s: self times %.4f of the traced time; fib %.1f ms of fib_rounds' "
          "%.1f ms" % (how, selfs / traced, s["fib"]["total_s"] * 1e3,
                       s["fib_rounds"]["total_s"] * 1e3))
hot, every = runs
assert hot["fib"].get("aggregated_calls", 0) > 0 and hot["check"].get("aggregated_calls", 0) > 0, hot
share = lambda s, k: s[k]["self_s"] / s["check_rounds"]["total_s"]
# the deep work is deep_leaf's, not check's as well: check's own share is no larger with its
# calls counted than with each recorded (recording them puts the recording's cost in its self
# time; it was 0.98 of the run, the deep work's, with its calls counted). The two runs' shares
# of the deep work itself differ by preemption on a loaded machine (5.3 points seen): the
# in-run sums above are what hold it.
assert share(hot, "check") <= share(every, "check") + 0.05, (share(hot, "check"),
                                                            share(every, "check"))
PY
    ;;
hotfn)
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
    ;;
nvtx)
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
    ;;
flight)
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
    grep -q "torn\|checksum" f2.err && fail "the dump is torn after SIGKILL: $(cat f2.err)"
    ;;
install)
    cmake --install "$build" --prefix "$work/prefix" > /dev/null
    for f in include/sonde/sonde.h include/sonde/autotrace.h lib/libsonde.a lib/libsonde-autotrace.so \
             lib/pkgconfig/sonde.pc lib/cmake/sonde/sondeConfig.cmake; do
        [ -f "$work/prefix/$f" ] || fail "install lacks $f"
    done
    soname=$(objdump -p "$work/prefix/lib/libsonde.so" | awk '/SONAME/ {print $2}')
    [ "$soname" = "libsonde.so.0" ] || fail "SONAME is '$soname'"
    # the installed sonde's --sample-in-thread preloads the installed libsonde.so.0 (beside it:
    # ../lib), not the build tree's
    if [ -z "$asan" ]; then
        got=$("$work/prefix/bin/sonde" run --quiet --format none --sample-in-thread \
              -o "$work/inj" -- sh -c 'echo "$LD_PRELOAD"') ||
            fail "installed sonde run --sample-in-thread exited $?"
        [ "$(realpath "$got")" = "$(realpath "$work/prefix/lib/libsonde.so.0")" ] ||
            fail "installed sonde run --sample-in-thread preloads '$got'"
    fi
    # a program outside the tree, with pkg-config and the rpath the README gives for a prefix
    # that is not the system's: it starts without LD_LIBRARY_PATH
    export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
    cc -o "$work/minimal" "$src/examples/minimal.c" $(pkg-config --cflags --libs sonde) \
        -Wl,-rpath,"$(pkg-config --variable=libdir sonde)"
    (cd "$work" && env -u LD_LIBRARY_PATH ./minimal > /dev/null) || fail "minimal did not start: $(cd "$work" && ./minimal 2>&1 | head -2)"
    check count "$work/sonde-out/minimal.json" decode 10
    # the installed libsonde-autotrace finds libsonde.so.0 beside itself, and its .pc file builds
    # an instrumented program
    readelf -d "$work/prefix/lib/libsonde-autotrace.so" | grep -q 'RUNPATH.*\[\$ORIGIN\]' ||
        fail "libsonde-autotrace has no \$ORIGIN RUNPATH: $(readelf -d "$work/prefix/lib/libsonde-autotrace.so" | grep -i path)"
    printf '#include <stdio.h>\nstatic int sq(int x) { return x * x; }\nint main(void) { int s = 0; for (int i = 0; i < 5; i++) s += sq(i); printf("%%d\\n", s); return 0; }\n' > "$work/traced.c"
    cc -g -o "$work/traced" "$work/traced.c" $(pkg-config --cflags --libs sonde-autotrace) \
        -Wl,-rpath,"$(pkg-config --variable=libdir sonde-autotrace)"
    (cd "$work" && env -u LD_LIBRARY_PATH SONDE_NAME=traced ./traced > traced.out) || fail "traced did not start"
    [ "$(cat "$work/traced.out")" = 30 ] || fail "traced printed $(cat "$work/traced.out")"
    check count "$work/sonde-out/traced.json" sq 5
    # the README's quick start, exactly as printed: enabled, disabled, and with a directory that
    # cannot be made; each exits 0 and prints its figures or why nothing was recorded
    awk '/^## Quick start in C/ {q=1} q && /^```c/ {on=1; next} on && /^```/ {exit} on' "$src/README.md" > "$work/quick.c"
    grep -q "sonde_create" "$work/quick.c" || fail "no quick start found in README.md"
    cc -Wall -Wextra -Werror -o "$work/quick" "$work/quick.c" $(pkg-config --cflags --libs sonde) \
        -Wl,-rpath,"$(pkg-config --variable=libdir sonde)"
    cd "$work"
    env -u LD_LIBRARY_PATH ./quick > q1.txt 2> q1.err || fail "quick start exited $?: $(cat q1.err)"
    grep -q "^[0-9.]* tokens/s over 128 steps$" q1.txt || fail "quick start printed: $(cat q1.txt q1.err)"
    check count sonde-out/llm-serve.json decode 128
    SONDE_ENABLED=0 ./quick > q2.txt 2> q2.err || fail "quick start, disabled, exited $?: $(cat q2.err)"
    grep -q "^not profiled: profiling is disabled" q2.txt || fail "disabled quick start printed: $(cat q2.txt q2.err)"
    touch blocker
    SONDE_OUTPUT_DIR=blocker/out ./quick > q3.txt 2> q3.err || fail "quick start, unwritable, exited $?: $(cat q3.err)"
    grep -q "^not profiled: cannot create output directory blocker/out" q3.txt || fail "unwritable quick start printed: $(cat q3.txt q3.err)"
    # the quick start drops sonde_config_from_env's code, as many programs will: a bad value is
    # still said on stderr by sonde_create, and a variable that is no key is named with the one
    # it most likely meant
    SONDE_ENABLED=maybe SONDE_OUTDIR=elsewhere ./quick > q4.txt 2> q4.err || fail "quick start, bad env, exited $?"
    grep -qF 'sonde: the environment was not applied (sonde_config_from_env failed): SONDE_ENABLED: "maybe" is not a boolean' q4.err || fail "bad SONDE_ENABLED not said: $(cat q4.err)"
    grep -qF "sonde: SONDE_OUTDIR is not a sonde variable and is ignored (did you mean SONDE_OUTPUT_DIR?)" q4.err || fail "SONDE_OUTDIR not named: $(cat q4.err)"
    [ "$(grep -c SONDE_OUTDIR q4.err)" = 1 ] || fail "SONDE_OUTDIR named more than once: $(cat q4.err)"
    grep -q "the environment was not applied" sonde-out/llm-serve-2.json || fail "the report lacks the environment warning"
    cd - > /dev/null
    # and with CMake's find_package
    mkdir -p "$work/consumer"
    cp "$src/examples/minimal.c" "$work/consumer/"
    cat > "$work/consumer/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(sonde REQUIRED)
add_executable(minimal minimal.c)
target_link_libraries(minimal PRIVATE sonde::sonde_static)
CM
    cmake -S "$work/consumer" -B "$work/consumer/build" -DCMAKE_PREFIX_PATH="$work/prefix" > /dev/null
    cmake --build "$work/consumer/build" > /dev/null
    (cd "$work/consumer" && ./build/minimal > /dev/null)
    check count "$work/consumer/sonde-out/minimal.json" load_model 1
    # the Python package installed with the library (its extension carries libsonde inside)
    # where the interpreter looks under the prefix: lib/pythonX.Y/site-packages (dist-packages
    # for Debian's python3)
    site=$(find "$work/prefix/lib" -path "*/python3.*/*-packages" -maxdepth 2 -type d | head -1)
    [ -n "$site" ] && [ -f "$site/sonde/__init__.py" ] || fail "no sonde package under $work/prefix/lib/python3.*/"
    (cd "$work" && env -u LD_LIBRARY_PATH PYTHONPATH="$site" \
        python3 -c 'import sonde, sys
with sonde.Profiler({"name": "py", "collect_gpu": False}) as p:
    with p.profile("installed"):
        pass
assert sonde._sonde.__file__.startswith(sys.argv[1]), sonde._sonde.__file__' "$work/prefix/lib/")
    check count "$work/sonde-out/py.json" installed 1
    # `make python-install` into a virtual environment's interpreter, from this checkout, offline;
    # the environment's python imports it from anywhere
    python3 -m venv --without-pip "$work/venv"
    make -s -C "$src" python-install PYTHON="$work/venv/bin/python" PYBUILD="$work/pybuild" > "$work/pyinst.txt"
    grep -q "^sonde: Python package installed into $work/venv/lib/python.*/site-packages/sonde for $work/venv/bin/python" "$work/pyinst.txt" \
        || fail "make python-install said: $(cat "$work/pyinst.txt")"
    (cd / && env -u PYTHONPATH "$work/venv/bin/python" -c 'import sonde, sys
with sonde.Profiler({"name": "venv", "output_dir": sys.argv[1], "collect_gpu": False}) as p:
    with p.profile("from_venv"):
        pass
assert sonde._sonde.__file__.startswith(sys.prefix), (sonde._sonde.__file__, sys.prefix)' "$work/venvout")
    check count "$work/venvout/venv.json" from_venv 1
    ;;
*)
    fail "unknown test $test"
    ;;
esac
echo "e2e $test: passed"
