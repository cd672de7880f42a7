"""test_compat_diffulex.py - every Python code block of the Diffulex profiler's document
(shared/reference/000_*.txt) run against sonde.compat.diffulex with only its import line changed,
the Diffulex engine replaced by a small stand-in; the files the blocks name and the values they
print are checked. Run by ctest with PYTHONPATH=BUILD/python and REFERENCE_DOCS_DIR."""

import contextlib
import importlib.util
import io
import json
import os
import re
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
        return ns, out.getvalue()

    def test_every_block(self):
        bs = blocks()
        self.assertGreaterEqual(len(bs), 10)
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
                    if importlib.util.find_spec("torch") is None:
                        with self.assertRaises(ImportError) as e:
                            self.run_block(code)
                        self.assertIn('backend="pytorch" needs PyTorch', str(e.exception))
                    else:  # tests/python/test_torch_profiler.py checks what it records
                        p = self.run_block(code)[0]["profiler"]
                        self.assertIsNotNone(p.torch_profiler)
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
        """The "viztracer" backend: every Python call a section; VizTracer's output_file gets
        the Chrome trace at export(), its events with their source file (file_info)."""
        def tokenize(text):
            return text.split()

        with profiler.profile("inference"):
            tokenize("a b c")
        written = profiler.export()
        self.assertIn("trace.json", written)
        with open("trace.json") as f:
            events = json.load(f)  # the Chrome trace: an array of events
        (call,) = [e for e in events if e.get("ph") == "X" and e["name"].endswith(".tokenize")]
        self.assertEqual(call["args"]["file"], __file__)
        (outer,) = [e for e in events if e.get("ph") == "X" and e["name"] == "inference"]
        self.assertGreaterEqual(call["ts"], outer["ts"])
        with self.assertRaises(ValueError) as e:
            DiffulexProfilerFor({"output_file": "t.json", "no_such_option": 1})
        self.assertIn("no_such_option", str(e.exception))

    def check(self, code, ns, printed):
        """What the block promises: the files it exports, the values it prints."""
        for path in re.findall(r'profiler\.export\("([^"]+)"\)', code):
            self.assertTrue(os.path.isfile(path), path)
            if path.endswith(".json"):
                with open(path) as f:
                    r = json.load(f)
                self.assertEqual(r["schema"], "sonde-report")
                names = {s["name"] for s in r["sections"]}
                for sec in re.findall(r'profiler\.profile\("([^"{]+)"', code):
                    self.assertIn(sec, names)
            elif path.endswith(".txt"):
                with open(path) as f:
                    self.assertTrue(f.read().startswith("sonde summary: "))
            elif path.endswith(".csv"):
                with open(path) as f:
                    self.assertIn("name,count", f.readline())
        if "profiler.export()" in code:
            p = ns["profiler"]
            for f in p.export():
                self.assertTrue(os.path.isfile(f), f)
        m = re.search(r"Total duration: ([0-9.]+)s", printed)
        if "Total duration" in code:
            self.assertIsNotNone(m, printed)
            self.assertGreater(float(m.group(1)) + 1, 0)
        for label in ("Average throughput", "Throughput"):
            if label + ": " in code:
                t = re.search(label + r": ([0-9.]+) tok/s", printed)
                self.assertIsNotNone(t, printed)
                self.assertGreater(float(t.group(1)), 0)

    def test_summary_and_metrics(self):
        from sonde.compat.diffulex import DiffulexProfiler, ProfilerConfig
        p = DiffulexProfiler(ProfilerConfig(output_dir="out", collect_gpu_metrics=False))
        with p.profile("generate", metadata={"num_prompts": 2}):
            p.record_metric("num_outputs", 2)
            p.record_metric("label", {"kind": "greedy"})  # not a number: metadata
            p.record_throughput(total_tokens=1000)
        s = p.get_summary()
        self.assertEqual(s["total_tokens"], 1000)
        self.assertGreater(s["avg_throughput_tokens_per_sec"], 0)
        self.assertGreater(s["total_duration_sec"], 0)
        g = s["sections"]["generate"]
        self.assertEqual((g["count"], g["total_tokens"]), (1, 1000))
        self.assertEqual(g["custom_metrics"], {"num_outputs": 2, "label": {"kind": "greedy"}})
        self.assertEqual(g["metadata"]["num_prompts"], 2)
        p.export("out/r.json")
        with open("out/r.json") as f:
            r = json.load(f)
        sec = [x for x in r["sections"] if x["name"] == "generate"][0]
        self.assertEqual(sec["metadata"]["label"], ['{"kind": "greedy"}'])
        self.assertEqual([m["name"] for m in r["metrics"]], ["num_outputs"])
        p.clear()
        self.assertEqual(p.get_summary()["num_sections"], 0)
        with self.assertRaises(ValueError):
            DiffulexProfiler(ProfilerConfig(export_formats=["xml"]))


if __name__ == "__main__":
    print("sonde.compat.diffulex tests on %s (Python %s)" % (sys.executable, sys.version.split()[0]),
          file=sys.stderr)
    unittest.main(verbosity=2)
