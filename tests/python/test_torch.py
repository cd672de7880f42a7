"""test_torch.py - sonde.torch against real PyTorch (Debian's python3-torch, 1.13, CPU).

A tiny GPT (token and position embeddings, two blocks of attention + MLP, an LM head) generates
32 tokens under sonde.torch.instrument; the run's own JSON report must give each module's known
call count, the analytic FLOPs of its products, its shapes, and the loop's throughput.
Run by ctest with the extension built for the interpreter that has torch (tests/torch.sh).
"""

import json
import os
import sys
import tempfile
import time
import unittest

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


if __name__ == "__main__":
    unittest.main()
