"""sonde.compat.artifex - Artifex's profiling callbacks (004) over sonde: JAXProfiler (a trace
window of training steps) and MemoryProfiler (memory every N steps into memory_profile.json).

    from sonde.compat.artifex import JAXProfiler, ProfilingConfig, MemoryProfiler, \\
        MemoryProfileConfig

    callbacks = [JAXProfiler(ProfilingConfig(log_dir="logs/profiles", start_step=10,
                                             end_step=20)),
                 MemoryProfiler(MemoryProfileConfig(log_dir="logs/memory",
                                                    profile_every_n_steps=100))]
    # a trainer calls on_train_begin(trainer), on_step_begin(trainer, step),
    # on_step_end(trainer, step, logs) and on_train_end(trainer) on each

The callbacks are framework-neutral: any trainer that calls those four methods drives them (no
JAX is needed, or used). What maps where: JAXProfiler is a sonde profiler whose step schedule
keeps steps start_step to end_step - 1, in the trainer's own step numbers; its trace is written
into log_dir in the TensorBoard layout (plugins/profile/RUN/HOST_PID.pt.trace.json.gz, for
`tensorboard --logdir log_dir`) and as NAME.trace.json.gz (Perfetto, chrome://tracing); a
.perfetto-trace file comes with sonde's Perfetto format. trace_memory samples host and GPU
memory into the trace; trace_python=True traces every Python call in the window (sonde's
Python function tracing, docs/python.md).
MemoryProfiler is sonde's memory snapshots (memory_every_n_steps), taken every N steps ended by
the sampler thread: memory_profile.json is written when training ends, in 004's shape, each
device ("cuda:N") from torch's allocator when torch with CUDA is present, else from NVML's
memory in use (with the highest use seen as the peak), and the host's resident memory under
"host". "step" counts the steps ended (the trainer's step when it counts from 1).
"""

import dataclasses
import json
import os
import sys

import sonde

__all__ = ["ProfilingConfig", "JAXProfiler", "MemoryProfileConfig", "MemoryProfiler"]


@dataclasses.dataclass
class ProfilingConfig:
    """JAXProfiler's configuration (004's parameters and defaults)."""

    log_dir: str = "logs/profiles"
    start_step: int = 10
    end_step: int = 20
    trace_memory: bool = True
    trace_python: bool = False

    def __post_init__(self):
        if not (isinstance(self.start_step, int) and isinstance(self.end_step, int)
                and 0 <= self.start_step < self.end_step):
            raise ValueError("ProfilingConfig: start_step=%r, end_step=%r; expected integers "
                             "with 0 <= start_step < end_step" % (self.start_step, self.end_step))


@dataclasses.dataclass
class MemoryProfileConfig:
    """MemoryProfiler's configuration (004's parameters and defaults)."""

    log_dir: str = "logs/memory"
    profile_every_n_steps: int = 100
    log_device_memory: bool = True

    def __post_init__(self):
        if not isinstance(self.profile_every_n_steps, int) or self.profile_every_n_steps < 1:
            raise ValueError("MemoryProfileConfig.profile_every_n_steps=%r: expected an integer "
                             ">= 1" % (self.profile_every_n_steps,))


class _Callback:
    """The four training callbacks over one sonde profiler, made at the first step (so that
    the trainer's step numbers, from 0 or from 1, are known)."""

    def __init__(self):
        self.profiler = None
        self.first_step = None
        self._steps = 0

    def _keys(self, first_step):
        raise NotImplementedError

    def on_train_begin(self, trainer=None):
        self._steps = 0

    def on_step_begin(self, trainer=None, step=None):
        if self.profiler is None:
            self.first_step = int(step) if step is not None else 0
            self.profiler = sonde.Profiler(self._keys(self.first_step))
        self.profiler.step_begin()

    def on_step_end(self, trainer=None, step=None, logs=None):
        if self.profiler is None:  # a trainer that calls on_step_end alone
            self.on_step_begin(trainer, step)
        self.profiler.step()
        self._steps += 1

    def on_train_end(self, trainer=None):
        if self.profiler is not None:
            self.profiler.close(raise_on_error=False)

    # Some trainers call the callbacks under other names; these keep them working.
    def on_epoch_begin(self, trainer=None, epoch=None):
        pass

    def on_epoch_end(self, trainer=None, epoch=None, logs=None):
        pass


class JAXProfiler(_Callback):
    """A trace of steps start_step .. end_step - 1 (the trainer's numbering) in log_dir."""

    def __init__(self, config=None):
        super().__init__()
        self.config = config if config is not None else ProfilingConfig()

    def _keys(self, first):
        c = self.config
        return {"name": "trace", "output_dir": c.log_dir, "formats": ["tensorboard", "trace", "perfetto"],
                "start_step": max(0, c.start_step - first), "end_step": max(1, c.end_step - first),
                "collect_memory": c.trace_memory, "collect_gpu": c.trace_memory,
                "trace_python": c.trace_python}

    @property
    def trace_path(self):
        """The trace (Perfetto, chrome://tracing), once training has begun."""
        if self.profiler is None or self.profiler.file_path is None:
            return None
        return os.path.join(self.config.log_dir, self.profiler.name + ".trace.json.gz")


class MemoryProfiler(_Callback):
    """Memory every profile_every_n_steps steps into log_dir/memory_profile.json."""

    def __init__(self, config=None):
        super().__init__()
        self.config = config if config is not None else MemoryProfileConfig()
        self._torch = {}   # steps ended -> {"cuda:N": {...}} from torch's allocator
        self.profile_path = os.path.join(self.config.log_dir, "memory_profile.json")

    def _keys(self, first):
        c = self.config
        return {"name": "memory", "output_dir": c.log_dir, "formats": [],
                "memory_every_n_steps": c.profile_every_n_steps, "collect_cpu": False,
                "collect_gpu": c.log_device_memory}

    def on_step_end(self, trainer=None, step=None, logs=None):
        super().on_step_end(trainer, step, logs)
        n = self._steps
        if self.config.log_device_memory and n % self.config.profile_every_n_steps == 0:
            torch_mem = _torch_memory()
            if torch_mem:
                self._torch[n] = torch_mem

    def on_train_end(self, trainer=None):
        super().on_train_end(trainer)
        p = self.profiler
        if p is None or p.file_path is None:
            return
        raw = os.path.join(p.output_dir, p.name + ".memory.json")
        entries = []
        if os.path.exists(raw):
            with open(raw) as f:
                entries = json.load(f)
        out = []
        for e in entries:
            mem = {}
            for dev, m in e["memory"].items():
                if dev == "host":
                    mem["host"] = {"bytes_in_use": m["rss_bytes"],
                                   "peak_bytes_in_use": m["peak_rss_bytes"]}
                elif self.config.log_device_memory:
                    mem[dev] = {"bytes_in_use": m["bytes_in_use"],
                                "peak_bytes_in_use": m["peak_bytes_in_use"]}
            mem.update(self._torch.get(e["step"], {}))
            out.append({"step": e["step"], "memory": mem})
        tmp = self.profile_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(out, f, indent=2)
        os.replace(tmp, self.profile_path)


def _torch_memory():
    """Each CUDA device's allocator figures from torch, when torch with CUDA is loaded (it is
    not imported here: a program that has not imported it has no tensors on a GPU)."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    try:
        if cuda is None or not cuda.is_available():
            return {}
        return {"cuda:%d" % i: {"bytes_in_use": int(cuda.memory_allocated(i)),
                                "peak_bytes_in_use": int(cuda.max_memory_allocated(i))}
                for i in range(cuda.device_count())}
    except (RuntimeError, AttributeError):
        return {}
