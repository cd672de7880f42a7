# compiled_out.sh - the e2e case `compiled_out`, sourced by run.sh (index: README.md), which gives it
# $work (its folder, removed at the end), $build, $src, $sonde, $asan and the helpers check,
# fail and expect; it exits non-zero at the first failure, 77 when it cannot run here.
# shellcheck shell=bash
out=$("$build/tests/compiled_out")
[ "$out" = "45" ] || fail "compiled-out program printed $out"
if nm "$build/tests/compiled_out" | grep -q "sonde"; then
    fail "a -DSONDE_DISABLE build still references sonde: $(nm "$build/tests/compiled_out" | grep sonde)"
fi
echo "compiled out: no sonde symbol in the binary"
