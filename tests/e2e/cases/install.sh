# install.sh - the e2e case `install`, sourced by run.sh (index: README.md), which gives it
# $work (its folder, removed at the end), $build, $src, $sonde, $asan and the helpers check,
# fail and expect; it exits non-zero at the first failure, 77 when it cannot run here.
# shellcheck shell=bash
cmake --install "$build" --prefix "$work/prefix" > /dev/null
for f in include/sonde/sonde.h include/sonde/autotrace.h lib/libsonde.a lib/libsonde-autotrace.so \
         lib/pkgconfig/sonde.pc lib/cmake/sonde/sondeConfig.cmake; do
    [ -f "$work/prefix/$f" ] || fail "install lacks $f"
done
soname=$(objdump -p "$work/prefix/lib/libsonde.so" | awk '/SONAME/ {print $2}')
[ "$soname" = "libsonde.so.0" ] || fail "SONAME is '$soname'"
# the installed sonde's --sample-in-thread preloads the installed libsonde.so.0 (beside it:
# ../lib), not the build tree's
if [ -z "$asan" ]; then
    got=$("$work/prefix/bin/sonde" run --quiet --format none --sample-in-thread \
          -o "$work/inj" -- sh -c 'echo "$LD_PRELOAD"') ||
        fail "installed sonde run --sample-in-thread exited $?"
    [ "$(realpath "$got")" = "$(realpath "$work/prefix/lib/libsonde.so.0")" ] ||
        fail "installed sonde run --sample-in-thread preloads '$got'"
fi
# a program outside the tree, with pkg-config and the rpath the README gives for a prefix
# that is not the system's: it starts without LD_LIBRARY_PATH
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
cc -o "$work/minimal" "$src/examples/minimal.c" $(pkg-config --cflags --libs sonde) \
    -Wl,-rpath,"$(pkg-config --variable=libdir sonde)"
(cd "$work" && env -u LD_LIBRARY_PATH ./minimal > /dev/null) || fail "minimal did not start: $(cd "$work" && ./minimal 2>&1 | head -2)"
check count "$work/sonde-out/minimal.json" decode 10
# the installed libsonde-autotrace finds libsonde.so.0 beside itself, and its .pc file builds
# an instrumented program
readelf -d "$work/prefix/lib/libsonde-autotrace.so" | grep -q 'RUNPATH.*\[\$ORIGIN\]' ||
    fail "libsonde-autotrace has no \$ORIGIN RUNPATH: $(readelf -d "$work/prefix/lib/libsonde-autotrace.so" | grep -i path)"
printf '#include <stdio.h>\nstatic int sq(int x) { return x * x; }\nint main(void) { int s = 0; for (int i = 0; i < 5; i++) s += sq(i); printf("%%d\\n", s); return 0; }\n' > "$work/traced.c"
cc -g -o "$work/traced" "$work/traced.c" $(pkg-config --cflags --libs sonde-autotrace) \
    -Wl,-rpath,"$(pkg-config --variable=libdir sonde-autotrace)"
(cd "$work" && env -u LD_LIBRARY_PATH SONDE_NAME=traced ./traced > traced.out) || fail "traced did not start"
[ "$(cat "$work/traced.out")" = 30 ] || fail "traced printed $(cat "$work/traced.out")"
check count "$work/sonde-out/traced.json" sq 5
# the README's quick start, exactly as printed: enabled, disabled, and with a directory that
# cannot be made; each exits 0 and prints its figures or why nothing was recorded
awk '/^## Quick start in C/ {q=1} q && /^```c/ {on=1; next} on && /^```/ {exit} on' "$src/README.md" > "$work/quick.c"
grep -q "sonde_create" "$work/quick.c" || fail "no quick start found in README.md"
cc -Wall -Wextra -Werror -o "$work/quick" "$work/quick.c" $(pkg-config --cflags --libs sonde) \
    -Wl,-rpath,"$(pkg-config --variable=libdir sonde)"
cd "$work"
env -u LD_LIBRARY_PATH ./quick > q1.txt 2> q1.err || fail "quick start exited $?: $(cat q1.err)"
grep -q "^[0-9.]* tokens/s over 128 steps$" q1.txt || fail "quick start printed: $(cat q1.txt q1.err)"
check count sonde-out/llm-serve.json decode 128
SONDE_ENABLED=0 ./quick > q2.txt 2> q2.err || fail "quick start, disabled, exited $?: $(cat q2.err)"
grep -q "^not profiled: profiling is disabled" q2.txt || fail "disabled quick start printed: $(cat q2.txt q2.err)"
touch blocker
SONDE_OUTPUT_DIR=blocker/out ./quick > q3.txt 2> q3.err || fail "quick start, unwritable, exited $?: $(cat q3.err)"
grep -q "^not profiled: cannot create output directory blocker/out" q3.txt || fail "unwritable quick start printed: $(cat q3.txt q3.err)"
# the quick start drops sonde_config_from_env's code, as many programs will: a bad value is
# still said on stderr by sonde_create, and a variable that is no key is named with the one
# it most likely meant
SONDE_ENABLED=maybe SONDE_OUTDIR=elsewhere ./quick > q4.txt 2> q4.err || fail "quick start, bad env, exited $?"
grep -qF 'sonde: the environment was not applied (sonde_config_from_env failed): SONDE_ENABLED: "maybe" is not a boolean' q4.err || fail "bad SONDE_ENABLED not said: $(cat q4.err)"
grep -qF "sonde: SONDE_OUTDIR is not a sonde variable and is ignored (did you mean SONDE_OUTPUT_DIR?)" q4.err || fail "SONDE_OUTDIR not named: $(cat q4.err)"
[ "$(grep -c SONDE_OUTDIR q4.err)" = 1 ] || fail "SONDE_OUTDIR named more than once: $(cat q4.err)"
grep -q "the environment was not applied" sonde-out/llm-serve-2.json || fail "the report lacks the environment warning"
cd - > /dev/null
# and with CMake's find_package
mkdir -p "$work/consumer"
cp "$src/examples/minimal.c" "$work/consumer/"
cat > "$work/consumer/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(sonde REQUIRED)
add_executable(minimal minimal.c)
target_link_libraries(minimal PRIVATE sonde::sonde_static)
CM
cmake -S "$work/consumer" -B "$work/consumer/build" -DCMAKE_PREFIX_PATH="$work/prefix" > /dev/null
cmake --build "$work/consumer/build" > /dev/null
(cd "$work/consumer" && ./build/minimal > /dev/null)
check count "$work/consumer/sonde-out/minimal.json" load_model 1
# the Python package installed with the library (its extension carries libsonde inside)
# where the interpreter looks under the prefix: lib/pythonX.Y/site-packages (dist-packages
# for Debian's python3)
site=$(find "$work/prefix/lib" -path "*/python3.*/*-packages" -maxdepth 2 -type d | head -1)
[ -n "$site" ] && [ -f "$site/sonde/__init__.py" ] || fail "no sonde package under $work/prefix/lib/python3.*/"
(cd "$work" && env -u LD_LIBRARY_PATH PYTHONPATH="$site" \
    python3 -c 'import sonde, sys
with sonde.Profiler({"name": "py", "collect_gpu": False}) as p:
    with p.profile("installed"):
        pass
assert sonde._sonde.__file__.startswith(sys.argv[1]), sonde._sonde.__file__' "$work/prefix/lib/")
check count "$work/sonde-out/py.json" installed 1
# `make python-install` into a virtual environment's interpreter, from this checkout, offline;
# the environment's python imports it from anywhere
python3 -m venv --without-pip "$work/venv"
make -s -C "$src" python-install PYTHON="$work/venv/bin/python" PYBUILD="$work/pybuild" > "$work/pyinst.txt"
grep -q "^sonde: Python package installed into $work/venv/lib/python.*/site-packages/sonde for $work/venv/bin/python" "$work/pyinst.txt" \
    || fail "make python-install said: $(cat "$work/pyinst.txt")"
(cd / && env -u PYTHONPATH "$work/venv/bin/python" -c 'import sonde, sys
with sonde.Profiler({"name": "venv", "output_dir": sys.argv[1], "collect_gpu": False}) as p:
    with p.profile("from_venv"):
        pass
assert sonde._sonde.__file__.startswith(sys.prefix), (sonde._sonde.__file__, sys.prefix)' "$work/venvout")
check count "$work/venvout/venv.json" from_venv 1
