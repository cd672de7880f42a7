"""test_compat_diffulex.py - every Python code block of the Diffulex profiler's document
(shared/reference/000_*.txt) run against sonde.compat.diffulex with only its import line changed,
the Diffulex engine replaced by a small stand-in; the files the blocks name and the values they
print are checked. Run by ctest with PYTHONPATH=BUILD/python and REFERENCE_DOCS_DIR."""

import contextlib
import csv
import glob
import importlib.util
import io
import json
import logging
import os
import re
import subprocess
import sys
import unittest

import sonde  # noqa: F401  (the package under test, from PYTHONPATH)

from docblocks import InTempDir, blocks as doc_blocks


def blocks():
    """The document's ```python blocks, in order."""
    return doc_blocks("000")


class SamplingParams:
    def __init__(self, **kw):
        self.kw = kw


class Diffulex:
    """The engine, standing in: generate() returns outputs shaped as Diffulex's."""

    def __init__(self, *a, **kw):
        pass

    def generate(self, prompts, params=None):
        return [{"token_ids": list(range(40 + i)), "n_diff_steps": 8 + i}
                for i, _ in enumerate(prompts)]


class ProfilerActivity:
    CPU, CUDA = "CPU", "CUDA"


def namespace():
    """What a block may use: the document's own import (its first block's, import line changed)
    and the engine's stand-ins."""
    ns = {}
    exec("from sonde.compat.diffulex import DiffulexProfiler, ProfilerConfig, PerformanceMetrics", ns)
    ns.update({"Diffulex": Diffulex, "SamplingParams": SamplingParams,
            "ProfilerActivity": ProfilerActivity, "model_path": "/models/dream",
            "prompts": ["What is 2+2?", "Explain quantum computing"],
            "sampling_params": SamplingParams(temperature=0.0),
            "batches": [["a", "b"], ["c"]], "total_tokens": 1000, "llm": Diffulex()})
    return ns


def adapt(code):
    """Only the import lines change: the profiler's module becomes sonde's; the engine's goes."""
    code = code.replace("from diffulex_profiler import", "from sonde.compat.diffulex import")
    code = code.replace("from diffulex import Diffulex, SamplingParams\n", "")
    return code.replace("llm = Diffulex(model_path, ...)", "llm = Diffulex(model_path)") \
               .replace('llm = Diffulex(model_path, model_name="dream", ...)',
                        'llm = Diffulex(model_path, model_name="dream")')


def DiffulexProfilerFor(viztracer_config):
    from sonde.compat.diffulex import DiffulexProfiler, ProfilerConfig
    return DiffulexProfiler(ProfilerConfig(backend="viztracer", viztracer_config=viztracer_config))


class DiffulexDocument(InTempDir):
    def run_block(self, code, before=None):
        """Runs one block; a block that uses the profiler an earlier block made (as the
        document's reader has it) gets that one."""
        out = io.StringIO()
        ns = namespace()
        if before and "profiler" in before:
            ns["profiler"] = before["profiler"]
        with contextlib.redirect_stdout(out):
            exec(compile(adapt(code), "<000 block>", "exec"), ns)
        if getattr(ns.get("profiler"), "profiler", None) is not None:
            self.made.append(ns["profiler"].profiler)
        return ns, out.getvalue()

    def tearDown(self):  # each block's sonde profiler closed while its directory is there
        for p in getattr(self, "made", []):
            p.close(raise_on_error=False)
        super().tearDown()

    def test_every_block(self):
        bs = blocks()
        self.assertGreaterEqual(len(bs), 10)
        self.made = []
        ran, last = 0, None
        for i, code in enumerate(bs):
            with self.subTest(block=i, first_line=code.splitlines()[0]):
                if "class ProfilerConfig" in code:  # the dataclass's description, not a use
                    from sonde.compat.diffulex import ProfilerConfig
                    fields = set(ProfilerConfig.__dataclass_fields__)
                    for f in re.findall(r"^\s+(\w+): ", code, re.M):
                        self.assertIn(f, fields)
                    self.assertEqual(ProfilerConfig().export_formats, ["json", "summary"])
                    self.assertEqual(ProfilerConfig().output_dir, "log/profiles")
                    continue
                if 'backend="pytorch"' in code:  # sonde.torch: needs PyTorch
                    p = self.run_block(code)[0]["profiler"]
                    if importlib.util.find_spec("torch") is None:  # the original's fallback
                        self.assertEqual(type(p.backend).__name__, "SimpleTimerBackend")
                    else:  # tests/python/test_torch_profiler.py checks what it records
                        self.assertEqual(type(p.backend).__name__, "PyTorchProfilerBackend")
                    p.profiler.close()
                    continue
                if 'backend="viztracer"' in code:
                    self.check_viztracer(self.run_block(code)[0]["profiler"])
                    continue
                ns, printed = self.run_block(code, last)
                last = ns
                ran += 1
                self.check(code, ns, printed)
        self.assertGreaterEqual(ran, 8)

    def check_viztracer(self, profiler):
        """The "viztracer" backend: every Python call a section; VizTracer's output_file (in
        output_dir, as the original places it) gets the Chrome trace when the section ends,
        its events with their source file (file_info)."""
        def tokenize(text):
            return text.split()

        with profiler.profile("inference"):
            tokenize("a b c")
        path = os.path.join("log", "profiles", "trace.json")
        self.assertEqual(profiler.metrics[0].backend_data,
                         {"backend": "viztracer", "output_file": path})
        with open(path) as f:
            events = json.load(f)  # the Chrome trace: an array of events
        (call,) = [e for e in events if e.get("ph") == "X" and e["name"].endswith(".tokenize")]
        self.assertEqual(call["args"]["file"], __file__)
        (outer,) = [e for e in events if e.get("ph") == "X" and e["name"] == "inference"]
        self.assertGreaterEqual(call["ts"], outer["ts"])
        profiler.profiler.close()
        with self.assertRaises(ValueError) as e:
            DiffulexProfilerFor({"output_file": "t.json", "no_such_option": 1})
        self.assertIn("no_such_option", str(e.exception))

    def check(self, code, ns, printed):
        """What the block promises: the original's files for what it exports (one per
        export_formats entry, with the path's stem), the values it prints."""
        p = ns.get("profiler")
        exts = {"json": ".json", "csv": ".csv", "summary": ".txt"}
        for path in re.findall(r'profiler\.export\("([^"]+)"\)', code):
            stem = os.path.splitext(path)[0]
            for fmt in p.config.export_formats:
                if p.metrics:
                    self.check_file(stem + exts[fmt], p)
                else:  # nothing recorded: the original warns and writes nothing
                    self.assertFalse(os.path.exists(stem + exts[fmt]))
        if "profiler.export()" in code:
            made = sorted(glob.glob(os.path.join(p.config.output_dir, "profile_*")))
            self.assertEqual([os.path.splitext(f)[1] for f in made], [".csv", ".json", ".txt"])
            for f in made:
                self.check_file(f, p)
        m = re.search(r"Total duration: ([0-9.]+)s", printed)
        if "Total duration" in code:
            self.assertIsNotNone(m, printed)
            self.assertGreater(float(m.group(1)) + 1, 0)
        for label in ("Average throughput", "Throughput"):
            if label + ": " in code:
                t = re.search(label + r": ([0-9.]+) tok/s", printed)
                self.assertIsNotNone(t, printed)
                self.assertGreater(float(t.group(1)), 0)

    def check_file(self, path, p):
        """One exported file holds every section run, in the original's shape."""
        names = [m.name for m in p.metrics]
        if path.endswith(".json"):
            with open(path) as f:
                r = json.load(f)
            self.assertEqual([m["name"] for m in r["metrics"]], names)
            self.assertEqual(set(r["metrics"][0]), {
                "name", "metadata", "duration_sec", "total_tokens", "throughput_tokens_per_sec",
                "gpu_utilization", "memory_delta_mb", "custom_metrics", "backend_data"})
            self.assertEqual(set(r["summary"]), {"total_sections", "total_duration_sec",
                                                 "total_tokens",
                                                 "avg_throughput_tokens_per_sec"})
            self.assertEqual(r["summary"]["total_sections"], len(names))
        elif path.endswith(".txt"):
            with open(path) as f:
                text = f.read()
            self.assertTrue(text.startswith("=" * 80 + "\nDiffulex Profiling Summary\n"), text)
            self.assertIn("Total Sections: %d\n" % len(names), text)
            for n in names:
                self.assertIn("\nSection: %s\n" % n, text)
        else:
            with open(path) as f:
                rows = list(csv.DictReader(f))
            self.assertEqual([r["name"] for r in rows], names)

    def test_summary_and_metrics(self):
        from sonde.compat.diffulex import DiffulexProfiler, PerformanceMetrics, ProfilerConfig
        p = DiffulexProfiler(ProfilerConfig(output_dir="out", collect_gpu_metrics=False,
                                            export_formats=["json", "csv", "summary"]))
        for i in range(2):  # one entry per section run, each with its own metadata
            with p.profile("generate", metadata={"num_prompts": 2 + i}):
                p.record_metric("num_outputs", 2 + i)
                p.record_metric("label", {"kind": "greedy"})
                p.record_throughput(1000)  # inside the block: over the section's own time
        self.assertTrue(all(isinstance(m, PerformanceMetrics) for m in p.metrics))
        s = p.get_summary()
        self.assertEqual(set(s), {"total_sections", "total_duration_sec", "total_tokens",
                                  "avg_throughput_tokens_per_sec", "sections"})
        self.assertEqual((s["total_sections"], s["total_tokens"]), (2, 2000))
        self.assertGreater(s["avg_throughput_tokens_per_sec"], 0)
        self.assertEqual([set(x) for x in s["sections"]],
                         [{"name", "duration_sec", "throughput_tokens_per_sec",
                           "total_tokens"}] * 2)
        self.assertAlmostEqual(s["sections"][0]["throughput_tokens_per_sec"],
                               1000 / s["sections"][0]["duration_sec"])
        self.assertEqual(p.metrics[1].metadata, {"num_prompts": 3})
        self.assertEqual(p.metrics[1].custom_metrics, {"num_outputs": 3,
                                                       "label": {"kind": "greedy"}})
        self.assertIsInstance(p.metrics[0].memory_delta_mb, float)
        self.assertEqual(set(p.metrics[0].memory_metrics_start),
                         {"total_mb", "available_mb", "used_mb", "percent"})
        self.assertEqual(p.metrics[0].backend_data["name"], "generate")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            p.export("out/r.json")
        with open("out/r.json") as f:
            r = json.load(f)
        self.assertEqual([(m["name"], m["metadata"], m["custom_metrics"]["num_outputs"])
                          for m in r["metrics"]],
                         [("generate", {"num_prompts": 2}, 2), ("generate", {"num_prompts": 3}, 3)])
        self.assertEqual(r["metrics"][0]["memory_delta_mb"], p.metrics[0].memory_delta_mb)
        with open("out/r.csv") as f:
            rows = list(csv.DictReader(f))
        self.assertEqual(list(rows[0]), sorted(["name", "duration_sec", "total_tokens",
                                                "throughput_tokens_per_sec", "num_outputs",
                                                "label", "metadata_num_prompts"]))
        self.assertEqual([r["metadata_num_prompts"] for r in rows], ["2", "3"])
        self.assertTrue(os.path.isfile("out/r.txt"))
        # export then clear, as the document advises: the exported files stay as written
        p.clear()
        self.assertEqual(p.get_summary(), {})
        p.profiler.close()
        with open("out/r.json") as f:
            self.assertEqual(json.load(f), r)

    def test_the_original_warns_where_it_warns(self):
        """Unknown backend or format, export with nothing recorded, stop with nothing open:
        warnings on the original's logger, and the program goes on."""
        from sonde.compat.diffulex import DiffulexProfiler, ProfilerConfig, logger
        log = io.StringIO()
        h = logging.StreamHandler(log)
        logger.addHandler(h)
        try:
            p = DiffulexProfiler(ProfilerConfig(output_dir="w", backend="nvprof",
                                                export_formats=["json", "xml"]))
            p.stop()
            p.export("w/none.json")
            off = DiffulexProfiler(ProfilerConfig(enabled=False, output_dir="off"))
            with off.profile("x"):
                off.record_metric("m", 1)
            off.export()
        finally:
            logger.removeHandler(h)
        self.assertEqual(log.getvalue().splitlines(), [
            "Unknown backend 'nvprof', using simple timer",
            "Unknown export format 'xml', skipping",
            "No metrics to export", "No metrics to export"])
        self.assertFalse(os.path.exists("w/none.json") or os.path.exists("off"))
        self.assertIsNone(off.profiler)
        p.profiler.close()

    def test_export_prints_the_summary_as_the_original_logs_it(self):
        code = ("from sonde.compat.diffulex import DiffulexProfiler, ProfilerConfig\n"
                "p = DiffulexProfiler(ProfilerConfig(output_dir='o'))\n"
                "with p.profile('decode'):\n"
                "    pass\n"
                "p.export('o/run.json')\n")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        first = r.stdout.splitlines()[0]
        self.assertRegex(first, r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \| INFO     \| "
                                r"diffulex_profiler\.exporters\.summary \| ={80}$")
        with open("o/run.txt") as f:
            self.assertEqual(r.stdout.split(" | ", 3)[3].rstrip("\n"), f.read())

    def test_nested_sections_are_both_kept(self):
        from sonde.compat.diffulex import DiffulexProfiler, ProfilerConfig
        p = DiffulexProfiler(ProfilerConfig(output_dir="n", export_formats=[]))
        with p.profile("outer"):
            with p.profile("inner"):
                p.record_metric("k", 1)
            self.assertEqual(p.current_metrics.name, "outer")
        self.assertEqual([m.name for m in p.metrics], ["inner", "outer"])
        self.assertEqual(p.metrics[0].custom_metrics, {"k": 1})
        self.assertGreaterEqual(p.metrics[1].duration, p.metrics[0].duration)
        p.profiler.close()

    def test_second_round_facts(self):
        """What the original does that users meet (issue 65): its backend classes, an abstract
        exporter, profile() binding None, clear() inside a block, no time no throughput."""
        import sonde.compat.diffulex as dx
        for n in ("ProfilerBackend", "SimpleTimerBackend", "VizTracerBackend",
                  "PyTorchProfilerBackend"):
            self.assertIn(n, dx.__all__)
            self.assertTrue(issubclass(getattr(dx, n), dx.ProfilerBackend), n)
        for abstract in (dx.ProfilerBackend, dx.ProfilerExporter):
            with self.assertRaises(TypeError):
                abstract()
        p = dx.DiffulexProfiler(dx.ProfilerConfig(output_dir="s", export_formats=[]))
        self.assertEqual(type(p.backend).__name__, "SimpleTimerBackend")
        with p.profile("a") as v:
            p.record_throughput(100, duration=0)
        self.assertIsNone(v)
        self.assertEqual((p.metrics[0].total_tokens, p.metrics[0].throughput_tokens_per_sec),
                         (0, 0.0))
        self.assertEqual(set(p.metrics[0].backend_data), {"duration_sec", "name"})
        with p.profile("dropped"):
            p.record_metric("k", 1)
            p.clear()
            p.record_metric("k", 2)  # nothing open for the original now: nothing recorded
        with p.profile("kept"):
            pass
        self.assertEqual([m.name for m in p.metrics], ["kept"])
        self.assertIsNone(p.current_metrics)
        p.profiler.close()
        with contextlib.redirect_stdout(io.StringIO()):
            q = dx.DiffulexProfiler(dx.ProfilerConfig(output_dir="s", backend="nvprof"))
        self.assertEqual(type(q.backend).__name__, "SimpleTimerBackend")
        q.profiler.close()

    def test_backends_alone(self):
        """The backends as a user of the original drives them without the profiler: the simple
        timer's start/stop, and VizTracerBackend writing its trace (VizTracer not needed)."""
        from sonde.compat.diffulex import SimpleTimerBackend, VizTracerBackend
        b = SimpleTimerBackend()
        self.assertIsNone(b.stop())
        with b:
            b.start("x")
            self.assertEqual(b.current_name, "x")
            d = b.stop()
        self.assertEqual(d["name"], "x")
        self.assertGreaterEqual(d["duration_sec"], 0)
        self.assertIsNone(b.start_time)

        def work():
            return sum(range(10))

        with contextlib.redirect_stdout(io.StringIO()):
            v = VizTracerBackend(output_dir="viz", max_stack_depth=-1)
            v.start("step")
            work()
            d = v.stop()
        self.assertEqual(d, {"backend": "viztracer",
                             "output_file": os.path.join("viz", "viztracer_step.json")})
        with open(d["output_file"]) as f:
            names = {e.get("name") for e in json.load(f)}
        self.assertTrue(any("work" in (n or "") for n in names), sorted(map(str, names))[:20])
        self.assertIsNone(v.stop())
        with self.assertRaises(TypeError):  # VizTracer's own error for an unknown option
            VizTracerBackend(log_everything=True)
        with self.assertRaises(ValueError):  # what sonde raised before: still caught
            VizTracerBackend(log_everything=True)


if __name__ == "__main__":
    print("sonde.compat.diffulex tests on %s (Python %s)" % (sys.executable, sys.version.split()[0]),
          file=sys.stderr)
    unittest.main(verbosity=2)
