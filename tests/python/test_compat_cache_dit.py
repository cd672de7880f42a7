"""test_compat_cache_dit.py - every Python code block of cache-dit's profiler document
(shared/reference/002_*.txt) run against sonde.compat.cache_dit with only its import lines
changed (the diffusers pipeline, torch and the example's utils replaced by stand-ins that step
the schedule as diffusers' callback_on_step_end would); the command lines it shows parsed; the
trace files, their names and the schedule's defaults checked. Run by ctest with
PYTHONPATH=BUILD/python."""

import argparse
import contextlib
import gzip
import io
import json
import os
import re
import shutil
import subprocess
import sys
import unittest

import sonde

from docblocks import InTempDir, blocks
from sonde.compat import cache_dit


class Image:
    pass


class Pipe:
    """A diffusers pipeline, standing in: each denoising step is a section, and the step ends
    the way a callback_on_step_end calling cache_dit.step() ends it."""

    def __init__(self):
        self.calls = 0

    @classmethod
    def from_pretrained(cls, *a, **kw):
        return cls()

    def __call__(self, prompt, num_inference_steps=28, **kw):
        self.calls += 1
        for i in range(num_inference_steps):
            with _section("transformer"):
                pass
            cache_dit.step()
        return argparse.Namespace(images=[Image()])


@contextlib.contextmanager
def _section(name):
    """A section in the active ProfilerContext's profiler, as torch's ops would be."""
    stack = getattr(cache_dit._tls, "stack", None)
    if stack:
        with stack[-1].profiler.profile(name):
            yield
    else:
        yield


class Torch:
    class Generator:
        def __init__(self, device):
            pass

        def manual_seed(self, s):
            return self


class MemoryTracker:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False

    def report(self):
        print("memory: tracked")


def parse(argv, steps=None):
    ap = cache_dit.add_profiler_args(argparse.ArgumentParser())
    ap.add_argument("--steps", type=int, default=steps)
    ap.add_argument("--track-memory", action="store_true")
    return ap.parse_args(argv)


def adapt(code):
    """Only the import lines change; the example's literal `...` arguments become nothing."""
    code = code.replace("from utils import get_args, strify, cachify, MemoryTracker, "
                        "create_profiler_from_args",
                        "from sonde.compat.cache_dit import create_profiler_from_args")
    code = code.replace("from utils import create_profiler_from_args",
                        "from sonde.compat.cache_dit import create_profiler_from_args")
    code = code.replace("from cache_dit import", "from sonde.compat.cache_dit import")
    for line in ("import torch\n", "import cache_dit\n",
                 "from diffusers import FluxPipeline, FluxTransformer2DModel\n"):
        code = code.replace(line, "")
    code = re.sub(r",\s*\.\.\.,?\s*\)", ")", code)          # pipe(prompt, ..., ...)
    return code


def trace(path):
    with gzip.open(path, "rt") as f:
        t = json.load(f)
    return t["traceEvents"] if isinstance(t, dict) else t


class CacheDitDocument(InTempDir):
    def run_block(self, code, ns):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(adapt(code), "<002 block>", "exec"), ns)
        return out.getvalue()

    def namespace(self, argv):
        args = parse(argv)
        return {"args": args, "get_args": lambda: args, "pipe": Pipe(), "prompt": "a cat",
                "FluxPipeline": Pipe, "torch": Torch, "MemoryTracker": MemoryTracker,
                "strify": str, "cachify": lambda *a, **k: None, "model": lambda x: "out"}

    def test_every_block(self):
        bs = blocks("002")
        self.assertEqual(len(bs), 4)
        direct = "/tmp/profiles/my_inference-rank0"  # the path block 2 names
        for i, code in enumerate(bs):
            with self.subTest(block=i, first_line=code.splitlines()[0]):
                outdir = os.path.join(self.dir, "profiles%d" % i)
                ns = self.namespace(["--profile", "--profile-dir", outdir])
                os.environ["CACHE_DIT_TORCH_PROFILER_DIR"] = os.path.join(self.dir, "env")
                for ext in (".sonde", ".trace.json.gz"):
                    if os.path.exists(direct + ext):
                        os.unlink(direct + ext)
                try:
                    printed = self.run_block(code, ns)
                    if "def my_function" in code:
                        self.assertEqual(ns["my_function"](), "out")
                finally:
                    del os.environ["CACHE_DIT_TORCH_PROFILER_DIR"]
                if "create_profiler_from_args" in code:
                    p = ns["profiler"]
                    want = os.path.join(outdir, "flux_inference-rank0.trace.json.gz")
                    self.assertIn("Profiler traces saved to: %s\n" % want, printed)
                    self.assertEqual(p.trace_path.name, "flux_inference-rank0.trace.json.gz")
                    ev = trace(p.trace_path)
                    # --profile without --steps: 3 steps; warmup 1, then steps 1 and 2 active
                    self.assertEqual(sorted(e["name"] for e in ev if e.get("cat") == "step"),
                                     ["step 0", "step 1", "step 2"])
                    self.assertEqual(sum(e.get("name") == "transformer" for e in ev), 2)
                if "ProfilerContext(" in code:
                    self.assertTrue(os.path.isfile(direct + ".trace.json.gz"))
                    for ext in (".sonde", ".trace.json.gz"):
                        os.unlink(direct + ext)
                    tb = "/tmp/profiles/plugins/profile/my_inference-rank0"
                    self.assertTrue(os.path.isdir(tb), "the TensorBoard layout")
                    shutil.rmtree(tb)
                if "def my_function" in code:  # the default directory: the variable's
                    self.assertTrue(os.path.isfile(os.path.join(
                        self.dir, "env", "forward_pass-rank0.trace.json.gz")))

    def test_defaults_and_flags(self):
        ns = parse([])
        p = cache_dit.create_profiler_from_args(ns)
        self.assertFalse(p.enabled)
        self.assertEqual((p.wait, p.warmup, p.active, p.repeat), (0, 1, 3, 1))
        self.assertEqual(p.activities, ["CPU", "GPU"])
        self.assertTrue(p.record_shapes and not p.with_stack)
        os.environ.pop("CACHE_DIT_TORCH_PROFILER_DIR", None)
        self.assertEqual(str(p.output_dir), "/tmp/cache_dit_profiles")
        os.environ["CACHE_DIT_TORCH_PROFILER_DIR"] = os.path.join(self.dir, "env")
        try:
            p = cache_dit.create_profiler_from_args(parse(["--profile"]), profile_name="x")
            self.assertEqual(p.output_dir, cache_dit.Path(self.dir) / "env")
            with p:
                for _ in range(5):
                    p.step()
            self.assertTrue(os.path.isfile(os.path.join(self.dir, "env", "x-rank0.trace.json.gz")))
            tb = os.path.join(self.dir, "env", "plugins", "profile")
            self.assertTrue(os.path.isdir(tb), "the TensorBoard layout for --logdir")
        finally:
            del os.environ["CACHE_DIT_TORCH_PROFILER_DIR"]
        # the document's command lines parse, and mean what they say
        for cmd in blocks("002", "bash"):
            for line in cmd.replace("\\\n", " ").splitlines():
                line = line.split("#")[0].strip()
                if "run_flux" not in line:
                    continue
                argv = line.split()[line.split().index(next(w for w in line.split()
                                                              if w.endswith(".py"))) + 1:]
                a = parse(argv)
                self.assertTrue(a.profile)
        a = parse("--profile --profile-name flux_test --profile-dir /tmp/profiles".split())
        p = cache_dit.create_profiler_from_args(a)
        self.assertEqual((p.profile_name, str(p.output_dir)), ("flux_test", "/tmp/profiles"))
        a = parse("--profile --profile-activities CPU GPU MEM".split())
        p = cache_dit.create_profiler_from_args(a, profile_name="m")
        p.output_dir = cache_dit.Path(self.dir)
        with p:
            self.assertEqual(p.profiler.config.get("collect_memory"), "1")
        # a block that counted no step says why its trace is empty
        r = subprocess.run([sys.executable, "-c",
                            "from sonde.compat.cache_dit import ProfilerContext\n"
                            "with ProfilerContext(output_dir=%r, profile_name='n'):\n"
                            "    pass\n" % self.dir], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("0 step(s) counted", r.stderr)

    def test_ranks_name_their_files(self):
        for rank in (0, 1):
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2")
            subprocess.run([sys.executable, "-c",
                            "from sonde.compat.cache_dit import ProfilerContext\n"
                            "with ProfilerContext(output_dir=%r, profile_name='flux_tp') as p:\n"
                            "    [p.step() for _ in range(4)]\n"
                            "print(p.trace_path)\n" % self.dir], check=True, env=env)
        self.assertTrue(os.path.isfile("flux_tp-rank0.trace.json.gz"))
        self.assertTrue(os.path.isfile("flux_tp-rank1.trace.json.gz"))


if __name__ == "__main__":
    print("sonde.compat.cache_dit tests on %s (Python %s)" % (sys.executable,
                                                             sys.version.split()[0]),
          file=sys.stderr)
    unittest.main(verbosity=2)
