# limits.sh - the e2e case `limits`, sourced by run.sh (index: README.md), which gives it
# $work (its folder, removed at the end), $build, $src, $sonde, $asan and the helpers check,
# fail and expect; it exits non-zero at the first failure, 77 when it cannot run here.
# shellcheck shell=bash
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
