"""test_compat_torch_decorator.py - every Python code block of the profiler decorator's document
(shared/reference/003_*.txt) run against sonde.compat.torch_decorator with only its import lines
changed (model, batch, optimizer, dataloader and the @ray launcher replaced by stand-ins); the
files it names, its defaults, the ProfilerStep#N spans of the active steps and rank 0's summary
checked. Run by ctest with PYTHONPATH=BUILD/python."""

import importlib.util
import contextlib
import io
import json
import os
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
                    tb = [f for _, _, fs in os.walk("profiler_logs/rank_0") for f in fs
                          if f.endswith(".pt.trace.json.gz")]
                    self.assertEqual(len(tb), 1, tb)
                    ev = trace("profiler_logs/trace_rank_0.json")
                    steps = sorted((e["name"] for e in ev
                                    if e["name"].startswith("ProfilerStep#")),
                                   key=lambda n: int(n.split("#")[1]))
                    self.assertEqual(steps, ["ProfilerStep#3", "ProfilerStep#4",
                                             "ProfilerStep#5"])
                    self.assertEqual(sum(e["name"] == "forward" for e in ev), 3)
                    text = out.getvalue()
                    self.assertIn("Top sections by total time (rank 0, 100 steps)", text)
                    row = [ln for ln in text.splitlines() if ln.strip().startswith("forward")]
                    self.assertEqual(row[0].split()[1:2], ["6.000G"])  # 3 active x 2 GFLOP
                    self.assertEqual(row[0].split()[-1], "3")
                if "def distributed_train" in code:
                    out = io.StringIO()
                    with contextlib.redirect_stdout(out):
                        ns["distributed_train"](None)
                    self.assertTrue(os.path.isfile("profiles/trace_rank_0.json"))
                    self.assertIn("Top sections", out.getvalue())

    def test_only_rank_0_prints_and_each_rank_has_its_files(self):
        code = ("from sonde.compat.torch_decorator import profiler, step_profiler\n"
                "@profiler(output_dir='dist', skip_first=0, wait=0, warmup=0, active=2)\n"
                "def train():\n"
                "    for _ in range(3):\n"
                "        step_profiler()\n"
                "train()\n")
        outs = {}
        for rank in (0, 1):
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2")
            r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            outs[rank] = r.stdout
        self.assertIn("Top sections", outs[0])
        self.assertEqual(outs[1], "")
        for rank in (0, 1):
            self.assertTrue(os.path.isfile("dist/trace_rank_%d.json" % rank))
            self.assertTrue(os.path.isdir("dist/rank_%d" % rank))
            ev = trace("dist/trace_rank_%d.json" % rank)
            self.assertEqual(sorted(e["name"] for e in ev if e["name"].startswith("ProfilerStep")),
                             ["ProfilerStep#0", "ProfilerStep#1"])

    def test_options(self):
        if importlib.util.find_spec("torch") is None:  # else test_torch_profiler.py's
            with self.assertRaises(ImportError) as e:
                torch_decorator.profiler(with_modules=True)
            self.assertIn("with_modules=True) needs PyTorch", str(e.exception))
        with self.assertRaises(ValueError):
            torch_decorator.profiler(active=-1)

        @torch_decorator.profiler(enabled=False, output_dir="off")
        def f():
            torch_decorator.step_profiler()  # nothing under way: nothing
            return 7

        self.assertEqual(f(), 7)
        self.assertFalse(os.path.exists("off"))

        @torch_decorator.profiler(output_dir="ns", nsight_enabled=True)
        def g():
            p = torch_decorator.active_profiler()
            return p.config.get("nvtx"), p.config.get("cuda_profiler_range")

        with contextlib.redirect_stdout(io.StringIO()):
            self.assertEqual(g(), ("1", "1"))
        self.assertEqual(g.nsight_output, "nsight_profile")


if __name__ == "__main__":
    print("sonde.compat.torch_decorator tests on %s (Python %s)" % (sys.executable,
                                                                   sys.version.split()[0]),
          file=sys.stderr)
    unittest.main(verbosity=2)
