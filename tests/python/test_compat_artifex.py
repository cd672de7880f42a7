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
    """Artifex's Trainer, standing in, calling the callbacks as it does (trainer.py): a
    CallbackList's on_train_begin, per epoch on_epoch_begin, per batch on_batch_begin(self,
    step) before the step and on_batch_end(self, step, metrics) after it, the step counted from
    0 and increased in between, then on_validation_begin/end and on_epoch_end, and
    on_train_end. A plain list of callbacks is wrapped in a CallbackList."""

    def __init__(self, model=None, training_config=None, callbacks=None):
        if isinstance(callbacks, (list, tuple)):
            callbacks = artifex.CallbackList(list(callbacks))
        self.callbacks = callbacks
        self.step = 0

    def train(self, data, num_epochs=1):
        cbs = self.callbacks
        cbs.on_train_begin(self)
        for epoch in range(num_epochs):
            cbs.on_epoch_begin(self, epoch)
            for _ in data:
                cbs.on_batch_begin(self, self.step)
                p = getattr(cbs.callbacks[0], "profiler", None)
                if p is not None and getattr(cbs.callbacks[0], "_profiling", False):
                    with p.profile("train_step"):
                        pass
                self.step += 1
                cbs.on_batch_end(self, self.step, {"loss": 1.0 / self.step, "step": self.step})
            cbs.on_validation_begin(self)
            cbs.on_validation_end(self, {"val_loss": 0.5})
            cbs.on_epoch_end(self, epoch, {"loss": 0.5})
        cbs.on_train_end(self)


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
            # the batches begun at steps 10..19 (on_batch_begin(10) starts the trace,
            # on_batch_end(20) stops it): ten steps, numbered from 0 in the window
            self.assertTrue(ns["profiler"].trace_path.startswith("logs/profiles/"))
            self.assertEqual(window("logs/profiles"),
                             (["ProfilerStep#%d" % s for s in range(10)], 10))
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
                self.assertEqual(set(p["memory"]), {"cuda:0", "cuda:1", "cuda:2", "cuda:3"})
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
                             (["ProfilerStep#%d" % s for s in range(10)], 10))
            with open("logs/profiles/memory/memory_profile.json") as f:
                self.assertEqual([p["step"] for p in json.load(f)], [50, 100])

    def test_trace_python_traces_the_window(self):
        def forward(x):
            return x + 1

        prof = artifex.JAXProfiler(artifex.ProfilingConfig(log_dir="logs/tp", start_step=2,
                                                           end_step=4, trace_python=True))
        prof.on_train_begin(None)
        for step in range(6):  # a loop that passes one number to both hooks: 2, 3 and 4
            prof.on_batch_begin(None, step)
            forward(step)
            prof.on_batch_end(None, step, {})
        prof.on_train_end(None)
        with gzip.open(prof.trace_path) as f:
            events = json.load(f)  # the Chrome trace: an array of events
        calls = [e for e in events if e.get("ph") == "X" and e["name"].endswith(".forward")]
        self.assertEqual(len(calls), 3)  # the window's three batches, not the other three
        # and Perfetto's protobuf trace of the same window beside it
        pf = prof.trace_path[:-len(".trace.json.gz")] + ".pftrace"
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
        import pftrace
        got = pftrace.read(pf)
        self.assertEqual(sum(s["name"].endswith(".forward") for s in got["slices"]), 3)

    def test_defaults_and_torch_allocator(self):
        c, m = artifex.ProfilingConfig(), artifex.MemoryProfileConfig()
        self.assertEqual((c.log_dir, c.start_step, c.end_step, c.trace_memory, c.trace_python),
                         ("logs/profiles", 10, 20, True, False))
        self.assertEqual((m.log_dir, m.profile_every_n_steps, m.log_device_memory),
                         ("logs/memory", 100, True))

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
        with open("h/memory_profile.json") as f:  # the original's: no device, no figure
            self.assertEqual(json.load(f), [{"step": 1, "memory": {}}, {"step": 2, "memory": {}}])

    def test_second_round_facts(self):
        """Artifex's own test calls the dispatch with keywords; a program may move log_dir
        after making the callback (issue 65)."""
        seen = []

        class Recorder(artifex.BaseCallback):
            def on_batch_end(self, trainer, batch, logs):
                seen.append((trainer, batch, logs))

            def on_epoch_end(self, trainer, epoch, logs):
                seen.append((trainer, epoch, logs))

        mine = [Recorder()]
        cbs = artifex.CallbackList(mine)
        cbs.on_batch_end(None, batch=100, logs={"loss": 1.0})
        cbs.on_epoch_end(trainer="t", epoch=2, logs={})
        self.assertEqual(seen, [(None, 100, {"loss": 1.0}), ("t", 2, {})])
        cbs.add(artifex.BaseCallback())
        self.assertIs(cbs.callbacks, mine)  # the list given is the one kept, as the original
        with self.assertRaises(TypeError):  # the original's signature: batch is required
            cbs.on_batch_begin(None)
        mp = artifex.MemoryProfiler(artifex.MemoryProfileConfig(log_dir="old",
                                                                profile_every_n_steps=1))
        mp.config.log_dir = "new"
        mp.on_train_begin(None)
        mp.on_batch_end(None, 1, {})
        mp.on_train_end(None)
        self.assertEqual(mp.profile_path, os.path.join("new", "memory_profile.json"))
        with open(mp.profile_path) as f:
            self.assertEqual([e["step"] for e in json.load(f)], [1])


if __name__ == "__main__":
    print("sonde.compat.artifex tests on %s (Python %s)" % (sys.executable,
                                                           sys.version.split()[0]),
          file=sys.stderr)
    unittest.main(verbosity=2)
