"""sonde.compat.artifex - Artifex's profiling callbacks (004) over sonde: JAXProfiler (a trace
window of training batches) and MemoryProfiler (device memory every N batches into
memory_profile.json), with the callback protocol Artifex's Trainer calls.

    from sonde.compat.artifex import JAXProfiler, ProfilingConfig, MemoryProfiler, \\
        MemoryProfileConfig

    callbacks = [JAXProfiler(ProfilingConfig(log_dir="logs/profiles", start_step=10,
                                             end_step=20)),
                 MemoryProfiler(MemoryProfileConfig(log_dir="logs/memory",
                                                    profile_every_n_steps=100))]
    trainer = Trainer(model=model, training_config=config, callbacks=CallbackList(callbacks))

As the original (artifex/generative_models/training/callbacks/profiling.py and base.py): every
callback has the eight methods of Artifex's TrainingCallback protocol (on_train_begin/end,
on_epoch_begin/end, on_batch_begin/end, on_validation_begin/end), with the original's
arguments. JAXProfiler makes log_dir when training begins, starts its trace at the
on_batch_begin whose batch is start_step and stops it at the on_batch_end whose batch is
end_step (or when training ends): with Artifex's Trainer, which passes the step before a batch
to on_batch_begin and the step after it to on_batch_end, that is batches start_step to
end_step - 1. MemoryProfiler appends {"step": batch, "memory": {device: {"bytes_in_use",
"peak_bytes_in_use"}}} at every on_batch_end whose batch is a multiple of profile_every_n_steps,
and writes the list to log_dir/memory_profile.json when training ends (always, an empty list
too).

What maps where: the trace window is a sonde profiler that lives from its start to its stop,
each batch a step: the trace goes into log_dir in the TensorBoard layout
(plugins/profile/RUN/HOST_PID.pt.trace.json.gz, for `tensorboard --logdir log_dir`), as
NAME.trace.json.gz (Perfetto, chrome://tracing) and NAME.pftrace; in a program that imported
torch it holds torch's operators (sonde.torch's torch.profiler backend), as JAX's trace holds
its XLA operations. trace_memory samples host and GPU memory into the trace; trace_python=True
traces every Python call in the window (docs/python.md). MemoryProfiler's devices are "cuda:N":
torch's allocator figures when torch with CUDA is loaded, else what sonde's sampler read from
NVML at that batch (memory in use, and the highest use it has seen as the peak); the host's
memory is in sonde's own NAME.memory.json beside it, not in memory_profile.json.
"""

import dataclasses
import json
import os
import platform
import sys
import types
from typing import Any, Protocol, runtime_checkable

import sonde

__all__ = ["ProfilingConfig", "JAXProfiler", "MemoryProfileConfig", "MemoryProfiler",
           "BaseCallback", "CallbackList", "TrainerLike", "TrainingCallback", "IS_MACOS"]

# The original's flag: JAX's trace is off on macOS there (TensorBoard's stack hangs on ARM64).
# sonde's trace is not JAX's: JAXProfiler traces on every platform.
IS_MACOS = platform.system() == "Darwin"


@runtime_checkable
class TrainerLike(Protocol):
    """What a callback may use of the trainer (the original's protocol): its model."""

    @property
    def model(self) -> Any:
        """The model being trained."""


@runtime_checkable
class TrainingCallback(Protocol):
    """The eight hooks a trainer calls (the original's protocol): a class with them is a
    callback without inheriting from BaseCallback."""

    def on_train_begin(self, trainer) -> None:
        """Training begins."""

    def on_train_end(self, trainer) -> None:
        """Training ends."""

    def on_epoch_begin(self, trainer, epoch) -> None:
        """An epoch begins."""

    def on_epoch_end(self, trainer, epoch, logs) -> None:
        """An epoch ends."""

    def on_batch_begin(self, trainer, batch) -> None:
        """A batch begins."""

    def on_batch_end(self, trainer, batch, logs) -> None:
        """A batch ends."""

    def on_validation_begin(self, trainer) -> None:
        """Validation begins."""

    def on_validation_end(self, trainer, logs) -> None:
        """Validation ends."""


@dataclasses.dataclass
class ProfilingConfig:
    """JAXProfiler's configuration: the original's fields and defaults, and the document's
    trace_memory and trace_python."""

    log_dir: str = "logs/profiles"
    start_step: int = 10
    end_step: int = 20
    trace_memory: bool = True
    trace_python: bool = False


@dataclasses.dataclass
class MemoryProfileConfig:
    """MemoryProfiler's configuration (the original's fields and defaults)."""

    log_dir: str = "logs/memory"
    profile_every_n_steps: int = 100
    log_device_memory: bool = True


class BaseCallback:
    """Artifex's BaseCallback: every hook of the training protocol, doing nothing."""

    def on_train_begin(self, trainer=None):
        """Called at the start of training."""

    def on_train_end(self, trainer=None):
        """Called at the end of training."""

    def on_epoch_begin(self, trainer=None, epoch=None):
        """Called at the start of each epoch."""

    def on_epoch_end(self, trainer=None, epoch=None, logs=None):
        """Called at the end of each epoch."""

    def on_batch_begin(self, trainer=None, batch=None):
        """Called at the start of each batch."""

    def on_batch_end(self, trainer=None, batch=None, logs=None):
        """Called at the end of each batch."""

    def on_validation_begin(self, trainer=None):
        """Called at the start of validation."""

    def on_validation_end(self, trainer=None, logs=None):
        """Called at the end of validation."""


class CallbackList:
    """Artifex's CallbackList: each hook called on every callback, in order, with the
    arguments given by position or by the original's names (trainer, epoch, batch, logs). The
    list given is the one kept, as the original keeps it."""

    __slots__ = ("callbacks",)

    def __init__(self, callbacks=None):
        self.callbacks = callbacks or []

    def add(self, callback):
        self.callbacks.append(callback)

    def remove(self, callback):
        self.callbacks.remove(callback)

    def __len__(self):
        return len(self.callbacks)

    def __iter__(self):
        return iter(self.callbacks)

    # Each callback gets the arguments by position, as the original passes them.
    def on_train_begin(self, trainer):
        for cb in self.callbacks:
            cb.on_train_begin(trainer)

    def on_train_end(self, trainer):
        for cb in self.callbacks:
            cb.on_train_end(trainer)

    def on_epoch_begin(self, trainer, epoch):
        for cb in self.callbacks:
            cb.on_epoch_begin(trainer, epoch)

    def on_epoch_end(self, trainer, epoch, logs):
        for cb in self.callbacks:
            cb.on_epoch_end(trainer, epoch, logs)

    def on_batch_begin(self, trainer, batch):
        for cb in self.callbacks:
            cb.on_batch_begin(trainer, batch)

    def on_batch_end(self, trainer, batch, logs):
        for cb in self.callbacks:
            cb.on_batch_end(trainer, batch, logs)

    def on_validation_begin(self, trainer):
        for cb in self.callbacks:
            cb.on_validation_begin(trainer)

    def on_validation_end(self, trainer, logs):
        for cb in self.callbacks:
            cb.on_validation_end(trainer, logs)


def _torch():
    """torch, when the program imported it (never imported here)."""
    t = sys.modules.get("torch")
    return t if isinstance(t, types.ModuleType) else None


class JAXProfiler(BaseCallback):
    """A trace of the batches from start_step to end_step in log_dir (see the module's
    documentation). profiler: the sonde.Profiler of the window under way, else of the last
    one, else None."""

    def __init__(self, config=None):
        self.config = config if config is not None else ProfilingConfig()
        self._profiling = False
        self.profiler = None

    def on_train_begin(self, trainer=None):
        os.makedirs(self.config.log_dir, exist_ok=True)

    def on_batch_begin(self, trainer=None, batch=None):
        if batch == self.config.start_step and not self._profiling:
            self._start()
        if self._profiling:
            self.profiler.step_begin()

    def on_batch_end(self, trainer=None, batch=None, logs=None):
        if not self._profiling:
            return
        self.profiler.step()
        if batch == self.config.end_step:
            self._stop()

    def on_train_end(self, trainer=None):
        if self._profiling:
            self._stop()

    def _start(self):
        c = self.config
        p = sonde.Profiler({"name": "trace", "output_dir": c.log_dir,
                            "formats": ["tensorboard", "trace", "perfetto"],
                            "collect_memory": c.trace_memory, "collect_gpu": c.trace_memory,
                            "trace_python": c.trace_python})
        if p.enabled and _torch() is not None:  # torch's operators in the window
            from sonde import torch as sonde_torch
            sonde_torch.profile_operators(p)
        self.profiler = p
        self._profiling = True

    def _stop(self):
        self._profiling = False
        self.profiler.close(raise_on_error=False)

    @property
    def trace_path(self):
        """The window's trace (Perfetto, chrome://tracing), once a window has begun."""
        if self.profiler is None or self.profiler.file_path is None:
            return None
        return os.path.join(self.config.log_dir, self.profiler.name + ".trace.json.gz")


class MemoryProfiler(BaseCallback):
    """Device memory every profile_every_n_steps batches into log_dir/memory_profile.json (see
    the module's documentation). profile_path is that file, in config.log_dir as it is when
    training ends (a program may change it after making the callback, as the original reads
    it then)."""

    def __init__(self, config=None):
        self.config = config if config is not None else MemoryProfileConfig()
        self.profiler = None
        self._base = 0
        self._memory_history = []

    @property
    def profile_path(self):
        return os.path.join(self.config.log_dir, "memory_profile.json")

    def _sampler(self):
        """The sonde profiler whose sampler thread reads the devices: a snapshot at each of
        its steps, one step per entry, the entries from _base on."""
        if self.profiler is None:
            c = self.config
            self._base = len(self._memory_history)
            self.profiler = sonde.Profiler({"name": "memory", "output_dir": c.log_dir,
                                            "formats": [], "memory_every_n_steps": 1,
                                            "collect_cpu": False,
                                            "collect_gpu": c.log_device_memory})
        return self.profiler

    def on_train_begin(self, trainer=None):
        self._sampler()

    def on_batch_end(self, trainer=None, batch=None, logs=None):
        if batch % self.config.profile_every_n_steps != 0:
            return
        memory = _torch_memory() if self.config.log_device_memory else {}
        p = self._sampler()
        self._memory_history.append({"step": batch, "memory": memory})
        p.step()  # the sampler's snapshot of this entry

    def on_train_end(self, trainer=None):
        """Writes every entry so far (a second training run's are added to the first's, as
        the original keeps them)."""
        p, self.profiler = self.profiler, None
        if p is not None:
            p.close(raise_on_error=False)
            raw = os.path.join(p.output_dir, p.name + ".memory.json")
            snaps = []
            if p.file_path is not None and os.path.exists(raw):
                with open(raw) as f:
                    snaps = json.load(f)
            for e in snaps:  # step k: the k-th entry from _base on
                i = self._base + e["step"] - 1
                if not self.config.log_device_memory or i >= len(self._memory_history):
                    continue
                mem = self._memory_history[i]["memory"]
                for dev, m in e["memory"].items():
                    if dev != "host" and dev not in mem:  # torch's allocator comes first
                        mem[dev] = {"bytes_in_use": m["bytes_in_use"],
                                    "peak_bytes_in_use": m["peak_bytes_in_use"]}
        path = self.profile_path
        os.makedirs(self.config.log_dir or ".", exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self._memory_history, f, indent=2)
        os.replace(tmp, path)


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
