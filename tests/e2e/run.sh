#!/usr/bin/env bash
# run.sh - end-to-end tests: the real binaries on real files. Usage: run.sh TEST BUILD_DIR SRC_DIR
# TEST is one of cases/*.sh (README.md beside this file is their index); this file makes its
# folder and helpers, then sources it.
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

# The case itself: cases/NAME.sh (one file a case; README.md is their index). Its last command
# must succeed: a `check && fail ...` there would end the sourcing with status 1.
case_file="$src/tests/e2e/cases/$test.sh"
[ -f "$case_file" ] || fail "unknown test $test (the cases: $(cd "$src/tests/e2e/cases" && ls | sed 's/\.sh$//' | tr '\n' ' '))"
# shellcheck source=/dev/null
. "$case_file"
echo "e2e $test: passed"
