"""test_torch.py - sonde.torch against real PyTorch (Debian's python3-torch, 1.13, CPU).

A tiny GPT (token and position embeddings, two blocks of attention + MLP, an LM head) generates
32 tokens under sonde.torch.instrument; the run's own JSON report must give each module's known
call count, the analytic FLOPs of its products, its shapes, and the loop's throughput.
Run by ctest with the extension built for the interpreter that has torch (tests/torch.sh).
"""

import contextlib
import glob
import io
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest
from unittest import mock

import torch
import torch.nn as nn

import sonde
import sonde.torch

print("sonde.torch tests on %s (Python %s, torch %s)" % (
    sys.executable, sys.version.split()[0], torch.__version__), file=sys.stderr)

QUIET = {"collect_cpu": False, "collect_memory": False, "collect_gpu": False}
E, H, V, T = 32, 4, 50, 32  # width, heads, vocabulary, tokens generated


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(E)
        self.attn = nn.MultiheadAttention(E, H, batch_first=True)
        self.ln2 = nn.LayerNorm(E)
        self.mlp = nn.Sequential(nn.Linear(E, 4 * E), nn.GELU(), nn.Linear(4 * E, E))

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(V, E)
        self.pos = nn.Embedding(64, E)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.ln_f = nn.LayerNorm(E)
        self.head = nn.Linear(E, V, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x))


def generate(model, prof, n):
    """Generates n tokens; returns them and the loop's own time for them: the sum of each
    token's interval on perf_counter, taken inside its section (time between tokens, where a
    loaded machine may preempt the test, is in neither figure)."""
    idx = torch.zeros(1, 1, dtype=torch.long)
    loop_s = 0.0
    with torch.no_grad():
        for _ in range(n):
            with prof.profile("token"):
                t0 = time.perf_counter()
                logits = model(idx)
                nxt = logits[:, -1].argmax(-1, keepdim=True)
                idx = torch.cat([idx, nxt], 1)
                loop_s += time.perf_counter() - t0
                prof.record_throughput(1)
    return idx, loop_s


class Instrument(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def run_gpt(self, **kw):
        model = GPT().eval()
        cfg = dict(QUIET, name="gpt", output_dir=self.tmp.name, formats="json")
        with sonde.Profiler(cfg, from_env=False) as prof:
            h = sonde.torch.instrument(model, **kw)
            idx, loop_s = generate(model, prof, T)
            h.remove()
        with open(prof.file_path[:-len(".sonde")] + ".json") as f:
            rep = json.load(f)
        return model, h, {s["name"]: s for s in rep["sections"]}, rep, loop_s

    def test_module_calls_flops_and_throughput(self):
        model, h, st, rep, loop_s = self.run_gpt(with_flops=True)
        # every module called once per token, but attn.out_proj, whose weights
        # multi_head_attention_forward uses directly, and the ModuleList, which is not called
        for mod, name in h.names.items():
            want = 0 if name.endswith(("out_proj", ".blocks")) else T
            self.assertEqual(st[name]["count"] if name in st else 0, want, name)
        self.assertEqual(st["model.blocks.1.mlp.0"]["depth"], 4)  # token > model > blocks.1 > mlp
        # the products, analytically: sequence lengths 1..32
        lens = range(1, T + 1)
        self.assertEqual(st["model.head"]["flops"], sum(2 * L * E * V for L in lens))
        self.assertEqual(st["model.blocks.0.mlp.0"]["flops"], sum(2 * L * E * 4 * E for L in lens))
        self.assertEqual(st["model.blocks.0.mlp.2"]["flops"], sum(2 * L * 4 * E * E for L in lens))
        attn = sum(2 * (4 * L * E * E) + 2 * (2 * L * L * E) for L in lens)
        self.assertEqual(st["model.blocks.1.attn"]["flops"], attn)
        self.assertEqual(st["model.blocks.0.ln1"]["flops"], 0)
        total = 2 * (attn + sum(2 * L * E * 4 * E * 2 for L in lens)) + sum(2 * L * E * V for L in lens)
        self.assertEqual(st["model"]["flops"], 0)  # each product goes to the innermost module
        self.assertEqual(rep["summary"]["flops"], total)
        # tokens/s from record_throughput against the loop's own clock (inside the sections)
        tps = rep["throughput"][0]["per_s"]
        self.assertLess(tps, T / loop_s)
        self.assertGreater(tps, T / loop_s / 1.5)
        # removed: the model runs bare again, its outputs unchanged
        self.assertNotIn("forward", model.__dict__)

    def test_shapes_and_profiler_none(self):
        model = GPT().eval()
        cfg = dict(QUIET, name="shapes", output_dir=self.tmp.name, formats="json")
        with sonde.torch.instrument(model, record_shapes=True):
            with sonde.Profiler(cfg, from_env=False) as prof:  # the one entered, at call time
                with torch.no_grad():
                    model(torch.zeros(2, 5, dtype=torch.long))
            model(torch.zeros(1, 3, dtype=torch.long))  # no profiler entered: runs unprofiled
        with open(prof.file_path[:-len(".sonde")] + ".json") as f:
            st = {s["name"]: s for s in json.load(f)["sections"]}
        head = st["model.head"]
        self.assertEqual(head["count"], 1)
        def meta(sec, key):  # a section name's metadata: each key's distinct values
            (v,) = sec["metadata"][key]
            return json.loads(v)

        self.assertEqual(meta(head, "input_shapes"), [[2, 5, E]])
        self.assertEqual(meta(head, "output_shapes"), [[2, 5, V]])
        self.assertEqual(meta(head, "output_dtypes"), ["float32"])
        self.assertEqual(meta(st["model.tok"], "input_dtypes"), ["int64"])

    def test_exception_closes_the_sections(self):
        class Bad(nn.Module):
            def forward(self, x):
                raise ValueError("no")

        model = nn.Sequential(nn.Linear(4, 4), Bad())
        cfg = dict(QUIET, name="bad", output_dir=self.tmp.name, formats="json")
        with sonde.Profiler(cfg, from_env=False) as prof:
            sonde.torch.instrument(model, prof)
            with self.assertRaises(ValueError):
                model(torch.zeros(1, 4))
            with prof.profile("after"):
                pass
        with open(prof.file_path[:-len(".sonde")] + ".json") as f:
            st = {s["name"]: s for s in json.load(f)["sections"]}
        self.assertEqual(st["after"]["depth"], 0)  # nothing was left open
        self.assertEqual(st["model.1"]["count"], 1)

    def train(self, model, prof, steps):
        """steps of next-token training (prof None: unprofiled)."""
        torch.manual_seed(1)
        idx = torch.randint(0, V, (2, 8))
        section = prof.profile if prof else (lambda name: contextlib.nullcontext())
        for _ in range(steps):
            with section("step"):
                logits = model(idx)
                loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, V),
                                                         idx[:, 1:].reshape(-1))
                with section("backward"):
                    loss.backward()

    def test_flight_recorder_on_a_training_loop(self):
        """Profiler(flight_recorder_s=...) around a torch training loop: nothing is written
        until prof.trigger(); the dump holds the module sections of the steps in its window and
        none from before it."""
        model = GPT()
        out = self.tmp.name
        cfg = dict(QUIET, name="fr", output_dir=out, formats="json", flight_recorder_s=0.5,
                   flight_recorder_after_s=0.05)
        with sonde.Profiler(cfg, from_env=False) as prof:
            sonde.torch.instrument(model, prof)
            self.train(model, prof, 3)
            time.sleep(0.8)  # those 3 steps are older than the window now
            self.assertEqual(os.listdir(out), [])
            self.train(model, prof, 2)
            prof.trigger("loss spiked")
            deadline = time.time() + 20
            while not os.path.exists(os.path.join(out, "fr-trigger1.json")):
                self.assertLess(time.time(), deadline, "no dump within 20 s")
                time.sleep(0.05)
        self.assertEqual(sorted(os.listdir(out)), ["fr-trigger1.json", "fr-trigger1.sonde"])
        with open(os.path.join(out, "fr-trigger1.json")) as f:
            rep = json.load(f)
        self.assertEqual(rep["run"]["trigger"]["reason"], "loss spiked")
        st = {s["name"]: s for s in rep["sections"]}
        self.assertEqual(st["step"]["count"], 2)
        self.assertEqual(st["backward"]["count"], 2)
        self.assertEqual(st["model"]["count"], 2)
        self.assertEqual(st["model.head"]["count"], 2)

    def test_backward_sections(self):
        torch.manual_seed(0)
        model, plain = GPT(), GPT()
        plain.load_state_dict(model.state_dict())
        cfg = dict(QUIET, name="bwd", output_dir=self.tmp.name, formats="json")
        with sonde.Profiler(cfg, from_env=False) as prof:
            h = sonde.torch.instrument(model, backward=True)
            self.train(model, prof, 3)
            model(torch.zeros(1, 2, dtype=torch.long))  # gradients on, no backward: hooks left
            h.remove()
        self.train(plain, None, 3)
        # the gradients are what they are without sonde
        for (n, a), b in zip(model.named_parameters(), plain.parameters()):
            self.assertTrue(torch.equal(a.grad, b.grad), n)
        # no hook left behind: a parameter's hooks went with remove()
        for n, q in model.named_parameters():
            self.assertFalse(q._backward_hooks, n)
        with open(prof.file_path[:-len(".sonde")] + ".json") as f:
            st = {s["name"]: s for s in json.load(f)["sections"]}
        for mod, name in h.names.items():
            if name.endswith(("out_proj", ".blocks")):
                continue
            self.assertEqual(st[name + ".backward"]["count"], 3, name)
        # nested as the modules nest, inside the section around loss.backward()
        self.assertEqual(st["model.backward"]["depth"], 2)
        self.assertEqual(st["model.blocks.1.backward"]["depth"], 3)
        self.assertEqual(st["model.blocks.1.attn.backward"]["depth"], 4)
        self.assertEqual(st["model.tok.backward"]["depth"], 3)  # ends with its weight's gradient
        self.assertLessEqual(st["model.blocks.1.mlp.backward"]["total_s"],
                             st["model.blocks.1.backward"]["total_s"])
        self.assertLessEqual(st["model.backward"]["total_s"], st["backward"]["total_s"])

    def test_backward_with_in_place_modules(self):
        torch.manual_seed(0)
        def net():
            return nn.Sequential(nn.Linear(4, 8), nn.ReLU(inplace=True), nn.Linear(8, 8),
                                 nn.ReLU(inplace=True), nn.Linear(8, 1))
        model, plain = net(), net()
        plain.load_state_dict(model.state_dict())
        x = torch.randn(5, 4)
        cfg = dict(QUIET, name="inplace", output_dir=self.tmp.name, formats="json")
        with sonde.Profiler(cfg, from_env=False) as prof:
            with sonde.torch.instrument(model, prof, backward=True):
                model(x).sum().backward()
        plain(x).sum().backward()
        for a, b in zip(model.parameters(), plain.parameters()):
            self.assertTrue(torch.equal(a.grad, b.grad))
        with open(prof.file_path[:-len(".sonde")] + ".json") as f:
            st = {s["name"]: s for s in json.load(f)["sections"]}
        for i in range(5):
            self.assertEqual(st["model.%d.backward" % i]["count"], 1)
            self.assertEqual(st["model.%d.backward" % i]["depth"], 1)
        self.assertEqual(st["model.backward"]["depth"], 0)

    def test_flop_formulas(self):
        from sonde.torch import count_flops
        import torch.nn.functional as F
        a, b = torch.zeros(3, 4, 5), torch.zeros(3, 5, 6)
        self.assertEqual(count_flops(torch.bmm, (a, b), None, torch.bmm(a, b)), 2 * 3 * 4 * 6 * 5)
        x, w = torch.zeros(2, 3, 8, 8), torch.zeros(4, 3, 3, 3)
        y = F.conv2d(x, w)
        self.assertEqual(count_flops(F.conv2d, (x, w), None, y), 2 * y.numel() * 3 * 9)
        m1, m2, c = torch.zeros(4, 5), torch.zeros(5, 6), torch.zeros(6)
        self.assertEqual(count_flops(torch.addmm, (c, m1, m2), None, torch.addmm(c, m1, m2)),
                         2 * 4 * 6 * 5)
        self.assertEqual(count_flops(torch.relu, (m1,), None, m1), 0)
        # the ATen operators the dispatch mode counts
        aten = torch.ops.aten
        self.assertEqual(count_flops(aten.mm.default, (m1, m2), None, m1 @ m2), 2 * 4 * 6 * 5)
        self.assertEqual(count_flops(aten.convolution.default,
                                     (x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1),
                                     None, y), 2 * y.numel() * 3 * 9)
        # transposed: each input element meets out/groups x kernel weights
        wt = torch.zeros(3, 4, 3, 3)
        yt = F.conv_transpose2d(x, wt)
        self.assertEqual(count_flops(aten.convolution.default,
                                     (x, wt, None, [1, 1], [0, 0], [1, 1], True, [0, 0], 1),
                                     None, yt), 2 * x.numel() * 4 * 9)
        self.assertEqual(count_flops(aten.relu.default, (m1,), None, m1), 0)


class Distributed(unittest.TestCase):
    def test_tensorboard_trace_says_the_process_group(self):
        """A rank's TensorBoard trace carries PyTorch's distributedInfo (backend, rank, world
        size), which TensorBoard's distributed view reads (issue 62): the backend from the
        process group the program made, the rank and size from the job."""
        import socket
        import torch.distributed as dist
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with tempfile.TemporaryDirectory() as d:
            with mock.patch.dict(os.environ, {"MASTER_ADDR": "127.0.0.1",
                                              "MASTER_PORT": str(port)}):
                dist.init_process_group("gloo", rank=0, world_size=1)
            try:
                cfg = dict(QUIET, name="tb", output_dir=d, formats="tensorboard", rank=0,
                           world_size=1)
                with sonde.Profiler(cfg, from_env=False) as prof:
                    with prof.profile("step"):
                        dist.all_reduce(torch.ones(4))
            finally:
                dist.destroy_process_group()
            traces = glob.glob(os.path.join(d, "**", "*.pt.trace.json.gz"), recursive=True)
            self.assertEqual(len(traces), 1, traces)
            import gzip
            with gzip.open(traces[0], "rt") as f:
                trace = json.load(f)
        self.assertEqual(trace["distributedInfo"], {"backend": "gloo", "rank": 0,
                                                    "world_size": 1})

    def test_ddp_straggler_is_the_cause(self):
        """issue 62: a real DDP job (2 ranks, gloo on CPU, started as torchrun starts them: RANK,
        WORLD_SIZE, MASTER_ADDR/PORT) whose rank 1 is 30 ms slower a step in forward: rank 0
        waits for it in the gradients' allreduce inside its backward, which made `sonde
        aggregate` name rank 0 the slowest in backward. Now rank 1 is the straggler and the
        cause of rank 0's wait (12 steps x 30 ms planted), and no row names rank 0 slower."""
        import socket
        prog = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ddp_straggler.py")
        with tempfile.TemporaryDirectory() as d:
            subprocess.run([sys.executable, prog, "--launch", d], check=True, timeout=240,
                           capture_output=True)
            out = subprocess.run([sys.executable, "-m", "sonde", "aggregate", d, "--format",
                                  "json"], check=True, capture_output=True, text=True).stdout
            text = subprocess.run([sys.executable, "-m", "sonde", "aggregate", d], check=True,
                                  capture_output=True, text=True).stdout
            page = os.path.join(d, "job.html")
            subprocess.run([sys.executable, "-m", "sonde", "aggregate", d, "--format", "html",
                            "-o", page], check=True, capture_output=True)
            with open(page) as f:
                html = f.read()
        # the page's rank view names rank 1 and has rank 0 wait for it (drawn in a browser by
        # e2e html's aggregate.test.js)
        self.assertIn('data-straggler="1">Rank 1 is the straggler', html)
        self.assertRegex(html, r'data-rank="0" data-wait="0\.[1-9][0-9]*" data-cause="1"')
        a = json.loads(out)
        w = a["waiting"]
        by = {r["rank"]: r for r in w["per_rank"]}
        self.assertEqual((w["straggler"], w["steps"]), (1, 12), text)
        self.assertEqual(by[0]["waited_most_for"], 1, text)
        self.assertTrue(0.25 <= by[0]["wait_s"] <= 0.8, text)  # planted 0.36 s
        self.assertLess(by[1]["wait_s"], 0.2 * by[0]["wait_s"], text)
        rows = {r["name"]: r for r in a["rows"]}
        # by the raw totals rank 0's backward (its wait in the allreduce inside) is several
        # times rank 1's: what made the old column name rank 0
        bw = rows["backward"]["per_rank_s"]
        self.assertGreater(bw[0], 3 * bw[1], text)
        self.assertEqual(rows["forward"]["slowest_rank"], 1, text)
        for name, r in rows.items():
            self.assertTrue(r["slowest_rank"] == 1 or r["over_median"] < 0.25, (name, text))
        self.assertIn("straggler: rank 1, the last into the collectives", text)
        print("ddp: rank 0 waited %.3f s for rank 1 (planted 0.36 s); backward's slowest rank %d"
              % (by[0]["wait_s"], rows["backward"]["slowest_rank"]), file=sys.stderr)

    def test_sonde_run_of_a_ddp_job_tells_the_ranks_apart(self):
        """issue 62: `sonde run` of a launcher and its two ranks: the folded stacks, pprof's
        process label and the text summary named every process "python3" (launcher and ranks
        in one root); `sonde aggregate` of the folder said "world size 1" and summed the ranks;
        `sonde merge` kept only the run's own section. Now each rank's stacks are
        "python3 (rank N)", the summary gives the samples by process, and aggregate and merge
        of the folder take the ranks' own files (RUN.pidN-rankR.sonde)."""
        prog = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ddp_straggler.py")
        with tempfile.TemporaryDirectory() as d:
            sr = os.path.join(d, "sr")
            subprocess.run([sys.executable, "-m", "sonde", "run", "--quiet", "-o", sr, "--name",
                            "job", "--", sys.executable, prog, "--launch",
                            os.path.join(d, "unused")], check=True, timeout=300,
                           capture_output=True)
            roots = {}
            with open(os.path.join(sr, "job.folded")) as f:
                for line in f:
                    stack, n = line.rsplit(" ", 1)
                    root = stack.split(";", 1)[0]
                    roots[root] = roots.get(root, 0) + int(n)
            with open(os.path.join(sr, "job.txt")) as f:
                text = f.read()
            agg = json.loads(subprocess.run([sys.executable, "-m", "sonde", "aggregate", sr,
                                             "--format", "json"], check=True,
                                            capture_output=True, text=True).stdout)
            merged = os.path.join(d, "m.trace.json.gz")
            subprocess.run([sys.executable, "-m", "sonde", "merge", sr, "-o", merged],
                           check=True, capture_output=True)
            import gzip
            with gzip.open(merged, "rt") as f:
                trace = json.load(f)
        total = sum(roots.values())
        by_rank = {r: sum(n for k, n in roots.items() if k.endswith(" (rank %d)" % r))
                   for r in (0, 1)}
        self.assertTrue(all(n >= 0.25 * total for n in by_rank.values()), roots)
        self.assertIn("  by process: ", text)
        self.assertEqual((agg["ranks"], agg["world_size"]), (2, 2), agg["notes"])
        self.assertEqual(agg["waiting"]["straggler"], 1, agg["waiting"])
        ev = trace["traceEvents"] if isinstance(trace, dict) else trace
        procs = sorted(e["args"]["name"] for e in ev
                       if e.get("ph") == "M" and e.get("name") == "process_name")
        self.assertEqual([p.split(" (")[0] for p in procs], ["rank 0", "rank 1"], procs)
        self.assertEqual(sum(1 for e in ev if e.get("cat") == "section"), 48)
        print("sonde run of a DDP job: samples by root %s; aggregate world size 2, straggler 1"
              % sorted(roots.items()), file=sys.stderr)


class FastPaths(unittest.TestCase):
    """issue 35 #1: with_flops must not change what torch runs. A TorchFunctionMode turned off
    the fused fast paths of nn.TransformerEncoderLayer and nn.MultiheadAttention (their slow
    path ran instead); the dispatch mode leaves them on, and counts their FLOPs by formula."""

    E, H, F, N, L = 32, 4, 64, 2, 5

    def operators(self, fn, with_flops):
        """The operators torch.profiler sees in fn() under sonde.torch.instrument, and the
        report's sections."""
        from torch.profiler import profile
        # a first call's own work (the first use of a mode in the process: a view, an
        # allocation) is in neither list: one call each way before the measured one
        with tempfile.TemporaryDirectory() as d:
            with sonde.Profiler(QUIET, name="warm", output_dir=d, formats=[]) as prof:
                h = sonde.torch.instrument(self.model, prof, with_flops=with_flops)
                with torch.no_grad():
                    fn()
                h.remove()
        with tempfile.TemporaryDirectory() as d:
            with sonde.Profiler(QUIET, name="fp", output_dir=d, formats="json") as prof:
                h = sonde.torch.instrument(self.model, prof, with_flops=with_flops)
                with torch.no_grad(), profile() as p:
                    fn()
                h.remove()
            with open(os.path.join(d, "fp.json")) as f:
                rep = json.load(f)
        # ATen's operators alone: PyTorch 2 also records the Python dispatch mode's handling of
        # each call ("PythonDispatchMode"), and with a GPU its CUDA runtime calls and Kineto's
        # own "Instrumentation" and "Resource" events on a process's first profile (an H200 run
        # with 2.11 found them): none is an operator run
        return (sorted(e.name for e in p.events() if e.name.startswith("aten::")),
                {s["name"]: s for s in rep["sections"]})

    def same_operators(self, fn, fused):
        """with_flops ran the fused kernel and no other operator than the run without it (fn run
        both ways); the counted run's sections. Not "as many times" for the kernel: the dispatch
        mode calls it through the dispatcher again, and torch.profiler then records it a second
        time, nested in itself, in some runs (one run in three here): the kernel runs once. The
        other operators as many times, in one of three tries: a plain run once recorded one
        aten::empty more than the counted run (torch's own, run to run, seen once in a CI run);
        the slow path the test guards against differs in every try."""
        for _ in range(3):
            plain, _ = self.operators(fn, False)
            counted, st = self.operators(fn, True)
            self.assertIn(fused, plain)
            self.assertIn(fused, counted)  # the fast path ran with FLOPs counted
            self.assertNotIn("aten::softmax", counted)  # the slow path's
            self.assertEqual(sorted(set(counted)), sorted(set(plain)))
            if [n for n in counted if n != fused] == [n for n in plain if n != fused]:
                return st
        self.assertEqual([n for n in counted if n != fused], [n for n in plain if n != fused])

    def test_encoder_layer_keeps_its_fast_path(self):
        E, H, F, N, L = self.E, self.H, self.F, self.N, self.L
        self.model = nn.TransformerEncoderLayer(E, H, F, batch_first=True).eval()
        x = torch.randn(N, L, E)
        st = self.same_operators(lambda: self.model(x), "aten::_transformer_encoder_layer_fwd")
        attn = 2 * N * (4 * L * E * E) + 2 * (2 * N * L * L * E)
        self.assertEqual(st["model"]["flops"], attn + 2 * (2 * N * L * E * F))

    def test_fast_path_inside_a_plain_module(self):
        """The root (a Sequential) counts through the function mode; the encoder layer inside
        suspends it, so its fast path still runs, and counts through the dispatch mode."""
        E, H, F, N, L = self.E, self.H, self.F, self.N, self.L
        self.model = nn.Sequential(nn.Linear(E, E),
                                   nn.TransformerEncoderLayer(E, H, F, batch_first=True)).eval()
        x = torch.randn(N, L, E)
        st = self.same_operators(lambda: self.model(x), "aten::_transformer_encoder_layer_fwd")
        attn = 2 * N * (4 * L * E * E) + 2 * (2 * N * L * L * E)
        self.assertEqual(st["model.0"]["flops"], 2 * N * L * E * E)
        self.assertEqual(st["model.1"]["flops"], attn + 2 * (2 * N * L * E * F))

    def test_padded_sequences_count_at_their_length(self):
        """The encoder's fast path with a padding mask runs the layers on nested tensors: each
        sequence's FLOPs at its own length (5 and 3 here)."""
        E, H, F = self.E, self.H, self.F
        self.model = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, F, batch_first=True),
                                           2).eval()
        x = torch.randn(2, 5, E)
        mask = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
        _, st = self.operators(lambda: self.model(x, src_key_padding_mask=mask), True)
        want = sum(2 * (4 * L * E * E) + 2 * (2 * L * L * E) + 2 * (2 * L * E * F) for L in (5, 3))
        self.assertEqual(st["model.layers.0"]["flops"], want)
        self.assertEqual(st["model.layers.1"]["flops"], want)

    def test_multihead_attention_keeps_its_fast_path(self):
        E, H, N, L = self.E, self.H, self.N, self.L
        self.model = nn.MultiheadAttention(E, H, batch_first=True).eval()
        x = torch.randn(N, L, E)
        st = self.same_operators(lambda: self.model(x, x, x, need_weights=False),
                                 "aten::_native_multi_head_attention")
        self.assertEqual(st["model"]["flops"], 2 * N * (4 * L * E * E) + 2 * (2 * N * L * L * E))

    def test_slow_path_counts_the_same(self):
        """In training the layer takes its slow path (linear, bmm, ...): the same FLOPs as the
        fused kernel's formula."""
        E, H, F, N, L = self.E, self.H, self.F, self.N, self.L
        self.model = nn.TransformerEncoderLayer(E, H, F, batch_first=True, dropout=0.0).train()
        x = torch.randn(N, L, E)
        with tempfile.TemporaryDirectory() as d:
            with sonde.Profiler(QUIET, name="slow", output_dir=d, formats="json") as prof:
                h = sonde.torch.instrument(self.model, prof, with_flops=True)
                self.model(x)
                h.remove()
            with open(os.path.join(d, "slow.json")) as f:
                st = {s["name"]: s for s in json.load(f)["sections"]}
        attn = 2 * N * (4 * L * E * E) + 2 * (2 * N * L * L * E)
        # the attention module's products go to it (the innermost), the feed-forward's to the
        # linear layers
        self.assertEqual(st["model.self_attn"]["flops"], attn)
        self.assertEqual(st["model.linear1"]["flops"] + st["model.linear2"]["flops"],
                         2 * (2 * N * L * E * F))


class CudaSubstituted(unittest.TestCase):
    """sonde.torch.track_cuda against torch.cuda functions substituted by fakes (no GPU here):
    two devices, a synchronize that takes 3 ms (the GPU work a section queued), memory figures
    the test sets, a memory snapshot."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.calls = []
        self.alloc = {0: 0, 1: 0}
        c, m = torch.cuda, torch.cuda.memory
        fakes = [(c, "is_available", lambda: True), (c, "device_count", lambda: 2),
                 (c, "synchronize", self.synchronize),
                 (c, "memory_allocated", lambda d=None: self.alloc[d]),
                 (c, "max_memory_allocated", lambda d=None: 2 * self.alloc[d]),
                 (c, "memory_reserved", lambda d=None: 4 << 30),
                 (c, "memory_summary", lambda device=None: "|  fake memory summary  |\n"),
                 (m, "_record_memory_history",
                  lambda enabled, device=None: self.calls.append(("history", enabled, device))),
                 (m, "_snapshot", lambda device=None: {"segments": [{"device": 0}],
                                                       "device_traces": [[]]})]
        for obj, name, f in fakes:
            patcher = mock.patch.object(obj, name, f)
            patcher.start()
            self.addCleanup(patcher.stop)

    def synchronize(self, device=None):
        self.calls.append(("sync", device))
        time.sleep(0.003)

    def report(self, prof):
        with open(prof.file_path[:-len(".sonde")] + ".json") as f:
            return json.load(f)

    def test_sync_and_memory_counters(self):
        cfg = dict(QUIET, name="cuda", output_dir=self.tmp.name, formats="json")
        with sonde.Profiler(cfg, from_env=False) as prof:
            tracker = sonde.torch.track_cuda(sync=True)
            self.assertEqual(tracker.devices, [0, 1])
            for i in range(3):
                self.alloc[0] = (i + 1) * 10 << 20
                with prof.profile("gpu_work"):
                    pass
                prof.step()
        rep = self.report(prof)
        st = {s["name"]: s for s in rep["sections"]}
        # each section waited for both devices before it ended: its time holds the wait
        self.assertEqual(self.calls.count(("sync", 0)), 3)
        self.assertEqual(self.calls.count(("sync", 1)), 3)
        self.assertGreaterEqual(st["gpu_work"]["min_s"], 0.006)
        ctr = {c["name"]: c for c in rep["counters"]}
        self.assertEqual(ctr["cuda0 allocated MiB"]["max"], 30)
        self.assertEqual(ctr["cuda0 allocated MiB"]["samples"], 5)  # start, 3 steps, end
        self.assertEqual(ctr["cuda0 peak allocated MiB"]["max"], 60)
        self.assertEqual(ctr["cuda1 reserved MiB"]["last"], 4096)
        self.assertEqual(ctr["cuda1 allocated MiB"]["max"], 0)
        # stopped with the profiler: the hooks are gone
        self.assertEqual(prof._after_step, [])
        self.assertNotIn(("history", True, 0), self.calls)  # no snapshot asked for

    def test_hook_off_after_stop(self):
        cfg = dict(QUIET, name="off", output_dir=self.tmp.name, formats="json")
        with sonde.Profiler(cfg, from_env=False) as prof:
            with sonde.torch.track_cuda(prof, sync=True, memory=False):
                with prof.profile("synced"):
                    pass
            with prof.profile("not_synced"):
                pass
        self.assertEqual(len([c for c in self.calls if c[0] == "sync"]), 2)

    def test_002_mem_writes_the_snapshot(self):
        import pickle
        from sonde.compat.cache_dit import ProfilerContext
        ctx = ProfilerContext(activities=["CPU", "MEM"], output_dir=self.tmp.name,
                              profile_name="flux", wait=0, warmup=0, active=2)
        with contextlib.redirect_stderr(io.StringIO()):
            with ctx:
                for _ in range(2):
                    with ctx.profiler.profile("denoise"):
                        torch.ones(4).sum()
                    ctx.step()
        (snap,) = glob.glob(os.path.join(self.tmp.name, "flux-rank0-memory-*.pickle"))
        self.assertEqual(str(ctx.memory_snapshot_path), snap)
        with open(snap, "rb") as f:
            self.assertEqual(pickle.load(f)["segments"], [{"device": 0}])
        with open(snap[:-len(".pickle")] + ".txt") as f:  # torch.cuda.memory_summary()
            self.assertEqual(f.read(), "|  fake memory summary  |\n")
        self.assertEqual([c for c in self.calls if c[0] == "history"],
                         [("history", True, 0), ("history", True, 1),
                          ("history", False, 0), ("history", False, 1)])
        self.assertEqual(glob.glob(os.path.join(self.tmp.name, ".tmp-*")), [])


def heavy_matmul(a, b, n):
    for _ in range(n):
        torch.mm(a, b)


class PythonFrames(unittest.TestCase):
    def test_the_python_caller_stands_above_the_operator(self):
        # issue 39: each CPU sample carries its Python frames, outside the native frames of
        # the operator; most of this run's samples are BLAS work called by heavy_matmul
        a, b = torch.randn(384, 384), torch.randn(384, 384)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        self.addCleanup(torch.set_num_threads, threads)
        with tempfile.TemporaryDirectory() as d:
            cfg = dict(QUIET, name="frames", output_dir=d, formats="json", sample_hz=999)
            with sonde.Profiler(cfg, from_env=False):
                heavy_matmul(a, b, 150)
            with open(os.path.join(d, "frames.json")) as f:
                p = json.load(f)["profile"]
            with open(os.path.join(d, "frames.folded")) as f:
                stacks = [line.rsplit(" ", 1) for line in f.read().splitlines()]
        native = {fn["name"] for fn in p["functions"] if not fn["object"].endswith(".py")}
        mm = [(st.split(";"), int(n)) for st, n in stacks if ";heavy_matmul;" in st]
        total = sum(int(n) for _, n in stacks)
        under = sum(n for _, n in mm)
        self.assertGreaterEqual(under, 0.8 * total, stacks[:5])
        # the frame inward of heavy_matmul is native code (BLAS, ATen), never Python's
        inner = {}
        for frames, n in mm:
            k = frames[frames.index("heavy_matmul") + 1] if frames[-1] != "heavy_matmul" else None
            inner[k] = inner.get(k, 0) + n
        self.assertGreaterEqual(sum(n for k, n in inner.items() if k in native), 0.9 * under,
                                inner)
        self.assertTrue(all(fr[fr.index("heavy_matmul") - 1] == "PythonFrames.test_the_python_"
                            "caller_stands_above_the_operator" for fr, _ in mm), mm[:3])
        print("python frames: %d of %d samples under heavy_matmul, inward of it %s" % (
            under, total, sorted(inner.items(), key=lambda x: -x[1])[:3]), file=sys.stderr)


class DataLoaderWorkers(unittest.TestCase):
    def test_every_worker_keeps_its_sections(self):
        # issue 62: persistent workers are ended by torch's SIGTERM, whose handler (installed in
        # the worker after sonde's) calls _exit: every worker's sections were lost (0 of 128);
        # sonde's handler is put in front of it again and flushes them. Not persistent: the
        # workers end each epoch and finish their runs
        prog = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dataloader_workers.py")
        for persistent in ("1", "0"):
            with tempfile.TemporaryDirectory() as d:
                out = subprocess.run([sys.executable, prog, d, persistent], capture_output=True,
                                     text=True, timeout=120)
                self.assertEqual((out.returncode, out.stdout), (0, "done\n"), out.stderr)
                workers = sorted(glob.glob(os.path.join(d, "dl-pid*.sonde")))
                self.assertEqual(len(workers), 2 if persistent == "1" else 4, workers)
                sections = 0
                for w in workers:
                    rep = os.path.join(d, "r", os.path.basename(w)[:-len(".sonde")] + ".json")
                    self.assertEqual(sonde.cli(["export", w, "--format", "json", "-o",
                                                os.path.join(d, "r"), "--quiet"]), 0, w)
                    with open(rep) as f:
                        st = {s["name"]: s["count"] for s in json.load(f)["sections"]}
                    self.assertEqual(set(st), {"load_item"}, (w, st))
                    sections += st["load_item"]
                self.assertEqual(sections, 128, (persistent, workers))


def slow_collate(seconds):
    """Python work of its own (no native call to speak of) for the CPU samples to find."""
    x, t0 = 0, time.thread_time()
    while time.thread_time() - t0 < seconds:
        for i in range(2000):
            x += i * i
    return x


class SqlExport(unittest.TestCase):
    def test_documented_queries_on_a_torch_run(self):
        # issue 64: docs/formats.md's queries on a real PyTorch run written with
        # formats="sqlite": Q7 names the Python function planted in steps 4 and 5, Q9 the
        # operators under forward (two linears and a relu a step), Q3 the report's table
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
        import sqlite_check
        q = sqlite_check.queries(os.path.join(os.path.dirname(__file__), "..", "..", "docs",
                                              "formats.md"))
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        self.addCleanup(torch.set_num_threads, threads)
        with tempfile.TemporaryDirectory() as d:
            cfg = dict(QUIET, name="sql", output_dir=d, formats="json,sqlite", sample_hz=999)
            with sonde.Profiler(cfg, from_env=False) as prof:
                sonde.torch.profile_operators(prof)
                for step in range(8):
                    x = torch.randn(32, 64)
                    if step in (4, 5):
                        slow_collate(0.15)
                    with prof.profile("forward"):
                        y = model(x)
                    with prof.profile("backward"):
                        y.sum().backward()
                    prof.step()
            db = sqlite3.connect(os.path.join(d, "sql.sqlite"))
            with open(os.path.join(d, "sql.json")) as f:
                rep = json.load(f)
            hot = db.execute(q[7]).fetchall()
            ops = {r[0]: r[1] for r in db.execute(q[9])}
            sqlite_check.check_report(q, db, rep)
            db.close()
        self.assertTrue(hot, "Q7: no samples in steps 4 and 5")
        self.assertEqual((hot[0][0], hot[0][2]), ("slow_collate", 1), hot[:3])
        self.assertTrue(hot[0][1].endswith("test_torch.py"), hot[0])
        self.assertEqual((ops.get("aten::linear"), ops.get("aten::relu")), (16, 8), ops)
        print("sqlite: Q7 %s (%d samples), Q9 %s" % (hot[0][0], hot[0][3], sorted(ops.items())[:4]),
              file=sys.stderr)


@unittest.skipIf(torch.cuda.is_available(), "a GPU is present")
class CudaAbsent(unittest.TestCase):
    def test_one_line_and_nothing_else(self):
        with tempfile.TemporaryDirectory() as d:
            cfg = dict(QUIET, name="nocuda", output_dir=d, formats="json")
            err = io.StringIO()
            with sonde.Profiler(cfg, from_env=False) as prof:
                with contextlib.redirect_stderr(err):
                    t = sonde.torch.track_cuda(sync=True, snapshot=True)
                with prof.profile("work"):
                    pass
                prof.step()
            self.assertEqual(err.getvalue().count("\n"), 1)
            self.assertIn("torch.cuda.is_available() is False", err.getvalue())
            self.assertEqual(t.devices, [])
            with open(prof.file_path[:-len(".sonde")] + ".json") as f:
                rep = json.load(f)
            self.assertEqual([c for c in rep["counters"] if c["name"].startswith("cuda")], [])
            self.assertIn("sonde.torch", [e["name"] for e in rep["events"]])


if __name__ == "__main__":
    unittest.main()
