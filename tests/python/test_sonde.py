"""test_sonde.py - the Python package (python/sonde and its C extension sonde._sonde).

Run by ctest with PYTHONPATH=BUILD/python (the package and the extension built for this
interpreter) and SONDE_TWIN (tests/python/twin.c, the C program the workload below mirrors call
for call). Also: PYTHONPATH=build/python SONDE_TWIN=build/tests/twin python3 tests/python/test_sonde.py.
"""

import argparse
import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import warnings

import sonde  # noqa: E402

print("sonde's Python tests on %s (Python %s), extension %s" % (
    sys.executable, sys.version.split()[0], sonde._sonde.__file__), file=sys.stderr)

QUIET = {"collect_cpu": False, "collect_memory": False, "collect_gpu": False}


@sonde.profile_function
def profiled_square(x):
    """A module-level decorated function: pickled by reference (issue 36 #19)."""
    return x * x


_POOL_PROF = None


def pool_work(i):
    """A multiprocessing worker's task (fork start method): a section in the profiler the worker
    inherited."""
    with _POOL_PROF.profile("pool work"):
        return sum(range(1000 + i))


def nap():
    time.sleep(0.002)


def workload(prof):
    """tests/python/twin.c, in Python."""

    @prof.profile_function(name="work")
    def work():
        nap()

    prof.add_metadata("model", "tiny")
    with prof.session("generate"):
        with prof.profile("load", metadata={"weights": "w.bin"}):
            prof.record_model_params("tiny", 1234)
            nap()
        for i in range(5):
            with prof.profile("decode", metadata={"batch": i % 2}):
                with prof.stage("attention"):
                    prof.record_flops(1e6)
                    nap()
                prof.record_metric("loss", 1.0 / (i + 1))
                prof.record_throughput(16)
            prof.step()
        prof.event("checkpoint")
        prof.event("milestone", {"progress": 0.5, "stage": "decode"})
        for i in range(1, 4):
            prof.counter("queue", i)
        for _ in range(3):
            work()
    with prof.session("post"):
        with prof.profile("write"):
            prof.record_throughput(3, seconds=0.01, unit="frames")


def shape(report):
    """What a report says apart from timings: the parts a C and a Python run must share."""

    def stat(s):
        return {k: s.get(k) for k in ("name", "count", "depth", "threads", "unit", "units",
                                      "flops", "metadata")}

    return {
        "summary": {k: report["summary"][k] for k in ("sections", "section_names", "steps",
                                                      "units", "unit", "flops", "warnings",
                                                      "dropped_events")},
        "run_metadata": report["run"]["metadata"],
        "sections": sorted((stat(s) for s in report["sections"]), key=lambda s: s["name"]),
        "sessions": [
            {"name": s["name"], "units": s["units"], "flops": s["flops"],
             "sections": sorted((stat(x) for x in s["sections"]), key=lambda x: x["name"])}
            for s in report["sessions"]
        ],
        "throughput": [{"unit": t["unit"], "units": t["units"]} for t in report["throughput"]],
        "steps": report["steps"]["count"],
        "metrics": sorted([{k: m[k] for k in ("owner", "name", "count", "mean", "min", "max",
                                              "sum", "last")} for m in report["metrics"]],
                          key=lambda m: (m["owner"], m["name"])),
        "events": [{"name": e["name"], "count": e["count"],
                    "args": [o["args"] for o in e["occurrences"]]} for e in report["events"]],
        "counters": [{k: c[k] for k in ("name", "samples", "min", "max", "last")}
                     for c in report["counters"]],
        "warnings": report["warnings"],
        "models": report.get("diffusion", {}).get("models"),
    }


class Base(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="sonde-py-", dir=os.environ.get("TMPDIR"))

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def report(self, name):
        with open(os.path.join(self.dir, name + ".json")) as f:
            return json.load(f)


class SameReportAsC(Base):
    def test_python_and_c_write_the_same_report(self):
        twin = os.environ.get("SONDE_TWIN")
        if not twin:
            self.skipTest("SONDE_TWIN (the C twin program) is not set")
        subprocess.run([twin, self.dir, "from-c"], check=True)
        with sonde.Profiler(dict(QUIET, name="from-py", output_dir=self.dir,
                                 formats=["json"]), from_env=False) as prof:
            workload(prof)
        c, py = shape(self.report("from-c")), shape(self.report("from-py"))
        for key in c:
            self.assertEqual(py[key], c[key], "reports differ in " + key)
        # and the workload did what it says: not two empty reports
        self.assertEqual(c["steps"], 5)
        self.assertEqual({s["name"]: s["count"] for s in c["sections"]},
                         {"load": 1, "decode": 5, "attention": 5, "work": 3, "write": 1})
        self.assertEqual(py["run_metadata"], {"model": "tiny"})


class Configuration(Base):
    def test_keys_and_values(self):
        cfg = sonde.Config(name="x", gpu_interval_s=0.25, formats=["json", "trace"],
                           collect_gpu=False)
        self.assertEqual(cfg.get("name"), "x")
        self.assertEqual(cfg["gpu_interval_s"], "0.25")
        self.assertEqual(cfg["formats"], "json,trace")
        self.assertEqual(cfg["collect_gpu"], "0")
        cfg["name"] = None
        self.assertEqual(cfg["name"], "")

    def test_a_bad_environment_value_is_said_and_the_program_runs(self):
        """One rule in C and Python: a bad SONDE_* value is said on stderr (naming the variable)
        and none of the environment is applied; the program goes on (Python raised)."""
        with tempfile.TemporaryDirectory() as d:
            code = ("import sonde\n"
                    "with sonde.Profiler({'name': 'envbad', 'output_dir': %r, 'formats': 'json',"
                    " 'collect_gpu': False}) as p:\n"
                    "    with p.profile('x'):\n"
                    "        pass\n"
                    "print('formats', p.config.get('formats'))\n" % d)
            r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               env=dict(os.environ, SONDE_FORMATS="jsn", SONDE_NAME="fromenv"))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("the environment was not applied", r.stderr)
            self.assertIn('SONDE_FORMATS: unknown format "jsn" (did you mean "json"?)', r.stderr)
            self.assertIn("formats json", r.stdout)  # the program's own, not the environment's
            self.assertTrue(os.path.exists(os.path.join(d, "envbad.json")))  # SONDE_NAME: not applied
        with self.assertRaises(sonde.SondeError):  # asked for by the program itself: raised
            os.environ["SONDE_FORMATS"] = "jsn"
            try:
                sonde.Config().from_env()
            finally:
                del os.environ["SONDE_FORMATS"]

    def test_a_yaml_path_is_a_configuration(self):
        """sonde.Profiler("sonde.yaml") reads the file (it raised a TypeError about vars())."""
        import pathlib
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "sonde.yaml")
            with open(path, "w") as f:
                f.write("name: fromyaml\ngpu_interval_s: 0.25\noutput_dir: %s\nformats: json\n"
                        "collect_gpu: false\n" % d)
            for given in (path, pathlib.Path(path)):
                with sonde.Profiler(given, from_env=False) as prof:
                    cfg = prof.config
                self.assertEqual((cfg["name"], cfg["gpu_interval_s"]), ("fromyaml", "0.25"))
            self.assertTrue(os.path.exists(os.path.join(d, "fromyaml.json")))
            with self.assertRaises(TypeError):
                sonde.Config(path, config_file=path)
        with self.assertRaises(TypeError) as e:
            sonde.Config(42)
        self.assertIn("YAML file's path", str(e.exception))

    def test_a_misspelt_key_is_named_with_a_suggestion(self):
        with self.assertRaises(sonde.SondeError) as e:
            sonde.Config(gpu_intervl_s=1)
        self.assertEqual(e.exception.name, "SONDE_ENOTFOUND")
        self.assertIn('did you mean "gpu_interval_s"', str(e.exception))

    def test_a_bad_value_names_the_key_and_the_range(self):
        with self.assertRaises(sonde.SondeError) as e:
            sonde.Config({"buffer_mb": 0})
        self.assertEqual(e.exception.code, sonde.EINVAL)
        self.assertIn("buffer_mb: 0 is out of range: expected a number in 1..65536",
                      str(e.exception))

    def test_preset_then_file_then_arguments(self):
        path = os.path.join(self.dir, "c.yaml")
        with open(path, "w") as f:
            f.write("profiling:\n  cpu_interval_s: 0.5\n  unit: frames\n")
        cfg = sonde.Config(preset="production", config_file=path, unit="blocks")
        self.assertEqual(cfg["formats"], "json")  # from the preset
        self.assertEqual(cfg["cpu_interval_s"], "0.5")  # the file over the preset
        self.assertEqual(cfg["unit"], "blocks")  # the arguments over the file

    def test_environment_applies_last(self):
        os.environ["SONDE_UNIT"] = "frames"
        try:
            prof = sonde.Profiler(dict(QUIET, name="env", output_dir=self.dir, formats=[],
                                       unit="tokens"))
            self.assertEqual(prof.config["unit"], "frames")
            prof.close()
            prof = sonde.Profiler(dict(QUIET, name="env", output_dir=self.dir, formats=[],
                                       unit="tokens"), from_env=False)
            self.assertEqual(prof.config["unit"], "tokens")
            prof.close()
        finally:
            del os.environ["SONDE_UNIT"]


class Recording(Base):
    def make(self, name, **kw):
        return sonde.Profiler(dict(QUIET, name=name, output_dir=self.dir, formats=["json"],
                                   **kw), from_env=False)

    def export_cpu(self, name, n, body, fmt):
        """Records body(prof, i) for i < n into NAME.sonde, then the least thread CPU time of
        three `sonde export` runs of it, in process: the CPU it consumed, whatever else the
        machine runs."""
        with sonde.Profiler(dict(QUIET, name=name, output_dir=self.dir, formats=[]),
                            from_env=False) as prof:
            for i in range(n):
                body(prof, i)
        best = None
        for _ in range(3):
            t = time.thread_time()
            self.assertEqual(sonde.cli(["export", os.path.join(self.dir, name + ".sonde"),
                                        "--format", fmt, "-o", os.path.join(self.dir, "x"),
                                        "--quiet"]), 0)
            t = time.thread_time() - t
            best = t if best is None else min(best, t)
        return best

    def test_cli_says_the_same_in_process_twice(self):
        """sonde.cli runs a command in this process: a second `sonde diff --stat` with a figure
        it does not know names the same figures as the first (its list, built at run time, once
        grew at each call)."""
        with sonde.Profiler(dict(QUIET, name="fig", output_dir=self.dir, formats=[]),
                            from_env=False) as prof:
            with prof.profile("work"):
                pass
        run = os.path.join(self.dir, "fig.sonde")
        said = []
        for _ in range(2):
            with tempfile.TemporaryFile() as err:
                saved = os.dup(2)
                os.dup2(err.fileno(), 2)
                try:
                    rc = sonde.cli(["diff", run, run, "--stat", "p95"])
                finally:
                    os.dup2(saved, 2)
                    os.close(saved)
                err.seek(0)
                said.append(err.read().decode())
            self.assertEqual(rc, 2)
        self.assertIn("--stat p95: expected mean, p50, p90 or p99\n", said[0])
        self.assertEqual(said[0], said[1])

    def test_reports_are_linear_in_section_names(self):
        """Four times the names, about four times the CPU time: matching each site to its
        statistic by name compared every site with every name (20,000 names: 2.5 s for the text
        report, 0.3 s after; issue 36 #13). A relative figure, on the CPU time `sonde export`
        consumed; four times, not twice, so that a loaded machine's noise (a CI run saw 3.2 for
        twice) stays far from the quadratic figure."""
        def one(prof, i):
            with prof.profile("fn_%d" % i):
                pass
        small = self.export_cpu("names1", 5000, one, "txt,json")
        big = self.export_cpu("names4", 20000, one, "txt,json")
        self.assertLess(big / small, 8.0, (small, big))  # quadratic gives 16, linear 4

    def test_reports_are_linear_in_sessions(self):
        """Four times the sessions, about four times the CPU time: each session's statistics
        scanned every span and grouped every site again (20,000 sessions of 10 sections: the
        JSON report 139.6 s, 2.6 s after; issue 36 #13)."""
        def three(prof, i):
            with prof.session("s%d" % i):
                for k in range(3):
                    with prof.profile("sec%d" % k):
                        pass

        def cpu(n):
            name = "sessions%d" % n
            t = self.export_cpu(name, n, three, "json")
            with open(os.path.join(self.dir, "x", name + ".json")) as f:
                r = json.load(f)
            self.assertEqual(len(r["sessions"]), n)
            self.assertEqual([x["count"] for x in r["sessions"][-1]["sections"]], [1, 1, 1])
            return t
        small, big = cpu(1000), cpu(4000)
        self.assertLess(big / small, 8.0, (small, big))  # quadratic gives 16, linear 4

    def test_instances_csv_up_to_the_cap_or_when_asked(self):
        """csv writes NAME.instances.csv for a run of up to SONDE_INSTANCES_CSV_AUTO sections;
        beyond, only the format instances does (1.1 M instances made 87 MB, issue 35)."""
        def run(name, n, formats):
            with sonde.Profiler(dict(QUIET, name=name, output_dir=self.dir, formats=formats),
                                from_env=False) as prof:
                for _ in range(n):
                    with prof.profile("tick"):
                        pass
            return os.path.join(self.dir, name + ".instances.csv")
        small = run("small", 1000, ["csv"])
        with open(small) as f:
            self.assertEqual(sum(1 for _ in f), 1 + 1000)
        big = run("big", 100001, ["csv"])
        self.assertFalse(os.path.exists(big))
        self.assertTrue(os.path.exists(os.path.join(self.dir, "big.csv")))
        asked = run("asked", 100001, ["csv", "instances"])
        with open(asked) as f:
            self.assertEqual(sum(1 for _ in f), 1 + 100001)
        # and later, from the .sonde file
        out = os.path.join(self.dir, "later")
        self.assertEqual(sonde.cli(["export", os.path.join(self.dir, "big.sonde"), "--format",
                                    "instances", "-o", out, "--quiet"]), 0)
        with open(os.path.join(out, "big.instances.csv")) as f:
            self.assertEqual(sum(1 for _ in f), 1 + 100001)

    def test_summary_matches_the_report(self):
        with self.make("summary") as prof:
            workload(prof)
            s = prof.get_summary()
        r = self.report("summary")
        self.assertEqual(s["sections"], r["summary"]["sections"])
        self.assertEqual(s["steps"], 5)
        self.assertEqual(s["unit"], "tokens")
        self.assertEqual(s["units"], 80.0)
        self.assertEqual(s["flops"], 5e6)
        self.assertEqual({x["name"]: x["count"] for x in s["stats"]},
                         {x["name"]: x["count"] for x in r["sections"]})
        attention = next(x for x in s["stats"] if x["name"] == "attention")
        self.assertGreaterEqual(attention["min_s"], 0.0015)  # 2 ms naps, not zero
        self.assertGreater(attention["flops_per_s"], 0)
        totals = [x["total_s"] for x in s["stats"]]
        self.assertEqual(totals, sorted(totals, reverse=True))

    def test_every_other_recording_call_reaches_the_report(self):
        with self.make("calls", record_shapes=True) as prof:
            prof.record_model_params("unet", 8.6e8)
            for i in range(3):
                with prof.profile("denoise"):
                    prof.record_shape("latent", [1, 4, 64, 64])
                    time.sleep(0.001)
                    prof.record_diffusion_step(i, 999.0 - i, block_size=2,
                                               guidance_scale=7.5 if i else None)
                prof.counter("queue", i)
                prof.sync()
            prof.record_block(0, 16, seconds=0.5, memory_mb=1024)
            prof.event("done")
        r = self.report("calls")
        dn = [s for s in r["sections"] if s["name"] == "denoise"][0]
        self.assertEqual(dn["metadata"]["latent"], ["[1, 4, 64, 64]"])
        d = r["diffusion"]
        self.assertEqual(d["steps"]["count"], 3)
        self.assertEqual(d["blocks"]["count"], 1)
        self.assertEqual(d["blocks"]["frames"], 16)
        self.assertEqual(d["models"][0]["name"], "unet")
        self.assertEqual({c["name"]: c["samples"] for c in r["counters"]}["queue"], 3)
        self.assertEqual({e["name"]: e["count"] for e in r["events"]}["done"], 1)

    def test_current_metrics_are_the_latest_samples(self):
        p = sonde.Profiler(dict(name="live", output_dir=self.dir, formats=["json"],
                                collect_cpu=True, collect_memory=True, collect_gpu=False,
                                cpu_interval_s=0.01), from_env=False)
        cur = {}
        for _ in range(1000):  # the sampler's second pass (CPU % is a difference), asleep
            cur = p.get_current_metrics()
            if "rss MiB" in cur and "cpu %" in cur:
                break
            time.sleep(0.01)
        p.close()
        self.assertGreater(cur["rss MiB"], 1)
        self.assertIn("cpu %", cur)
        self.assertGreater(cur["memory total MiB"], cur["rss MiB"])  # the system's, from /proc
        off = sonde.Profiler(dict(QUIET, enabled=False), from_env=False)
        self.assertEqual(off.get_current_metrics(), {})
        off.close()

    def test_session_tags_are_every_sessions_metadata(self):
        tags = {"experiment": "optimization_v1", "team": "video"}
        with self.make("tags", session_tags=tags) as p:
            for name in ("setup", "generate"):
                with p.session(name):
                    with p.profile("work"):
                        pass
        r = self.report("tags")
        self.assertEqual([s["metadata"] for s in r["sessions"]], [tags, tags])
        # in a YAML file, a mapping; a value that is not key=value names the key
        path = os.path.join(self.dir, "tags.yaml")
        with open(path, "w") as f:
            f.write("profiling:\n  session_tags:\n    experiment: optimization_v1\n")
        self.assertEqual(sonde.Config(config_file=path)["session_tags"], "experiment=optimization_v1")
        with self.assertRaises(sonde.SondeError) as e:
            sonde.Config(session_tags="experiment")
        self.assertIn('session_tags: "experiment" is not key=value', str(e.exception))

    def test_clear_discards_what_came_before(self):
        with self.make("cleared") as prof:
            with prof.profile("before"):
                pass
            prof.clear()
            with prof.profile("after"):
                pass
        self.assertEqual([s["name"] for s in self.report("cleared")["sections"]], ["after"])

    def test_flight_recorder_writes_only_the_window_of_a_trigger(self):
        """Profiler(flight_recorder_s=...): nothing is written until prof.trigger(); the dump
        holds the window before it, its reason, and no section that began before it."""
        with self.make("fr", flight_recorder_s=0.3, flight_recorder_after_s=0.05) as prof:
            with prof.profile("long ago"):
                pass
            time.sleep(0.5)
            self.assertEqual(os.listdir(self.dir), [])  # nothing written before a trigger
            for i in range(20):
                with prof.profile("recent"):
                    time.sleep(0.005)
            prof.trigger("asked from Python")
            deadline = time.time() + 10
            while not os.path.exists(os.path.join(self.dir, "fr-trigger1.json")):
                self.assertLess(time.time(), deadline, "no dump within 10 s")
                time.sleep(0.02)
        self.assertNotIn("fr.sonde", os.listdir(self.dir))  # a clean end writes nothing more
        r = self.report("fr-trigger1")
        self.assertEqual(r["run"]["trigger"]["reason"], "asked from Python")
        self.assertEqual([s["name"] for s in r["sections"]], ["recent"])
        self.assertEqual(r["sections"][0]["count"], 20)
        self.assertEqual([e["name"] for e in r["events"]], ["sonde.trigger"])
        # without the flight recorder, trigger() marks the moment and writes nothing else
        with self.make("nofr") as prof:
            prof.trigger("just a mark")
        r = self.report("nofr")
        self.assertEqual(r["events"][0]["occurrences"][0]["args"], {"reason": "just a mark"})
        self.assertFalse([f for f in os.listdir(self.dir) if "nofr-trigger" in f])

    def test_fork_pool_workers_write_their_runs(self):
        """multiprocessing's fork workers end through os._exit: each still writes NAME-pidN with
        its sections (issue 36 #10; none reached a file before)."""
        import multiprocessing
        global _POOL_PROF
        with self.make("pool") as prof:
            _POOL_PROF = prof
            with multiprocessing.get_context("fork").Pool(2) as pool:
                self.assertEqual(len(pool.map(pool_work, range(20))), 20)
                pool.close()
                pool.join()
            _POOL_PROF = None
        runs = [f for f in os.listdir(self.dir) if f.startswith("pool-pid") and f.endswith(".json")]
        self.assertTrue(runs, os.listdir(self.dir))
        n = 0
        for f in runs:
            r = self.report(f[:-len(".json")])
            n += sum(s["count"] for s in r["sections"] if s["name"] == "pool work")
        self.assertEqual(n, 20)
        self.assertNotIn("pool work", [s["name"] for s in self.report("pool")["sections"]])

    def test_fork_pool_workers_ended_by_sigterm_keep_their_sections(self):
        """`with Pool(2) as pool: pool.map(...)` ends its workers with SIGTERM (terminate()) as
        soon as the map returns, before a worker's writer thread may have had its first pass
        (5 ms after its first record; later on a loaded machine): every section the workers
        recorded is in their NAME-pidN.sonde files all the same (issue 61 #10; the workers'
        files were missing, or held none of them, in every run of a quick map before)."""
        import glob
        import multiprocessing
        global _POOL_PROF
        with self.make("term") as prof:
            _POOL_PROF = prof
            with multiprocessing.get_context("fork").Pool(2) as pool:
                self.assertEqual(len(pool.map(pool_work, range(4))), 4)
            _POOL_PROF = None
        runs = glob.glob(os.path.join(self.dir, "term-pid*.sonde"))
        self.assertTrue(runs, os.listdir(self.dir))
        n = 0
        for f in runs:
            self.assertEqual(sonde.cli(["export", f, "--format", "json", "--quiet"]), 0, f)
            n += sum(s["count"] for s in self.report(os.path.basename(f)[:-len(".sonde")])
                     ["sections"] if s["name"] == "pool work")
        self.assertEqual(n, 4)

    def test_ctrl_c_still_interrupts_a_blocking_read(self):
        """sonde's SIGINT handler keeps Python's (no SA_RESTART): Ctrl-C during os.read on a pipe
        that never gets data raises KeyboardInterrupt at once (issue 36 #3; it hung before)."""
        code = (
            "import os, signal, sys, threading, sonde\n"
            "prof = sonde.Profiler(dict(collect_cpu=False, collect_memory=False,\n"
            "    collect_gpu=False, output_dir=sys.argv[1], formats=[]), from_env=False)\n"
            "r, w = os.pipe()\n"
            "threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()\n"
            "try:\n"
            "    os.read(r, 1)\n"
            "    print('read returned')\n"
            "except KeyboardInterrupt:\n"
            "    print('interrupted')\n"
            "prof.close()\n")
        try:
            out = subprocess.run([sys.executable, "-c", code, self.dir], capture_output=True,
                                 text=True, timeout=60, env=dict(os.environ))
        except subprocess.TimeoutExpired:
            self.fail("SIGINT did not interrupt os.read within 60 s")
        self.assertEqual(out.stdout.strip(), "interrupted", out.stderr)

    def test_on_demand_records_only_between_start_and_stop(self):
        """Profiler(on_demand=True): nothing until `sonde trigger PID --start --for S` (here
        through sonde.cli, on this very process); then a run of its own with its reports."""
        with self.make("od", on_demand=True) as prof:
            with prof.profile("before"):
                pass
            self.assertEqual(os.listdir(self.dir), [])
            self.assertEqual(sonde.cli(["trigger", str(os.getpid()), "--start", "--for", "0.3"]), 0)
            deadline = time.time() + 10
            while not os.path.exists(os.path.join(self.dir, "od-ondemand1.json")):
                self.assertLess(time.time(), deadline, "no window within 10 s")
                with prof.profile("during"):
                    time.sleep(0.01)
            with prof.profile("after"):
                pass
        r = self.report("od-ondemand1")
        self.assertEqual([s["name"] for s in r["sections"]], ["during"])
        self.assertGreater(r["sections"][0]["count"], 5)
        self.assertEqual(sorted(os.listdir(self.dir)), ["od-ondemand1.json", "od-ondemand1.sonde"])

    def test_exception_in_a_block_closes_the_section_and_propagates(self):
        with self.assertRaises(KeyError):
            with self.make("raises") as prof:
                with prof.profile("outer"):
                    with prof.profile("inner"):
                        raise KeyError("boom")
        r = self.report("raises")
        self.assertEqual({s["name"]: s["count"] for s in r["sections"]}, {"outer": 1, "inner": 1})
        self.assertEqual(r["warnings"], [])

    def test_on_end_runs_before_every_section_end(self):
        """The hook sonde.torch.track_cuda(sync=True) uses: called before each section ends,
        whichever way it was opened, inside the section's time; a hook that raises still lets
        the section end, and its exception is the block's (the function's own wins)."""
        ends = []
        with self.make("on_end") as prof:
            def hook():
                ends.append(len(ends))
                nap()  # inside the section's time
            prof._handle.set_on_end(hook)
            with prof.profile("with"):
                pass
            with prof.session("session"):
                pass
            prof.start("started")
            prof.stop()
            prof.profile_function(lambda: None, name="decorated")()
            self.assertEqual(len(ends), 4)

            def bad():
                raise OSError("device lost")
            prof._handle.set_on_end(bad)
            with self.assertRaises(OSError):
                with prof.profile("hook_raises"):
                    pass
            with self.assertRaises(KeyError):  # the function's exception, not the hook's
                with contextlib.redirect_stderr(io.StringIO()):
                    prof.profile_function(lambda: {}["x"], name="both_raise")()
            with self.assertRaises(OSError):
                prof.profile_function(lambda: None, name="decorated_hook_raises")()
            prof._handle.set_on_end(None)
            with prof.profile("after"):
                pass
            with self.assertRaises(TypeError):
                prof._handle.set_on_end(5)
        st = {s["name"]: s for s in self.report("on_end")["sections"]}
        self.assertGreaterEqual(st["with"]["min_s"], 0.002)  # nap() sleeps 2 ms
        for name in ("hook_raises", "both_raise", "decorated_hook_raises", "after"):
            self.assertEqual(st[name]["depth"], 0, name)  # each ended: nothing left open
        self.assertEqual(len(ends), 4)

    def test_misuse_raises_with_libsondes_message(self):
        prof = self.make("misuse")
        with self.assertRaises(sonde.SondeError) as e:
            prof.stop()
        self.assertEqual(e.exception.name, "SONDE_EUNBALANCED")
        with self.assertRaises(sonde.SondeError) as e:
            prof.record_metric("loss", float("nan"))
        self.assertEqual(e.exception.code, sonde.EINVAL)
        prof.start("left open")
        with self.assertRaises(sonde.SondeError) as e:
            prof.close()
        self.assertEqual(e.exception.name, "SONDE_EOPEN")
        self.assertEqual(prof.close(), sonde.EOPEN)  # idempotent: the status is kept
        with self.assertRaises(sonde.SondeError) as e:
            prof.step()
        self.assertEqual(e.exception.name, "SONDE_ESTATE")
        r = self.report("misuse")
        self.assertEqual(r["sections"][0]["name"], "left open")

    def test_profile_function_uses_the_profiler_entered_on_this_thread(self):
        @sonde.profile_function
        def f(x):
            return x * 2

        @sonde.profile_function(name="named")
        def g():
            return 1

        self.assertEqual(f(2), 4)  # no profiler entered: runs unprofiled
        with self.make("decorated") as prof:
            self.assertIs(sonde.current(), prof)
            for i in range(4):
                f(i)
            g()
        self.assertIsNone(sonde.current())
        counts = {s["name"]: s["count"] for s in self.report("decorated")["sections"]}
        self.assertEqual(counts, {__name__ + ".Recording.test_profile_function_uses_the_"
                                  "profiler_entered_on_this_thread.<locals>.f": 4, "named": 1})

    def test_generators_and_coroutines_are_timed_as_they_run(self):
        """issue 36 #16: a decorated generator's sections are its resumes (its own sleeps, not
        the consumer's); a decorated coroutine's is the whole await (0 s before: the call only
        made the object). Sleeps only bound the planted time from below; the upper bound is the
        wrong answer's lower bound."""
        import asyncio

        with self.make("genco") as prof:
            @prof.profile_function(name="gen")
            def gen(n):
                for i in range(n):
                    time.sleep(0.05)
                    got = yield i
                    if got == "stop":
                        return "stopped"
                return "done"

            @prof.profile_function(name="co")
            async def co(s):
                await asyncio.sleep(s)
                return s

            @prof.profile_function(name="agen")
            async def agen(n):
                for i in range(n):
                    await asyncio.sleep(0.05)
                    yield i

            items = []
            for x in gen(3):
                items.append(x)
                time.sleep(0.25)  # the consumer's: in no "gen" section
            self.assertEqual(items, [0, 1, 2])
            g = gen(5)
            next(g)
            with self.assertRaises(StopIteration) as stop:
                g.send("stop")
            self.assertEqual(stop.exception.value, "stopped")
            g = gen(5)
            next(g)
            with self.assertRaises(KeyError):  # thrown in: raised out of the generator
                g.throw(KeyError("k"))
            g = gen(5)
            next(g)
            g.close()  # abandoned: its section was the resume, long ended

            async def main():
                self.assertEqual(await co(0.1), 0.1)
                self.assertEqual(await asyncio.gather(*(co(0.1) for _ in range(4))), [0.1] * 4)
                self.assertEqual([x async for x in agen(2)], [0, 1])
            asyncio.run(main())

        async def closed_meanwhile():  # the profiler closes while a decorated await runs
            other = self.make("genco_closed")

            @other.profile_function(name="x")
            async def x():
                await asyncio.sleep(0.01)
                return 1
            task = asyncio.ensure_future(x())
            await asyncio.sleep(0)  # its section is open
            self.assertEqual(other.close(raise_on_error=False), sonde.EOPEN)  # x still open
            self.assertEqual(await task, 1)  # and it ends without an error
        asyncio.run(closed_meanwhile())
        r = {s["name"]: s for s in self.report("genco")["sections"]}
        # gen(3): 4 resumes (3 yields and the return); send/throw/close runs: 2 + 2 + 1
        self.assertEqual(r["gen"]["count"], 4 + 2 + 2 + 1)
        self.assertGreaterEqual(r["gen"]["total_s"], 0.05 * (3 + 1 + 1 + 1))
        # counting the consumer's sleeps too would give at least 0.3 + 0.75 s: the bound sits
        # under that, not on the generator's own time, so load cannot push it over
        self.assertLess(r["gen"]["total_s"], 1.0)
        self.assertEqual(r["co"]["count"], 5)
        # each await as long as its sleep: concurrent ones may swap ends (docs/python.md), which
        # keeps the sum, so the mean
        self.assertGreaterEqual(r["co"]["mean_s"], 0.0995)
        # the 4 concurrent ones overlap on one thread: the name's time counts them once
        self.assertGreaterEqual(r["co"]["total_s"], 0.2 - 0.004)
        self.assertEqual(r["agen"]["count"], 3)  # 2 items and the end
        self.assertGreaterEqual(r["agen"]["total_s"], 0.1)

    def test_units_in_nested_sections_are_counted_once(self):
        """prefill and decode inside a batch that records the batch's tokens too: the run's
        throughput counts each token once (the batch's), says why, and each section keeps its
        own figure."""
        with self.make("nested_units") as prof:
            for _ in range(3):
                with prof.profile("batch"):
                    with prof.profile("prefill"):
                        prof.record_throughput(100, 0.1)
                    with prof.profile("decode"):
                        prof.record_throughput(200, 0.2)
                    prof.record_throughput(300, 0.5)
            with prof.profile("alone"):  # no enclosing recorder: counted
                prof.record_throughput(50, 0.5)
        r = self.report("nested_units")
        self.assertEqual(r["throughput"], [{"unit": "tokens", "units": 950, "seconds": 2.0,
                                            "per_s": 475}])
        self.assertEqual({x["name"]: x["units"] for x in r["sections"]},
                         {"batch": 900, "prefill": 300, "decode": 600, "alone": 50})
        self.assertEqual([w for w in r["warnings"] if w.startswith("throughput:")],
                         ["throughput: 6 section instance(s) recorded units inside a section (or "
                          "session) that recorded units in the same unit too: each is counted "
                          "once, in the outer one's total, not added again"])

    def test_profile_is_a_c_call_with_the_methods_other_cases(self):
        """prof.profile on an instance is _sonde.ProfileFn: a str name alone takes the C way;
        metadata, other names, keywords and a closed profiler take Profiler.profile's."""
        prof = self.make("fastpath")
        self.assertEqual(type(prof.profile).__name__, "ProfileFn")
        with prof.profile("plain"):
            pass
        with prof.profile("meta", {"k": 1}):
            pass
        with prof.profile(name="kw", metadata={"k": 2}):
            pass
        with prof.profile(b"bytes"):
            pass
        with prof.profile(7):
            pass
        with self.assertRaises(TypeError):
            prof.profile()
        fn = prof.profile
        prof.close()
        with self.assertRaises(sonde.SondeError) as e:
            fn("after")
        self.assertEqual(e.exception.name, "SONDE_ESTATE")
        del prof
        with self.assertRaises(sonde.SondeError):  # it outlived its profiler: no crash
            fn("gone")
        class Mine(sonde.Profiler):  # a subclass's own profile() is what it gets
            def profile(self, name, metadata=None):
                return super().profile("mine." + name, metadata)

        with Mine(dict(QUIET, name="sub", output_dir=self.dir, formats=["json"]),
                  from_env=False) as sub:
            self.assertNotIn("profile", sub.__dict__)
            with sub.profile("x"):
                pass
        self.assertEqual([x["name"] for x in self.report("sub")["sections"]], ["mine.x"])
        r = self.report("fastpath")
        secs = {x["name"]: x for x in r["sections"]}
        self.assertEqual(set(secs), {"plain", "meta", "kw", "bytes", "7"})
        self.assertEqual((secs["meta"]["metadata"], secs["kw"]["metadata"]),
                         ({"k": ["1"]}, {"k": ["2"]}))

    def test_inline_sections_end_as_sonde_end_does_around_the_schedule(self):
        """A with-block and a decorated call record inline (sonde__begin_fast/_end_fast) only
        where that is what sonde_begin and sonde_end record: a section object nested in itself,
        one begun while the schedule waits and ended while it records, one begun while it
        records and ended after the window closed, and one wholly outside, as the functions do."""
        with self.make("inline", wait=1, warmup=0, active=2, repeat=1) as prof:
            same = prof.profile("same")
            deco = prof.profile_function(lambda: None, name="deco")
            with prof.profile("early"):  # step 0: waiting, so neither edge is recorded
                deco()
                prof.step()  # step 1: recording from here
                deco()
            with prof.profile("late"):
                with same:
                    with same:
                        deco()
                prof.step()
                prof.step()  # step 3: the window has closed; late's end is still recorded
                deco()
            with prof.profile("after"):
                deco()
        r = self.report("inline")
        counts = {x["name"]: x["count"] for x in r["sections"]}
        self.assertEqual(counts, {"late": 1, "same": 2, "deco": 2})
        self.assertFalse([w for w in r.get("warnings", []) if "unbalanced" in w or "open" in w],
                         r.get("warnings"))

    def test_the_end_of_a_with_block_warns_and_the_program_goes_on(self):
        """Issue 36 #7: an output directory that cannot be made, or a section another thread
        still has open, ended the program (SondeError out of __exit__, exit status 1). The end
        of a with block goes on; an explicit close() still raises. The directory is said once,
        by libsonde's line on stderr when it came (issue 61: a RuntimeWarning said it again);
        the open section, which nothing said, is a RuntimeWarning."""
        blocker = os.path.join(self.dir, "a_file")
        open(blocker, "w").close()
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # one would raise here
            with sonde.Profiler(dict(QUIET, name="nodir", formats=["json"],
                                     output_dir=os.path.join(blocker, "below")),
                                from_env=False) as prof:
                with prof.profile("work"):
                    pass
        self.assertEqual(prof.closed_status, sonde.EIO)
        started, release = threading.Event(), threading.Event()

        def hold(prof):
            prof.start("held by a thread")
            started.set()
            release.wait()
        with self.assertWarns(RuntimeWarning) as w:
            with self.make("open") as prof:
                t = threading.Thread(target=hold, args=(prof,))
                t.start()
                started.wait()
        release.set()
        t.join()
        self.assertIn("held by a thread", str(w.warning))
        self.assertEqual(prof.closed_status, sonde.EOPEN)
        prof2 = self.make("explicit")
        prof2.start("left")
        with self.assertRaises(sonde.SondeError):
            prof2.close()

    def test_close_while_another_thread_asks_for_the_summary(self):
        """Issue 36 #2: get_summary() runs with the GIL released; close() in another thread
        destroyed the profiler under it (a segfault). close() now waits for the summaries under
        way; those that start after it raise SondeError (closed)."""
        for _ in range(20):
            prof = self.make("race")
            for i in range(300):
                with prof.profile("s%d" % (i % 30)):
                    pass
            errors, done = [], threading.Event()

            def ask():
                while not done.is_set():
                    try:
                        prof.get_summary()
                    except sonde.SondeError as e:
                        if e.name != "SONDE_ESTATE":
                            errors.append(e)
                        return
            t = threading.Thread(target=ask)
            t.start()
            time.sleep(0.002)
            prof.close()
            done.set()
            t.join()
            self.assertEqual(errors, [])

    def test_a_profiled_function_pickles_by_reference(self):
        """Issue 36 #19: a decorated function goes to a process pool as a plain function does
        (by its module and name), and comes back as the same object; a local one is refused as
        a local function is."""
        import concurrent.futures
        import multiprocessing
        import pickle
        self.assertIs(pickle.loads(pickle.dumps(profiled_square)), profiled_square)
        with concurrent.futures.ProcessPoolExecutor(
                1, mp_context=multiprocessing.get_context("fork")) as ex:
            self.assertEqual(list(ex.map(profiled_square, [1, 2, 3])), [1, 4, 9])

        @sonde.profile_function
        def local(x):
            return x
        with self.assertRaises((AttributeError, pickle.PicklingError)):
            pickle.dumps(local)

    def test_a_nul_in_a_name_is_refused(self):
        """A NUL would end the C string: "a\\0left" and "a\\0right" would both be "a". Refused
        as CPython refuses a path with one (ValueError), for sections, metadata and events."""
        with self.make("nul") as prof:
            for name in ("a\0left", b"a\0right"):
                with self.assertRaises(ValueError) as e:
                    with prof.profile(name):
                        pass
                self.assertIn("embedded null character", str(e.exception))
            with self.assertRaises(ValueError):
                prof.add_metadata("k\0ey", "v")
            with self.assertRaises(ValueError):
                prof.event("ev\0ent")
            with prof.profile("a"):
                pass
        counts = {s["name"]: s["count"] for s in self.report("nul")["sections"]}
        self.assertEqual(counts, {"a": 1})

    def test_profile_function_takes_a_positional_name(self):
        with self.make("positional") as prof:
            @prof.profile_function("load_batch")
            def load():
                return 3

            @sonde.profile_function("module_level")
            def other():
                return 4

            self.assertEqual((load(), load(), other()), (3, 3, 4))
            self.assertEqual(load.__name__, "load")
            with self.assertRaises(TypeError) as e:
                prof.profile_function("a", name="b")
            self.assertIn("given twice", str(e.exception))
            with self.assertRaises(TypeError):
                prof.profile_function(42)
        counts = {s["name"]: s["count"] for s in self.report("positional")["sections"]}
        self.assertEqual(counts, {"load_batch": 2, "module_level": 1})

    def test_threads_record_their_own_sections(self):
        with self.make("threads") as prof:
            def run(i):
                for _ in range(50):
                    with prof.profile("t%d" % i):
                        pass

            ts = [threading.Thread(target=run, args=(i,)) for i in range(4)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
        r = self.report("threads")
        self.assertEqual({s["name"]: s["count"] for s in r["sections"]},
                         {"t0": 50, "t1": 50, "t2": 50, "t3": 50})
        self.assertEqual(sorted(s["threads"] for s in r["sections"]), [1, 1, 1, 1])

    def test_cpu_samples_land_in_the_section_running_on_each_thread(self):
        # sample_hz reaches libsonde's sampler: Python's own time shows as the interpreter's C
        # functions, each sample in the section open on its thread (docs/stacks.md)
        def spin(n):
            s = 0
            for i in range(n):
                s += i * i % 7
            return s

        with self.make("samples", sample_hz=999) as prof:
            with prof.profile("busy"):
                spin(3000000)
            with prof.profile("idle"):
                time.sleep(0.3)
        p = self.report("samples")["profile"]
        sec = {s["name"]: s["samples"] for s in p["sections"]}
        self.assertGreaterEqual(sec.get("busy", 0), 50, p["sections"])
        self.assertLessEqual(sec.get("idle", 0), 5, p["sections"])  # CPU time, not wall time
        self.assertEqual(p["hz"], 999)

    def test_cpu_samples_carry_the_python_frames(self):
        # issue 39, in process: tests/e2e/pyshares.py samples itself through this package; its
        # functions' shares (70/20/10) come back from the folded stacks within 5 points, each
        # stack <module>;main;FUNCTION;spin, each function where it is defined
        # (tests/e2e/pyframes_check.py; e2e pyframes does the same from outside)
        # And the same taken in the threads: by their CPU-clock counters, asked for
        # (sample_in_thread; as root or at perf_event_paranoid 2, the counters are allowed), and
        # by timers where perf_event_open is refused (tests/fakes/noperf.c, beside the twin):
        # the SIGPROF handler reads the Python frames in the sampled thread itself.
        e2e = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e")
        ways = [("perf_event", {}), ("counter_signal", {"SONDE_SAMPLE_IN_THREAD": "1"})]
        twin = os.environ.get("SONDE_TWIN")
        noperf = twin and os.path.join(os.path.dirname(twin), "libnoperf.so")
        if noperf and os.path.exists(noperf):
            ways.append(("timer_signal", {"LD_PRELOAD": noperf}))
        for method, env in ways:
            out = os.path.join(self.dir, method + "-".join(env))
            r = subprocess.run([sys.executable, os.path.join(e2e, "pyshares.py"), "2", out],
                               capture_output=True, text=True, env=dict(os.environ, **env))
            self.assertEqual(r.returncode, 0, r.stderr)
            measured = os.path.join(out, "measured.txt")
            with open(measured, "w") as f:
                f.write(r.stdout)
            with open(os.path.join(out, "inproc.json")) as f:
                self.assertEqual(json.load(f)["profile"]["method"], method)
            label = "in process (%s%s), %s %d.%d" % (
                (method, "".join(" " + k for k in env), sys.executable) + sys.version_info[:2])
            c = subprocess.run([sys.executable, os.path.join(e2e, "pyframes_check.py"),
                                os.path.join(out, "inproc.json"),
                                os.path.join(out, "inproc.folded"), measured, label],
                               capture_output=True, text=True)
            self.assertEqual(c.returncode, 0, c.stdout + c.stderr)
            print(c.stdout.strip(), file=sys.stderr)
        if twin:  # the build's tests are there: the fallback's run is not to be missed
            self.assertEqual(len(ways), 3, "%s not found beside SONDE_TWIN" % noperf)

    def test_threads_with_small_stacks_sampled_in_the_threads(self):
        # issue 39, in process, taken in the threads: tests/e2e/pytinystack.py's threads on 32 KiB
        # stacks, deep in calls through C, 14 levels short of the depth at which the program
        # dies alone (about 11 KiB left): the handler on their stacks unwinds only where it has
        # room, else keeps the instruction and the Python frames (they died by SIGSEGV before)
        prog = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e",
                            "pytinystack.py")
        alone = int(subprocess.run([sys.executable, prog, "--alone"], capture_output=True,
                                   text=True, check=True).stdout)
        out = os.path.join(self.dir, "tiny")
        r = subprocess.run([sys.executable, prog, str(alone - 14), "1", out],
                           capture_output=True, text=True,
                           env=dict(os.environ, SONDE_SAMPLE_IN_THREAD="1"))
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "ok"),
                         "%s at depth %d of %d: %s" % (sys.executable, alone - 14, alone, r.stderr))
        with open(os.path.join(out, "tiny.json")) as f:
            rep = json.load(f)
        self.assertEqual(rep["profile"]["method"], "counter_signal")
        with open(os.path.join(out, "tiny.folded")) as f:
            lines = [line.rsplit(" ", 1) for line in f]
        total = sum(int(n) for _, n in lines)
        leaf = sum(int(n) for stack, n in lines if ";deep;leaf" in stack)
        self.assertGreaterEqual(leaf, max(100, total // 2), (leaf, total))
        said = [w for w in rep.get("warnings", []) if "too little room" in w]
        self.assertTrue(said, rep.get("warnings"))
        print("small stacks, %s %d.%d: depth %d of %d, %d of %d samples in leaf under its "
              "Python callers" % ((sys.executable,) + sys.version_info[:2] +
                                  (alone - 14, alone, leaf, total)), file=sys.stderr)

    def test_package_sonde_run_samples_in_the_threads(self):
        # issue 39: the package's own sonde command (`python -m sonde run`, the `sonde` script
        # pip installs) preloads the libsonde.so beside its module for --sample-in-thread, with
        # no SONDE_LIBRARY: the program's samples are taken in its threads and merged
        env = {k: v for k, v in os.environ.items() if k != "SONDE_LIBRARY"}
        prog = ("import os\nprint(os.environ['LD_PRELOAD'])\nx = 0\n"
                "for i in range(3000000):\n    x ^= i\n")
        r = subprocess.run([sys.executable, "-m", "sonde", "run", "--quiet", "--sample-in-thread",
                            "-o", self.dir, "--name", "pkgrun", "--", sys.executable, "-c", prog],
                           capture_output=True, text=True, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        beside = os.path.join(os.path.dirname(os.path.abspath(sonde._sonde.__file__)),
                              "libsonde.so")
        self.assertEqual(r.stdout.split("\n")[0], beside)
        with open(os.path.join(self.dir, "pkgrun.json")) as f:
            p = json.load(f)["profile"]
        self.assertEqual(p["method"], "counter_signal")
        self.assertGreaterEqual(p["samples"], 50)
        self.assertTrue([n for n in os.listdir(self.dir) if n.startswith("pkgrun.pid") and
                         n.endswith(".samples.sonde")], os.listdir(self.dir))

    def test_off_cpu_time_of_blocked_threads(self):
        # issue 39, in process: tests/e2e/pyoffcpu.py's threads sleep, wait on a queue and on a
        # lock for planted times; each wait comes back under its Python function with what it
        # waited in (tests/e2e/pyoffcpu_check.py; e2e pyframes does the same from outside).
        # Where the context-switch event is refused (not root, perf_event_paranoid 2) the
        # check says so and asks for no off_cpu.
        # The waits in sections are found in them: with every section in the report, and with
        # 2 (report_max_sections; the three are then placed as they are built).
        e2e = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e")
        for held in ("0", "2"):
            out = os.path.join(self.dir, "held" + held)
            r = subprocess.run([sys.executable, os.path.join(e2e, "pyoffcpu.py"), out, held],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            label = "in process, %s %d.%d, report_max_sections %s" % (
                (sys.executable,) + sys.version_info[:2] + (held,))
            c = subprocess.run([sys.executable, os.path.join(e2e, "pyoffcpu_check.py"),
                                os.path.join(out, "offcpu.json"), label],
                               capture_output=True, text=True)
            self.assertEqual(c.returncode, 0, c.stdout + c.stderr)
            print(c.stdout.strip(), file=sys.stderr)

    def test_job_rank_reads_the_launchers_variables(self):
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_", "PMI_",
                                     "SLURM_", "MPI_"))}
        code = "import sonde; print(sonde.job_rank())"
        for env, want in (({}, "(-1, -1, -1)"),
                          ({"RANK": "2", "WORLD_SIZE": "4", "LOCAL_RANK": "0"}, "(2, 4, 0)"),
                          ({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8"},
                           "(3, 8, -1)")):
            r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               env=dict(base, **env))
            self.assertEqual((r.returncode, r.stdout.strip()), (0, want), r.stderr)

    def test_a_forked_child_records_into_its_own_file(self):
        prof = self.make("forked")
        with prof.profile("before"):
            pass
        pid = os.fork()
        if pid == 0:  # the child: its own sections, its own file, then out without cleanup
            code = 1
            try:
                with prof.profile("child_work"):
                    pass
                prof.close()
                code = 0
            finally:
                os._exit(code)
        with prof.profile("parent_work"):
            pass
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)
        prof.close()
        parent = {s["name"] for s in self.report("forked")["sections"]}
        self.assertEqual(parent, {"before", "parent_work"})
        child = {s["name"] for s in self.report("forked-pid%d" % pid)["sections"]}
        self.assertIn("child_work", child)
        self.assertNotIn("parent_work", child)

    def test_sonde_enabled_0_accepts_everything_and_writes_nothing(self):
        code = ("import sonde, json\n"
                "p = sonde.Profiler({'name': 'off', 'output_dir': %r})\n"
                "with p:\n"
                "    with p.session('s'):\n"
                "        with p.profile('x', metadata={'k': 1}):\n"
                "            p.record_metric('m', 1.0); p.record_throughput(5); p.step()\n"
                "            p.event('e', {'a': 1}); p.counter('c', 2.0)\n"
                "    s = p.get_summary()\n"
                "print(json.dumps([s['sections'], s['not_recorded'], p.file_path]))\n"
                % os.path.join(self.dir, "off"))
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=dict(os.environ, SONDE_ENABLED="0"))
        self.assertEqual(r.returncode, 0, r.stderr)
        sections, why, path = json.loads(r.stdout)
        self.assertEqual((sections, path), (0, None))
        self.assertIn("disabled", why)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "off")))

    def test_export_one_file_and_disabled_writes_nothing(self):
        prof = self.make("export")
        with prof.profile("a"):
            pass
        out = os.path.join(self.dir, "mid.csv")
        prof.export(out)
        with open(out) as f:
            self.assertIn("a,", f.read())
        # a JSON report exported mid-run says it holds the run so far, not that it crashed
        mid = os.path.join(self.dir, "mid.json")
        prof.export(mid)
        with open(mid) as f:
            r = json.load(f)
        self.assertEqual((r["run"]["clean_end"], r["run"]["in_progress"]), (False, True))
        self.assertFalse([w for w in r["warnings"] if "did not end cleanly" in w])
        self.assertTrue([w for w in r["warnings"]
                         if w.startswith("exported while the run was recording: the run so far")])
        prof.close()
        r = self.report("export")  # the final report: ended cleanly
        self.assertEqual((r["run"]["clean_end"], r["run"]["in_progress"]), (True, False))
        quiet = os.path.join(self.dir, "off")
        p = sonde.Profiler(dict(QUIET, enabled=False, output_dir=quiet), from_env=False)
        with p.profile("x"):
            p.step()
        s = p.get_summary()  # a valid, empty summary that says why, not an exception
        self.assertEqual((s["sections"], s["steps"], s["stats"]), (0, 0, []))
        self.assertIn("disabled", s["not_recorded"])
        self.assertIsNone(p.trace_path)
        p.close()
        self.assertFalse(os.path.exists(quiet))
        # an output directory that cannot be made: the same, with the reason
        blocker = os.path.join(self.dir, "file")
        open(blocker, "w").close()
        p = sonde.Profiler(dict(QUIET, output_dir=os.path.join(blocker, "sub")), from_env=False)
        with p.profile("x"):
            pass
        s = p.get_summary()
        self.assertEqual(s["sections"], 0)
        self.assertIn("sub", s["not_recorded"])
        self.assertIsNone(p.trace_path)
        p.close(raise_on_error=False)
        # recording: nothing to explain
        p = self.make("recorded")
        self.assertIsNone(p.get_summary()["not_recorded"])
        self.assertTrue(p.trace_path.endswith("recorded.trace.json.gz"))
        p.close()


class LiveMetrics(Base):
    def test_metrics_port_serves_the_sections_and_steps(self):
        # issue 64: metrics_port as a keyword argument; the page holds what was recorded,
        # at most one writer pass (flush_interval_s) later
        import socket
        import urllib.request
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        cfg = dict(QUIET, name="live", output_dir=self.dir, formats=["json"],
                   flush_interval_s=0.05)
        def page(want):
            for _ in range(100):
                url = "http://127.0.0.1:%d/metrics" % port
                with urllib.request.urlopen(url, timeout=5) as r:
                    lines = set(r.read().decode().splitlines())
                if want <= lines:
                    break
                time.sleep(0.05)
            return lines

        with sonde.Profiler(cfg, from_env=False, metrics_port=port) as prof:
            for n in (10, 20):
                for _ in range(10):
                    with prof.profile("work"):
                        pass
                    prof.step()
                want = {'sonde_section_calls_total{run="live",rank="",section="work"} %d' % n,
                        'sonde_step_seconds_count{run="live",rank=""} %d' % n}
                self.assertLessEqual(want, page(want))
                # a Ctrl-C the program catches: sonde's handler flushes, then the metrics
                # follow the events again (they stopped for good before)
                try:
                    os.kill(os.getpid(), signal.SIGINT)
                    time.sleep(1)
                except KeyboardInterrupt:
                    pass


class Loading(Base):
    def test_an_unbuilt_checkout_says_how_to_build(self):
        # the source tree's package has no extension: the error names this interpreter and the
        # command that builds one for it
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        code = "import sys; sys.path.insert(0, sys.argv[1]); import sonde"
        pkg = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")
        r = subprocess.run([sys.executable, "-c", code, pkg], env=env, capture_output=True,
                           text=True, cwd=self.dir)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("sonde._sonde is not built for this interpreter (%s" % sys.executable,
                      r.stderr)
        self.assertIn("`pip install .` from a clone", r.stderr)

    def test_nothing_loads_libsonde_with_ctypes(self):
        self.assertNotIn("ctypes", sys.modules.get("sonde").__dict__)
        src = os.path.dirname(sonde.__file__)
        for f in os.listdir(src):
            if f.endswith(".py"):
                with open(os.path.join(src, f)) as fh:
                    self.assertNotIn("import ctypes", fh.read(), f)


class Argparse(Base):
    def parse(self, words):
        parser = sonde.add_profiling_args(argparse.ArgumentParser())
        parser.add_argument("--steps", type=int, default=3)
        return parser.parse_args(words)

    def test_flags_mean_what_they_mean_to_c(self):
        args = self.parse(["--steps", "8", "--profile", "--profile-name", "ignored",
                           "--profile-dir", self.dir, "--profile-activities", "CPU",
                           "--profile-wait", "1", "--profile-warmup", "1",
                           "--profile-active", "2", "--profile-repeat", "1"])
        self.assertEqual(args.steps, 8)
        prof = sonde.create_profiler_from_args(args, profile_name="flux", collect_gpu=False,
                                               formats=["json"])
        self.assertEqual(prof.name, "flux")
        self.assertEqual(prof.config["collect_cpu"], "1")
        self.assertEqual(prof.config["collect_memory"], "0")
        self.assertEqual(prof.trace_path, os.path.join(self.dir, "flux.trace.json.gz"))
        with prof:
            for i in range(args.steps):
                with prof.profile("step"):
                    prof.add_metadata("i", i)
                prof.step()
        r = self.report("flux")
        windows = r["schedule"]["windows"]
        self.assertEqual([(w["first_step"], w["last_step"]) for w in windows], [(2, 3)])
        kept = sorted(m for s in r["sections"] for m in s["metadata"]["i"])
        self.assertEqual(kept, ["2", "3"])

    def test_without_profile_the_profiler_is_off(self):
        args = self.parse(["--profile-dir", self.dir])
        prof = sonde.create_profiler_from_args(args)
        self.assertFalse(prof.enabled)
        prof.close()
        self.assertEqual(os.listdir(self.dir), [])

    def test_a_bad_flag_value_names_the_flag(self):
        args = self.parse(["--profile", "--profile-wait", "-1", "--profile-dir", self.dir])
        with self.assertRaises(sonde.SondeError) as e:
            sonde.create_profiler_from_args(args)
        self.assertIn("--profile-wait", str(e.exception))


if __name__ == "__main__":
    unittest.main(verbosity=2)
