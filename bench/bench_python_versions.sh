#!/usr/bin/env bash
# bench_python_versions.sh [N] - bench/bench_python.py (per call), bench/bench_pyrun.py (a
# whole program against cProfile) and bench/bench_pyshares.py (self-time shares at the defaults
# against every call recorded and cProfile) on every interpreter these machines have
# (Debian's /usr/bin/python3, the pyenv 3.11, 3.12 and 3.13): the extension and the benchmark's
# C floors (bench/noop_cm.c) built for each by CMake, optimised, in build-bench/py-<tag>. A
# missing interpreter is skipped with a line saying so. Run by `make bench`.
set -euo pipefail
cd "$(dirname "$0")/.."
pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}
pyenv_py() { ls -d "$pyenv_root"/versions/"$1".*/bin/python3 2>/dev/null | sort -V | tail -1; }
for entry in "debian:/usr/bin/python3" "pyenv-3.11:$(pyenv_py 3.11)" "pyenv-3.12:$(pyenv_py 3.12)" \
             "pyenv-3.13:$(pyenv_py 3.13)"; do
    tag=${entry%%:*} py=${entry#*:}
    if [ -z "$py" ] || [ ! -x "$py" ]; then
        echo "SKIP: $tag: no such interpreter on this machine"
        continue
    fi
    out=build-bench/py-$tag
    mkdir -p build-bench
    { cmake -S . -B "$out" -DCMAKE_BUILD_TYPE=Release -DSONDE_BUILD_TESTS=OFF \
          -DSONDE_BUILD_EXAMPLES=OFF -DPython3_EXECUTABLE="$py" &&
      cmake --build "$out" -j "$(nproc)" --target sonde_python sonde_python_files sonde_bench_noop; } \
        > "$out.log" 2>&1 || { tail -30 "$out.log"; echo "bench: building for $py failed"; exit 1; }
    PYTHONPATH="$out/python" "$py" bench/bench_python.py "$@"
    PYTHONPATH="$out/python" "$py" bench/bench_pyrun.py
    PYTHONPATH="$out/python" "$py" bench/bench_pyshares.py
done
