"""test_compat_torch_decorator.py - every Python code block of the profiler decorator's document
(shared/reference/003_*.txt) run against sonde.compat.torch_decorator with only its import lines
changed (model, batch, optimizer, dataloader and the @ray launcher replaced by stand-ins); the
files it names, its defaults, the ProfilerStep#N spans of the active steps and rank 0's summary
checked. Run by ctest with PYTHONPATH=BUILD/python."""

import importlib.util
import contextlib
import glob
import io
import json
import os
import re
import subprocess
import sys
import unittest

import sonde

from docblocks import InTempDir, blocks
from sonde.compat import torch_decorator


class Loss:
    def backward(self):
        pass


def model(batch):
    """A model, standing in: a section with its FLOPs, as the operators would record them."""
    p = torch_decorator.active_profiler()
    with p.profile("forward"):
        p.record_flops(2e9)
    return Loss()


class Optimizer:
    def step(self):
        pass


def ray(**kw):
    """The document's launcher, standing in: calls the function once, here."""
    def wrap(f):
        return f
    return wrap


def adapt(code):
    code = code.replace("from parallelization import ray, profiler",
                        "from sonde.compat.torch_decorator import profiler")
    code = code.replace("from parallelization import profiler",
                        "from sonde.compat.torch_decorator import profiler")
    code = code.replace("from parallelization.profiler.decorator import step_profiler",
                        "from sonde.compat.torch_decorator import step_profiler")
    return code


def ANNOUNCED(out, sf=1, w=1, wu=1, a=3, r=1):
    """The lines the original prints as a decorated call begins (with_flops on)."""
    return ["📊 PyTorch profiler enabled:",
            "   📁 Output directory: %s" % out,
            "   ⏱️  Schedule - skip_first: %d, wait: %d, warmup: %d, active: %d, repeat: %d"
            % (sf, w, wu, a, r),
            "   🔧 Options - stack: False, flops: True, modules: False",
            "   💡 FLOP counting enabled - skipping first %d step(s) to avoid initialization "
            "overhead" % sf]


def trace(path):
    with open(path) as f:
        t = json.load(f)
    return t["traceEvents"] if isinstance(t, dict) else t


class DecoratorDocument(InTempDir):
    def namespace(self):
        return {"model": model, "batch": [1, 2], "optimizer": Optimizer(), "ray": ray,
                "step_profiler": torch_decorator.step_profiler,
                "dataloader": [[i] for i in range(8)]}

    def run_block(self, code, ns):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(adapt(code), "<003 block>", "exec"), ns)
        return out.getvalue()

    def test_every_block(self):
        bs = blocks("003")
        self.assertEqual(len(bs), 3)
        for i, code in enumerate(bs):
            with self.subTest(block=i, first_line=code.splitlines()[0]):
                ns = self.namespace()
                if "for batch in dataloader" in code and "def " not in code:
                    # the training loop block, inside a decorated call as the document says
                    @torch_decorator.profiler(output_dir="loop")
                    def train():
                        exec(compile(adapt(code), "<003 block>", "exec"), ns)
                    out = io.StringIO()
                    with contextlib.redirect_stdout(out):
                        train()
                    ev = trace("loop/trace_rank_0.json")
                    self.assertEqual(sorted(e["name"] for e in ev
                                            if e["name"].startswith("ProfilerStep#")),
                                     ["ProfilerStep#3", "ProfilerStep#4", "ProfilerStep#5"])
                    continue
                printed = self.run_block(code, ns)
                self.assertEqual(printed, "")  # definitions only
                if "def train_model" in code:
                    out = io.StringIO()
                    with contextlib.redirect_stdout(out):
                        ns["train_model"](None)
                    # the defaults: ./profiler_logs, skip_first 1, wait 1, warmup 1, active 3
                    self.assertTrue(os.path.isdir("profiler_logs/rank_0"))
                    tb = [f for f in os.listdir("profiler_logs")
                          if re.fullmatch(r"rank_0\.\d+\.pt\.trace\.json", f)]
                    self.assertEqual(len(tb), 1, os.listdir("profiler_logs"))
                    ev = trace("profiler_logs/trace_rank_0.json")
                    steps = sorted((e["name"] for e in ev
                                    if e["name"].startswith("ProfilerStep#")),
                                   key=lambda n: int(n.split("#")[1]))
                    self.assertEqual(steps, ["ProfilerStep#3", "ProfilerStep#4",
                                             "ProfilerStep#5"])
                    self.assertEqual(sum(e["name"] == "forward" for e in ev), 3)
                    text = out.getvalue()
                    self.assertEqual(text.splitlines()[:5], ANNOUNCED("./profiler_logs"))
                    self.assertIn("💾 Chrome trace saved to: ./profiler_logs/trace_rank_0.json\n"
                                  "\n📈 Profiling Summary:\n"
                                  "Top sections by total time (rank 0, 100 steps)", text)
                    row = [ln for ln in text.splitlines() if ln.strip().startswith("forward")]
                    self.assertEqual(row[0].split()[1:2], ["6.000G"])  # 3 active x 2 GFLOP
                    self.assertEqual(row[0].split()[-1], "3")
                if "def distributed_train" in code:  # its body is `pass`: no step taken,
                    with contextlib.redirect_stdout(io.StringIO()):  # the original's
                        with self.assertRaises(AssertionError):  # export_chrome_trace fails
                            ns["distributed_train"](None)
                    self.assertFalse(os.path.exists("profiles/trace_rank_0.json"))

    def test_only_rank_0_prints_and_each_rank_has_its_files(self):
        code = ("from sonde.compat.torch_decorator import profiler, step_profiler\n"
                "@profiler(output_dir='dist', skip_first=0, wait=0, warmup=0, active=2)\n"
                "def train():\n"
                "    for _ in range(3):\n"
                "        step_profiler()\n"
                "train()\n")
        outs = {}
        for rank in (0, 1):  # the original's rank is LOCAL_RANK
            env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2")
            r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            outs[rank] = r.stdout
        self.assertIn("Top sections", outs[0])
        for rank in (0, 1):
            lines = outs[rank].splitlines()
            self.assertEqual(lines[5], "🌐 Multi-GPU detected - saving rank %d trace to "
                             "trace_rank_%d.json" % (rank, rank))
            self.assertEqual(lines[6], "💾 Chrome trace saved to: dist/trace_rank_%d.json" % rank)
        self.assertEqual(len(outs[1].splitlines()), 7)  # no summary but on rank 0
        for rank in (0, 1):
            self.assertTrue(os.path.isfile("dist/trace_rank_%d.json" % rank))
            self.assertTrue(os.path.isdir("dist/rank_%d" % rank))
            ev = trace("dist/trace_rank_%d.json" % rank)
            self.assertEqual(sorted(e["name"] for e in ev if e["name"].startswith("ProfilerStep")),
                             ["ProfilerStep#0", "ProfilerStep#1"])

    def test_repeat_keeps_every_window_and_the_last_as_trace_rank(self):
        @torch_decorator.profiler(output_dir="rep", skip_first=0, wait=1, warmup=0, active=2,
                                  repeat=2)
        def train():
            for i in range(8):
                with torch_decorator.active_profiler().profile("s%d" % i):
                    pass
                torch_decorator.step_profiler()

        with contextlib.redirect_stdout(io.StringIO()):
            train()
        wins = sorted((f for f in os.listdir("rep") if f.endswith(".pt.trace.json")),
                      key=lambda f: int(f.split(".")[1]))
        self.assertEqual(len(wins), 2, os.listdir("rep"))

        def steps(path):
            return sorted(e["name"] for e in trace(path) if e["name"].startswith("ProfilerStep#"))
        self.assertEqual(steps(os.path.join("rep", wins[0])), ["ProfilerStep#1", "ProfilerStep#2"])
        self.assertEqual(steps(os.path.join("rep", wins[1])), ["ProfilerStep#4", "ProfilerStep#5"])
        self.assertEqual(steps("rep/trace_rank_0.json"), ["ProfilerStep#4", "ProfilerStep#5"])

    def test_a_second_call_publishes_its_own_windows(self):
        """Issue 61 #14: the decorator's second call published the first call's last window as
        trace_rank_0.json and wrote the first call's windows again as new files (its run,
        "train-2/", sorted before "train/")."""
        @torch_decorator.profiler(output_dir="twice", skip_first=0, wait=0, warmup=0, active=2,
                                  repeat=1)
        def train(tag):
            for i in range(3):
                with torch_decorator.active_profiler().profile("%s%d" % (tag, i)):
                    pass
                torch_decorator.step_profiler()

        def names(path):
            return {e["name"] for e in trace(path) if e["name"][:5] in ("first", "secon")}
        with contextlib.redirect_stdout(io.StringIO()):
            train("first")
        first = sorted(f for f in os.listdir("twice") if f.endswith(".pt.trace.json"))
        self.assertEqual(len(first), 1, os.listdir("twice"))
        self.assertEqual(names("twice/trace_rank_0.json"), {"first0", "first1"})
        with contextlib.redirect_stdout(io.StringIO()):
            train("second")
        wins = sorted(f for f in os.listdir("twice") if f.endswith(".pt.trace.json"))
        self.assertEqual(len(wins), 2, wins)  # one window a call, none written twice
        self.assertEqual(names("twice/trace_rank_0.json"), {"second0", "second1"})
        new = [f for f in wins if f not in first]
        self.assertEqual(names(os.path.join("twice", new[0])), {"second0", "second1"})

    def test_options(self):
        if importlib.util.find_spec("torch") is None:  # else test_torch_profiler.py's
            with self.assertRaises(ImportError) as e:
                torch_decorator.profiler(with_modules=True)
            self.assertIn("with_modules=True) needs PyTorch", str(e.exception))
        @torch_decorator.profiler(enabled=False, output_dir="off")
        def f():
            torch_decorator.step_profiler()  # nothing under way: nothing
            return 7

        self.assertEqual(f(), 7)
        self.assertFalse(os.path.exists("off"))

        @torch_decorator.profiler(output_dir="ns", nsight_enabled=True)
        def g():
            p = torch_decorator.active_profiler()
            for _ in range(3):
                torch_decorator.step_profiler()
            return p.config.get("nvtx"), p.config.get("cuda_profiler_range")

        with contextlib.redirect_stdout(io.StringIO()):
            self.assertEqual(g(), ("1", "1"))
        self.assertEqual(g.nsight_output, "nsight_profile")

    def test_misuse_the_original_refuses(self):
        """As torch's schedule and export refuse them in the original (issue 65): active=0 or
        a negative count fails the call (AssertionError; also the ValueError sonde raised),
        before anything is printed; a call that ends before the first window fails when it
        returns, after the function ran; a call that raises leaves its windows but no
        trace_rank_0.json."""
        @torch_decorator.profiler(output_dir="bad", active=0)  # decorating is allowed
        def bad():
            raise RuntimeError("never runs")

        out = io.StringIO()
        with contextlib.redirect_stdout(out), self.assertRaises(AssertionError) as e:
            bad()
        self.assertIsInstance(e.exception, ValueError)
        self.assertIn("Invalid profiler schedule arguments", str(e.exception))
        self.assertEqual(out.getvalue(), "")
        ran = []

        @torch_decorator.profiler(output_dir="short")  # skip_first 1 + wait 1: step 2 first
        def short():
            torch_decorator.step_profiler()
            ran.append(1)
            return 1

        with contextlib.redirect_stdout(io.StringIO()), self.assertRaises(AssertionError) as e:
            short()
        self.assertEqual(ran, [1])
        self.assertIn("1 step_profiler() call(s)", str(e.exception))
        self.assertFalse(os.path.exists("short/trace_rank_0.json"))

        @torch_decorator.profiler(output_dir="boom", skip_first=0, wait=0, warmup=0, active=2,
                                  repeat=0)
        def boom():
            for i in range(5):  # windows 0-1 and 2-3 end; the error comes in the third
                torch_decorator.step_profiler()
            raise KeyError("data loader")

        out = io.StringIO()
        with contextlib.redirect_stdout(out), self.assertRaises(KeyError):
            boom()
        self.assertNotIn("Chrome trace saved", out.getvalue())
        self.assertNotIn("Profiling Summary", out.getvalue())
        self.assertFalse(os.path.exists("boom/trace_rank_0.json"))
        self.assertGreaterEqual(len([f for f in os.listdir("boom")
                                     if f.endswith(".pt.trace.json")]), 2)

    def test_tensorboard_lists_each_window_once(self):
        """What `tensorboard --logdir DIR` lists: every *.pt.trace.json(.gz) under DIR, the
        original's one file per window; sonde's own copies (its TensorBoard layout) no more."""
        @torch_decorator.profiler(output_dir="tb", skip_first=0, wait=1, warmup=0, active=1,
                                  repeat=5)
        def train():
            for _ in range(10):
                torch_decorator.step_profiler()

        with contextlib.redirect_stdout(io.StringIO()):
            train()
        listed = [os.path.relpath(os.path.join(d, f), "tb") for d, _, fs in os.walk("tb")
                  for f in fs if f.endswith((".pt.trace.json", ".pt.trace.json.gz"))]
        self.assertEqual(len(listed), 5, listed)
        self.assertTrue(all(re.fullmatch(r"rank_0\.\d+\.pt\.trace\.json", f) for f in listed),
                        listed)
        self.assertTrue(os.path.isfile("tb/trace_rank_0.json"))
        self.assertTrue(glob.glob("tb/rank_0/*.sonde"))


if __name__ == "__main__":
    print("sonde.compat.torch_decorator tests on %s (Python %s)" % (sys.executable,
                                                                   sys.version.split()[0]),
          file=sys.stderr)
    unittest.main(verbosity=2)
