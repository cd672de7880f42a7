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
import logging
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
    ctx = cache_dit.current()
    if ctx is not None:
        with ctx.profiler.profile(name):
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


def names(path):
    return [e.get("name") for e in trace(path)]


def run_py(code, env=None, cwd=None):
    """code in a fresh interpreter (module state as a new program has it)."""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, **(env or {})), cwd=cwd)
    if r.returncode != 0:
        raise AssertionError("exit %d: %s" % (r.returncode, r.stderr))
    return r


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
        direct = "/tmp/profiles/my_inference"  # the path block 2 names
        saved = cache_dit.PROFILER_DIR
        for i, code in enumerate(bs):
            with self.subTest(block=i, first_line=code.splitlines()[0]):
                outdir = os.path.join(self.dir, "profiles%d" % i)
                ns = self.namespace(["--profile", "--profile-dir", outdir])
                cache_dit.PROFILER_DIR = os.path.join(self.dir, "env")  # as read at import
                for ext in (".sonde", ".trace.json.gz"):
                    if os.path.exists(direct + ext):
                        os.unlink(direct + ext)
                try:
                    printed = self.run_block(code, ns)
                    if "def my_function" in code:
                        self.assertEqual(ns["my_function"](), "out")
                finally:
                    cache_dit.PROFILER_DIR = saved
                if "create_profiler_from_args" in code:
                    p = ns["profiler"]
                    want = os.path.join(outdir, "flux_inference.trace.json.gz")
                    self.assertIn("Profiler traces saved to: %s\n" % want, printed)
                    self.assertEqual(p.trace_path.name, "flux_inference.trace.json.gz")
                    ev = trace(p.trace_path)
                    # --profile without --steps: 3 steps, each one recorded (no schedule)
                    self.assertEqual(sorted(e["name"] for e in ev if e.get("cat") == "step"),
                                     ["step 0", "step 1", "step 2"])
                    self.assertEqual(sum(e.get("name") == "transformer" for e in ev), 3)
                if "ProfilerContext(" in code:
                    self.assertTrue(os.path.isfile(direct + ".trace.json.gz"))
                    for ext in (".sonde", ".trace.json.gz"):
                        os.unlink(direct + ext)
                    shutil.rmtree("/tmp/profiles/plugins", ignore_errors=True)
                if "def my_function" in code:  # the default directory: PROFILER_DIR
                    self.assertTrue(os.path.isfile(os.path.join(
                        self.dir, "env", "forward_pass.trace.json.gz")))

    def test_defaults_and_flags(self):
        p = cache_dit.create_profiler_from_args(parse([]))
        self.assertFalse(p.enabled)
        self.assertEqual((p.wait, p.warmup, p.active, p.repeat), (None, None, None, None))
        self.assertEqual(p.activities, ["CPU", "GPU"])
        # the original's examples: with_stack and record_shapes both on
        self.assertTrue(p.record_shapes and p.with_stack)
        self.assertEqual(str(p.output_dir), cache_dit.PROFILER_DIR)
        self.assertTrue(re.fullmatch(r"profile_\d+", p.profile_name), p.profile_name)
        self.assertIsNone(p.trace_path)
        self.assertIsNone(p.memory_snapshot_path)
        c = cache_dit.ProfilerContext()
        self.assertTrue(c.enabled and c.with_stack and c.record_shapes)
        self.assertFalse(cache_dit.create_profiler_context().enabled)
        a = parse("--profile --profile-name flux_test --profile-dir /tmp/profiles".split())
        p = cache_dit.create_profiler_from_args(a)
        self.assertEqual((p.profile_name, str(p.output_dir)), ("flux_test", "/tmp/profiles"))
        a = parse("--profile --profile-activities CPU GPU MEM".split())
        p = cache_dit.create_profiler_from_args(a, profile_name="m")
        p.output_dir = cache_dit.Path(self.dir)
        with p:
            self.assertEqual(p.profiler.config.get("collect_memory"), "1")
        # the document's command lines parse, and mean what they say
        for cmd in blocks("002", "bash"):
            for line in cmd.replace("\\\n", " ").splitlines():
                line = line.split("#")[0].strip()
                if "run_flux" not in line:
                    continue
                argv = line.split()[line.split().index(next(w for w in line.split()
                                                              if w.endswith(".py"))) + 1:]
                self.assertTrue(parse(argv).profile)

    def test_the_variable_is_read_at_import(self):
        env_dir = os.path.join(self.dir, "at_import")
        r = run_py("import os\n"
                   "from sonde.compat import cache_dit as c\n"
                   "os.environ['CACHE_DIT_TORCH_PROFILER_DIR'] = 'later'\n"
                   "print(c.PROFILER_DIR, c.ProfilerContext().output_dir, "
                   "c.get_profiler_output_dir())\n"
                   "c.set_profiler_output_dir('set')\n"
                   "print(os.environ['CACHE_DIT_TORCH_PROFILER_DIR'], "
                   "c.ProfilerContext().output_dir)\n",
                   env={"CACHE_DIT_TORCH_PROFILER_DIR": env_dir})
        self.assertEqual(r.stdout.split("\n")[:2],
                         ["%s %s later" % (env_dir, env_dir), "set %s" % env_dir])

    def test_the_whole_block_without_steps(self):
        """The original records everything between enter and exit: the direct context, the
        decorator and a block that raises all leave a trace with the block's sections."""
        with cache_dit.ProfilerContext(output_dir=self.dir, profile_name="direct") as c:
            with c.profiler.profile("denoise"):
                pass
        self.assertEqual(c.trace_path, cache_dit.Path(self.dir) / "direct.trace.json.gz")
        self.assertEqual(names(c.trace_path).count("denoise"), 1)

        @cache_dit.profile_function(output_dir=self.dir)
        def forward():
            with cache_dit.current().profiler.profile("layer"):
                return 7
        self.assertEqual(forward(), 7)
        self.assertEqual(names(os.path.join(self.dir, "forward.trace.json.gz")).count("layer"), 1)

        c = cache_dit.ProfilerContext(output_dir=self.dir, profile_name="raised")
        with self.assertRaises(KeyError):
            with c:
                with c.profiler.profile("before the error"):
                    raise KeyError("x")
        self.assertEqual(names(c.trace_path).count("before the error"), 1)

    def test_every_step_is_kept(self):
        with cache_dit.ProfilerContext(output_dir=self.dir, profile_name="steps") as c:
            for _ in range(5):
                with c.profiler.profile("transformer"):
                    pass
                cache_dit.step()
        ev = trace(c.trace_path)
        self.assertEqual(sorted(e["name"] for e in ev if e.get("cat") == "step"),
                         ["step %d" % i for i in range(5)])
        self.assertEqual(sum(e.get("name") == "transformer" for e in ev), 5)
        # sonde's schedule, only when asked for: warmup 1 active 2 keeps steps 1 and 2
        a = parse(["--profile", "--profile-dir", self.dir, "--profile-warmup", "1",
                   "--profile-active", "2"])
        c = cache_dit.create_profiler_from_args(a, profile_name="scheduled")
        with c:
            for i in range(5):
                with c.profiler.profile("transformer %d" % i):
                    pass
                c.step()
        self.assertEqual(sorted(n for n in names(c.trace_path) if n.startswith("transformer")),
                         ["transformer 1", "transformer 2"])

    def test_disabled_writes_nothing(self):
        c = cache_dit.ProfilerContext(enabled=False, output_dir=os.path.join(self.dir, "off"))
        with c:
            pass
        self.assertIsNone(c.trace_path)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "off")))

    def test_a_second_run_overwrites_the_trace(self):
        for section in ("first", "second"):
            with cache_dit.ProfilerContext(output_dir=self.dir, profile_name="again") as c:
                with c.profiler.profile(section):
                    pass
        self.assertEqual(c.trace_path, cache_dit.Path(self.dir) / "again.trace.json.gz")
        self.assertEqual([n for n in names(c.trace_path) if n in ("first", "second")],
                         ["second"])
        self.assertEqual(sorted(f for f in os.listdir(self.dir) if f.endswith(".json.gz")),
                         ["again.trace.json.gz"])

    def test_the_original_log_lines(self):
        log = io.StringIO()
        h = logging.StreamHandler(log)
        lg = logging.getLogger("cache_dit.profiler")
        lg.addHandler(h)
        lg.setLevel(logging.INFO)
        try:
            with cache_dit.ProfilerContext(output_dir=self.dir, profile_name="logged"):
                pass
        finally:
            lg.removeHandler(h)
        path = os.path.join(self.dir, "logged.trace.json.gz")
        self.assertEqual(log.getvalue().splitlines(), [
            "Started profiling. Traces will be saved to: %s (activities: ['CPU', 'GPU'])"
            % self.dir,
            "Exporting trace to: %s" % path,
            "Profiling completed. Trace saved to: %s" % path])

    def test_ranks_name_their_files(self):
        for rank in (0, 1):
            env = {"RANK": str(rank), "WORLD_SIZE": "2"}
            run_py("from sonde.compat.cache_dit import ProfilerContext\n"
                   "with ProfilerContext(output_dir=%r, profile_name='flux_tp') as p:\n"
                   "    [p.step() for _ in range(4)]\n"
                   "print(p.trace_path)\n" % self.dir, env=env)
        self.assertTrue(os.path.isfile("flux_tp-rank0.trace.json.gz"))
        self.assertTrue(os.path.isfile("flux_tp-rank1.trace.json.gz"))


if __name__ == "__main__":
    print("sonde.compat.cache_dit tests on %s (Python %s)" % (sys.executable,
                                                             sys.version.split()[0]),
          file=sys.stderr)
    unittest.main(verbosity=2)
