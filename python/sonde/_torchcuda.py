"""sonde.torch.track_cuda: what a CUDA device adds to a run (section-end synchronization, memory
counters per device, torch's CUDA memory snapshot). The functions of torch.cuda are looked up at
each use, so a test can substitute them; docs/pytorch.md says what never ran on a GPU."""

import os
import pickle
import sys
import tempfile
import time

import torch

_MiB = float(1 << 20)


class CudaTracker:
    """What track_cuda() started; stop() ends it (the sonde profiler's close() does too).
    `devices` lists the CUDA devices it follows (empty without CUDA: then `note` says why),
    `snapshot_path` where the memory snapshot went (None until stop(), or without one)."""

    def __init__(self, prof, *, sync, memory, snapshot):
        self.prof = prof
        self.sync, self.memory, self.snapshot = bool(sync), bool(memory), snapshot
        self.devices = []
        self.snapshot_path = None
        self.note = None
        self._stopped = True
        if prof is None or prof._handle is None:
            return
        if not torch.cuda.is_available():
            asked = [w for w, on in (("section-end synchronization", self.sync),
                                     ("CUDA memory counters", self.memory),
                                     ("the CUDA memory snapshot", self.snapshot)) if on]
            if asked:
                self.note = ("no CUDA device (torch.cuda.is_available() is False): %s off"
                             % ", ".join(asked))
                print("sonde.torch: " + self.note, file=sys.stderr)
                prof.event("sonde.torch", {"note": self.note})
            return
        self.devices = list(range(torch.cuda.device_count()))
        self._stopped = False
        if self.snapshot:
            for d in self.devices:
                torch.cuda.memory._record_memory_history(True, device=d)
        if self.sync:
            prof._h().set_on_end(self._synchronize)
        if self.memory:
            self.sample()
            prof._after_step.append(self.sample)
        prof._attached.append(self)

    def _synchronize(self):
        for d in self.devices:
            torch.cuda.synchronize(d)

    def sample(self):
        """Records each device's memory now: counters `cudaN allocated MiB`, `cudaN peak
        allocated MiB` (since the start or torch.cuda.reset_peak_memory_stats) and `cudaN
        reserved MiB` (held by torch's caching allocator). Runs after every step()."""
        p = self.prof
        if p._handle is None:
            return
        for d in self.devices:
            p.counter("cuda%d allocated MiB" % d, torch.cuda.memory_allocated(d) / _MiB)
            p.counter("cuda%d peak allocated MiB" % d, torch.cuda.max_memory_allocated(d) / _MiB)
            p.counter("cuda%d reserved MiB" % d, torch.cuda.memory_reserved(d) / _MiB)

    def flush(self):
        """The memory counters now (sonde.Profiler.export calls it)."""
        if not self._stopped and self.memory:
            self.sample()

    def _write_snapshot(self):
        """torch's memory snapshot (what torch.cuda.memory._snapshot() returns, with the
        allocation history recorded since the start) as OUTDIR/NAME-memory-YYYYmmdd-HHMMSS.pickle,
        the file torch.cuda.memory's tools and pytorch.org/memory_viz read; written to a
        temporary file and renamed, so no half-written snapshot is left."""
        p = self.prof
        snap = torch.cuda.memory._snapshot()
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = os.path.join(p.output_dir, "%s-memory-%s.pickle" % (p.name, stamp))
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=p.output_dir)
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(snap, f)
            os.rename(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
        self.snapshot_path = path
        p.event("sonde.torch.memory_snapshot", {"path": path})

    def stop(self):
        """Records the memory counters a last time, writes the snapshot, and takes the hooks
        off. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        p = self.prof
        try:
            if self.memory:
                self.sample()
            if self.snapshot and p._handle is not None and p.file_path is not None:
                self._write_snapshot()
        finally:
            if self.snapshot:
                for d in self.devices:
                    torch.cuda.memory._record_memory_history(False, device=d)
            if p._handle is not None and self.sync:
                p._handle.set_on_end(None)
            if self.sample in p._after_step:
                p._after_step.remove(self.sample)
            if self in p._attached:
                p._attached.remove(self)

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        self.stop()
        return False
