"""sonde.compat - the APIs of the Python profilers sonde replaces, one module each, so their
users switch by changing one import line and get every file, key, method and printed line the
original gave. What each records is also recorded by libsonde (sections, events, steps,
operators, samples: one timeline, read by every `sonde` command); the per-call records an
original hands back to its user (Diffulex's PerformanceMetrics, Inferix's session reports) are
kept as the original keeps them. docs/python.md lists, per module, what differs and why.

    sonde.compat.diffulex   DiffulexProfiler, ProfilerConfig, PerformanceMetrics, exporters
    sonde.compat.inferix    InferixProfiler, ProfilingConfig, ProfilingIntegration, monitors,
                            reporter, decorators, aggregate_reports (and its command line)
    sonde.compat.cache_dit  ProfilerContext, create_profiler_from_args, profile_function,
                            create_profiler_context, get/set_profiler_output_dir
    sonde.compat.torch_decorator  profiler (the decorator factory), step_profiler
    sonde.compat.artifex    JAXProfiler, ProfilingConfig, MemoryProfiler, MemoryProfileConfig,
                            BaseCallback, CallbackList
"""

import gzip
import os
import shutil
import threading


class UnknownOption(TypeError, ValueError):
    """An option or configuration key a compat module does not know. The originals pass their
    options to a dataclass or a function (Inferix's ProfilingConfig(**d), VizTracer,
    torch.profiler.profile), where an unknown keyword is a TypeError; sonde's message also
    names the source and the nearest key. It is a ValueError too, what sonde raised before."""


class ActiveStack:
    """What a compat module has entered on each thread, innermost last: the "current profiler"
    that its free functions (cache_dit.step, Inferix's decorators) find."""

    def __init__(self):
        self._tls = threading.local()

    def _stack(self):
        s = getattr(self._tls, "stack", None)
        if s is None:
            s = self._tls.stack = []
        return s

    def push(self, x):
        self._stack().append(x)

    def remove(self, x):
        """Takes x's innermost entry off this thread's stack (none: nothing)."""
        s = self._stack()
        for i in range(len(s) - 1, -1, -1):
            if s[i] is x:
                del s[i]
                return

    def top(self):
        """The innermost entry on this thread, or None."""
        s = getattr(self._tls, "stack", None)
        return s[-1] if s else None


def _unzip_to(src, dst):
    """Writes the gunzipped src (a .json.gz trace) at dst, whole or not at all."""
    d = os.path.dirname(os.path.abspath(dst))
    os.makedirs(d, exist_ok=True)
    with gzip.open(src, "rb") as f, open(dst + ".tmp", "wb") as out:
        shutil.copyfileobj(f, out)
    os.replace(dst + ".tmp", dst)
