"""sonde.compat.cache_dit - cache-dit's torch profiler module (002) over sonde.

    from sonde.compat.cache_dit import ProfilerContext, create_profiler_from_args

    profiler = create_profiler_from_args(args, profile_name="flux_inference")
    with profiler:                         # the whole block is recorded, as cache-dit records it
        image = pipe(prompt, num_inference_steps=3)
    print(profiler.trace_path)             # /tmp/cache_dit_profiles/flux_inference.trace.json.gz

What the original does, and this module does the same: ProfilerContext(enabled=True,
activities=None, output_dir=None, profile_name=None, with_stack=True, record_shapes=True) records
everything between __enter__ and __exit__ (an exception in the block too) and writes
OUTPUT_DIR/PROFILE_NAME.trace.json.gz, PROFILE_NAME-rankN.trace.json.gz in a job of more than
one process, overwriting a file of that name. OUTPUT_DIR defaults to PROFILER_DIR,
$CACHE_DIT_TORCH_PROFILER_DIR as it was when this module was imported, else
/tmp/cache_dit_profiles; PROFILE_NAME to profile_<unix time>. trace_path is None until an
enabled context is entered, and stays None when it is disabled (nothing is written then).
With MEM among the activities and a CUDA device, torch's memory snapshot and memory_summary()
are written as PROFILE_NAME-rankN-memory-<unix time>.pickle and .txt. What it logs goes to the
logger "cache_dit.profiler" with the original's texts.

What sonde adds: the run's NAME.sonde (every `sonde` command reads it) and the TensorBoard
layout (plugins/profile/NAME/...) beside the trace; the trace holds sonde's sections, steps,
counters and CPU/memory samples on one timeline with torch's operators (sonde.torch's
torch.profiler backend, when the program imported torch). step() marks a step (the
schedule's step when one is given); the --profile-wait/-warmup/-active/-repeat flags that
sonde.add_profiling_args adds, or the wait/warmup/active/repeat keywords, turn on sonde's step
schedule: then only the scheduled steps are kept. docs/python.md lists the differences.
"""

import functools
import logging
import os
import sys
import time
from pathlib import Path

import sonde
from sonde.compat import ActiveStack

__all__ = ["ProfilerContext", "create_profiler_from_args", "create_profiler_context",
           "add_profiler_args", "profile_function", "step", "current", "get_profiler_output_dir",
           "set_profiler_output_dir", "PROFILER_DIR", "NPU_PROFILER_LEVEL_ENV"]

# The original reads the variable once, when the module is imported.
PROFILER_DIR = os.getenv("CACHE_DIT_TORCH_PROFILER_DIR", "/tmp/cache_dit_profiles")
# The variable today's original reads for torch_npu's profiler level on Ascend NPUs. sonde
# records no NPU activity (no NPU here to test one): the name is there for programs that set it.
NPU_PROFILER_LEVEL_ENV = "CACHE_DIT_NPU_PROFILER_LEVEL"
logger = logging.getLogger("cache_dit.profiler")
_active = ActiveStack()
_SCHEDULE = ("wait", "warmup", "active", "repeat")


# What the original's ctx.profiler (a torch.profiler.profile) is read with after the block.
_TORCH_READS = ("key_averages", "events", "export_chrome_trace", "export_stacks",
                "export_memory_timeline", "profiler")


class _Profiler(sonde.Profiler):
    """The context's sonde.Profiler, read also as the original's ctx.profiler is, a
    torch.profiler.profile: key_averages(), events(), export_chrome_trace(), export_stacks()
    are torch's own, over the operators torch recorded in the block (its last window with a
    schedule)."""

    _tp = None  # sonde.torch's TorchProfiler attached, when the program imported torch

    def __getattr__(self, name):
        if name not in _TORCH_READS:
            raise AttributeError("%r object has no attribute %r" % (type(self).__name__, name))
        last = self._tp.last_profile if self._tp is not None else None
        if last is None:
            raise AttributeError(
                "ProfilerContext.profiler.%s: no torch profile to read %s" % (
                    name, "yet: torch's is read once the block has ended"
                    if self._tp is not None else "(torch was not imported when the block began)"))
        return getattr(last, name)


class ProfilerContext:
    """A profiling context: `with ProfilerContext(...):` records the block into
    output_dir/profile_name.trace.json.gz (see the module's documentation). wait, warmup, active
    and repeat (sonde's; None: no schedule, the whole block) keep only the scheduled steps."""

    def __init__(self, enabled=True, activities=None, output_dir=None, profile_name=None,
                 with_stack=True, record_shapes=True, wait=None, warmup=None, active=None,
                 repeat=None):
        self.enabled = enabled
        self.activities = activities or ["CPU", "GPU"]
        self.output_dir = Path(output_dir or PROFILER_DIR).expanduser()
        self.profile_name = profile_name or "profile_%d" % int(time.time())
        self.with_stack = with_stack
        self.record_shapes = record_shapes
        self.wait, self.warmup, self.active, self.repeat = wait, warmup, active, repeat
        for k in _SCHEDULE:
            v = getattr(self, k)
            if v is not None and (not isinstance(v, int) or v < 0):
                raise ValueError("ProfilerContext: %s=%r; expected an integer >= 0" % (k, v))
        self.profiler = None            # the sonde.Profiler while the block runs
        self.trace_path = None
        self.memory_snapshot_path = None
        self.steps = 0
        self._cuda = None

    def _schedule(self):
        """sonde's schedule keys, when any of wait/warmup/active/repeat was given."""
        given = {k: getattr(self, k) for k in _SCHEDULE if getattr(self, k) is not None}
        if not given:
            return {}
        keys = {"wait": 0, "warmup": 1, "active": 3, "repeat": 1}  # the document's defaults
        keys.update(given)
        return keys

    def __enter__(self):
        if not self.enabled:
            return self
        self.output_dir.mkdir(parents=True, exist_ok=True)
        rank, world = sonde._rank_world() or (0, 1)  # torch's group, as the original asks it
        stem = self.profile_name + ("-rank%d" % rank if world > 1 else "")
        self.trace_path = self.output_dir / (stem + ".trace.json.gz")
        keys = {"name": self.profile_name, "output_dir": str(self.output_dir),
                "formats": ["trace", "tensorboard"], "with_stack": self.with_stack,
                "record_shapes": self.record_shapes,
                "collect_memory": "MEM" in self.activities}
        keys.update(self._schedule())
        self.profiler = _Profiler(keys)
        self.steps = 0
        if self.profiler.enabled and "torch" in sys.modules:  # the torch.profiler backend
            from sonde import torch as sonde_torch
            acts, mem = sonde_torch.parse_activities(self.activities)
            self.profiler._tp = sonde_torch.profile_operators(
                self.profiler, activities=acts, profile_memory=mem,
                record_shapes=self.record_shapes, with_stack=self.with_stack,
                keep_last_profile=True)
            if mem:  # CUDA memory counters, and the snapshot when the block ends
                self._cuda = sonde_torch.track_cuda(self.profiler, memory=True, snapshot=True)
        logger.info("Started profiling. Traces will be saved to: %s (activities: %s)"
                    % (self.output_dir, self.activities))
        _active.push(self)
        return self

    def step(self):
        """One step (a denoising step, an iteration): a step span in the trace, and the
        schedule's step when one was given."""
        if self.profiler is None:
            raise RuntimeError("ProfilerContext.step(): the context has not been entered")
        self.profiler.step()
        self.steps += 1

    def __exit__(self, exc_type, exc_val, exc_tb):
        if not self.enabled or self.profiler is None:
            return None
        _active.remove(self)
        p = self.profiler
        logger.info("Exporting trace to: %s" % self.trace_path)
        try:
            p.close(raise_on_error=exc_type is None)
        finally:
            self._place_files(p)
        logger.info("Profiling completed. Trace saved to: %s" % self.trace_path)
        return None

    def _place_files(self, p):
        """The trace and the memory snapshot under the original's names. sonde names a run
        NAME-2, NAME-3... when NAME's files exist; the original overwrites: so does this."""
        if p.file_path is None:  # nothing could be recorded (the directory is not writable)
            return
        made = Path(p.trace_path)
        if made != self.trace_path and made.exists():
            os.replace(made, self.trace_path)
        snap = getattr(self._cuda, "snapshot_path", None)
        if snap:
            import torch
            rank = (sonde._rank_world() or (0, 1))[0]
            stem = self.output_dir / ("%s-rank%d-memory-%d" % (self.profile_name, rank,
                                                                int(time.time())))
            os.replace(snap, str(stem) + ".pickle")
            self.memory_snapshot_path = Path(str(stem) + ".pickle")
            logger.info("Memory snapshot saved to: %s" % self.memory_snapshot_path)
            with open(str(stem) + ".txt", "w") as f:
                f.write(torch.cuda.memory_summary())
            logger.info("Memory summary saved to: %s.txt" % stem)


def current():
    """The innermost ProfilerContext entered on this thread, or None (sonde's addition)."""
    return _active.top()


def step():
    """A step of the innermost ProfilerContext entered on this thread (none: nothing)."""
    c = _active.top()
    if c is not None:
        c.step()


def add_profiler_args(parser):
    """Adds the --profile* flags to an argparse parser: cache-dit's (--profile, --profile-name,
    --profile-dir, --profile-activities, --profile-with-stack, --profile-record-shapes) and
    sonde's others (sonde.add_profiling_args)."""
    return sonde.add_profiling_args(parser)


def create_profiler_from_args(args, profile_name=None):
    """A ProfilerContext from parsed --profile* flags, as the original's examples make it:
    profile_name, else --profile-name; with_stack and record_shapes default to True; the
    --profile-wait/-warmup/-active/-repeat flags (sonde's), when given, set the schedule."""
    return ProfilerContext(
        enabled=args.profile,
        activities=getattr(args, "profile_activities", None) or ["CPU", "GPU"],
        output_dir=getattr(args, "profile_dir", None),
        profile_name=profile_name or getattr(args, "profile_name", None),
        with_stack=_flag(args, "profile_with_stack", True),
        record_shapes=_flag(args, "profile_record_shapes", True),
        **{k: getattr(args, "profile_" + k, None) for k in _SCHEDULE})


def _flag(args, attr, default):
    v = getattr(args, attr, default)
    return default if v is None else v


def create_profiler_context(enabled=False, activities=None, output_dir=None, profile_name=None,
                            **kwargs):
    """A ProfilerContext; disabled unless enabled is given (the original's default)."""
    return ProfilerContext(enabled=enabled, activities=activities, output_dir=output_dir,
                           profile_name=profile_name, **kwargs)


def get_profiler_output_dir():
    """$CACHE_DIT_TORCH_PROFILER_DIR now, else PROFILER_DIR."""
    return os.environ.get("CACHE_DIT_TORCH_PROFILER_DIR", PROFILER_DIR)


def set_profiler_output_dir(path):
    """Sets $CACHE_DIT_TORCH_PROFILER_DIR (as the original does: contexts made in this process
    keep using PROFILER_DIR, read at import; child processes see the new directory)."""
    os.environ["CACHE_DIT_TORCH_PROFILER_DIR"] = path


def profile_function(enabled=True, activities=None, output_dir=None, profile_name=None,
                     with_stack=False, record_shapes=True):
    """Decorator factory: each call runs inside its own ProfilerContext (profile_name defaults
    to the function's name)."""

    def decorator(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with ProfilerContext(enabled=enabled, activities=activities, output_dir=output_dir,
                                 profile_name=profile_name or func.__name__,
                                 with_stack=with_stack, record_shapes=record_shapes):
                return func(*args, **kwargs)

        return wrapper

    return decorator

