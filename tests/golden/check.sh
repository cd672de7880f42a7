#!/usr/bin/env bash
# check.sh BUILD_DIR [SRC_DIR] [--update] - every report of the golden corpus, byte for byte.
# Each run in tests/golden/runs/ (recorded once by record.sh) is exported to every format, and
# read by `sonde summary`, `sonde aggregate` (text, json, csv, markdown; by section and by session), `sonde merge` and
# `sonde diff`; the SHA-256 of every output must equal tests/golden/expected.sha256. A change to
# a report is either a bug or a fix: run with --update, and say in the commit which fix changed
# which file. On a mismatch the outputs are kept in $KEEP (default: a directory named in the
# message) so that they can be compared with an older build's.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "${2:-$(dirname "$0")/../..}" && pwd)
update=0
[ "${3:-}" = "--update" ] && update=1
sonde="$build/tools/sonde/sonde"
runs="$src/tests/golden/runs" expected="$src/tests/golden/expected.sha256"
work=$(mktemp -d "${TMPDIR:-/tmp}/sonde-golden-XXXXXX")
keep=0
trap '[ $keep = 1 ] || rm -rf "$work"' EXIT
cd "$work"
all=all # every format of the one list (src/format/formats.h), offcpu and instances too
for f in "$runs"/*.sonde; do
    n=$(basename "$f" .sonde)
    mkdir -p "$n" && cp "$f" "$n/" # reports go beside the file, as the library writes them
    "$sonde" export "$n/$n.sonde" --format "$all" --quiet
    "$sonde" summary "$n/$n.sonde" > "$n/summary.out"
    "$sonde" summary "$n/$n.sonde" --wide --sort count --top 5 > "$n/summary-wide.out"
    # the JSON report read back (load.c): its summary and its HTML report
    "$sonde" summary "$n/$n.json" > "$n/summary-from-json.out"
    "$sonde" report "$n/$n.json" -o "$n/from-json.html" > /dev/null
    rm "$n/$n.sonde"
done
# every format of the one list (src/format/formats.h) wrote its file for some run of the corpus:
# a file whose name ends with the format's extension and with no longer one of the list
exts=$(sed -n 's/^ *X([a-z]*, SONDE_FORMAT_[A-Z]*, "\([^"]*\)".*/\1/p' "$src/src/format/formats.h")
[ "$(echo "$exts" | wc -l)" = "$(grep -c '^ *X([a-z]*, SONDE_FORMAT_' "$src/src/format/formats.h")" ] ||
    { echo "golden: cannot read the formats' extensions from src/format/formats.h"; exit 1; }
for ext in $exts; do
    found=0
    while IFS= read -r f; do
        longer=0
        for other in $exts; do
            [ ${#other} -gt ${#ext} ] && [[ "$f" == *"$other" ]] && longer=1
        done
        [ $longer = 1 ] || { found=1; break; }
    done < <(find . -type f -name "*$ext")
    [ $found = 1 ] || { echo "golden: no run of the corpus wrote a $ext file (src/format/formats.h)"; exit 1; }
done
# sonde run's recording with the program's own run beside it: one report of both (sm_merge)
mkdir -p joined && cp "$runs"/gpu.sonde "$runs"/gpu.pid*.sonde joined/
"$sonde" export joined/gpu.sonde --format json,txt,trace --quiet
rm joined/*.sonde
mkdir -p job && cp "$runs"/job-rank*.sonde job/
for fmt in text json csv markdown; do
    "$sonde" aggregate job --format $fmt -o "aggregate.$fmt"
    "$sonde" aggregate job --format $fmt --by session -o "aggregate-sessions.$fmt"
done
"$sonde" merge job -o merged.trace.json.gz > merge.out
"$sonde" merge job -o merged.sqlite >> merge.out
mkdir -p jobjson && cp job-rank*/job-rank*.json jobjson/
"$sonde" aggregate jobjson --format json -o aggregate-from-json.json
rm -r jobjson
set +e # diff exits 1 on a regression: its exit status is part of what is checked
"$sonde" diff job/job-rank0.sonde job/job-rank2.sonde > diff.out 2>&1; echo "exit $?" >> diff.out
"$sonde" diff job/job-rank0.sonde job/job-rank2.sonde --format json > diff.json 2>&1; echo "exit $?" >> diff.json
"$sonde" diff job/job-rank0.sonde job/job-rank2.sonde --format markdown > diff.md 2>&1; echo "exit $?" >> diff.md
"$sonde" diff job/job-rank0.sonde job/job-rank1.sonde -- job/job-rank2.sonde --per-instance \
    > diff-instances.out 2>&1; echo "exit $?" >> diff-instances.out
set -e
rm -r job
# a SQLite database's bytes carry the library's version: each is compared as its SQL dump
find . -type f -name "*.sqlite" | while IFS= read -r db; do
    sqlite3 "$db" .dump > "$db.sql" && rm "$db"
done
find . -type f | LC_ALL=C sort | sed 's|^\./||' | xargs sha256sum > got.sha256
sed -i '/ got.sha256$/d' got.sha256
if [ $update = 1 ]; then
    cp got.sha256 "$expected"
    echo "golden: $(wc -l < "$expected") outputs written to $expected"
    exit 0
fi
if ! diff -u "$expected" got.sha256 > golden.diff; then
    keep=1
    echo "FAIL: golden reports differ from tests/golden/expected.sha256 (outputs kept in $work):"
    grep '^[-+][0-9a-f]' golden.diff | awk '{print "  " substr($1,1,1) " " $2}' | sort -k2 -u
    exit 1
fi
echo "golden: $(wc -l < got.sha256) outputs of $(ls "$runs" | wc -l) runs, byte for byte"
