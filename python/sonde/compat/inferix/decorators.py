"""sonde.compat.inferix.decorators - Inferix's method decorators (inferix.profiling.decorators).

As the original, each decorates a method of a pipeline object and uses that object's profiler
when `self._profiling_enabled` is true and `self._profiler` is not None (else the method runs
unprofiled); the *_func extractors are called with (args, kwargs) (add_profiling_event's with
(result, *args, **kwargs)), and one that raises is ignored. sonde adds: an object without those
attributes but with a `profiler` attribute holding an InferixProfiler (or a
ProfilingIntegration), or a call made inside a session of an InferixProfiler on this thread,
uses that profiler."""

import contextlib
import functools
import time

from .profiler import InferixProfiler, current_profiler

__all__ = ["profile_method", "profile_layer", "profile_session", "profile_streaming",
           "profile_diffusion_step", "profile_model_parameters", "profile_block_computation",
           "add_profiling_event"]


def _profiler_of(obj):
    """The profiler a decorated method of obj uses, or None."""
    if getattr(obj, "_profiling_enabled", False) and getattr(obj, "_profiler", None) is not None:
        return obj._profiler
    if hasattr(obj, "_profiling_enabled"):  # the original's switch, turned off
        return None
    p = getattr(obj, "profiler", None)
    p = getattr(p, "profiler", p) if not isinstance(p, InferixProfiler) else p
    if isinstance(p, InferixProfiler):
        return p
    return current_profiler()


def _extract(fn, *args):
    """An extractor's dict ({} without one, or when it raised)."""
    if fn is None:
        return {}
    try:
        d = fn(*args)
    except Exception:  # the original ignores an extractor's failure
        return {}
    return dict(d) if isinstance(d, dict) else {}


def profile_method(stage_name=None, metadata=None):
    """Each call of the method is a stage (stage_name, else the method's name)."""
    if callable(stage_name):  # sonde: also usable bare, @profile_method
        return profile_method()(stage_name)

    def decorator(func):
        @functools.wraps(func)
        def wrapper(self, *args, **kwargs):
            p = _profiler_of(self)
            ctx = p.stage(stage_name or func.__name__, metadata) if p is not None \
                else contextlib.nullcontext()
            with ctx:
                return func(self, *args, **kwargs)
        return wrapper
    return decorator


def profile_layer(layer_name=None, parameters_count=None):
    """Each call of the method is a layer computation (its time in computation_analysis)."""
    def decorator(func):
        @functools.wraps(func)
        def wrapper(self, *args, **kwargs):
            p = _profiler_of(self)
            name = layer_name or func.__name__
            start = p.start_layer_computation(name) if p is not None else time.time()
            try:
                return func(self, *args, **kwargs)
            finally:
                if p is not None:
                    p.end_layer_computation(name, start, parameters_count)
        return wrapper
    return decorator


def profile_session(session_id, tags=None):
    """Each call of the method is a whole session session_id (its reports written when the
    method returns or raises)."""
    def decorator(func):
        @functools.wraps(func)
        def wrapper(self, *args, **kwargs):
            p = _profiler_of(self)
            if p is not None:
                p.start_session(session_id, tags)
            try:
                return func(self, *args, **kwargs)
            finally:
                if p is not None:
                    p.end_session()
        return wrapper
    return decorator


def _timed(func, record):
    """func wrapped: each call timed, then record(profiler, ms, args, kwargs) when the call's
    object has a profiler (whether the call returned or raised)."""
    @functools.wraps(func)
    def wrapper(self, *args, **kwargs):
        start = time.time()
        try:
            return func(self, *args, **kwargs)
        finally:
            p = _profiler_of(self)
            if p is not None:
                record(p, (time.time() - start) * 1000, args, kwargs)
    return wrapper


def _after(func, record):
    """func wrapped: after a call that returned, record(profiler, result, args, kwargs) when
    the call's object has a profiler."""
    @functools.wraps(func)
    def wrapper(self, *args, **kwargs):
        result = func(self, *args, **kwargs)
        p = _profiler_of(self)
        if p is not None:
            record(p, result, args, kwargs)
        return result
    return wrapper


def profile_streaming(batch_size_func=None):
    """Each call streams a batch: its time as the encoding time, its size from
    batch_size_func(args, kwargs) (else 1)."""
    def record(p, ms, args, kwargs):
        n = 1
        if batch_size_func is not None:
            try:
                n = batch_size_func(args, kwargs)
            except Exception:  # the original falls back to 1
                n = 1
        p.record_streaming_event(batch_size=n, encoding_time_ms=ms)
    return lambda func: _timed(func, record)


def profile_diffusion_step(step_func=None):
    """Each call is a diffusion step timed by the call; step, timestep, block_size and
    guidance_scale from step_func(args, kwargs) (else 0, 0.0, 1, None)."""
    def record(p, ms, args, kwargs):
        info = _extract(step_func, args, kwargs)
        p.record_diffusion_step(step=info.get("step", 0), timestep=info.get("timestep", 0.0),
                                block_size=info.get("block_size", 1), computation_time_ms=ms,
                                guidance_scale=info.get("guidance_scale"))
    return lambda func: _timed(func, record)


def profile_model_parameters(model_name_func=None):
    """After each call, a model's parameters: model_name, parameters_count and model_type from
    model_name_func(args, kwargs) (else "unknown_model", 0, "unknown")."""
    def record(p, result, args, kwargs):
        info = _extract(model_name_func, args, kwargs)
        p.record_model_parameters(model_name=info.get("model_name", "unknown_model"),
                                  parameters_count=info.get("parameters_count", 0),
                                  model_type=info.get("model_type", "unknown"))
    return lambda func: _after(func, record)


def profile_block_computation(block_info_func=None):
    """After each call, a block: block_index, block_size, computation_time_ms and
    memory_usage_mb from block_info_func(args, kwargs) (else 0, 1, 0.0, 0.0)."""
    def record(p, result, args, kwargs):
        info = _extract(block_info_func, args, kwargs)
        p.record_block_computation(block_index=info.get("block_index", 0),
                                   block_size=info.get("block_size", 1),
                                   computation_time_ms=info.get("computation_time_ms", 0.0),
                                   memory_usage_mb=info.get("memory_usage_mb", 0.0))
    return lambda func: _after(func, record)


def add_profiling_event(event_name, data_func=None):
    """After each call, the event event_name with data_func(result, *args, **kwargs)'s data."""
    def record(p, result, args, kwargs):
        data = None
        if data_func is not None:
            try:
                data = data_func(result, *args, **kwargs)
            except Exception:  # the original records the event without data
                data = None
        p.add_event(event_name, data)
    return lambda func: _after(func, record)
