"""test_compat_inferix.py - every Python code block of the Inferix profiling document
(shared/reference/001_*.txt) run against sonde.compat.inferix with only its import lines
changed (pipeline objects replaced by stand-ins); its YAML file loaded verbatim; its command
line run; the reports, keys and printed lines it shows checked. GPUs are the fake NVML
(SONDE_NVML_LIBRARY, FAKE_NVML_DEVICES=4: device i uses (1000 + 1000i) MiB of 24576 MiB at
40 + 10i % utilization, 60 + i C). Run by ctest with PYTHONPATH=BUILD/python."""

import contextlib
import glob
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
    "from inferix.core.monitoring.profiling import": "from sonde.compat.inferix import",
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


def session_reports(d, sid, ext="json"):
    """The reports of session sid in d, as the original names them."""
    return sorted(glob.glob(os.path.join(d, "profiling_report_%s_*.%s" % (sid, ext))))


def session_report(d, sid):
    (path,) = session_reports(d, sid)
    for part in path[:-len(".json")].rsplit("_", 2)[1:]:
        assert part.isdigit(), path  # ..._YYYYmmdd_HHMMSS
    return report(path)


KEYS = {"session_info", "summary", "gpu_metrics", "cpu_metrics", "stage_analysis", "events",
        "recommendations"}


def quiet():
    return contextlib.redirect_stdout(io.StringIO())


class InferixDocument(InTempDir):
    def namespace(self, prev=None):
        from sonde.compat import inferix
        ns = {name: getattr(inferix, name) for name in inferix.__all__}
        ns.update(prev or {})

        def your_existing_function():
            """Inference, standing in: it lasts until the GPU monitor has a snapshot with the
            fake GPUs' memory (a real one lasts far longer than its 0.5 s interval)."""
            p = inferix.current_profiler()
            wait_for(lambda: p.get_current_metrics().get("gpu", {}).get(
                "total_gpu_memory_used_mb"), "a GPU snapshot")
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
        """n ranks' reports of one distributed run, each from its own process into
        where/rank_N, as the original's distributed example lays them out."""
        for r in range(n):
            env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(n))
            subprocess.run([sys.executable, "-c", (
                "from sonde.compat.inferix import InferixProfiler, ProfilingConfig\n"
                "import time\n"
                "p = InferixProfiler(ProfilingConfig(enabled=True, output_dir=%r,\n"
                "    report_format='json', real_time_display=False))\n"
                "p.start_session('generate', {'rank': %d})\n"
                "with p.stage('denoise'):\n"
                "    time.sleep(0.01 * (1 + %d))\n"
                "p.end_session()\n"
                "p.cleanup()\n") % (os.path.join(where, "rank_%d" % r), r, r)],
                check=True, env=env, stdout=subprocess.DEVNULL)

    def test_every_block(self):
        bs = blocks("001")
        self.assertGreaterEqual(len(bs), 10)
        ns = self.namespace()
        self.checked = set()
        self.ranks("./distributed_profiling_reports")
        for i, code in enumerate(bs):
            with self.subTest(block=i, first_line=code.splitlines()[0]):
                if "self.profiler" in code:  # inside a pipeline's method: a stand-in self
                    prof = ns["InferixProfiler"](ns["ProfilingConfig"](
                        enabled=True, output_dir="direct", real_time_display=False))
                    prof.start_session("direct")
                    ns.update(self=Stand(profiler=prof, args=Stand(guidance_scale=5.0)),
                              num_blocks=3, index=0, current_timestep=Timestep(750.0),
                              current_num_frames=4, diffusion_time_ms=120.0, block_time=480.0,
                              memory_used_mb=2048.0)
                printed = self.run_block(code, ns)
                self.check(code, ns, printed)
        made = [v.profiler if isinstance(v, ns["ProfilingIntegration"]) else v
                for v in ns.values()
                if isinstance(v, (ns["InferixProfiler"], ns["ProfilingIntegration"]))]
        for p in {id(v): v for v in made if v is not None}.values():
            with quiet():
                p.cleanup()
        self.assertEqual(self.checked, set(range(1, 11)))  # every block's promise was checked

    def check(self, code, ns, printed):
        if 'profiler.session("my_video_generation")' in code:
            self.checked.add(1)
            self.assertEqual(ns["session_id"], "my_video_generation")
            r = session_report("profiling_reports", "my_video_generation")
            self.assertTrue(session_reports("profiling_reports", "my_video_generation", "html"))
            self.assertLessEqual(KEYS, set(r))
            self.assertEqual(set(r["stage_analysis"]["stages"]),
                             {"text_encoding", "video_generation", "vae_decode"})
            self.assertEqual(r["stage_analysis"]["stages"]["vae_decode"]["call_count"], 1)
            lines = printed.splitlines()
            self.assertIn("Profiling session 'my_video_generation' started", lines)
            self.assertRegex(lines[-1], r"^Profiling session 'my_video_generation' ended "
                                        r"\(duration: \d+\.\d\ds\)$")
            self.assertRegex(lines[-2], r"^Profiling report generated: .*profiling_report_"
                                        r"my_video_generation_\d+_\d+\.json, .*\.html$")
        if "ProfilingIntegration(config)" in code:
            self.checked.add(2)
            # the document's printed line: the fake GPUs' memory (1000+2000+3000+4000 MiB)
            self.assertIn("GPU Memory: 10000MB\n", printed)
            sid = [ln for ln in printed.splitlines() if ln.startswith("Profiling session")][0]
            sid = sid.split("'")[1]
            self.assertRegex(sid, r"^session_[0-9a-f]{8}_\d+$")
            r = session_report("profiling_reports", sid)
            self.assertEqual(r["session_info"]["tags"]["prompt"], "A cat playing in the garden")
            self.assertEqual(r["session_info"]["tags"]["prompt_length"], 27)
            ev = [e for e in r["events"] if e["name"] == "milestone_reached"][0]
            self.assertEqual(ev["data"], {"progress": 0.5})  # numbers stay numbers
            g = r["gpu_metrics"]["timeline"][-1]
            self.assertEqual((g["memory_used_mb"], g["memory_total_mb"]), (10000, 4 * 24576))
        if 'session_tags={"experiment": "optimization_v1"}' in code:
            self.checked.add(3)
            c = ns["config"]
            self.assertEqual((c.report_format, c.gpu_monitor_interval, c.output_dir),
                             ("both", 0.5, "./profiling_reports"))
            p = ns["InferixProfiler"](c, name="tagged")
            with quiet():
                p.start_session("tagged_session", {"run": 3})
                p.end_session()
                p.cleanup()
            r = session_report("profiling_reports", "tagged_session")
            self.assertEqual(r["session_info"]["tags"], {"experiment": "optimization_v1",
                                                         "run": 3})
        if "aggregate_reports(" in code:
            self.checked.add(4)
            a = report("aggregated_report.json")
            self.assertEqual((a["rank_count"], a["total_reports"]), (2, 2), a)
            self.assertEqual(set(a), {"total_reports", "rank_count", "aggregated_gpu_metrics",
                                      "aggregated_cpu_metrics", "reports_summary",
                                      "sonde_aggregate"})
            self.assertEqual(printed.splitlines()[:2], ["Found 2 rank directories",
                                                        "Aggregated report saved to "
                                                        "./aggregated_report.json"])
            names = {x["name"] for x in a["sonde_aggregate"]["rows"]}
            self.assertIn("denoise", names)
        if '"custom_operation"' in code:
            self.checked.add(5)
            self.assertEqual(ns["result"], 42)
            p = ns["profiler"]
            with quiet():
                p.start_session("custom")
                with p.stage("custom_operation", metadata={"batch_size": 32}):
                    pass
                ns["my_function"]()
                p.end_session()
            st = session_report("profiling_reports", "custom")["stage_analysis"]["stages"]
            self.assertEqual(set(st), {"custom_operation", "my_function"})
        if "GPUMonitor(device_ids=[0, 1, 2, 3])" in code:
            self.checked.add(6)
            m = ns["gpu_monitor"]
            m.start_monitoring()
            cur = wait_for(lambda: (lambda s: s and s.metrics["total_gpu_memory_used_mb"] ==
                                    10000 and s.metrics)(m.get_latest_metrics()), "4 GPUs")
            m.stop_monitoring()
            devs = cur["gpu_devices"]
            self.assertEqual([devs["gpu_%d" % i]["memory_used_mb"] for i in range(4)],
                             [1000, 2000, 3000, 4000])
            self.assertEqual(devs["gpu_3"]["utilization_percent"], 70.0)
            self.assertEqual((cur["total_gpu_memory_used_mb"], cur["max_gpu_utilization"]),
                             (10000, 70.0))
        if "class VideoPipeline" in code:
            self.checked.add(7)
            prof = ns["InferixProfiler"](ns["ProfilingConfig"](
                enabled=True, output_dir="deco", real_time_display=False))
            pipe = ns["VideoPipeline"]()
            pipe._profiling_enabled, pipe._profiler = True, prof  # the original's idiom
            with quiet():
                pipe.run_text_to_video(["a cat"])
            r = session_report("deco", "video_generation")
            self.assertEqual(r["session_info"]["tags"]["mode"], "t2v")
            off = ns["VideoPipeline"]()
            off._profiling_enabled, off._profiler = False, prof
            off.run_text_to_video(["a dog"])  # profiling off on the object: nothing
            self.assertEqual(len(session_reports("deco", "video_generation")), 1)
            prof.cleanup()
        if "record_diffusion_step(" in code:
            self.checked.add(8)
            prof = ns["self"].profiler
            with quiet():
                prof.end_session()
            r = session_report("direct", "direct")
            d, b = r["diffusion_analysis"], r["block_analysis"]
            self.assertEqual((d["total_steps"], d["avg_timestep"], d["total_frames"]),
                             (3, 0.75, 12))
            self.assertEqual([s["guidance_scale"] for s in d["steps"]], [5.0] * 3)
            self.assertAlmostEqual(d["fps"], 12 / 0.360)  # over 10: no speed advice
            self.assertEqual((b["total_blocks"], b["peak_memory_usage_mb"]), (3, 2048.0))
            recs = {x["category"]: x for x in r["recommendations"]}
            self.assertNotIn("Generation Speed", recs)
            self.assertEqual(recs["Latency Optimization"]["issue"],
                             "First-block delay is 0.48 seconds")
            with quiet():
                prof.cleanup()
        if "config.max_data_points = 5000" in code:
            self.checked.add(9)
            self.assertEqual(ns["config"].max_data_points, 5000)
            self.assertEqual(ns["config"].cpu_monitor_interval, 2.0)
        if "config.profile_text_encoding = False" in code:
            self.checked.add(10)
            self.assertFalse(ns["config"].real_time_display)
            self.assertFalse(ns["config"].profile_text_encoding)

    def test_the_original_defaults_and_fields(self):
        from sonde.compat.inferix import ProfilingConfig, create_profiler_from_config, \
            InferixProfiler, ProfilingIntegration, get_profiling_summary
        c = ProfilingConfig()
        self.assertFalse(c.enabled)  # off unless asked for
        self.assertTrue(c.real_time_display)
        self.assertIsNone(c.output_dir)
        for f in ("save_raw_data", "profile_diffusion_steps", "profile_block_computation",
                  "profile_model_parameters"):
            self.assertTrue(hasattr(c, f), f)
        self.assertIsNone(create_profiler_from_config(None))
        self.assertIsNone(create_profiler_from_config({"profiling": {"enabled": False}}))
        off = create_profiler_from_config(ProfilingConfig())
        self.assertIsNone(off.profiler)
        self.assertEqual(get_profiling_summary(off), {"profiling_enabled": False})
        with off.session(prompt="x") as sid:
            self.assertIsNone(sid)
        on = create_profiler_from_config({"profiling": {"enabled": True, "output_dir": "o",
                                                        "real_time_display": False}})
        self.assertIsInstance(on.profiler, InferixProfiler)
        with quiet():
            with on.session("given", prompt="p", tags={"k": 1}) as sid:
                self.assertEqual(sid, "given")
                self.assertEqual(get_profiling_summary(on)["profiling_enabled"], True)
        on.cleanup()
        r = session_report("o", "given")
        self.assertEqual(r["session_info"]["tags"], {"k": 1, "prompt": "p", "prompt_length": 1})

        class External:  # a pipeline config carrying profiling_config
            profiling_config = ProfilingConfig(enabled=True, output_dir="ext",
                                               real_time_display=False)
        ext = ProfilingIntegration(External())
        self.assertTrue(ext.enabled)
        ext.cleanup()
        disabled = InferixProfiler()
        self.assertEqual(disabled.get_current_metrics(), {})
        self.assertEqual(disabled.start_session("x"), "x")
        self.assertIsNone(disabled.end_session())
        self.assertIsNone(disabled.profiler.file_path)  # writes nothing

    def test_sessions_recorders_and_their_report(self):
        from sonde.compat.inferix import InferixProfiler, ProfilingConfig
        p = InferixProfiler(ProfilingConfig(enabled=True, output_dir="r", report_format="json",
                                            real_time_display=False, save_raw_data=True))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            p.start_session("first")
            p.start_session("second")  # ends the first, with the original's warning
            self.assertEqual(p.current_session.session_id, "second")
            for i in range(4):
                p.record_streaming_event(batch_size=4, encoding_time_ms=10.0 + i)
            p.record_dropped_frames(4)
            t0 = p.start_layer_computation("attn")
            ms = p.end_layer_computation("attn", t0, parameters_count=10)
            p.record_memory_event("alloc", 4 << 20, allocator="cuda")
            p.record_memory_event("alloc", 1024, allocator="cuda")
            p.record_memory_event("dealloc", 1024, allocator="cuda")
            p.record_cache_event("hits", 100)
            p.record_cache_event("misses", 100)
            p.record_model_parameters("vae", 2500000, "vae")
            self.assertEqual(set(p.sessions), {"first", "second"})
            self.assertEqual(p.end_session(), "second")
        p.cleanup()
        lines = out.getvalue().splitlines()
        self.assertEqual(lines[:2], ["Profiling session 'first' started",
                                     "Warning: Starting new session 'second' while session "
                                     "'first' is still active"])
        r = session_report("r", "second")
        s = r["streaming_analysis"]
        self.assertEqual((s["total_frames_streamed"], s["total_dropped_frames"],
                          s["drop_rate_percent"], s["avg_encoding_time_ms"]), (16, 4, 20.0, 11.5))
        self.assertEqual(r["computation_analysis"]["layer_performance"]["attn"]["call_count"], 1)
        self.assertGreaterEqual(ms, 0)
        m = r["memory_analysis"]["allocation_patterns"]["cuda"]
        self.assertEqual((m["total_allocations"], m["total_deallocations"]), (2, 1))
        self.assertEqual(r["memory_analysis"]["fragmentation_analysis"]["small_allocation_ratio"],
                         0.5)
        self.assertEqual(r["cache_analysis"]["cache_efficiency"]["hit_rate"], 0.5)
        self.assertEqual(r["model_analysis"]["total_parameters_readable"], "2.5M")
        self.assertIn("Streaming Performance", {x["category"] for x in r["recommendations"]})
        self.assertEqual([e["name"] for e in r["events"]],
                         ["layer_computation", "cache_event", "cache_event", "model_parameters"])
        raw = glob.glob("r/raw_profiling_data_second_*.json")
        self.assertEqual(len(raw), 1)
        self.assertEqual(set(report(raw[0])), {"session_id", "gpu_data", "cpu_data", "saved_at"})
        self.assertEqual(session_report("r", "first")["session_info"]["id"], "first")
        self.assertFalse(glob.glob("r/*.html"))  # report_format json

    def test_second_round_facts(self):
        """What the original does that its users meet (issue 65): a profiler cleaned up after a
        request serves the next one; a session that cannot start leaves no report; a report
        has "cache_analysis": {} without cache events; an unknown configuration key is a
        TypeError (dataclass keywords), also a ValueError."""
        from sonde.compat.inferix import InferixProfiler, ProfilingConfig
        from sonde.compat.inferix.integration import create_profiler_from_config
        p = InferixProfiler(ProfilingConfig(enabled=True, output_dir="req", report_format="json",
                                            real_time_display=False))
        with contextlib.redirect_stdout(io.StringIO()):
            for request in ("first", "second"):  # the pipeline's loop
                p.start_session(request)
                with p.stage("denoise"):
                    pass
                p.cleanup()
            self.assertEqual(set(p.sessions), {"first", "second"})
            for sid in ("first", "second"):
                r = session_report("req", sid)
                self.assertEqual(r["cache_analysis"], {})
                self.assertIn("denoise", r["stage_analysis"]["stages"])
            p.close()  # sonde's own end: the run's files written, then nothing more
            with self.assertRaises(sonde.SondeError):
                p.start_session("third")
        self.assertIsNone(p.current_session)
        self.assertEqual(set(p.sessions), {"first", "second"})
        p.cleanup()  # nothing under way: no report of a session that never started
        self.assertEqual(session_reports("req", "third"), [])
        with self.assertRaises(TypeError) as e:
            create_profiler_from_config({"profiling": {"enabled": True, "gpu_intervl": 1}})
        self.assertIsInstance(e.exception, ValueError)
        self.assertIn('unknown key "gpu_intervl"', str(e.exception))
        with open("bad.yaml", "w") as f:
            f.write("profiling:\n  enabled: true\n  report_formt: html\n")
        with self.assertRaises(TypeError):
            ProfilingConfig.from_yaml("bad.yaml")

    def test_cpu_frequency_as_psutil_reads_it(self):
        """CPUMonitor's cpu_freq_current_mhz and cpu_freq_max_mhz, read as psutil.cpu_freq()
        reads them (the original's source), on planted /proc and /sys trees."""
        from sonde.compat.inferix.monitors import cpu_freq_mhz, cpu_metrics

        def plant(root, files):
            for path, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
                with open(os.path.join(root, path), "w") as f:
                    f.write(text)

        two = "processor\t: 0\ncpu MHz\t\t: 1000.000\n\nprocessor\t: 1\ncpu MHz\t\t: 3000.5\n"
        plant("a", {"proc/cpuinfo": two})  # no cpufreq: cpuinfo's mean, max 0.0
        self.assertEqual(cpu_freq_mhz("a/proc", "a/cpu"), (2000.25, 0.0))
        plant("b", {"proc/cpuinfo": two,  # as many policies as cpuinfo's CPUs: cpuinfo's now
                    "cpu/cpufreq/policy0/scaling_cur_freq": "800000\n",
                    "cpu/cpufreq/policy0/scaling_max_freq": "3500000\n",
                    "cpu/cpufreq/policy1/scaling_cur_freq": "900000\n",
                    "cpu/cpufreq/policy1/scaling_max_freq": "4500000\n"})
        self.assertEqual(cpu_freq_mhz("b/proc", "b/cpu"), (2000.25, 4000.0))
        plant("c", {"proc/cpuinfo": "cpu MHz : 1.0\n",  # counts differ: sysfs's current
                    "cpu/cpu0/cpufreq/scaling_cur_freq": "800000\n",
                    "cpu/cpu0/cpufreq/scaling_max_freq": "3500000\n",
                    "cpu/cpu1/cpufreq/cpuinfo_cur_freq": "1200000\n",
                    "cpu/cpu1/cpufreq/scaling_max_freq": "3500000\n"})
        self.assertEqual(cpu_freq_mhz("c/proc", "c/cpu"), (1000.0, 3500.0))
        self.assertIsNone(cpu_freq_mhz("none/proc", "none/cpu"))
        m = cpu_metrics({"cpu %": 5.0, "load 1m": 0.5}, freq=lambda: (2000.25, 0.0))
        self.assertEqual(list(m), ["cpu_usage_percent", "cpu_per_core_percent",
                                   "cpu_core_count", "cpu_freq_current_mhz",
                                   "cpu_freq_max_mhz", "load_average_1min"])
        # no per-core reading yet: 0.0 for each CPU, as psutil's first call gives the original
        self.assertEqual(m["cpu_per_core_percent"], [0.0] * (os.cpu_count() or 1))
        self.assertNotIn("cpu_freq_current_mhz", cpu_metrics({}, freq=lambda: None))

    def test_decorators_with_extractors(self):
        from sonde.compat.inferix import (InferixProfiler, ProfilingConfig, add_profiling_event,
                                          profile_block_computation, profile_diffusion_step,
                                          profile_layer, profile_method,
                                          profile_model_parameters, profile_session,
                                          profile_streaming)

        class Pipe:  # the original's idiom: self._profiler and self._profiling_enabled
            def __init__(self, prof):
                self._profiler, self._profiling_enabled = prof, True

            @profile_session("gen", {"mode": "t2v"})
            def run(self):
                self.encode()
                for i, t in enumerate((0.9, 0.5)):
                    self.step(i, t)
                self.block(0, 8)
                self.load("unet", 1024)
                self.attn()
                self.stream([1, 2, 3])
                return self.decode()

            @profile_method("text_encoding", {"tokens": 77})
            def encode(self):
                return "e"

            @profile_diffusion_step(lambda a, kw: {"step": a[0], "timestep": a[1],
                                                   "block_size": 4})
            def step(self, i, t):
                time.sleep(0.002)

            @profile_block_computation(lambda a, kw: {"block_index": a[0], "block_size": a[1],
                                                      "computation_time_ms": 50.0,
                                                      "memory_usage_mb": 512.0})
            def block(self, i, n):
                pass

            @profile_model_parameters(lambda a, kw: {"model_name": a[0],
                                                     "parameters_count": a[1]})
            def load(self, name, n):
                pass

            @profile_layer("attention", parameters_count=99)
            def attn(self):
                pass

            @profile_streaming(lambda a, kw: len(a[0]))
            def stream(self, frames):
                pass

            @add_profiling_event("decoded", lambda result, *a, **kw: {"result": result})
            def decode(self):
                return "d"

        p = InferixProfiler(ProfilingConfig(enabled=True, output_dir="d", report_format="json",
                                            real_time_display=False))
        with quiet():
            self.assertEqual(Pipe(p).run(), "d")
        p.cleanup()
        r = session_report("d", "gen")
        self.assertEqual(r["session_info"]["tags"], {"mode": "t2v"})
        self.assertEqual(r["stage_analysis"]["stages"]["text_encoding"]["call_count"], 1)
        d = r["diffusion_analysis"]
        self.assertEqual([(x["step"], x["timestep"], x["block_size"]) for x in d["steps"]],
                         [(0, 0.9, 4), (1, 0.5, 4)])
        self.assertGreaterEqual(d["min_computation_time_ms"], 2.0)  # timed by the decorator
        self.assertEqual(r["block_analysis"]["blocks"][0]["memory_usage_mb"], 512.0)
        self.assertEqual(r["model_analysis"]["models"]["unet"],
                         {"parameters_count": 1024, "model_type": "unknown"})
        self.assertIn("attention", r["computation_analysis"]["layer_performance"])
        self.assertEqual(r["streaming_analysis"]["total_frames_streamed"], 3)
        self.assertEqual([e["data"] for e in r["events"] if e["name"] == "decoded"],
                         [{"result": "d"}])

    def test_aggregate_reports_of_the_original_shape(self):
        """Reports with top-level "gpu" and "cpu" objects (as the original's aggregation reads
        them): KEY_min/max/avg/sum across ranks and the original's printed lines."""
        from sonde.compat.inferix import aggregate_reports
        for r, (mem, util, cpu) in enumerate(((1000.0, 40.0, 10.0), (3000.0, 80.0, 30.0))):
            os.makedirs("agg/rank_%d" % r)
            with open("agg/rank_%d/r.json" % r, "w") as f:
                json.dump({"session_id": "s%d" % r, "duration": 2.0 + r, "tags": {"rank": r},
                           "gpu": {"memory_used_mb": mem, "utilization_percent": util},
                           "cpu": {"usage_percent": cpu, "memory_used_mb": 500.0}}, f)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            a = aggregate_reports("agg", "agg.json")
        g = a["aggregated_gpu_metrics"]
        self.assertEqual((g["memory_used_mb_min"], g["memory_used_mb_max"],
                          g["memory_used_mb_avg"], g["memory_used_mb_sum"]),
                         (1000.0, 3000.0, 2000.0, 4000.0))
        self.assertEqual(a["reports_summary"][1], {"report_index": 1, "session_id": "s1",
                                                   "duration": 3.0, "rank": 1})
        self.assertNotIn("sonde_aggregate", a)  # no .sonde files in the ranks' directories
        self.assertEqual(out.getvalue().splitlines()[-7:], [
            "=== GPU Metrics (Aggregated) ===",
            "GPU Memory - Min: 1000.0MB, Max: 3000.0MB, Avg: 2000.0MB",
            "GPU Utilization - Min: 40.0%, Max: 80.0%, Avg: 60.0%",
            "",
            "=== CPU Metrics (Aggregated) ===",
            "CPU Usage - Min: 10.0%, Max: 30.0%, Avg: 20.0%",
            "Memory Usage - Min: 500.0MB, Max: 500.0MB, Avg: 500.0MB"])

    def test_display_lines(self):
        from sonde.compat.inferix import InferixProfiler, ProfilingConfig
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            p = InferixProfiler(ProfilingConfig(enabled=True, output_dir="disp",
                                                display_interval=0.1, cpu_monitor_interval=0.05,
                                                gpu_monitor_interval=0.05))
            p.start_session("shown")
            wait_for(lambda: (p.get_current_metrics().get("gpu", {}).get("max_gpu_temperature")
                              and p.get_current_metrics().get("cpu", {}).get("memory_used_mb")),
                     "GPU and CPU snapshots")
            wait_for(lambda: out.getvalue().count("GPU: Memory 10000MB") >= 1, "a display")
            p.end_session()
            p.cleanup()
        text = out.getvalue()
        i = text.index("\n=== Profiling Metrics (shown) ===\nGPU: Memory 10000MB")
        block = text[i + 1:].splitlines()
        self.assertEqual(block[1], "GPU: Memory 10000MB / 98304MB (10.2%), Util 70.0%, "
                                   "Temp 63.0°C")
        self.assertRegex(block[2], r"^CPU: \d+\.\d%, Memory \d+MB / \d+MB \(\d+\.\d%\)$")

    def test_yaml_verbatim_and_the_command_line(self):
        with open("profiling.yaml", "w") as f:
            f.write(blocks("001", "yaml")[0])
        from sonde.compat.inferix import InferixProfiler, ProfilingConfig
        c = ProfilingConfig.from_yaml("profiling.yaml")
        self.assertEqual((c.enabled, c.display_interval, c.gpu_monitor_interval,
                          c.cpu_monitor_interval, c.report_format, c.max_data_points,
                          c.output_dir), (True, 5.0, 0.5, 1.0, "both", 10000,
                                          "./profiling_reports"))
        self.assertTrue(c.real_time_display and c.profile_vae_decode)
        InferixProfiler("profiling.yaml").cleanup()
        # libsonde's own YAML reader takes the document's key names too
        self.assertEqual(sonde.cli(["config", "--check", "profiling.yaml"]), 0)
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
        self.assertIn("Total reports processed: 2\nRanks: 2\n", r.stdout)
        self.assertEqual(report("aggregated_report.json")["rank_count"], 2)
        r = subprocess.run(cmd[:3] + ["--reports_dir", "missing", "--output", "x.json"],
                           capture_output=True, text=True)
        self.assertEqual(r.stdout, "Reports directory missing does not exist\n")
        self.assertFalse(os.path.exists("x.json"))
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


if __name__ == "__main__":
    print("sonde.compat.inferix tests on %s (Python %s)" % (sys.executable,
                                                           sys.version.split()[0]),
          file=sys.stderr)
    unittest.main(verbosity=2)
