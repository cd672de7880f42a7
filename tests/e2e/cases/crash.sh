# crash.sh - the e2e case `crash`, sourced by run.sh (index: README.md), which gives it
# $work (its folder, removed at the end), $build, $src, $sonde, $asan and the helpers check,
# fail and expect; it exits non-zero at the first failure, 77 when it cannot run here.
# shellcheck shell=bash
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
check count out/segv.json work 1000 --unclean --signal SEGV
expect_status 134 "$build/tests/crashy" abort 500 out
"$build/tests/readback" out/abort.sonde out/abort.json
check count out/abort.json work 500 --unclean --signal ABRT
# the host's own SIGTERM handler still runs (it exits 3), after sonde flushed
expect_status 3 "$build/tests/crashy" term 250 out
grep -q "host handler ran" err.txt || fail "the host's SIGTERM handler did not run"
"$build/tests/readback" out/term.sonde out/term.json
check count out/term.json work 250 --unclean --signal TERM
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
