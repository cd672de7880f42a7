"""sonde.compat - the APIs of the Python profilers sonde replaces, one module each, so their
users switch by changing one import line. Each module only maps names onto sonde's own API
(sonde.Profiler); the measuring is libsonde's.

    sonde.compat.diffulex   DiffulexProfiler, ProfilerConfig, PerformanceMetrics
    sonde.compat.inferix    InferixProfiler, ProfilingConfig, ProfilingIntegration, GPUMonitor,
                            the decorators, aggregate_reports (and its command line)
    sonde.compat.cache_dit  create_profiler_from_args, ProfilerContext, profile_function,
                            add_profiler_args, step
    sonde.compat.torch_decorator  profiler (the decorator factory), step_profiler
    sonde.compat.artifex    JAXProfiler, ProfilingConfig, MemoryProfiler, MemoryProfileConfig
                            (framework-neutral training callbacks)
"""

import gzip
import os
import shutil


def _unzip_to(src, dst):
    """Writes the gunzipped src (a .json.gz trace) at dst, whole or not at all."""
    d = os.path.dirname(os.path.abspath(dst))
    os.makedirs(d, exist_ok=True)
    with gzip.open(src, "rb") as f, open(dst + ".tmp", "wb") as out:
        shutil.copyfileobj(f, out)
    os.replace(dst + ".tmp", dst)
