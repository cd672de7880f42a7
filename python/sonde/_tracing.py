"""Python function tracing: every Python call a section (the tracer itself is C: _pytrace.c).

    with sonde.Profiler(name="train") as prof:
        with sonde.trace_python():          # or Profiler(trace_python=True) for its whole life
            train_one_epoch()

Filters and limits are the profiler's trace_python_* keys (docs/configuration.md), which the
arguments of trace_python() override. docs/python.md says what tracing costs and how to keep
the trace small.
"""

import os
import site
import sys
import sysconfig
import threading

from . import _sonde

_lock = threading.Lock()


def _prefixes():
    """(skip, keep): file prefixes of the standard library and of sonde itself (left out), and
    of the places third-party packages live (kept, though they may sit under the standard
    library's directory). The longest prefix that matches a file decides."""
    def norm(p):
        return os.path.join(os.path.realpath(p), "") if p else None

    skip, keep = set(), set()
    for k in ("stdlib", "platstdlib"):
        p = sysconfig.get_paths().get(k)
        if p:
            skip.add(norm(p))
            skip.add(os.path.join(os.path.abspath(p), ""))
    skip.add(os.path.join(os.path.dirname(os.path.abspath(__file__)), ""))
    skip.add(norm(os.path.dirname(__file__)))
    skip.add("<frozen ")
    places = []
    for k in ("purelib", "platlib"):
        places.append(sysconfig.get_paths().get(k))
    try:
        places += site.getsitepackages()
    except AttributeError:  # a virtualenv's old site.py
        pass
    places.append(getattr(site, "USER_SITE", None))
    for p in places:
        if p:
            keep.add(norm(p))
            keep.add(os.path.join(os.path.abspath(p), ""))
    keep -= skip
    return sorted(skip)[:16], sorted(keep)[:16]


def _key(profiler, key, value, conv):
    if value is not None:
        return value
    v = profiler.config.get(key)
    return conv(v) if v not in (None, "") else None


# The mechanism of tracers not given one: "auto" (the faster on this interpreter, measured by
# bench/bench_python.py), "monitoring" or "profile".
MECHANISM = "auto"


class PythonTracer:
    """Traces Python calls into a profiler while started (one tracer at a time per process).

    profiler: a sonde.Profiler (None: the one entered with `with` on this thread). The other
    arguments override the profiler's keys: include / exclude (comma-separated globs, or a list,
    on the qualified name module.qualname, the module or the file), max_depth, c_calls (C
    functions called from Python become sections too), hot_calls and hot_s (a function more
    than half of whose first hot_calls calls took under hot_s seconds is counted and summed
    from then on),
    mechanism ("monitoring": sys.monitoring, CPython 3.12 and later; "profile": the profiling
    hook; None or "auto": MECHANISM, whose "auto" is the faster on this interpreter,
    sys.monitoring from 3.12 on). After start(), .mechanism says which one runs."""

    def __init__(self, profiler=None, *, include=None, exclude=None, max_depth=None,
                 c_calls=None, hot_calls=None, hot_s=None, mechanism=None):
        if profiler is None:
            from . import current
            profiler = current()
            if profiler is None:
                raise RuntimeError("sonde.trace_python(): no profiler: pass one, or call it "
                                   "inside `with sonde.Profiler(...)`")
        self.profiler = profiler

        def globs(v):
            return ",".join(v) if isinstance(v, (list, tuple)) else v

        self._args = dict(
            include=globs(_key(profiler, "trace_python_include", include, str)),
            exclude=globs(_key(profiler, "trace_python_exclude", exclude, str)),
            max_depth=int(_key(profiler, "trace_python_max_depth", max_depth, int) or 1000),
            c_calls=bool(_key(profiler, "trace_python_c_calls", c_calls, lambda v: v == "1")),
            hot_calls=int(_key(profiler, "trace_python_hot_calls", hot_calls, int) or 0),
            hot_s=float(_key(profiler, "trace_python_hot_s", hot_s, float) or 0.0),
        )
        self._mechanism = mechanism
        self.mechanism = None  # what start() used: "monitoring" or "profile"
        self.stats = None
        self._on = False

    def start(self):
        """Starts tracing on every thread, and on threads started from now on (through
        threading.setprofile). Raises RuntimeError when another tracer is on."""
        h = self.profiler._h()
        skip, keep = _prefixes()
        with _lock:
            a = self._args
            self.mechanism = _sonde.trace_start(h, a["include"], a["exclude"], skip, keep,
                                                a["max_depth"], a["c_calls"], a["hot_calls"],
                                                a["hot_s"], self._mechanism or MECHANISM)
            if self.mechanism == "profile":  # sys.monitoring sees new threads by itself
                threading.setprofile(_sonde.trace_thread_hook)
            self._on = True
        return self

    def stop(self):
        """Stops tracing: the calling thread's traced frames that are still open end now; hot
        functions' totals are written. Returns the tracer's counters (functions seen, excluded,
        too_deep, mismatched, hot_functions, table_full). Idempotent."""
        with _lock:
            if self._on:
                self._on = False
                if self.mechanism == "profile":
                    threading.setprofile(None)
                if _sonde.trace_handle() is getattr(self.profiler, "_handle", None):
                    self.stats = _sonde.trace_stop()
                else:
                    self.stats = _sonde.trace_stats()
        return self.stats

    def __enter__(self):
        return self.start()

    def __exit__(self, et, ev, tb):
        self.stop()
        return False


def trace_python(profiler=None, **kwargs):
    """A PythonTracer, to use with `with` (or start() and stop()): every Python function call
    in the block, on every thread, is a section of `profiler`."""
    return PythonTracer(profiler, **kwargs)
