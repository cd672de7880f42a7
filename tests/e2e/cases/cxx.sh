# cxx.sh - the e2e case `cxx`, sourced by run.sh (index: README.md), which gives it
# $work (its folder, removed at the end), $build, $src, $sonde, $asan and the helpers check,
# fail and expect; it exits non-zero at the first failure, 77 when it cannot run here.
# shellcheck shell=bash
"$build/tests/cxx_scope" "$work"
check count "$work/cxx.json" "cxx outer" 5
check count "$work/cxx.json" "inner" 5
