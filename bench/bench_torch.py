"""bench_torch.py - what sonde.torch.instrument() adds to each module call, next to what a
torch.autograd.profiler.record_function range around the same call adds, measured in the same
run on the same model, and the model under torch.profiler alone.

The model is 16 blocks of 4 nn.Identity modules (80 module calls a forward, nested two deep), so
the module call itself is nearly all of the work and per-call overheads stand out. The plain
model is the floor: each figure is (time with it - time of the plain model) / module calls.
Usage: PYTHONPATH=BUILD/python python3 bench/bench_torch.py [N] (run by make bench through
tests/python/run_torch.sh, which builds the extension for the interpreter that has torch)."""

import sys
import tempfile
import time

import torch
import torch.nn as nn

import sonde
import sonde.torch

BLOCKS, PER = 16, 4
CALLS = 1 + BLOCKS * (1 + PER)  # module calls in one forward


def model():
    return nn.Sequential(*[nn.Sequential(*[nn.Identity() for _ in range(PER)])
                           for _ in range(BLOCKS)])


def per_forward(m, x, n):
    best = float("inf")
    for _ in range(5):  # the best of five rounds: the least disturbed by a loaded machine
        t = time.perf_counter()
        for _ in range(n):
            m(x)
        best = min(best, (time.perf_counter() - t) / n)
    return best


def instrumented(make, x, n, out, **kw):
    """per_forward of make()'s model under sonde.torch.instrument(**kw), recording nothing to
    disk."""
    with sonde.Profiler({"name": "bench", "output_dir": out, "formats": [],
                         "collect_cpu": False, "collect_memory": False,
                         "collect_gpu": False}, from_env=False) as prof:
        m = make()
        sonde.torch.instrument(m, prof, **kw)
        return per_forward(m, x, n)


def with_record_function(m):
    """Each module's forward inside a record_function range named by its path."""
    for path, mod in m.named_modules():
        orig = mod.forward

        def fwd(*a, _orig=orig, _name=path or "model", **kw):
            with torch.autograd.profiler.record_function(_name):
                return _orig(*a, **kw)

        mod.forward = fwd
    return m


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    x = torch.zeros(1)
    out = tempfile.mkdtemp(prefix="sonde-bench-torch-")
    print("sonde.torch on %s (torch %s): %d module calls a forward, best of 5 x %d forwards"
          % (sys.executable, torch.__version__, CALLS, n))
    plain = per_forward(model(), x, n)
    rf = per_forward(with_record_function(model()), x, n)
    inst = instrumented(model, x, n, out)
    inst_flops = instrumented(model, x, n, out, with_flops=True)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        tp = per_forward(model(), x, max(n // 10, 10))

    def row(what, t):
        print("  %-44s %9.0f ns a forward  %7.0f ns a module call over the plain model"
              % (what, t * 1e9, (t - plain) * 1e9 / CALLS))

    print("  %-44s %9.0f ns a forward  (the floor)" % ("plain model", plain * 1e9))
    row("sonde.torch.instrument()", inst)
    row("sonde.torch.instrument(with_flops=True)", inst_flops)
    row("record_function around each module", rf)
    row("torch.profiler (CPU) alone, no ranges", tp)
    a, b = (inst - plain) / CALLS, (rf - plain) / CALLS
    print("  instrument() costs %.2fx record_function's per module call (target: <= 0.33x)"
          % (a / b if b > 0 else float("nan")))
    flops_per_operator(out, max(n // 4, 50))


def mlp():
    return nn.Sequential(*[nn.Sequential(nn.Linear(32, 32), nn.ReLU()) for _ in range(8)])


def encoder():
    return nn.TransformerEncoderLayer(32, 4, 64, batch_first=True).eval()


def flops_per_operator(out, n):
    """What with_flops adds over instrument() alone, both measured here, on operators that do
    work: an MLP of 8 Linear+ReLU blocks, counted through the function mode (a Python call per
    torch function), and a TransformerEncoderLayer on its fast path, counted through the
    dispatch mode (a Python call per ATen operator; see sonde/torch.py)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Functions(torch.overrides.TorchFunctionMode):
        calls = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            Functions.calls += 1
            return func(*args, **(kwargs or {}))

    class Operators(TorchDispatchMode):
        calls = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Operators.calls += 1
            return func(*args, **(kwargs or {}))

    with torch.no_grad():
        # the two mechanisms alone, counting nothing, over the plain MLP (the floor): why sonde
        # keeps the function mode wherever no fast path needs the dispatch mode
        m, x = mlp(), torch.zeros(1, 32)

        def under(mode):
            def forward(inp):
                with mode():
                    return m(inp)
            return forward
        bare = {None: per_forward(m, x, n), Functions: per_forward(under(Functions), x, n),
                Operators: per_forward(under(Operators), x, n)}
        print("  bare modes on the MLP: function mode %.0f ns a forward, dispatch mode %.0f ns, "
              "over the plain MLP's %.0f ns (the floor)"
              % ((bare[Functions] - bare[None]) * 1e9, (bare[Operators] - bare[None]) * 1e9,
                 bare[None] * 1e9))
        for what, make, x, mode, unit in (
                ("an MLP (8 x Linear+ReLU)", mlp, torch.zeros(1, 32), Functions, "torch call"),
                ("an encoder layer (fast path)", encoder, torch.zeros(2, 5, 32), Operators,
                 "ATen operator")):
            mode.calls = 0
            with mode():
                make()(x)
            calls = mode.calls
            base = instrumented(make, x, n, out)
            counted = instrumented(make, x, n, out, with_flops=True)
            print("  with_flops on %-30s %9.0f ns a forward over instrument()'s %.0f ns (the "
                  "floor): %.0f ns per %s (%d a forward)"
                  % (what, (counted - base) * 1e9, base * 1e9, (counted - base) * 1e9 / calls,
                     unit, calls))


if __name__ == "__main__":
    main()
