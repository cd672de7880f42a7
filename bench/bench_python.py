"""bench_python.py - what a section costs through the Python binding, next to the floor the
same run measures: an empty Python `with` block around a no-op context manager.
Usage: SONDE_LIBRARY=build-bench/libsonde.so.0 python3 bench/bench_python.py [N]"""

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import sonde  # noqa: E402


class Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def per_iter(body, n):
    t = time.perf_counter()
    body(n)
    return (time.perf_counter() - t) / n * 1e9


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
    out = tempfile.mkdtemp(prefix="sonde-bench-py-")
    prof = sonde.Profiler({"name": "bench", "output_dir": out, "formats": [],
                           "collect_cpu": False, "collect_memory": False, "collect_gpu": False},
                          from_env=False)
    nothing = Nothing()

    def floor(k):
        for _ in range(k):
            with nothing:
                pass

    def section(k):
        for _ in range(k):
            with prof.profile("x"):
                pass

    def decorated(k):
        f = prof.profile_function(lambda: None, name="f")
        for _ in range(k):
            f()

    best = {"floor": 1e18, "section": 1e18, "decorated": 1e18}
    for _ in range(5):  # best of five: the machine is shared
        best["floor"] = min(best["floor"], per_iter(floor, n))
        best["section"] = min(best["section"], per_iter(section, n))
        best["decorated"] = min(best["decorated"], per_iter(decorated, n))
    prof.close()
    for f in os.listdir(out):
        os.unlink(os.path.join(out, f))
    os.rmdir(out)
    print("python binding, best of 5 x %d:" % n)
    print("  empty with-block (floor)   %7.0f ns" % best["floor"])
    print("  with prof.profile(name)    %7.0f ns  (%.1fx the floor)"
          % (best["section"], best["section"] / best["floor"]))
    print("  @prof.profile_function     %7.0f ns per call" % best["decorated"])


if __name__ == "__main__":
    main()
