"""test_compat_inferix.py - every Python code block of the Inferix profiling document
(shared/reference/001_*.txt) run against sonde.compat.inferix with only its import lines
changed (pipeline objects replaced by stand-ins); its YAML file loaded verbatim; its command
line run; the reports, keys and printed lines it shows checked. GPUs are the fake NVML
(SONDE_NVML_LIBRARY, FAKE_NVML_DEVICES=4: device i uses (1000 + 1000i) MiB of 24576 MiB at
40 + 10i % utilization, 60 + i C). Run by ctest with PYTHONPATH=BUILD/python."""

import contextlib
import io
import json
import os
import subprocess
import sys
import time
import unittest

import sonde

from docblocks import InTempDir, blocks

IMPORTS = {
    "from inferix.profiling import": "from sonde.compat.inferix import",
    "from inferix.profiling.config import": "from sonde.compat.inferix import",
    "from inferix.profiling.decorators import": "from sonde.compat.inferix import",
    "from inferix.utils.profiling_integration import": "from sonde.compat.inferix import",
    "from inferix.profiling.aggregate_reports import":
        "from sonde.compat.inferix.aggregate_reports import",
}


def adapt(code):
    """Only the import lines change."""
    for a, b in IMPORTS.items():
        code = code.replace(a, b)
    assert "inferix." not in code.replace("sonde.compat.inferix", ""), code
    return code


def wait_for(pred, what, seconds=30):
    """Polls pred() (the sampler's first pass), asleep in between: no CPU share needed."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.01)
    raise AssertionError("timed out waiting for " + what)


class Stand:
    """A pipeline's objects, standing in."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


class Timestep:
    def __init__(self, v):
        self.v = v

    def item(self):
        return self.v


def report(path):
    with open(path) as f:
        return json.load(f)


class InferixDocument(InTempDir):
    def namespace(self, prev=None):
        from sonde.compat import inferix
        ns = {name: getattr(inferix, name) for name in inferix.__all__}
        ns.update(prev or {})
        def your_existing_function():
            """Inference, standing in: it lasts until the GPU has been sampled once (a real
            one lasts far longer than the 0.5 s sampling interval)."""
            p = inferix.current_profiler()
            wait_for(lambda: p.get_current_metrics()["gpu"]["memory_used_mb"] is not None,
                     "a GPU sample")
            return "frames"

        ns.setdefault("your_existing_function", your_existing_function)
        ns.setdefault("custom_function", lambda: 42)
        return ns

    def run_block(self, code, ns):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(adapt(code), "<001 block>", "exec"), ns)
        return out.getvalue()

    def ranks(self, where, n=2):
        """Two ranks' reports of one distributed run, each from its own process."""
        for r in range(n):
            env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(n))
            subprocess.run([sys.executable, "-c", (
                "from sonde.compat.inferix import InferixProfiler, ProfilingConfig\n"
                "import time\n"
                "p = InferixProfiler(ProfilingConfig(output_dir=%r, report_format='json'))\n"
                "with p.session('generate'):\n"
                "    with p.stage('denoise'):\n"
                "        time.sleep(0.01 * (1 + %d))\n"
                "p.close()\n") % (where, r)], check=True, env=env)

    def test_every_block(self):
        bs = blocks("001")
        self.assertGreaterEqual(len(bs), 10)
        ns = self.namespace()
        self.checked = set()
        self.ranks("./distributed_profiling_reports")
        for i, code in enumerate(bs):
            with self.subTest(block=i, first_line=code.splitlines()[0]):
                if "self.profiler" in code:  # inside a pipeline's method: a stand-in self
                    prof = ns["InferixProfiler"](ns["ProfilingConfig"](output_dir="direct"))
                    ns.update(self=Stand(profiler=prof, args=Stand(guidance_scale=5.0)),
                              num_blocks=3, index=0, current_timestep=Timestep(750.0),
                              current_num_frames=4, diffusion_time_ms=120.0, block_time=480.0,
                              memory_used_mb=2048.0)
                printed = self.run_block(code, ns)
                self.check(code, ns, printed)
        for p in {id(v): v for v in ns.values() if isinstance(v, ns["InferixProfiler"])}.values():
            p.close()
        self.assertEqual(self.checked, set(range(1, 11)))  # every block's promise was checked

    def check(self, code, ns, printed):
        if 'profiler.session("my_video_generation")' in code:
            self.checked.add(1)
            r = report("profiling_reports/inferix.json")
            self.assertTrue(os.path.isfile("profiling_reports/inferix.html"))
            s = [x for x in r["sessions"] if x["name"] == "my_video_generation"][0]
            self.assertEqual(s["metadata"]["session_id"], ns["session_id"])
            self.assertRegex(ns["session_id"], r"^session_[0-9a-f]{6}$")
            self.assertEqual({x["name"] for x in s["sections"]},
                             {"text_encoding", "video_generation", "vae_decode"})
        if "ProfilingIntegration(config)" in code:
            self.checked.add(2)
            # the document's printed line, with the fake GPU 0's 1000 MiB
            self.assertEqual(printed, "GPU Memory: 1000.0MB\n")
            r = report(ns["profiling"].report_paths()[0])  # inferix-2: the name was taken
            s = [x for x in r["sessions"] if x["name"] == "generation"][-1]
            self.assertEqual(s["metadata"]["prompt"], "A cat playing in the garden")
            ev = {e["name"]: e for e in r["events"]}["milestone_reached"]
            self.assertEqual(ev["occurrences"][0]["args"], {"progress": "0.5"})
        if 'session_tags={"experiment": "optimization_v1"}' in code:
            self.checked.add(3)
            c = ns["config"]
            self.assertEqual((c.report_format, c.gpu_monitor_interval, c.output_dir),
                             ("both", 0.5, "./profiling_reports"))
            p = ns["InferixProfiler"](c, name="tagged")
            with p.session("s"):
                pass
            p.close()
            s = report("profiling_reports/tagged.json")["sessions"][0]
            self.assertEqual(s["metadata"]["experiment"], "optimization_v1")
        if "aggregate_reports(" in code:
            self.checked.add(4)
            a = report("aggregated_report.json")
            self.assertEqual(a["ranks"], 2, a)
            names = {x["name"] for x in a["rows"]}
            self.assertIn("denoise", names)
        if '"custom_operation"' in code:
            self.checked.add(5)
            self.assertEqual(ns["result"], 42)
            ns["my_function"]()
            ns["profiler"].profiler.export("custom.json")
            r = report("custom.json")
            st = {x["name"]: x for x in r["sections"]}
            self.assertEqual(st["custom_operation"]["metadata"]["batch_size"], ["32"])
            self.assertEqual(st["my_function"]["count"], 1)
        if "GPUMonitor(device_ids=[0, 1, 2, 3])" in code:
            self.checked.add(6)
            m = ns["gpu_monitor"].start()
            cur = wait_for(lambda: len(m.get_current_metrics()) == 4 and m.get_current_metrics(),
                           "4 GPUs")
            self.assertEqual([cur[i]["memory_used_mb"] for i in range(4)],
                             [1000.0, 2000.0, 3000.0, 4000.0])
            self.assertEqual(cur[3]["utilization"], 70.0)
            m.stop()
        if "class VideoPipeline" in code:
            self.checked.add(7)
            prof = ns["InferixProfiler"](ns["ProfilingConfig"](output_dir="deco"))
            pipe = ns["VideoPipeline"]()
            pipe.profiler = prof
            pipe._initialize_model()  # outside a session: a stage of the run
            pipe.run_text_to_video(["a cat"])
            prof.close()
            r = report("deco/inferix.json")
            s = [x for x in r["sessions"] if x["name"] == "video_generation"][0]
            self.assertEqual(s["metadata"]["mode"], "t2v")
            self.assertIn("model_initialization", {x["name"] for x in r["sections"]})
        if "record_diffusion_step(" in code:
            self.checked.add(8)
            prof = ns["self"].profiler
            prof.close()
            d = report("direct/inferix.json")["diffusion"]
            self.assertEqual(d["steps"]["count"], 3)
            self.assertEqual(d["steps"]["guidance_min"], 5.0)
            self.assertEqual(d["steps"]["timestep_first"], 0.75)
            self.assertEqual(d["blocks"]["count"], 3)
            self.assertEqual(d["blocks"]["frames"], 12)
            self.assertEqual(d["blocks"]["memory_peak_mb"], 2048.0)
        if "config.max_data_points = 5000" in code:
            self.checked.add(9)
            self.assertEqual(ns["config"].max_data_points, 5000)
            self.assertEqual(ns["config"].cpu_monitor_interval, 2.0)
        if "config.profile_text_encoding = False" in code:
            self.checked.add(10)
            p = ns["InferixProfiler"](ns["config"], name="lean")
            with p.session("s"):
                with p.stage("text_encoding"):
                    pass
                with p.stage("denoise"):
                    pass
            p.close()
            names = {x["name"] for x in report("profiling_reports/lean.json")["sections"]}
            self.assertEqual(names, {"denoise"})

    def test_yaml_verbatim_and_the_command_line(self):
        with open("profiling.yaml", "w") as f:
            f.write(blocks("001", "yaml")[0])
        from sonde.compat.inferix import InferixProfiler, ProfilingConfig
        c = ProfilingConfig.from_yaml("profiling.yaml")
        self.assertEqual((c.display_interval, c.gpu_monitor_interval, c.cpu_monitor_interval,
                          c.report_format, c.max_data_points, c.output_dir),
                         (5.0, 0.5, 1.0, "both", 10000, "./profiling_reports"))
        self.assertTrue(c.real_time_display and c.profile_vae_decode)
        p = InferixProfiler("profiling.yaml")
        self.assertEqual(p.profiler.config.get("formats"), "json,html")
        p.close()
        with open("bad.yaml", "w") as f:
            f.write("profiling:\n  enabled: true\n  report_formt: html\n")
        with self.assertRaises(ValueError) as e:
            ProfilingConfig.from_yaml("bad.yaml")
        self.assertEqual(str(e.exception),
                         'bad.yaml:3: unknown key "report_formt" (did you mean "report_format"?)')
        with open("bad.yaml", "w") as f:
            f.write("profiling:\n  display_interval: soon\n")
        with self.assertRaises(ValueError) as e:
            ProfilingConfig.from_yaml("bad.yaml")
        self.assertIn("bad.yaml:2: key \"display_interval\": 'soon' is not a number",
                      str(e.exception))
        with self.assertRaises(ValueError):
            ProfilingConfig(report_format="pdf")
        # the document's command line, as it is written there
        self.ranks("./distributed_profiling_reports")
        cmd = [b for b in blocks("001", "bash") if "aggregate_reports" in b][0]
        cmd = cmd.replace("\\\n", " ").split()
        self.assertEqual(cmd[:3], ["python", "-m", "inferix.profiling.aggregate_reports"])
        cmd = [sys.executable, "-m", "sonde.compat.inferix.aggregate_reports"] + cmd[3:]
        r = subprocess.run(cmd, capture_output=True, text=True,
                           env={k: v for k, v in os.environ.items() if not k.startswith("SONDE_")})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")  # no runpy warning either
        self.assertEqual(report("aggregated_report.json")["ranks"], 2)
        r = subprocess.run(cmd[:3] + ["--reports_dir", "missing", "--output", "x.json"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("no directory missing", r.stderr)
        from sonde.compat import inferix
        self.assertTrue(callable(inferix.aggregate_reports))

    def test_yaml_loader_survives_mutations(self):
        """_sonde.yaml_load (libyaml into Python values) on 3000 mutations of 001's YAML, in a
        child limited to 1 GiB of address space: only values or ValueError, never a crash."""
        with open("seed.yaml", "w") as f:
            f.write(blocks("001", "yaml")[0])
        code = (
            "import random, resource, sys\n"
            "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
            "from sonde import _sonde\n"
            "seed = open('seed.yaml', 'rb').read()\n"
            "rng = random.Random(1234)\n"
            "alphabet = b'{}[]:,-&*!|>\"\\'#%@ \\n\\tab01~'\n"
            "ok = err = 0\n"
            "for i in range(3000):\n"
            "    b = bytearray(seed)\n"
            "    for _ in range(rng.randint(1, 8)):\n"
            "        op, at = rng.randint(0, 2), rng.randrange(len(b) + 1)\n"
            "        if op == 0 and b: b[min(at, len(b) - 1)] = rng.choice(alphabet)\n"
            "        elif op == 1: b[at:at] = bytes([rng.choice(alphabet)]) * rng.randint(1, 64)\n"
            "        elif b: del b[at:at + rng.randint(1, 16)]\n"
            "    try:\n"
            "        _sonde.yaml_load(bytes(b), 'm.yaml'); ok += 1\n"
            "    except ValueError:\n"
            "        err += 1\n"
            "print(ok, err)\n")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        ok, err = map(int, r.stdout.split())
        self.assertEqual(ok + err, 3000)
        self.assertGreater(ok, 0)
        self.assertGreater(err, 0)

    def test_display_lines_and_current_metrics(self):
        from sonde.compat.inferix import InferixProfiler, ProfilingConfig, format_metrics
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            p = InferixProfiler(ProfilingConfig(real_time_display=True, display_interval=0.1,
                                                cpu_monitor_interval=0.05,
                                                gpu_monitor_interval=0.05))
            with p.session("shown") as sid:
                m = wait_for(lambda: (lambda x: x["cpu"]["usage_percent"] is not None and
                                      x["gpu"]["memory_used_mb"] is not None and x)(
                                          p.get_current_metrics()), "CPU and GPU figures")
                wait_for(lambda: out.getvalue().count("===") >= 4, "two displays")
            p.close()
        self.assertEqual((m["gpu"]["memory_used_mb"], m["gpu"]["memory_total_mb"],
                          m["gpu"]["utilization"], m["gpu"]["temperature"]),
                         (1000.0, 24576.0, 40.0, 60.0))
        self.assertEqual(len(m["gpus"]), 4)
        self.assertGreater(m["memory"]["total_mb"], m["memory"]["used_mb"])
        lines = out.getvalue().splitlines()
        self.assertEqual(lines[0], "=== Profiling Metrics (%s) ===" % sid)
        self.assertEqual(lines[1], "GPU: Memory 1000MB / 24576MB (4.1%), Util 40.0%, Temp 60.0°C")
        self.assertRegex(lines[2], r"^CPU: \d+\.\d%, Memory \d+MB / \d+MB \(\d+\.\d%\)$")
        # no GPU: the line says so instead of inventing figures
        self.assertIn("GPU: not monitored", format_metrics(
            {"gpu": {"available": False}, "cpu": {"usage_percent": 1.0},
             "memory": {"used_mb": 1.0, "total_mb": 2.0, "percent": 50.0}}, "s"))

    def test_decorators_find_their_profiler(self):
        from sonde.compat.inferix import (InferixProfiler, ProfilingConfig, add_profiling_event,
                                          profile_block_computation, profile_diffusion_step,
                                          profile_method, profile_model_parameters)

        class Tensor:
            def __init__(self, n):
                self.n = n

            def numel(self):
                return self.n

        class Model:
            def parameters(self):
                return [Tensor(1000), Tensor(24)]

        class Pipe:  # no profiler attribute: the one whose session the thread is in
            @profile_method
            def encode(self):
                return "e"

            @profile_diffusion_step
            def step(self, step=None, timestep=0.0):
                time.sleep(0.002)

            @profile_block_computation()
            def block(self, block_index=None, block_size=0):
                pass

            @profile_model_parameters("unet")
            def load(self):
                return Model()

            @add_profiling_event("decoded", {"frames": 16})
            def decode(self):
                return "d"

        pipe = Pipe()
        self.assertEqual(pipe.encode(), "e")  # no profiler anywhere: runs unprofiled
        p = InferixProfiler(ProfilingConfig(output_dir="out"))
        with p.session("run"):
            pipe.encode()
            pipe.load()
            for t in (0.9, 0.5):
                pipe.step(timestep=t)
            pipe.block(block_size=8)
            pipe.decode()
        a = p.diffusion_analyzer
        self.assertEqual(a.get_model_analysis(), {"unet": 1024})
        self.assertEqual(a.get_diffusion_analysis()["count"], 2)
        self.assertEqual(a.get_block_analysis()["frames"], 8)
        p.close()
        r = report("out/inferix.json")
        st = {x["name"].split(".<locals>.")[-1]: x["count"] for x in r["sections"]}
        self.assertEqual((st["Pipe.encode"], st["diffusion_step"], st["block_computation"]),
                         (1, 2, 1))
        d = r["diffusion"]
        self.assertEqual(d["steps"]["count"], 2)
        self.assertEqual((d["steps"]["timestep_first"], d["steps"]["timestep_last"]), (0.9, 0.5))
        self.assertGreaterEqual(d["steps"]["mean_s"], 0.002)  # the stage's own duration
        self.assertEqual(d["blocks"]["frames"], 8)
        ev = {e["name"]: e for e in r["events"]}
        self.assertEqual(ev["decoded"]["occurrences"][0]["args"], {"frames": "16"})


if __name__ == "__main__":
    print("sonde.compat.inferix tests on %s (Python %s)" % (sys.executable,
                                                           sys.version.split()[0]),
          file=sys.stderr)
    unittest.main(verbosity=2)
