#!/usr/bin/env bash
# run_torch.sh SRC BUILD OWN_PYTHON OWN_PYTHONPATH - sonde.torch's tests (test_torch.py,
# test_torch_profiler.py) and the originals' users' programs (test_parity_behaviour.py) on the
# interpreter that has PyTorch: Debian's python3-torch installs into /usr/bin/python3, which may
# not be the python3 the build found (a pyenv one). The extension is then built for it in
# BUILD/python-torch (a Release build of the module alone). SONDE_TORCH_PYTHON picks another
# interpreter. Exit 77 (skipped) when it has no torch.
set -euo pipefail
# Arguments after the fourth: scripts to run (with theirs) instead of the tests (make bench).
src=$1 build=$2 own_py=$3 own_dir=$4
shift 4
py=${SONDE_TORCH_PYTHON:-/usr/bin/python3}
if ! "$py" -c "import torch" >/dev/null 2>&1; then
    echo "SKIP: $py cannot import torch (apt-get install python3-torch)"
    exit 77
fi
if [ "$(realpath "$(command -v "$py")")" = "$(realpath "$own_py")" ]; then
    dir=$own_dir
else
    out=$build/python-torch
    log=$out.log
    { cmake -S "$src" -B "$out" -DCMAKE_BUILD_TYPE=Release -DSONDE_BUILD_TESTS=OFF \
          -DPython3_EXECUTABLE="$py" &&
      cmake --build "$out" -j 2 --target sonde_python sonde_python_files; } > "$log" 2>&1 ||
        { tail -30 "$log"; echo "run_torch.sh: building the extension for $py failed ($log)"; exit 1; }
    dir=$out/python
fi
export PYTHONPATH=$dir
if [ $# -gt 0 ]; then
    exec "$py" "$@"
fi
"$py" "$src/tests/python/test_torch.py"
"$py" "$src/tests/python/test_parity_behaviour.py"
exec "$py" "$src/tests/python/test_torch_profiler.py"
