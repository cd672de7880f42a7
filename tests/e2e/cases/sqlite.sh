# sqlite.sh - the e2e case `sqlite`, sourced by run.sh (index: README.md), which gives it
# $work (its folder, removed at the end), $build, $src, $sonde, $asan and the helpers check,
# fail and expect; it exits non-zero at the first failure, 77 when it cannot run here.
# shellcheck shell=bash
cd "$work"
# issue 64: the run as SQL tables. docs/formats.md's ten queries against planted runs
# (tests/e2e/planted.c), read from the page by sqlite_check.py
command -v sqlite3 > /dev/null || {
    [ "${CI:-}" = true ] && fail "the sqlite3 shell is missing (scripts/setup.sh test installs it)"
    echo "sqlite: no sqlite3 shell here (apt-get install sqlite3): skipped"; exit 77; }
docs="$src/docs/formats.md" sq="$src/tests/e2e/sqlite_check.py" planted="$build/tests/planted"
cupti="$build/tests/libfake_cupti_ok.so" gpu=1
if [ ! -f "$cupti" ]; then
    [ "${CI:-}" = true ] && fail "no fake CUPTI in $build/tests (CUDA's cupti.h not found?)"
    echo "sqlite: no fake CUPTI here: the GPU queries see none"; gpu=0
fi
# one run: GPU work through the fake CUPTI, its CPU sampled, written by the library at its end
SONDE_SAMPLE_HZ=499 SONDE_CUDA_ACTIVITY=$gpu SONDE_CUPTI_LIBRARY="$cupti" "$planted" one run ||
    fail "planted exited $?"
[ -f one/run.sqlite ] || fail "formats: sqlite wrote no one/run.sqlite: $(ls one)"
samples=$(sqlite3 one/run.sqlite "SELECT count(*) > 0 FROM samples")
if [ "$samples" != 1 ]; then
    [ "${CI:-}" = true ] && fail "the planted run has no CPU samples: $(grep -o '"warnings".*' one/run.json)"
    echo "sqlite: no CPU samples here: Q7 not checked"
fi
python3 "$sq" "$docs" planted one/run.sqlite one/run.json one/run.instances.csv $gpu "$samples" ||
    fail "the documented queries on the planted run"
# the same run from a model that folds its sections (the file read twice, sections in the order
# they ended): the same rows and nesting; and `sonde export` writes what the library wrote
"$sonde" export one/run.sonde --format sqlite -o held --quiet || fail "sonde export --format sqlite"
"$sonde" export one/run.sonde --format sqlite --set report_max_sections=5 -o folded --quiet ||
    fail "sonde export --format sqlite of a folding model"
python3 "$sq" "$docs" same held/run.sqlite folded/run.sqlite || fail "held and folded databases differ"
python3 "$sq" "$docs" same held/run.sqlite one/run.sqlite || fail "the library's database differs"
# the sqlite3 shell reads it too (the queries as a user runs them)
sed -n '/^-- Q1:/,/;$/p' "$docs" | sqlite3 one/run.sqlite | head -1 | grep -q '^|6|' ||
    fail "sqlite3 < Q1: $(sed -n '/^-- Q1:/,/;$/p' "$docs" | sqlite3 one/run.sqlite 2>&1 | head -3)"
# four ranks of a job, one after another (their timings apart), merged into one database
for r in 0 1 2 3; do
    "$planted" job job $r 4 || fail "planted rank $r exited $?"
done
"$sonde" merge job -o job.sqlite > merge.out || fail "sonde merge -o job.sqlite: $(cat merge.out)"
grep -q "^job.sqlite: 4 rank(s), aligned on one machine's monotonic clock" merge.out ||
    fail "sonde merge said: $(cat merge.out)"
python3 "$sq" "$docs" ranks job.sqlite job/job-rank{0,1,2,3}.instances.csv ||
    fail "the documented queries on the merged job"
sqlite3 job.sqlite "SELECT count(*) FROM runs WHERE align_ns IS NOT NULL" | grep -qx 4 ||
    fail "runs.align_ns missing"
"$sonde" merge job --format sqlite -o job.db > /dev/null || fail "sonde merge --format sqlite"
"$sonde" merge job -o job.trace.json.gz > /dev/null || fail "sonde merge into a trace"
check trace job.trace.json.gz
expect 2 "--format csv: unknown (trace or sqlite)" "$sonde" merge job --format csv -o x.sqlite
# the golden corpus's runs: Q3 equals each JSON report (sessions, a held run, CPU samples, GPU
# counters, a torch run with operators)
for r in pipeline held sampled torch; do
    cp "$src/tests/golden/runs/$r.sonde" .
    "$sonde" export $r.sonde --format json,sqlite -o gold --quiet || fail "sonde export $r"
    python3 "$sq" "$docs" report gold/$r.sqlite gold/$r.json || fail "Q3 on $r"
done
sqlite3 gold/torch.sqlite "SELECT count(*) > 0, count(section) > 0 FROM operators" | grep -qx '1|1' ||
    fail "torch's operators: $(sqlite3 gold/torch.sqlite 'SELECT count(*), count(section) FROM operators')"
# without libsqlite3: the format fails naming why, and the other reports are still written
expect 2 "the sqlite format needs libsqlite3" env SONDE_SQLITE_LIBRARY=/nonexistent/libsqlite3.so \
    "$sonde" export one/run.sonde --format json,sqlite -o nolib --quiet
[ -f nolib/run.json ] && [ ! -e nolib/run.sqlite ] && [ -z "$(ls nolib | grep tmp)" ] ||
    fail "without libsqlite3: $(ls nolib)"
# an unwritable place: a clear error, no file left
mkdir ro && chmod 555 ro
if [ "$(id -u)" != 0 ]; then
    expect 2 "ro/run.sqlite" "$sonde" export one/run.sonde --format sqlite -o ro --quiet
fi
chmod 755 ro
