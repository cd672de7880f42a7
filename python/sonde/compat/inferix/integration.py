"""sonde.compat.inferix.integration - Inferix's pipeline integration (the original's
inferix/core/monitoring/profiling.py, imported by its document as
inferix.utils.profiling_integration): ProfilingIntegration, profile_pipeline_function,
create_profiler_from_config and get_profiling_summary, as the original has them."""

import contextlib
import dataclasses
import functools
import hashlib
import time

from .config import ProfilingConfig
from .profiler import InferixProfiler

__all__ = ["ProfilingIntegration", "profile_pipeline_function", "create_profiler_from_config",
           "get_profiling_summary"]


class ProfilingIntegration:
    """An InferixProfiler (its `.profiler`) for a pipeline, or none: config None, disabled, or
    an object whose `profiling_config` is missing or disabled gives profiler None, and every
    call is then a no-op."""

    def __init__(self, config=None):
        self.profiler = None
        if isinstance(config, ProfilingConfig):
            if config.enabled:
                self.profiler = InferixProfiler(config)
        elif config is not None and hasattr(config, "profiling_config"):
            pc = getattr(config, "profiling_config", None)
            if pc is not None and getattr(pc, "enabled", False):
                names = {f.name for f in dataclasses.fields(ProfilingConfig)}
                defaults = ProfilingConfig()
                self.profiler = InferixProfiler(ProfilingConfig(**{
                    n: getattr(pc, n, getattr(defaults, n)) for n in names}))

    @property
    def enabled(self):
        return self.profiler is not None

    def start_session(self, session_id=None, prompt=None, tags=None):
        """Starts a session; without session_id it is session_<md5(prompt)[:8]>_<unix time>
        (session_<unix time> without a prompt). The prompt and its length become tags."""
        if not self.profiler:
            return None
        if session_id is None:
            now = int(time.time())
            session_id = ("session_%s_%d" % (hashlib.md5(prompt.encode("utf-8")).hexdigest()[:8],
                                             now) if prompt else "session_%d" % now)
        t = tags if tags is not None else {}
        if prompt:
            t["prompt"] = prompt
            t["prompt_length"] = len(prompt)
        return self.profiler.start_session(session_id, t)

    def end_session(self):
        return self.profiler.end_session() if self.profiler else None

    @contextlib.contextmanager
    def session(self, session_id=None, prompt=None, tags=None):
        """A session around a block; yields its id (None when profiling is off)."""
        if not self.profiler:
            yield None
            return
        sid = self.start_session(session_id, prompt, tags)
        try:
            yield sid
        finally:
            self.end_session()

    @contextlib.contextmanager
    def stage(self, stage_name, metadata=None):
        if not self.profiler:
            yield
            return
        with self.profiler.stage(stage_name, metadata):
            yield

    def add_event(self, event_name, data=None):
        if self.profiler:
            self.profiler.add_event(event_name, data)

    def get_current_metrics(self):
        return self.profiler.get_current_metrics() if self.profiler else {}

    def cleanup(self):
        if self.profiler:
            self.profiler.cleanup()


def profile_pipeline_function(stage_name, profiling_integration=None):
    """A decorator: each call is stage stage_name of profiling_integration when it is
    enabled."""
    def decorator(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            if profiling_integration and profiling_integration.enabled:
                with profiling_integration.stage(stage_name):
                    return func(*args, **kwargs)
            return func(*args, **kwargs)
        return wrapper
    return decorator


def create_profiler_from_config(config):
    """A ProfilingIntegration from a ProfilingConfig, an object with `profiling_config`, or a
    dict holding the keys under "profiling"; None when config is None or (for a dict)
    profiling is not enabled."""
    if config is None:
        return None
    if isinstance(config, dict):
        d = config.get("profiling", {})
        if d.get("enabled", False):
            return ProfilingIntegration(ProfilingConfig.from_dict(d, "config['profiling']"))
        return None
    return ProfilingIntegration(config)


def get_profiling_summary(profiling_integration):
    """{'profiling_enabled': False} without an enabled integration; else the latest figures:
    timestamp, gpu (memory_used_mb, memory_total_mb, utilization_percent,
    temperature_celsius, memory_utilization_percent) and cpu (usage_percent, memory_used_mb,
    memory_total_mb), those sampled."""
    if not profiling_integration or not profiling_integration.enabled:
        return {"profiling_enabled": False}
    m = profiling_integration.get_current_metrics()
    out = {"profiling_enabled": True, "timestamp": m.get("timestamp", 0)}
    if "gpu" in m:
        g = m["gpu"]
        out["gpu"] = {"memory_used_mb": g.get("total_gpu_memory_used_mb", 0),
                      "memory_total_mb": g.get("total_gpu_memory_total_mb", 0),
                      "utilization_percent": g.get("max_gpu_utilization", 0),
                      "temperature_celsius": g.get("max_gpu_temperature", 0)}
        if out["gpu"]["memory_total_mb"] > 0:
            out["gpu"]["memory_utilization_percent"] = (
                100.0 * out["gpu"]["memory_used_mb"] / out["gpu"]["memory_total_mb"])
    if "cpu" in m:
        c = m["cpu"]
        out["cpu"] = {"usage_percent": c.get("cpu_usage_percent", 0),
                      "memory_used_mb": c.get("memory_used_mb", 0),
                      "memory_total_mb": c.get("memory_total_mb", 0)}
    return out
