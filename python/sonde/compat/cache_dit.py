"""sonde.compat.cache_dit - cache-dit's torch profiler wrapper (002) over sonde.

    from sonde.compat.cache_dit import add_profiler_args, create_profiler_from_args, step

    parser = add_profiler_args(argparse.ArgumentParser())
    args = parser.parse_args()            # --profile --profile-name flux --profile-dir /tmp/p
    profiler = create_profiler_from_args(args, profile_name="flux_inference")
    with profiler:
        image = pipe(prompt, num_inference_steps=3,
                     callback_on_step_end=lambda *a, **k: (step(), k.get("callback_kwargs", {}))[1])
    print(profiler.trace_path)             # /tmp/p/flux_inference-rank0.trace.json.gz

What maps where: the --profile* flags are sonde's own (libsonde's flag parser reads them, so
they mean what they mean to a C program), with 002's defaults: --profile-dir
$CACHE_DIT_TORCH_PROFILER_DIR else /tmp/cache_dit_profiles, --profile-activities CPU GPU,
record_shapes on, wait 0, warmup 1, active 3, repeat 1. The schedule counts steps: call step()
(or the context's .step()) once per denoising step, from diffusers' callback_on_step_end for
instance; a block that counted no step keeps nothing, and says so on stderr. Each rank writes
NAME-rankN.trace.json.gz (Perfetto, chrome://tracing) into the output directory, and the
TensorBoard layout (plugins/profile/NAME/...) beside it; NAME.sonde keeps the raw data. MEM turns
on sonde's memory sampling and, in a program that imported torch, torch.profiler's memory events,
CUDA memory counters per device and torch's CUDA memory snapshot as NAME-memory-*.pickle beside
the trace (sonde.torch.track_cuda; without a CUDA device, one line on stderr says it is off).
"""

import argparse
import functools
import os
import sys
import threading
import time
from pathlib import Path

import sonde

__all__ = ["ProfilerContext", "create_profiler_from_args", "add_profiler_args",
           "profile_function", "step", "default_output_dir", "DEFAULT_OUTPUT_DIR"]

DEFAULT_OUTPUT_DIR = "/tmp/cache_dit_profiles"
_tls = threading.local()


def default_output_dir():
    """$CACHE_DIT_TORCH_PROFILER_DIR, else /tmp/cache_dit_profiles."""
    return os.environ.get("CACHE_DIT_TORCH_PROFILER_DIR") or DEFAULT_OUTPUT_DIR


class ProfilerContext:
    """A profiling context: `with ProfilerContext(...):` records the block into
    output_dir/profile_name-rankN.trace.json.gz under a wait/warmup/active/repeat schedule of
    steps. Disabled, it records nothing and writes nothing."""

    def __init__(self, enabled=True, activities=None, output_dir=None, profile_name=None,
                 with_stack=False, record_shapes=True, wait=0, warmup=1, active=3, repeat=1):
        self.enabled = bool(enabled)
        self.activities = list(activities) if activities else ["CPU", "GPU"]
        self.output_dir = Path(output_dir if output_dir is not None else default_output_dir())
        if profile_name is None:
            profile_name = "profile-" + time.strftime("%Y%m%d-%H%M%S")
        rank, world, _ = sonde.job_rank()
        self.rank = max(rank, 0)
        self.profile_name = profile_name
        # NAME-rankN; sonde appends -rankN itself in a distributed job, so alone it is named so
        self._rank_name = "%s-rank%d" % (profile_name, self.rank)
        self._name = profile_name if world > 1 else self._rank_name
        self.with_stack, self.record_shapes = bool(with_stack), bool(record_shapes)
        self.wait, self.warmup, self.active, self.repeat = wait, warmup, active, repeat
        for k in ("wait", "warmup", "active", "repeat"):
            v = getattr(self, k)
            if not isinstance(v, int) or v < 0:
                raise ValueError("ProfilerContext: %s=%r; expected an integer >= 0" % (k, v))
        self.profiler = None
        self.steps = 0

    @property
    def trace_path(self):
        """The trace's path (a pathlib.Path); final once the block has begun (a name already
        taken in output_dir gets -2, -3, ...)."""
        name = self.profiler.name if self.profiler is not None else self._rank_name
        return self.output_dir / (name + ".trace.json.gz")

    def __enter__(self):
        ns = argparse.Namespace(
            profile=self.enabled, profile_name=self._name, profile_dir=str(self.output_dir),
            profile_activities=self.activities, profile_with_stack=self.with_stack,
            profile_record_shapes=self.record_shapes, profile_wait=self.wait,
            profile_warmup=self.warmup, profile_active=self.active, profile_repeat=self.repeat)
        self.profiler = sonde.create_profiler_from_args(
            ns, config={"formats": ["trace", "tensorboard"]})
        if self.profiler.enabled and "torch" in sys.modules:  # the torch.profiler backend
            from sonde import torch as sonde_torch
            acts, mem = sonde_torch.parse_activities(self.activities)
            sonde_torch.profile_operators(self.profiler, activities=acts, profile_memory=mem,
                                          record_shapes=self.record_shapes,
                                          with_stack=self.with_stack)
            if mem:  # the CUDA memory counters and NAME-memory-*.pickle
                sonde_torch.track_cuda(self.profiler, memory=True, snapshot=True)
        self.steps = 0
        if not hasattr(_tls, "stack"):
            _tls.stack = []
        _tls.stack.append(self)
        return self

    def step(self):
        """One step of the schedule (a denoising step, an iteration)."""
        if self.profiler is None:
            raise RuntimeError("ProfilerContext.step(): the context has not been entered")
        self.profiler.step()
        self.steps += 1

    def __exit__(self, et, ev, tb):
        stack = getattr(_tls, "stack", [])
        if self in stack:
            stack.remove(self)
        p = self.profiler
        if p.enabled and self.steps < self.wait + self.warmup + 1 and et is None:
            print("sonde.compat.cache_dit: %d step(s) counted; the schedule (wait %d, warmup %d, "
                  "active %d) keeps steps from %d on: call step() once per denoising step"
                  % (self.steps, self.wait, self.warmup, self.active, self.wait + self.warmup),
                  file=sys.stderr)
        p.close(raise_on_error=et is None)
        return False


def step():
    """A step of the innermost ProfilerContext entered on this thread (none: nothing)."""
    stack = getattr(_tls, "stack", None)
    if stack:
        stack[-1].step()


def add_profiler_args(parser):
    """Adds the --profile* flags of 002 (sonde's own flags: sonde.add_profiling_args) to an
    argparse parser; unset ones take 002's defaults in create_profiler_from_args."""
    return sonde.add_profiling_args(parser)


def create_profiler_from_args(args, profile_name=None):
    """A ProfilerContext from parsed --profile* flags; profile_name overrides --profile-name."""

    def get(attr, default):
        v = getattr(args, attr, None)
        return default if v is None else v

    return ProfilerContext(
        enabled=bool(getattr(args, "profile", False)),
        activities=get("profile_activities", ["CPU", "GPU"]),
        output_dir=get("profile_dir", None),
        profile_name=profile_name if profile_name is not None else getattr(args, "profile_name",
                                                                           None),
        with_stack=bool(get("profile_with_stack", False)),
        record_shapes=bool(get("profile_record_shapes", True)),
        wait=get("profile_wait", 0), warmup=get("profile_warmup", 1),
        active=get("profile_active", 3), repeat=get("profile_repeat", 1))


def profile_function(enabled=True, profile_name=None, **context):
    """Decorator: each call runs inside its own ProfilerContext (profile_name defaults to the
    function's name; the other keywords are ProfilerContext's)."""

    def wrap(f):
        @functools.wraps(f)
        def run(*a, **kw):
            with ProfilerContext(enabled=enabled, profile_name=profile_name or f.__name__,
                                 **context):
                return f(*a, **kw)

        return run

    return wrap
