# pidreuse.sh - the e2e case `pidreuse`, sourced by run.sh (index: README.md), which gives it
# $work (its folder, removed at the end), $build, $src, $sonde, $asan and the helpers check,
# fail and expect; it exits non-zero at the first failure, 77 when it cannot run here.
# shellcheck shell=bash
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
