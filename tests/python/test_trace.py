"""test_trace.py - Python function tracing (python/sonde/_pytrace.c, _tracing.py, _run.py).

Each test traces a small program into a profiler, then reads back the run's own reports (the
instances CSV for nesting, the JSON for statistics) and checks what a user would: call counts,
nesting, balanced sections, times that add up. Run by ctest with PYTHONPATH=BUILD/python.
"""

import asyncio
import concurrent.futures
import csv
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import sonde

print("sonde's tracing tests on %s (Python %s)" % (sys.executable, sys.version.split()[0]),
      file=sys.stderr)

QUIET = {"collect_cpu": False, "collect_memory": False, "collect_gpu": False}
MOD = __name__  # the module name sections of this file carry ("__main__" when run directly)


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def spin(n):
    x = 0
    for i in range(n):
        x += i
    return x


def deep_leaf(n):
    return spin(n)


def deep(n):
    return deep_leaf(n) + deep_leaf(n)


def check(i):
    """Mostly tiny; one call in 100 does deep work (PyYAML's Parser.check_event's shape)."""
    if i % 100 == 0:
        return deep(24000)
    return i


def check_driver(n):
    for i in range(n):
        check(i)


def is_even(n):
    return True if n == 0 else is_odd(n - 1)


def is_odd(n):
    return False if n == 0 else is_even(n - 1)


def parity_driver(rounds):
    for i in range(rounds):
        is_even(30 + i % 7)
        if i % 50 == 0:
            spin(3000)


def tokens(n):
    """A generator, resumed n times: mostly tiny, sometimes deep work between yields."""
    for i in range(n):
        if i % 100 == 0:
            deep(16000)
        yield i


def gen_driver(n):
    return sum(tokens(n))


def key_of(i):
    """A sort key, called back through C (sorted): mostly tiny, sometimes deep."""
    if i % 100 == 0:
        deep(16000)
    return -i


def sort_driver(n):
    return sorted(range(n), key=key_of)


def fib_driver(rounds, n):
    """rounds calls of fib(n); returns the time of each outermost call, measured here."""
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fib(n)
        times.append(time.perf_counter() - t0)
    return times


class Run:
    """A traced run's reports, read back."""

    def __init__(self, prof):
        base = prof.file_path[:-len(".sonde")]
        with open(base + ".json") as f:
            self.report = json.load(f)
        self.rows = []  # no NAME.instances.csv past 100,000 sections
        if os.path.exists(base + ".instances.csv"):
            with open(base + ".instances.csv", newline="") as f:
                self.rows = list(csv.DictReader(f))
        for r in self.rows:
            r["depth"] = int(r["depth"])
            r["start_s"] = float(r["start_s"])
            r["end_s"] = float(r["end_s"])
        self.base = base

    def stat(self, name):
        for s in self.report["sections"]:
            if s["name"] == name:
                return s
        raise AssertionError("no section %r in %s" % (name, [s["name"] for s in self.report["sections"]]))

    def named(self, name):
        return [r for r in self.rows if r["name"] == name]

    def parents(self):
        """{id(row): parent row or None}, from depth and time on each thread."""
        out = {}
        by_thread = {}
        for r in self.rows:
            by_thread.setdefault(r["thread"], []).append(r)
        for rows in by_thread.values():
            rows.sort(key=lambda r: (r["start_s"], r["depth"]))
            stack = []
            for r in rows:
                del stack[r["depth"]:]
                out[id(r)] = stack[-1] if stack else None
                stack.append(r)
        return out


class Traced(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def profiler(self, name, **kw):
        cfg = dict(QUIET, name=name, output_dir=self.tmp.name, formats="json,csv,txt")
        cfg.update(kw)
        return sonde.Profiler(cfg, from_env=False)

    def assert_balanced(self, run):
        """No section left open or closed by an outer one; each inside its parent; a parent's
        time at least the sum of its children's."""
        parents = run.parents()
        children = {}
        for r in run.rows:
            self.assertEqual(r["flags"], "", "section %s: %s" % (r["name"], r["flags"]))
            p = parents[id(r)]
            if p is not None:
                self.assertEqual(r["depth"], p["depth"] + 1)
                self.assertGreaterEqual(r["start_s"], p["start_s"], r["name"])
                self.assertLessEqual(r["end_s"], p["end_s"], r["name"])
                children.setdefault(id(p), []).append(r)
        for r in run.rows:
            kids = children.get(id(r), [])
            self.assertGreaterEqual(float(r["duration_s"]) + 1e-9,
                                    sum(float(k["duration_s"]) for k in kids), r["name"])

    def assert_self_adds_up(self, run, root, delta=0.01, also=()):
        """The self times of the traced functions of this file (and those named in also) add
        up to the traced root's total (one thread): nothing counted twice, nothing left out."""
        ours = [s for s in run.report["sections"]
                if s["name"].startswith(MOD + ".") or s["name"] in also]
        total = run.stat(MOD + "." + root)["total_s"]
        selfs = sum(s["self_s"] for s in ours)
        self.assertAlmostEqual(selfs / total, 1.0, delta=delta,
                               msg="self times %s sum to %.6f s of %s's %.6f s" % (
                                   {s["name"]: s["self_s"] for s in ours}, selfs, root, total))
        for s in ours:  # one thread: no function's total above the run's
            self.assertLessEqual(s["total_s"], total * (1 + 1e-6), s["name"])
            self.assertGreaterEqual(s["self_s"], 0, s["name"])

    def shares(self, run, root):
        """{function: self time / root's total}, for this file's functions."""
        total = run.stat(MOD + "." + root)["total_s"]
        return {s["name"][len(MOD) + 1:]: s["self_s"] / total for s in run.report["sections"]
                if s["name"].startswith(MOD + ".")}

    def hot_and_all(self, name, fn, *args, **kw):
        """fn(*args) traced with hot functions (the first 300 calls probed, under 100 us
        hot) and with every call recorded: the two runs."""
        runs = []
        for hot in (300, 0):
            with self.profiler("%s%d" % (name, hot), trace_python_hot_calls=hot,
                               trace_python_hot_s=1e-4, **kw) as prof:
                with sonde.trace_python():
                    fn(*args)
            runs.append(Run(prof))
        return runs

    def assert_shares_agree(self, hot, every, root, tiny, points=0.05):
        """Self shares with hot calls within points of the every-call run's; for the tiny
        function, at most points above (recording its every call puts the recording's own cost
        in its self time, so the every-call run's share of it is the larger)."""
        a, b = self.shares(hot, root), self.shares(every, root)
        for name in set(a) | set(b):
            msg = "%s's self share: %.3f with hot calls, %.3f with every call recorded (%s / %s)" % (
                name, a.get(name, 0), b.get(name, 0), a, b)
            if name == tiny:
                self.assertLessEqual(a.get(name, 0), b.get(name, 0) + points, msg)
            else:
                self.assertAlmostEqual(a.get(name, 0), b.get(name, 0), delta=points, msg=msg)

    def test_mostly_tiny_sometimes_deep_keeps_its_own_time(self):
        """A hot function that sometimes does deep work: its counted calls' self time is theirs
        alone (the deep work is deep's), as with every call recorded and as cProfile says."""
        hot, every = self.hot_and_all("tiny", check_driver, 10000)
        s = hot.stat(MOD + ".check")
        self.assertEqual(s["count"], 10000)
        self.assertEqual(s["aggregated_calls"], 10000 - 300)
        for run in (hot, every):
            self.assert_self_adds_up(run, "check_driver")
        self.assert_shares_agree(hot, every, "check_driver", "check")
        self.assertLess(self.shares(hot, "check_driver")["check"], 0.5)
        import cProfile
        import pstats
        pr = cProfile.Profile()
        pr.enable()
        check_driver(10000)
        pr.disable()
        st = pstats.Stats(pr).stats
        tt = {k[2]: v[2] for k, v in st.items()}
        cp_total = next(v[3] for k, v in st.items() if k[2] == "check_driver")
        ours = self.shares(hot, "check_driver")
        for name in ("check", "spin", "check_driver"):
            self.assertAlmostEqual(ours[name], tt[name] / cp_total, delta=0.05,
                                   msg="%s: sonde %.3f, cProfile %.3f" % (
                                       name, ours[name], tt[name] / cp_total))

    def test_recursive_hot_total_counts_outermost_calls(self):
        """A recursive hot function: its total is its outermost calls' time, never above the
        run's; its self times add up."""
        with self.profiler("rec", trace_python_hot_calls=1000, trace_python_hot_s=1e-4) as prof:
            with sonde.trace_python():
                times = fib_driver(12, 16)
        run = Run(prof)
        f, d = run.stat(MOD + ".fib"), run.stat(MOD + ".fib_driver")
        self.assertGreater(f["aggregated_calls"], 0)
        self.assertLessEqual(f["total_s"], d["total_s"])
        # the outermost calls' time as the driver measured it around each call: never less than
        # sonde's, which leaves out the tracer's own work at the call's edges; more by what the
        # thread waited there for a CPU on a loaded machine (0.93 once in a CI run that shared
        # the cores; 1.00 alone). Counting every nested call would give several times as much.
        ratio = f["total_s"] / sum(times)
        self.assertLessEqual(ratio, 1.01)
        self.assertGreater(ratio, 0.8)
        self.assertAlmostEqual((f["total_s"] + d["self_s"]) / d["total_s"], 1.0, delta=0.01)
        self.assert_self_adds_up(run, "fib_driver")
        # every call's time is in the mean: above the outermost calls' share of it
        self.assertGreater(f["mean_s"] * f["count"], f["total_s"] * 2)

    def test_mutual_recursion(self):
        hot, every = self.hot_and_all("mutual", parity_driver, 3000)
        for run in (hot, every):
            self.assert_self_adds_up(run, "parity_driver")
        self.assertGreater(hot.stat(MOD + ".is_even")["aggregated_calls"], 0)
        # the driver's children are is_even's outermost calls and spin's: their totals and its
        # self time make its total (is_odd's calls are all nested in is_even's)
        for run in (hot, every):
            d = run.stat(MOD + ".parity_driver")
            parts = (run.stat(MOD + ".is_even")["total_s"] + run.stat(MOD + ".spin")["total_s"] +
                     d["self_s"])
            self.assertAlmostEqual(parts / d["total_s"], 1.0, delta=0.01)

    def test_generator_mostly_tiny_sometimes_deep(self):
        hot, every = self.hot_and_all("gen", gen_driver, 10000)
        self.assertGreater(hot.stat(MOD + ".tokens")["aggregated_calls"], 0)
        for run in (hot, every):
            self.assert_self_adds_up(run, "gen_driver")
        self.assert_shares_agree(hot, every, "gen_driver", "tokens")

    def test_callback_through_c_mostly_tiny_sometimes_deep(self):
        hot, every = self.hot_and_all("cb", sort_driver, 10000, trace_python_c_calls=True)
        self.assertGreater(hot.stat(MOD + ".key_of")["aggregated_calls"], 0)
        for run in (hot, every):
            self.assert_self_adds_up(run, "sort_driver", also=("builtins.sorted",))
        self.assert_shares_agree(hot, every, "sort_driver", "key_of")

    def test_fib_gives_every_call_nested(self):
        with self.profiler("fib", trace_python_hot_calls=0) as prof:
            with sonde.trace_python() as t:
                self.assertEqual(fib(20), 6765)
        run = Run(prof)
        self.assertEqual(run.stat(MOD + ".fib")["count"], 21891)
        rows = run.named(MOD + ".fib")
        depths = [r["depth"] for r in rows]
        self.assertEqual(max(depths) - min(depths), 19)  # fib(20) down to fib(1)
        parents = run.parents()
        top = [r for r in rows if parents[id(r)] is None or parents[id(r)]["name"] != MOD + ".fib"]
        self.assertEqual(len(top), 1)
        # a recursive function's total is its outermost call's, once
        self.assertAlmostEqual(run.stat(MOD + ".fib")["total_s"], float(top[0]["duration_s"]),
                               places=9)
        self.assertEqual(t.stats["mismatched"], 0)
        self.assert_balanced(run)
        self.assert_self_adds_up(run, "fib")

    def test_user_sections_nest_with_traced_calls(self):
        def step(prof):
            with prof.profile("inner"):
                fib(5)

        with self.profiler("mixed", trace_python_hot_calls=0) as prof:
            with prof.profile("outer"):
                with sonde.trace_python():
                    step(prof)
        run = Run(prof)
        parents = run.parents()
        (inner,) = run.named("inner")
        self.assertEqual(parents[id(inner)]["name"], MOD + ".Traced.test_user_sections_nest_with_traced_calls.<locals>.step")
        self.assertEqual(parents[id(parents[id(inner)])]["name"], "outer")
        self.assertEqual(parents[id(run.named(MOD + ".fib")[0])]["name"], "inner")
        self.assert_balanced(run)

    def test_asyncio_two_tasks(self):
        async def leaf(i):
            await asyncio.sleep(0)
            return i

        async def task(name, n):
            s = 0
            for i in range(n):
                s += await leaf(i)
            return s

        async def main():
            return await asyncio.gather(task("a", 5), task("b", 7))

        with self.profiler("aio", trace_python_hot_calls=0) as prof:
            with sonde.trace_python(include="*test_trace*") as t:
                self.assertEqual(asyncio.run(main()), [10, 21])
        run = Run(prof)
        # every resume of a coroutine is a call: each leaf suspends once, so runs twice
        leafs = run.named(MOD + ".Traced.test_asyncio_two_tasks.<locals>.leaf")
        self.assertEqual(len(leafs), 2 * 12)
        self.assertEqual(t.stats["mismatched"], 0)
        self.assert_balanced(run)

    def test_generator_pipeline(self):
        def numbers(n):
            for i in range(n):
                yield i

        def squares(it):
            for x in it:
                yield x * x

        def total(it):
            return sum(it)

        with self.profiler("gen", trace_python_hot_calls=0) as prof:
            with sonde.trace_python():
                self.assertEqual(total(squares(numbers(10))), 285)
        run = Run(prof)
        pre = MOD + ".Traced.test_generator_pipeline.<locals>."
        # a generator is entered at each resume: 10 values and the final StopIteration
        self.assertEqual(len(run.named(pre + "numbers")), 11)
        self.assertEqual(len(run.named(pre + "squares")), 11)
        self.assertEqual(len(run.named(pre + "total")), 1)
        parents = run.parents()
        for r in run.named(pre + "numbers"):
            self.assertEqual(parents[id(r)]["name"], pre + "squares")
        self.assert_balanced(run)
        self.assert_self_adds_up(run, "Traced.test_generator_pipeline.<locals>.total")

    def test_exception_ten_frames_deep(self):
        def dive(n):
            if n == 0:
                raise ValueError("bottom")
            dive(n - 1)

        def top():
            try:
                dive(9)  # dive(9) .. dive(0): ten frames
            except ValueError:
                return "caught"

        with self.profiler("exc", trace_python_hot_calls=0) as prof:
            with sonde.trace_python() as t:
                self.assertEqual(top(), "caught")
                fib(3)  # goes on after the unwinding, at the right depth
        run = Run(prof)
        pre = MOD + ".Traced.test_exception_ten_frames_deep.<locals>."
        dives = run.named(pre + "dive")
        self.assertEqual(len(dives), 10)
        self.assertEqual(sorted(r["depth"] for r in dives), list(range(1, 11)))
        self.assertEqual(run.named(MOD + ".fib")[0]["depth"], 0)
        self.assertEqual(t.stats["mismatched"], 0)
        self.assert_balanced(run)

    def test_thread_pool_of_four(self):
        barrier = threading.Barrier(4)

        def job(i):
            barrier.wait()  # four threads at once: each runs one job
            return fib(8) + i

        with self.profiler("pool", trace_python_hot_calls=0) as prof:
            with sonde.trace_python():
                with concurrent.futures.ThreadPoolExecutor(4) as pool:
                    self.assertEqual(list(pool.map(job, range(4))), [21, 22, 23, 24])
        run = Run(prof)
        jobs = run.named(MOD + ".Traced.test_thread_pool_of_four.<locals>.job")
        self.assertEqual(len(jobs), 4)
        self.assertEqual(len({r["thread"] for r in jobs}), 4)
        self.assertEqual(run.stat(MOD + ".fib")["count"], 4 * 67)
        self.assertEqual(run.stat(MOD + ".fib")["threads"], 4)
        self.assert_balanced(run)

    def test_filters_and_depth(self):
        def a():
            b()

        def b():
            c()

        def c():
            len([1])

        pre = MOD + ".Traced.test_filters_and_depth.<locals>."
        with self.profiler("flt", trace_python_hot_calls=0, trace_python_exclude="*.b",
                           trace_python_max_depth=2, trace_python_c_calls=True) as prof:
            with sonde.trace_python() as t:
                a()
        run = Run(prof)
        names = {r["name"] for r in run.rows}
        self.assertIn(pre + "a", names)
        self.assertNotIn(pre + "b", names)  # excluded
        self.assertNotIn(pre + "c", names)  # the third frame: deeper than 2
        self.assertGreaterEqual(t.stats["too_deep"], 1)
        # an include names the standard library back in; C functions on request
        with self.profiler("inc", trace_python_hot_calls=0, trace_python_c_calls=True) as prof:
            with sonde.trace_python(include=["json.*", "builtins.len"]):
                json.dumps({"a": 1})
                c()
        run = Run(prof)
        names = {r["name"] for r in run.rows}
        self.assertIn("json.dumps", names)
        self.assertIn("builtins.len", names)
        self.assertNotIn(pre + "c", names)
        # by default the standard library and sonde are left out
        with self.profiler("std", trace_python_hot_calls=0) as prof:
            with sonde.trace_python():
                json.dumps({"a": 1})
        run = Run(prof)
        self.assertFalse([r["name"] for r in run.rows if r["name"].startswith(("json.", "sonde."))])

    def test_deep_recursion_is_traced_and_the_limit_is_said(self):
        """sympy recursed past the old default depth (64) and lost calls without a word: the
        default is CPython's own recursion limit, and a lower limit's losses are counted in
        every report's warnings (issue 35)."""
        def down(n):
            return down(n - 1) + 1 if n else 0

        name = MOD + ".Traced.test_deep_recursion_is_traced_and_the_limit_is_said.<locals>.down"
        with self.profiler("deep", trace_python_hot_calls=0) as prof:
            with sonde.trace_python() as t:
                down(300)
        run = Run(prof)
        self.assertEqual(run.stat(name)["count"], 301)
        self.assertEqual(t.stats["too_deep"], 0)
        self.assertEqual(run.report["warnings"], [])
        with self.profiler("shallow", trace_python_hot_calls=0, trace_python_max_depth=50) as prof:
            with sonde.trace_python() as t:
                down(300)
        run = Run(prof)
        lost = t.stats["too_deep"]
        self.assertEqual(run.stat(name)["count"] + lost, 301)
        said = [w for w in run.report["warnings"] if "trace_python_max_depth (50)" in w]
        self.assertEqual(len(said), 1, run.report["warnings"])
        self.assertIn("%d calls nested deeper" % lost, said[0])
        with open(run.base + ".txt") as f:
            self.assertIn("%d calls nested deeper" % lost, f.read())

    def test_hot_function_is_counted_and_summed(self):
        def tiny(x):
            return x

        def loop(n):
            for i in range(n):
                tiny(i)

        with self.profiler("hot", trace_python_hot_calls=1000, trace_python_hot_s=1.0) as prof:
            with sonde.trace_python() as t:
                loop(50000)
        run = Run(prof)
        s = run.stat(MOD + ".Traced.test_hot_function_is_counted_and_summed.<locals>.tiny")
        self.assertEqual(s["count"], 50000)
        self.assertEqual(s["aggregated_calls"], 49000)
        self.assertEqual(len(run.named(s["name"])), 1000)  # the first 1000 are instances
        self.assertEqual(t.stats["hot_functions"], 1)
        loop_s = run.stat(MOD + ".Traced.test_hot_function_is_counted_and_summed.<locals>.loop")
        self.assertLess(s["total_s"], loop_s["total_s"])
        # the hot calls' time is tiny's, not loop's as well: the self times add up to loop's
        # whole time (they added up to it plus the 49000 hot calls, issue 35)
        self.assertAlmostEqual((loop_s["self_s"] + s["self_s"]) / loop_s["total_s"], 1.0,
                               delta=1e-6)
        with open(run.base + ".txt") as f:
            self.assertIn("49000 of its 50000 calls counted, not recorded", f.read())
        # the CLI reads the same from the .sonde file and from the JSON report
        for src in (run.base + ".sonde", run.base + ".json"):
            out = subprocess.run([sys.executable, "-m", "sonde", "summary", src], check=True,
                                 capture_output=True, text=True).stdout
            self.assertIn("49000 of its 50000 calls", out)

    def test_profiler_key_and_second_tracer(self):
        with self.profiler("key", trace_python=True, trace_python_hot_calls=0) as prof:
            fib(4)
            with self.assertRaises(RuntimeError):
                sonde.trace_python(prof).start()
        run = Run(prof)
        self.assertEqual(run.stat(MOD + ".fib")["count"], 9)
        # the flag, through argparse
        import argparse
        parser = sonde.add_profiling_args(argparse.ArgumentParser())
        args = parser.parse_args(["--profile", "--profile-trace-python", "--profile-dir",
                                  self.tmp.name, "--profile-name", "flag"])
        with sonde.create_profiler_from_args(args, config=dict(QUIET, trace_python_hot_calls=0,
                                                               formats="json,csv")) as prof:
            fib(3)
        self.assertEqual(Run(prof).stat(MOD + ".fib")["count"], 5)

    def test_fork_child_traced(self):
        if not hasattr(os, "fork"):
            self.skipTest("no fork")
        with self.profiler("fork", trace_python_hot_calls=0) as prof:
            with sonde.trace_python():
                pid = os.fork()
                if pid == 0:  # the child records into NAME-pidN; it closes before _exit
                    code = 1
                    try:
                        fib(6)
                        prof.close()
                        code = 0
                    finally:
                        os._exit(code)
                fib(3)
                _, status = os.waitpid(pid, 0)
                self.assertEqual(status, 0)
        run = Run(prof)
        self.assertEqual(run.stat(MOD + ".fib")["count"], 5)
        with open(os.path.join(self.tmp.name, "fork-pid%d.json" % pid)) as f:
            child = json.load(f)
        self.assertEqual([(s["name"], s["count"]) for s in child["sections"]], [(MOD + ".fib", 25)])

    def test_python_m_sonde_runs_a_script(self):
        script = os.path.join(self.tmp.name, "deep_exit.py")
        with open(script, "w") as f:
            f.write("import sys\n"
                    "def deep(n):\n"
                    "    if n == 0:\n"
                    "        sys.exit(3)\n"
                    "    deep(n - 1)\n"
                    "print('args', sys.argv[1:])\n"
                    "deep(10)\n")
        env = dict(os.environ, SONDE_COLLECT_GPU="0")
        out = os.path.join(self.tmp.name, "out")
        p = subprocess.run([sys.executable, "-m", "sonde", "--profile-dir", out, script, "x",
                            "--profile-name", "y"], env=env, capture_output=True, text=True)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("args ['x', '--profile-name', 'y']", p.stdout)
        # profiling off: the script runs, nothing is written, and stderr says why (it was silent)
        off = os.path.join(self.tmp.name, "off")
        q = subprocess.run([sys.executable, "-m", "sonde", "--profile-dir", off, script],
                           env=dict(env, SONDE_ENABLED="0"), capture_output=True, text=True)
        self.assertEqual(q.returncode, 3, q.stderr)
        self.assertIn("python -m sonde: profiling is off", q.stderr)
        self.assertFalse(os.path.exists(off))
        with open(os.path.join(out, "deep_exit.json")) as f:
            rep = json.load(f)
        deep = [s for s in rep["sections"] if s["name"] == "__main__.deep"]
        self.assertEqual(deep[0]["count"], 11)
        # json and txt by default (the rest costs more than the tracing on a big run), and a
        # line saying how to write the others from the .sonde file
        self.assertEqual(sorted(os.listdir(out)),
                         ["deep_exit.json", "deep_exit.sonde", "deep_exit.txt"])
        sonde_file = os.path.join(out, "deep_exit.sonde")
        self.assertIn("sonde: %s (reports: json,txt); the HTML page and the trace: sonde export "
                      "%s --format html,trace" % (sonde_file, sonde_file), p.stderr)
        p = subprocess.run([sys.executable, "-m", "sonde", "export", sonde_file, "--format",
                            "csv,html", "-o", out, "--quiet"], env=env, capture_output=True,
                           text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(out, "deep_exit.instances.csv")) as f:
            self.assertFalse([r for r in csv.DictReader(f) if r["flags"]])
        self.assertTrue(os.path.exists(os.path.join(out, "deep_exit.html")))
        # -m MODULE, --no-trace, and errors that name what is wrong
        p = subprocess.run([sys.executable, "-m", "sonde", "--profile-dir", out, "--no-trace",
                            "-m", "json.tool", "--help"], env=env, capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(out, "json.tool.json")) as f:
            self.assertEqual(json.load(f)["sections"], [])
        p = subprocess.run([sys.executable, "-m", "sonde", "nosuch.py"], env=env,
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("nosuch.py: no such file", p.stderr)
        p = subprocess.run([sys.executable, "-m", "sonde", "--profile-dri", out, script],
                           env=env, capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--profile-dir", p.stderr)


@unittest.skipIf(sys.version_info < (3, 12), "the profiling hook is what 'auto' runs before 3.12: "
                 "Traced above tested it")
class TracedThroughTheProfilingHook(Traced):
    """Every test of Traced again through the profiling hook, where 'auto' is sys.monitoring:
    the two mechanisms must give the same report."""

    def setUp(self):
        super().setUp()
        old = sonde._tracing.MECHANISM
        sonde._tracing.MECHANISM = "profile"
        self.addCleanup(setattr, sonde._tracing, "MECHANISM", old)


class Mechanisms(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def profiler(self, name):
        return sonde.Profiler(dict(QUIET, name=name, output_dir=self.tmp.name, formats="json",
                                   trace_python_hot_calls=0), from_env=False)

    def test_auto_names_what_runs_and_bad_names_are_refused(self):
        auto = "monitoring" if sys.version_info >= (3, 12) else "profile"
        with self.profiler("auto") as prof:
            with sonde.trace_python(prof) as t:
                fib(3)
            self.assertEqual(t.mechanism, auto)
            with self.assertRaises(ValueError) as e:
                sonde.trace_python(prof, mechanism="ptrace").start()
            self.assertIn("'ptrace'", str(e.exception))
            if sys.version_info < (3, 12):
                with self.assertRaises(ValueError) as e:
                    sonde.trace_python(prof, mechanism="monitoring").start()
                self.assertIn("3.12", str(e.exception))
        with open(os.path.join(self.tmp.name, "auto.json")) as f:
            counts = {s["name"]: s["count"] for s in json.load(f)["sections"]}
        self.assertEqual(counts[MOD + ".fib"], 5)

    @unittest.skipIf(sys.version_info < (3, 12), "sys.monitoring is 3.12's")
    def test_cprofile_and_sonde_trace_at_once(self):
        """cProfile holds sys.monitoring's PROFILER_ID from 3.12 on: sonde takes another tool id
        and both see every call; afterwards the ids are free again."""
        import cProfile
        import pstats
        pr = cProfile.Profile()
        with self.profiler("both") as prof:
            pr.enable()
            with sonde.trace_python(prof):
                fib(5)
            pr.disable()
        calls = {k[2]: v[1] for k, v in pstats.Stats(pr).stats.items()}
        self.assertEqual(calls["fib"], 15)
        with open(os.path.join(self.tmp.name, "both.json")) as f:
            counts = {s["name"]: s["count"] for s in json.load(f)["sections"]}
        self.assertEqual(counts[MOD + ".fib"], 15)
        self.assertEqual([sys.monitoring.get_tool(i) for i in range(2, 6)], [None] * 4)


if __name__ == "__main__":
    unittest.main()
