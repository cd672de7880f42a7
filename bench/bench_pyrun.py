"""bench_pyrun.py [ROUNDS] - what profiling a whole Python program costs: bench/pyworkload.py (a
tokenizer, parser and evaluator with 300 distinct small functions: a parser library's shape) run
plain, under `python -m cProfile -o`, and under `python -m sonde` (its default reports, json and
txt; then with the library's default reports, json, csv, txt, trace and html). Each figure is
the child's CPU time (user + system), best of 3; the added cost is over the plain run measured
in the same session. Issue 35's target: `python -m sonde` adds at most 1.2x what cProfile adds.
Run by bench/bench_python_versions.sh (make bench) with the extension on PYTHONPATH."""

import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOAD = os.path.join(HERE, "pyworkload.py")


def cpu_s(argv, env):
    """The child's user + system CPU seconds."""
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit("bench_pyrun: %s failed:\n%s" % (" ".join(argv), err))
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024.0


def best(argv, env, clean=None):
    runs = []
    for _ in range(3):
        if clean:
            shutil.rmtree(clean, ignore_errors=True)
        runs.append(cpu_s(argv, env))
    return min(r[0] for r in runs), max(r[1] for r in runs)


def main():
    rounds = sys.argv[1] if len(sys.argv) > 1 else "3000"
    py = sys.executable
    tmp = tempfile.mkdtemp(prefix="sonde-pyrun-")
    try:
        env = dict(os.environ, SONDE_COLLECT_GPU="0")
        env.pop("SONDE_FORMATS", None)
        out = os.path.join(tmp, "out")
        plain = best([py, WORKLOAD, rounds], env)
        cprof = best([py, "-m", "cProfile", "-o", os.path.join(tmp, "cp.out"), WORKLOAD, rounds],
                     env)
        sonde = best([py, "-m", "sonde", "--profile-dir", out, WORKLOAD, rounds], env, out)
        full = best([py, "-m", "sonde", "--profile-dir", out, WORKLOAD, rounds],
                    dict(env, SONDE_FORMATS="json,csv,txt,trace,html"), out)
        print("whole program, %s (%s rounds of bench/pyworkload.py), CPU s best of 3:"
              % (py, rounds))
        print("  plain (floor)                         %6.2f s  peak RSS %5.1f MiB" % plain)
        print("  python -m cProfile -o                 %6.2f s  peak RSS %5.1f MiB  (+%.2f s)"
              % (cprof[0], cprof[1], cprof[0] - plain[0]))
        for what, r in (("python -m sonde (json, txt)", sonde),
                        ("python -m sonde, the library's reports", full)):
            print("  %-38s%6.2f s  peak RSS %5.1f MiB  (+%.2f s: %.2fx cProfile's added cost)"
                  % (what, r[0], r[1], r[0] - plain[0],
                     (r[0] - plain[0]) / max(cprof[0] - plain[0], 1e-9)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
