"""sonde.compat.torch_decorator - the profiler decorator for distributed training (003) over
sonde.

    from sonde.compat.torch_decorator import profiler, step_profiler

    @profiler()                 # skip_first 1, wait 1, warmup 1, active 3, repeat 1, with_flops
    def train_model(args):
        for batch in loader:
            loss = model(batch)
            step_profiler()     # the end of one training step

What maps where: the decorated call is one sonde profiler under the step schedule
skip_first / wait / warmup / active / repeat (sonde's own schedule, in C); step_profiler() is
sonde_step. When the call returns, each rank writes {output_dir}/trace_rank_{rank}.json (a
Chrome trace holding the active steps as ProfilerStep#N spans, numbered from 0 as PyTorch
numbers them) and {output_dir}/rank_{rank}/ (the TensorBoard layout, and the raw NAME.sonde),
and rank 0 alone prints its table: the top operators with their FLOPs when torch.profiler ran,
else the top sections. nsight_enabled turns on sonde's NVTX
ranges and cudaProfilerStart/Stop around each active window (`nsys profile
--capture-range=cudaProfilerApi`). A program that imported torch is also profiled by
torch.profiler under the same schedule (sonde.torch.profile_operators): every operator with its
shapes and FLOPs (with_flops, record_shapes, with_stack are torch's) on sonde's timeline, and the
reports' per-operator table; with_modules makes every nn.Module call a section
("nn.Module: Linear", sonde.torch.instrument_all). FLOPs of sections are what the program
records (sonde's record_flops).
"""

import functools
import glob
import os
import sys
import threading

import sonde
from sonde.compat import _unzip_to

__all__ = ["profiler", "step_profiler", "active_profiler"]

_lock = threading.Lock()
_active = []   # the decorated calls under way, innermost last


def active_profiler():
    """The sonde.Profiler of the innermost decorated call under way, or None."""
    with _lock:
        return _active[-1] if _active else None


def step_profiler():
    """The end of one training step of the decorated call under way (none: nothing)."""
    p = active_profiler()
    if p is not None:
        p.step()


def _fmt_time(s):
    return "%.3fms" % (s * 1e3) if s < 1 else "%.3fs" % s


def _summary(p, rank, with_flops, top=10):
    """Rank 0's console summary, as 003's table lays it (the FLOP column with with_flops): the
    top operators by CUDA time (by CPU time when none ran on a GPU) when torch.profiler
    recorded them, else the top sections by total time."""
    s = p.get_summary()
    if s["operators"]:
        return _op_table(s, rank, with_flops, top)
    rows = s["stats"][:top]
    w = max([len("Name")] + [len(r["name"]) for r in rows]) + 2
    rule = "-" * w + "  " + "  ".join(["-" * 12] * 4)
    out = ["Top sections by total time (rank %d, %d steps)" % (rank, s["steps"]), rule,
           "%*s  %12s  %12s  %12s  %12s" % (w, "Name", "Self FLOPS", "Total", "Self",
                                            "# of Calls"), rule]
    for r in rows:
        flops = _fmt_flops(r["flops"]) if r["flops"] and with_flops else "-"
        out.append("%*s  %12s  %12s  %12s  %12d" % (w, r["name"], flops, _fmt_time(r["total_s"]),
                                                     _fmt_time(r["self_s"]), r["count"]))
    out.append(rule)
    return "\n".join(out)


def _fmt_flops(n):
    """9216 -> "9.216K", 1.074e9 -> "1.074G" (003's table writes G, with three decimals)."""
    for div, unit in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if n >= div:
            return "%.3f%s" % (n / div, unit)
    return "%d" % n


def _op_table(s, rank, with_flops, top):
    ops = s["operators"]
    cuda = any(o["cuda_total_s"] > 0 for o in ops)
    ops = sorted(ops, key=lambda o: -(o["cuda_total_s"] if cuda else o["cpu_total_s"]))[:top]
    w = max([len("Name")] + [len(o["name"]) for o in ops]) + 2
    rule = "-" * w + "  " + "  ".join(["-" * 12] * 4)
    out = ["Top operations by %s time (rank %d, %d steps)" % ("CUDA" if cuda else "CPU", rank,
                                                            s["steps"]), rule,
           "%*s  %12s  %12s  %12s  %12s" % (w, "Name", "Self FLOPS", "CPU total", "CUDA total",
                                            "# of Calls"), rule]
    for o in ops:
        flops = _fmt_flops(o["flops"]) if o["flops"] and with_flops else "-"
        out.append("%*s  %12s  %12s  %12s  %12d" % (
            w, o["name"], flops, _fmt_time(o["cpu_total_s"]),
            _fmt_time(o["cuda_total_s"]) if cuda else "-", o["calls"]))
    out.append(rule)
    return "\n".join(out)


def profiler(enabled=True, output_dir="./profiler_logs", skip_first=1, wait=1, warmup=1,
             active=3, repeat=1, with_stack=False, with_flops=True, with_modules=False,
             nsight_enabled=False, nsight_output="nsight_profile", record_shapes=False):
    """A decorator factory: each call of the decorated function is profiled under the step
    schedule (003's defaults); see the module's documentation for the files it writes."""
    if with_modules and enabled:
        try:
            import torch  # noqa: F401 (the module hierarchy is PyTorch's)
        except ImportError as e:
            raise ImportError("profiler(with_modules=True) needs PyTorch in this interpreter "
                              "(%s): %s" % (sys.executable, e)) from e
    for k, v in (("skip_first", skip_first), ("wait", wait), ("warmup", warmup),
                 ("active", active), ("repeat", repeat)):
        if not isinstance(v, int) or v < 0:
            raise ValueError("profiler(%s=%r): expected an integer >= 0" % (k, v))

    def wrap(f):
        @functools.wraps(f)
        def run(*a, **kw):
            if not enabled:
                return f(*a, **kw)
            rank = max(sonde.job_rank()[0], 0)
            rank_dir = os.path.join(output_dir, "rank_%d" % rank)
            p = sonde.Profiler({
                "name": "%s" % f.__name__, "output_dir": rank_dir,
                "formats": ["tensorboard"], "skip_first": skip_first, "wait": wait,
                "warmup": warmup, "active": active, "repeat": repeat, "with_stack": with_stack,
                "record_shapes": record_shapes, "nvtx": nsight_enabled,
                "cuda_profiler_range": nsight_enabled})
            hooks = None
            if p.enabled and ("torch" in sys.modules or with_modules):  # torch.profiler backend
                from sonde import torch as sonde_torch
                sonde_torch.profile_operators(p, record_shapes=record_shapes,
                                              with_flops=with_flops, with_stack=with_stack)
                if with_modules:
                    hooks = sonde_torch.instrument_all(p)
            with _lock:
                _active.append(p)
            try:
                return f(*a, **kw)
            finally:
                if hooks is not None:
                    hooks.remove()
                with _lock:
                    _active.remove(p)
                ok = sys.exc_info()[0] is None
                if rank == 0 and ok:  # torch's last window folded in before the table
                    p._stop_attached()
                text = _summary(p, rank, with_flops) if rank == 0 and ok else None
                p.close(raise_on_error=ok)
                _publish(p, output_dir, rank)
                if text:
                    print(text)

        run.nsight_output = nsight_output
        return run

    return wrap


def _publish(p, output_dir, rank):
    """{output_dir}/trace_rank_{rank}.json: the TensorBoard trace of rank_{rank}/, as JSON."""
    if p.file_path is None:
        return
    tb = glob.glob(os.path.join(p.output_dir, "plugins", "profile", "*",
                                "*.pt.trace.json.gz"))
    if not tb:
        return
    tb.sort(key=os.path.getmtime)
    _unzip_to(tb[-1], os.path.join(output_dir, "trace_rank_%d.json" % rank))
