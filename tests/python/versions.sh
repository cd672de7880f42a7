#!/usr/bin/env bash
# versions.sh SRC TWIN FAKE_NVML - the Python package as users get it, on every interpreter these
# machines have: Debian's /usr/bin/python3 (with python3-torch) and the pyenv 3.11, 3.12 and
# 3.13. For each, a fresh virtual environment, `pip install SRC` (offline, through the tree's
# build backend, python/sonde_build.py), then the Python suite run by that interpreter with no
# PYTHONPATH: the package is the installed one. Then `pip wheel` into a second environment, and
# README's Python quick start as printed. An interpreter that is not on this machine is skipped
# with a line saying so; the last line counts what passed.
set -euo pipefail
src=$(cd "$1" && pwd) twin=$(realpath "$2") fake_nvml=$(realpath "$3")   # test_sonde's C twin, the compat tests' NVML
work=$(mktemp -d "${TMPDIR:-/tmp}/sonde-versions.XXXXXX")
trap 'rm -rf "$work"' EXIT
pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}
passed=0 failed=0 skipped=0

# The newest pyenv build of a minor version, or nothing.
pyenv_py() { ls -d "$pyenv_root"/versions/"$1".*/bin/python3 2>/dev/null | sort -V | tail -1; }

# The suite's environment: the fake NVML of the compat tests, the C twin of test_sonde, the
# reference documents beside the checkout; no PYTHONPATH.
suite_env=(env -u PYTHONPATH TMPDIR="$work" SONDE_TWIN="$twin"
           REFERENCE_DOCS_DIR="$src/../shared/reference"
           SONDE_NVML_LIBRARY="$fake_nvml" FAKE_NVML_DEVICES=4)

run_suite() { # VENV_PYTHON LABEL TESTS...
    local py=$1 label=$2 t
    shift 2
    for t in "$@"; do
        if (cd "$work" && "${suite_env[@]}" "$py" "$src/tests/python/$t.py") > "$work/$label-$t.log" 2>&1; then
            echo "  $t: $(tail -1 "$work/$label-$t.log")"
        else
            tail -40 "$work/$label-$t.log"
            echo "FAIL: $label: $t"
            return 1
        fi
    done
}

# What a user checks first: import, a profiled script, `sonde summary` on its file and
# `python -m sonde script.py`, all from the environment alone.
first_steps() { # VENV LABEL
    local venv=$1 label=$2 d="$work/$2-steps"
    mkdir -p "$d"
    cat > "$d/script.py" <<'PY'
import sonde
with sonde.Profiler({"name": "first", "output_dir": "out", "formats": ["json"]}) as prof:
    for _ in range(3):
        with prof.profile("step"):
            sum(range(1000))
PY
    (cd "$d" && env -u PYTHONPATH "$venv/bin/python" -c \
        'import sonde, importlib.metadata as m, sys; v = m.version("sonde"); assert sonde.__version__ == v, (sonde.__version__, v); assert sonde.__file__.startswith(sys.prefix), sonde.__file__' &&
     env -u PYTHONPATH "$venv/bin/python" script.py &&
     env -u PYTHONPATH "$venv/bin/sonde" summary out/first.sonde | grep -q "^step  *3 " &&
     env -u PYTHONPATH "$venv/bin/python" -m sonde --profile-dir traced script.py > /dev/null &&
     ls traced/*.sonde > /dev/null) > "$work/$label-steps.log" 2>&1 ||
        { cat "$work/$label-steps.log"; echo "FAIL: $label: import, script, sonde summary, python -m sonde"; return 1; }
    echo "  import, a profiled script, sonde summary, python -m sonde: ok"
}

one() { # LABEL PYTHON PIP_FLAGS [venv flags]
    local label=$1 py=$2 pip_flags=$3
    shift 3
    if [ -z "$py" ] || [ ! -x "$py" ]; then
        echo "SKIP: $label: no such interpreter on this machine"
        skipped=$((skipped + 1))
        return 0
    fi
    local venv="$work/venv-$label"
    echo "== $label: $py ($("$py" -c 'import sys; print(sys.version.split()[0])'))"
    if ! "$py" -m venv "$@" "$venv" > "$work/$label-venv.log" 2>&1; then
        cat "$work/$label-venv.log"; echo "FAIL: $label: python -m venv"; failed=$((failed + 1)); return 0
    fi
    if ! env -u PYTHONPATH "$venv/bin/pip" install --no-index $pip_flags "$src" > "$work/$label-pip.log" 2>&1; then
        tail -40 "$work/$label-pip.log"; echo "FAIL: $label: pip install"; failed=$((failed + 1)); return 0
    fi
    echo "  pip install: $(grep -o 'Successfully installed.*' "$work/$label-pip.log")"
    local tests=(test_sonde test_trace test_compat_diffulex test_compat_inferix test_compat_cache_dit
                 test_compat_torch_decorator test_compat_artifex test_parity_surface)
    if "$venv/bin/python" -c "import torch" > /dev/null 2>&1; then
        tests+=(test_torch test_torch_profiler test_parity_behaviour)
    fi
    if first_steps "$venv" "$label" && run_suite "$venv/bin/python" "$label" "${tests[@]}"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
    fi
}

# Debian's and 3.13 with --no-build-isolation (the backend needs nothing either way), the
# others with pip's default isolation; Debian's venv sees its python3-torch
one debian /usr/bin/python3 --no-build-isolation --system-site-packages
one pyenv-3.11 "$(pyenv_py 3.11)" ""
one pyenv-3.12 "$(pyenv_py 3.12)" ""
one pyenv-3.13 "$(pyenv_py 3.13)" --no-build-isolation

# pip install from a checkout its user cannot write (it failed: build-pip/ was made inside it):
# as nobody, a read-only copy of the tracked files, HOME a folder of nobody's; Debian's
# interpreter (the pyenv ones are under /root, out of nobody's reach). Root only: root writes
# anywhere, and only root can become nobody.
if [ "$(id -u)" = 0 ] && command -v setpriv > /dev/null && [ -x /usr/bin/python3 ] &&
   git -C "$src" rev-parse --git-dir > /dev/null 2>&1; then
    echo "== pip install from a read-only checkout, as nobody: /usr/bin/python3"
    ro=$(mktemp -d /tmp/sonde-ro-XXXXXX) # not under TMPDIR: CI's is in the clone, nobody's out
    as_nobody=(setpriv --reuid=nobody --regid=nogroup --clear-groups env -u PYTHONPATH HOME="$ro/home")
    if mkdir "$ro/src" "$ro/home" && chown nobody "$ro/home" && chmod 755 "$ro" &&
       git -C "$src" ls-files -z | (cd "$src" && tar --null -T - -cf -) | tar -C "$ro/src" -xf - &&
       chmod -R a-w "$ro/src" && /usr/bin/python3 -m venv "$ro/venv" && chown -R nobody "$ro/venv" &&
       "${as_nobody[@]}" "$ro/venv/bin/pip" install --no-index --no-build-isolation "$ro/src" \
           > "$work/ro-pip.log" 2>&1 &&
       [ ! -e "$ro/src/build-pip" ] && [ -d "$ro/home/.cache/sonde-build" ] &&
       "${as_nobody[@]}" "$ro/venv/bin/python" -c 'import sonde; assert sonde.Profiler' \
           >> "$work/ro-pip.log" 2>&1; then
        echo "  built in ~/.cache/sonde-build, the checkout untouched"
        passed=$((passed + 1))
    else
        tail -30 "$work/ro-pip.log"; ls -la "$ro/src" | head -5
        echo "FAIL: pip install from a read-only checkout"; failed=$((failed + 1))
    fi
    chmod -R u+w "$ro" 2> /dev/null; rm -rf "$ro"
fi

# a wheel, built once and installed into a second environment of the same interpreter
wpy=$(pyenv_py 3.12)
[ -n "$wpy" ] || wpy=/usr/bin/python3
echo "== wheel: $wpy"
if "$wpy" -m venv "$work/venv-wheel-build" && "$wpy" -m venv "$work/venv-wheel" &&
   env -u PYTHONPATH "$work/venv-wheel-build/bin/pip" wheel --no-index "$src" -w "$work/dist" > "$work/wheel.log" 2>&1 &&
   env -u PYTHONPATH "$work/venv-wheel/bin/pip" install --no-index "$work"/dist/sonde-*.whl >> "$work/wheel.log" 2>&1 &&
   first_steps "$work/venv-wheel" wheel; then
    echo "  $(basename "$work"/dist/sonde-*.whl)"
    passed=$((passed + 1))
else
    tail -30 "$work/wheel.log"; echo "FAIL: the wheel"; failed=$((failed + 1))
fi

# README's Python quick start, its command lines as printed (HOME: a fresh one)
echo "== README's Python quick start"
readme_block() { # N: the Nth fenced block of "## From Python"
    python3 - "$src/README.md" "$1" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
part = text.split("## From Python", 1)[1].split("\n## ", 1)[0]
print(re.findall(r"```\w*\n(.*?)```", part, re.S)[int(sys.argv[2])], end="")
PY
}
home="$work/home" && mkdir -p "$home/app"
if (cd "$src" && env -u PYTHONPATH HOME="$home" bash -euo pipefail -c "$(readme_block 0)") > "$work/readme.log" 2>&1 &&
   readme_block 1 > "$home/app/example.py" &&
   (cd "$home/app" && env -u PYTHONPATH HOME="$home" "$home/venv-sonde/bin/python" example.py &&
    python3 -c 'import json, sys
r = json.load(open("sonde-out/inference.json"))
d = [s for s in r["sections"] if s["name"] == "decode"]
assert d and d[0]["count"] == 1, r["sections"]' &&
    cp example.py my_script.py &&
    env -u PYTHONPATH HOME="$home" bash -euo pipefail -c "$(readme_block 2)") >> "$work/readme.log" 2>&1; then
    echo "  the commands and the example ran as printed"
    passed=$((passed + 1))
else
    tail -30 "$work/readme.log"; echo "FAIL: README's Python quick start"; failed=$((failed + 1))
fi

echo "versions: $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
