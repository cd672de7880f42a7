"""test_compat_artifex.py - every Python code block of Artifex's profiling guide
(shared/reference/004_*.txt) run against sonde.compat.artifex with only its import lines
changed: the profiling callbacks come from sonde, the trainer, the other callbacks, jax and
matplotlib are stand-ins (the trainer calls the four callbacks with steps counted from 1). The
trace window, memory_profile.json's shape and steps, and the files the guide names are checked.
GPUs are the fake NVML (device i uses (1000 + 1000i) MiB). Run by ctest with
PYTHONPATH=BUILD/python."""

import contextlib
import gzip
import io
import json
import os
import re
import sys
import types
import unittest

import sonde

from docblocks import InTempDir, blocks
from sonde.compat import artifex


class Trainer:
    """A trainer, standing in: train() runs one step per item, numbered from 1, calling every
    callback's on_train_begin / on_step_begin / on_step_end / on_train_end."""

    def __init__(self, model=None, training_config=None, callbacks=()):
        self.callbacks = list(callbacks)

    def train(self, data):
        for c in self.callbacks:
            c.on_train_begin(self)
        for step, _ in enumerate(data, start=1):
            for c in self.callbacks:
                c.on_step_begin(self, step)
            p = getattr(self.callbacks[0], "profiler", None)
            if p is not None:
                with p.profile("train_step"):
                    pass
            for c in self.callbacks:
                c.on_step_end(self, step, {"loss": 1.0 / step})
        for c in self.callbacks:
            c.on_train_end(self)


class Other:
    """Artifex's other callbacks and configs, standing in (they do nothing here)."""

    def __init__(self, *a, **kw):
        pass

    def __getattr__(self, name):
        if name.startswith("on_"):
            return lambda *a, **kw: None
        raise AttributeError(name)


class Plt(types.SimpleNamespace):
    def __getattr__(self, name):
        return lambda *a, **kw: None


class Jax:
    class profiler:
        @staticmethod
        @contextlib.contextmanager
        def trace(d):
            yield

        @staticmethod
        @contextlib.contextmanager
        def StepTraceAnnotation(name):
            yield

    @staticmethod
    def jit(f):
        return f

    @staticmethod
    def block_until_ready(x):
        return x

    @staticmethod
    def devices():
        return []

    @staticmethod
    def device_put(x):
        return x

    @staticmethod
    def grad(f):
        return f


IMPORT = re.compile(r"from artifex\.generative_models\.training(?:\.callbacks)? import "
                    r"(\([^)]*\)|[^\n]*)")


def adapt(code):
    """Only the import lines change: the profiling callbacks from sonde.compat.artifex, the
    rest of Artifex's names from the stand-ins; jax and matplotlib are the stand-ins too."""

    def repl(m):
        names = [n.strip() for n in m.group(1).strip("()").replace("\n", " ").split(",")
                 if n.strip()]
        ours = [n for n in names if n in artifex.__all__]
        return "from sonde.compat.artifex import %s" % ", ".join(ours) if ours else "pass"

    code = IMPORT.sub(repl, code)
    code = code.replace("import matplotlib.pyplot as plt\n", "").replace("import jax\n", "")
    return code


def namespace():
    ns = {n: Other for n in ("ProgressBarCallback", "WandbLoggerCallback", "WandbLoggerConfig",
                             "EarlyStopping", "EarlyStoppingConfig", "ModelCheckpoint",
                             "CheckpointConfig", "TrainingConfig", "GradientAccumulator")}
    ns.update(Trainer=Trainer, model=lambda x: x, training_config=None, plt=Plt(), jax=Jax,
              train_step=lambda *a, **kw: 0.5, num_steps=5, batch=[1], key=0, inputs=[1],
              loss_fn=lambda m: 0.0, data=[1, 2])
    for n in artifex.__all__:
        ns[n] = getattr(artifex, n)
    return ns


def trace_files(d):
    return sorted(os.path.join(r, f) for r, _, fs in os.walk(d) for f in fs
                  if f.endswith(".trace.json.gz"))


def events(path):
    with gzip.open(path, "rt") as f:
        t = json.load(f)
    return t["traceEvents"] if isinstance(t, dict) else t


def window(d):
    """The steps the TensorBoard trace in d holds, and the sections the Perfetto trace kept."""
    files = trace_files(d)
    tb = [f for f in files if "plugins" in f]
    assert len(tb) == 1, files
    steps = sorted((e["name"] for e in events(tb[0]) if e["name"].startswith("ProfilerStep#")),
                   key=lambda n: int(n.split("#")[1]))
    main = [f for f in files if "plugins" not in f]
    kept = sum(e.get("name") == "train_step" for e in events(main[0]))
    return steps, kept


class ArtifexDocument(InTempDir):
    def run_block(self, code, ns):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(adapt(code), "<004 block>", "exec"), ns)
        return out.getvalue()

    def test_every_block(self):
        bs = blocks("004")
        self.assertGreaterEqual(len(bs), 14)
        ran = 0
        for i, code in enumerate(bs):
            with self.subTest(block=i, first_line=code.splitlines()[0]):
                try:
                    compile(adapt(code), "<004 block>", "exec")
                except SyntaxError:
                    # 004's "bad pattern" sketch (an `if` with only a comment for its body) is
                    # prose, not a program
                    self.assertIn("# Don't use Python control flow", code)
                    continue
                ns = namespace()
                printed = self.run_block(code, ns)
                ran += 1
                self.check(code, ns, printed)
        self.assertGreaterEqual(ran, len(bs) - 1)

    def check(self, code, ns, printed):
        if "callbacks=[profiler]" in code and "JAXProfiler(" in code:
            ns["trainer"].train(range(25))
            # steps 10..19 of the trainer's numbering: sonde's steps 9..18 (from 0)
            self.assertTrue(ns["profiler"].trace_path.startswith("logs/profiles/"))
            self.assertEqual(window("logs/profiles"),
                             (["ProfilerStep#%d" % s for s in range(9, 19)], 10))
        if "trace_memory=True" in code:
            c = ns["config"]
            self.assertEqual((c.log_dir, c.start_step, c.end_step, c.trace_memory,
                              c.trace_python), ("logs/profiles", 10, 20, True, False))
        if "callbacks=[profiler]" in code and "MemoryProfiler(" in code:
            ns["trainer"].train(range(250))
            with open("logs/memory/memory_profile.json") as f:
                prof = json.load(f)
            self.assertEqual([p["step"] for p in prof], [100, 200])
            for p in prof:
                self.assertEqual(set(p), {"step", "memory"})
                self.assertEqual(set(p["memory"]), {"host", "cuda:0", "cuda:1", "cuda:2",
                                                    "cuda:3"})
                self.assertEqual(p["memory"]["cuda:0"]["bytes_in_use"], 1000 * 1048576)
                self.assertEqual(set(p["memory"]["cuda:0"]), {"bytes_in_use",
                                                              "peak_bytes_in_use"})
        if "memory_profile.json\") as f" in code:
            self.assertEqual(ns["steps"], [100, 200])
            self.assertEqual(ns["memory"], [1000 * 1048576 / 1e9] * 2)
        if "def profile_training" in code:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                ns["profile_training"](object(), range(120))
            self.assertEqual(out.getvalue().splitlines(), [
                "Profiling complete!", "- Trace: logs/profiles/trace/",
                "- Memory: logs/profiles/memory/memory_profile.json"])
            self.assertEqual(window("logs/profiles/trace"),
                             (["ProfilerStep#%d" % s for s in range(99, 109)], 10))
            with open("logs/profiles/memory/memory_profile.json") as f:
                self.assertEqual([p["step"] for p in json.load(f)], [50, 100])

    def test_trace_python_traces_the_window(self):
        def forward(x):
            return x + 1

        prof = artifex.JAXProfiler(artifex.ProfilingConfig(log_dir="logs/tp", start_step=2,
                                                           end_step=4, trace_python=True))
        prof.on_train_begin()
        for step in range(6):
            prof.on_step_begin(None, step)
            forward(step)
            prof.on_step_end(None, step)
        prof.on_train_end()
        with gzip.open(prof.trace_path) as f:
            events = json.load(f)  # the Chrome trace: an array of events
        calls = [e for e in events if e.get("ph") == "X" and e["name"].endswith(".forward")]
        self.assertEqual(len(calls), 2)  # the window's two steps, not the other four
        # and Perfetto's protobuf trace of the same window beside it
        pf = prof.trace_path[:-len(".trace.json.gz")] + ".pftrace"
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
        import pftrace
        got = pftrace.read(pf)
        self.assertEqual(sum(s["name"].endswith(".forward") for s in got["slices"]), 2)

    def test_defaults_and_torch_allocator(self):
        c, m = artifex.ProfilingConfig(), artifex.MemoryProfileConfig()
        self.assertEqual((c.log_dir, c.start_step, c.end_step, c.trace_memory, c.trace_python),
                         ("logs/profiles", 10, 20, True, False))
        self.assertEqual((m.log_dir, m.profile_every_n_steps, m.log_device_memory),
                         ("logs/memory", 100, True))
        with self.assertRaises(ValueError):
            artifex.ProfilingConfig(start_step=5, end_step=5)

        class Cuda:  # torch with one CUDA device, standing in
            @staticmethod
            def is_available():
                return True

            @staticmethod
            def device_count():
                return 1

            @staticmethod
            def memory_allocated(i):
                return 123

            @staticmethod
            def max_memory_allocated(i):
                return 456

        sys.modules["torch"] = types.SimpleNamespace(cuda=Cuda)
        try:
            mp = artifex.MemoryProfiler(artifex.MemoryProfileConfig(log_dir="t",
                                                                    profile_every_n_steps=2))
            Trainer(callbacks=[mp]).train(range(4))
        finally:
            del sys.modules["torch"]
        with open("t/memory_profile.json") as f:
            prof = json.load(f)
        self.assertEqual([p["step"] for p in prof], [2, 4])
        self.assertEqual(prof[0]["memory"]["cuda:0"], {"bytes_in_use": 123,
                                                       "peak_bytes_in_use": 456})
        self.assertIn("cuda:1", prof[0]["memory"])  # NVML's, where torch has no device
        off = artifex.MemoryProfiler(artifex.MemoryProfileConfig(log_dir="h",
                                                                 log_device_memory=False,
                                                                 profile_every_n_steps=1))
        Trainer(callbacks=[off]).train(range(2))
        with open("h/memory_profile.json") as f:
            self.assertEqual([set(p["memory"]) for p in json.load(f)], [{"host"}, {"host"}])


if __name__ == "__main__":
    print("sonde.compat.artifex tests on %s (Python %s)" % (sys.executable,
                                                           sys.version.split()[0]),
          file=sys.stderr)
    unittest.main(verbosity=2)
