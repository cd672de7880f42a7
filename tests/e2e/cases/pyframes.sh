# pyframes.sh - the e2e case `pyframes`, sourced by run.sh (index: README.md), which gives it
# $work (its folder, removed at the end), $build, $src, $sonde, $asan and the helpers check,
# fail and expect; it exits non-zero at the first failure, 77 when it cannot run here.
# shellcheck shell=bash
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
    # a stack deeper than a sample keeps (issue 61 #11), read by the sampler (sample_python 3)
    # and in the kernel where it allows (walked to 256 frames, the outermost 95 kept in turn):
    # its outermost frames kept (<module>, main), its innermost (leaf) too, the cut marked
    # between them, one mark; 400 deep in the kernel, the root marked cut
    for w in 3 1; do
        [ "$w" = 3 ] || [ "$way" = kernel ] || continue
        SONDE_SAMPLE_PYTHON=$w "$sonde" run --quiet --sample-outside -o py --name deep$w$ran -- \
            "$py" "$src/tests/e2e/pydeep.py" 200 || fail "sonde run pydeep.py $py exited $?"
        python3 - py/deep$w$ran.folded "$label, sample_python $w" <<'PY' ||
import sys
rows = [l.rsplit(" ", 1) for l in open(sys.argv[1])]
leaf = [(s.split(";"), int(n)) for s, n in rows if ";leaf" in s]
total = sum(n for _, n in leaf)
kept = sum(n for f, n in leaf if f[1:3] == ["<module>", "main"] and
           len([x for x in f if x.startswith("[truncated_")]) == 1)
assert total >= 50, (total, rows[:3])
assert kept >= 0.9 * total, (kept, total, [r[0][:200] for r in rows[:3]])
print("deep stacks (%s): %d of %d samples in leaf keep <module>;main and mark the cut"
      % (sys.argv[2], kept, total))
PY
            fail "deep Python stacks of $py, sample_python $w"
    done
    if [ "$way" = kernel ]; then
        "$sonde" run --quiet --sample-outside -o py --name deeper$ran -- "$py" \
            "$src/tests/e2e/pydeep.py" 400 || fail "sonde run pydeep.py 400 $py exited $?"
        python3 - py/deeper$ran.folded <<'PY' || fail "a stack deeper than the kernel's walk, $py"
import sys
rows = [l.rsplit(" ", 1) for l in open(sys.argv[1])]
leaf = [(s.split(";"), int(n)) for s, n in rows if ";leaf" in s]
total = sum(n for _, n in leaf)
root = sum(n for f, n in leaf if f[1] == "[truncated:_deeper_than_256_frames]")
assert total >= 50 and root >= 0.9 * total, (root, total, [r[0][:200] for r in rows[:3]])
PY
    fi
    # the same taken in the program's threads (--sample-python-in-thread: libsonde.so
    # preloaded samples each thread of a Python process on its own CPU-clock counter, no
    # sampler woken a sample), its file RUN.pidN.samples.sonde merged into the run's profile
    if [ -z "$asan" ]; then
        "$sonde" run --quiet --sample-python-in-thread -o py --name thr$ran -- "$py" \
            "$src/tests/e2e/pyshares.py" 2 > py/mthr$ran.txt 2> py/ethr$ran.txt ||
            fail "sonde run $py exited $?: $(cat py/ethr$ran.txt)"
        # sonde run's own variables are no news to the library preloaded in the program (it
        # said "SONDE_RUN_ID is not a sonde variable")
        [ ! -s py/ethr$ran.txt ] || fail "sonde run --sample-python-in-thread said: $(cat py/ethr$ran.txt)"
        grep -q '"method": *"counter_signal"' py/thr$ran.json && ls py/thr$ran.pid*.samples.sonde \
            > /dev/null || fail "sonde run $py: not taken in the threads"
        python3 "$src/tests/e2e/pyframes_check.py" py/thr$ran.json py/thr$ran.folded \
            py/mthr$ran.txt "$label, in the threads (--sample-python-in-thread)" ||
            fail "Python frames of $py in the threads"
        # a deep stack read by the timers' handlers (64 frames kept of a walk of up to 256):
        # the root kept (<module>;main under the native frames), the cut marked once
        "$sonde" run --quiet --sample-python-in-thread -o py --name thrdeep$ran -- "$py" \
            "$src/tests/e2e/pydeep.py" 200 || fail "sonde run pydeep.py in the threads, $py"
        python3 - py/thrdeep$ran.folded <<'PY' || fail "deep Python stacks in the threads, $py"
import sys
rows = [l.rsplit(" ", 1) for l in open(sys.argv[1])]
leaf = [(s.split(";"), int(n)) for s, n in rows if ";leaf" in s]
total = sum(n for _, n in leaf)
kept = sum(n for f, n in leaf if "<module>" in f and f[f.index("<module>") + 1] == "main" and
           len([x for x in f if x.startswith("[truncated_")]) == 1)
assert total >= 50 and kept >= 0.9 * total, (kept, total, [r[0][:300] for r in rows[:3]])
PY
    fi
    # a sub-interpreter's frames (issue 61 #13, 3.12 and 3.13): named in every way, under the
    # frames that entered it where read from outside (sample_python 3); the main thread's
    # own after it. spin_sub and spin_main do the same work.
    minor=${label#3.}
    minor=${minor%%@*}
    if [ "$minor" -ge 12 ]; then
        for w in 3 1 thr; do
            [ "$w" != 1 ] || [ "$way" = kernel ] || continue
            if [ "$w" = thr ]; then
                [ -z "$asan" ] || continue
                set -- env "$sonde" run --quiet --sample-python-in-thread
            else
                set -- env SONDE_SAMPLE_PYTHON=$w "$sonde" run --quiet --sample-outside
            fi
            "$@" -o py --name sub$w$ran -- "$py" "$src/tests/e2e/pysubinterp.py" ||
                fail "sonde run pysubinterp $py, $w exited $?"
            python3 - py/sub$w$ran.folded "$w" "$label" <<'PY' || fail "sub-interpreter frames, $py, $w"
import sys
rows = [(s.split(";"), int(n)) for s, n in (l.rsplit(" ", 1) for l in open(sys.argv[1]))]
sub = sum(n for f, n in rows if "spin_sub" in f)
main = sum(n for f, n in rows if "spin_main" in f)
assert main >= 50 and 0.6 * main <= sub <= 1.6 * main, (sub, main)
if sys.argv[2] == "3":  # the whole chain: <module>;main, then the sub-interpreter's <module>
    whole = sum(n for f, n in rows if f[1:5] == ["<module>", "main", "<module>", "spin_sub"])
    assert whole >= 0.9 * sub, (whole, sub, [r for r in rows if "spin_sub" in r[0]][:3])
print("sub-interpreter (%s, %s): spin_sub %d, spin_main %d" % (sys.argv[3], sys.argv[2], sub, main))
PY
        done
    fi
    # off-CPU time: threads blocked for planted times, under their Python functions
    "$sonde" run --quiet --sample-outside -o py --name off$ran -- "$py" \
        "$src/tests/e2e/pyoffcpu.py" ||
        fail "sonde run pyoffcpu $py exited $?"
    "$sonde" export py/off$ran.sonde --format perfetto -o py --quiet ||
        fail "export perfetto of off$ran"
    python3 "$src/tests/e2e/pyoffcpu_check.py" py/off$ran.json "$label" ||
        fail "off-CPU time of $py"
    # short waits, each under its own Python function: read in the kernel as the thread leaves
    # its CPU (issue 61 #17: read from outside, only a period still open at the next drain had
    # them, 26 of 120 sleeps of 2 ms; and the kernel's record of each sample was taken for the
    # next one's: `long`'s waits showed `short`)
    "$sonde" run --quiet --sample-outside -o py --name sw$ran -- "$py" \
        "$src/tests/e2e/pyswitch.py" || fail "sonde run pyswitch $py exited $?"
    if [ "$way" = kernel ]; then
        python3 - py/sw$ran.json "$label" <<'PY' || fail "short waits' Python functions, $py"
import json, sys
off = json.load(open(sys.argv[1]))["profile"]["off_cpu"]
by = {}
for s in off["stacks"]:
    if s["waits_in"].startswith("clock_nanosleep"):
        f = s.get("python") or "(none)"
        by.setdefault(f, [0, 0.0])
        by[f][0] += s["periods"]
        by[f][1] += s["seconds"]
periods = {f: v[0] for f, v in by.items()}
assert periods.get("short", 0) >= 25 and periods.get("long", 0) >= 25, by  # of 30 each
assert set(by) <= {"short", "long", "warm", "(none)"}, by
assert by["short"][1] < 0.5 * by["long"][1], by  # each wait under its own function
print("short waits (%s): %s" % (sys.argv[2], {f: (n, round(t, 3)) for f, (n, t) in by.items()}))
PY
    fi
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
