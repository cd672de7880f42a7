# secure.sh - the e2e case `secure`, sourced by run.sh (index: README.md), which gives it
# $work (its folder, removed at the end), $build, $src, $sonde, $asan and the helpers check,
# fail and expect; it exits non-zero at the first failure, 77 when it cannot run here.
# shellcheck shell=bash
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
