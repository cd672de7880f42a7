"""sonde.compat.torch_decorator - the profiler decorator for distributed training (003) over
sonde.

    from sonde.compat.torch_decorator import profiler, step_profiler

    @profiler()                 # skip_first 1, wait 1, warmup 1, active 3, repeat 1, with_flops
    def train_model(args):
        for batch in loader:
            loss = model(batch)
            step_profiler()     # the end of one training step

As the original (parallelization/profiler/decorator.py at 33c61dc): each call of the decorated
function is profiled under the step schedule skip_first / wait / warmup / active / repeat
(sonde's own schedule, in C, with torch.profiler.schedule's semantics); step_profiler() ends a
step. The call prints the original's lines first (the output directory, the schedule, the
options); each finished window is written as {output_dir}/rank_{rank}.{ns}.pt.trace.json (what
torch's tensorboard_trace_handler names it), and when the call returns the last window is
{output_dir}/trace_rank_{rank}.json, with its "Chrome trace saved to" line; rank 0 (LOCAL_RANK)
then prints "Profiling Summary:" and the table: torch's own key_averages() table of the last
window (sorted by CUDA time, ten rows, with the memory and FLOP columns) when the program
imported torch, else sonde's table of the top sections. While the call runs torch._current_profiler
is an object whose step() is step_profiler(), as in the original. As there, a schedule torch
refuses (active=0, a negative count) fails the call with an AssertionError (ScheduleError, also a
ValueError), a call that ends before the first window (too few step_profiler() calls) fails
with one when it returns (NoWindowRecorded), and a call that raises leaves the windows written
so far but no trace_rank_{rank}.json.

What sonde adds: {output_dir}/rank_{rank}/ holds the run's NAME.sonde (every `sonde` command
reads it; `sonde aggregate` and `sonde merge` take the ranks' files), the whole run's trace and
each window's (NAME-cycleK.trace.json.gz; not *.pt.trace.json, so TensorBoard lists each window
once, as the original's). torch's operators (with shapes, memory and FLOPs) are on sonde's timeline
with the program's own sections; with_modules makes every nn.Module call a section
("nn.Module: Linear", sonde.torch.instrument_all); nsight_enabled turns on sonde's NVTX ranges
and cudaProfilerStart/Stop around each active window (`nsys profile
--capture-range=cudaProfilerApi`).
"""

import functools
import itertools
import glob
import os
import re
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
    """sonde's table of the top sections (a program that never imported torch has no torch
    table): FLOPs, total and self time, calls."""
    s = p.get_summary()
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
    """9216 -> "9.216K", 1.074e9 -> "1.074G" (three decimals, as torch's tables)."""
    for div, unit in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if n >= div:
            return "%.3f%s" % (n / div, unit)
    return "%d" % n


def _torch_table(tp):
    """torch's key_averages() table of the last window torch recorded, as the original prints
    it (sort_by="cuda_time_total", row_limit=10), less sonde's own marker ranges; None when
    torch recorded no window."""
    wins = [w for w in tp.windows if "key_averages" in w]
    if not wins:
        return None
    ka = wins[-1]["key_averages"]
    rows = [e for e in ka if not tp.is_own_range(e.key)]
    if hasattr(ka, "_use_device"):  # PyTorch 2's EventList: use_device for 1.x's use_cuda
        dev = {"use_device": ka._use_device}
    else:
        dev = {"use_cuda": getattr(ka, "_use_cuda", True)}
    kept = type(ka)(rows, profile_memory=getattr(ka, "_profile_memory", False),
                    with_flops=getattr(ka, "_with_flops", False), **dev)
    return kept.table(sort_by="cuda_time_total", row_limit=10)


class _CurrentProfiler:
    """What the original puts in torch._current_profiler: step() ends a step."""

    def __init__(self, prof):
        self.sonde_profiler = prof

    def step(self):
        self.sonde_profiler.step()


def _announce(output_dir, skip_first, wait, warmup, active, repeat, with_stack, with_flops,
              with_modules, rank, world_size):
    """The lines the original prints when a decorated call begins."""
    print("📊 PyTorch profiler enabled:")
    print("   📁 Output directory: %s" % output_dir)
    print("   ⏱️  Schedule - skip_first: %s, wait: %s, warmup: %s, active: %s, repeat: %s"
          % (skip_first, wait, warmup, active, repeat))
    print("   🔧 Options - stack: %s, flops: %s, modules: %s" % (with_stack, with_flops,
                                                              with_modules))
    if with_flops:
        print("   💡 FLOP counting enabled - skipping first %s step(s) to avoid initialization "
              "overhead" % skip_first)
    if world_size > 1:
        print("🌐 Multi-GPU detected - saving rank %d trace to trace_rank_%d.json" % (rank, rank))


def profiler(enabled=True, output_dir="./profiler_logs", skip_first=1, wait=1, warmup=1,
             active=3, repeat=1, with_stack=False, with_flops=True, with_modules=False,
             nsight_enabled=False, nsight_output="nsight_profile", record_shapes=True):
    """A decorator factory: each call of the decorated function is profiled under the step
    schedule (the original's defaults); see the module's documentation for what it writes and
    prints. record_shapes (always on in the original) is sonde's addition."""
    if with_modules and enabled:
        try:
            import torch  # noqa: F401 (the module hierarchy is PyTorch's)
        except ImportError as e:
            raise ImportError("profiler(with_modules=True) needs PyTorch in this interpreter "
                              "(%s): %s" % (sys.executable, e)) from e

    def wrap(f):
        @functools.wraps(f)
        def run(*a, **kw):
            if not enabled:
                return f(*a, **kw)
            os.makedirs(output_dir, exist_ok=True)
            _check_schedule(skip_first, wait, warmup, active, repeat)
            rank = int(os.environ.get("LOCAL_RANK", 0))
            world_size = int(os.environ.get("WORLD_SIZE", 1))
            nsight_error = _nsight_unavailable() if nsight_enabled else None
            if nsight_error:
                print("⚠️  NSight profiling failed to start: %s" % nsight_error)
            elif nsight_enabled:
                print("🔍 NSight profiling enabled - output: %s" % nsight_output)
            _announce(output_dir, skip_first, wait, warmup, active, repeat, with_stack,
                      with_flops, with_modules, rank, world_size)
            before = _windows(os.path.join(output_dir, "rank_%d" % rank))  # earlier calls'
            p = sonde.Profiler({
                "name": f.__name__, "output_dir": os.path.join(output_dir, "rank_%d" % rank),
                "formats": ["trace", "tensorboard"], "skip_first": skip_first, "wait": wait,
                "warmup": warmup, "active": active, "repeat": repeat, "with_stack": with_stack,
                "record_shapes": record_shapes, "nvtx": nsight_enabled,
                "cuda_profiler_range": nsight_enabled})
            tp = hooks = None
            taken = itertools.count()  # the steps, however the program steps (reading the
            p._after_step.append(taken.__next__)  # run back to count them costs a whole read)
            torch = sys.modules.get("torch")
            if p.enabled and (torch is not None or with_modules):  # torch.profiler backend
                from sonde import torch as sonde_torch
                tp = sonde_torch.profile_operators(p, record_shapes=record_shapes,
                                                   profile_memory=True, with_flops=with_flops,
                                                   with_stack=with_stack,
                                                   keep_key_averages=rank == 0)
                if with_modules:
                    hooks = sonde_torch.instrument_all(p)
                torch = sys.modules["torch"]
            saved = getattr(torch, "_current_profiler", None) if torch else None
            with _lock:
                _active.append(p)
            if torch is not None:
                torch._current_profiler = _CurrentProfiler(p)
            ok = False
            text = None
            try:
                result = f(*a, **kw)
                ok = True
            finally:
                if hooks is not None:
                    hooks.remove()
                with _lock:
                    _active.remove(p)
                if torch is not None:
                    if saved is not None:
                        torch._current_profiler = saved
                    else:
                        torch.__dict__.pop("_current_profiler", None)
                if ok and rank == 0:  # torch's last window folded in before the table
                    p._stop_attached()
                    text = _torch_table(tp) if tp is not None else None
                    if text is None:
                        text = _summary(p, rank, with_flops)
                steps = next(taken)
                p.close(raise_on_error=ok)
                # before the schedule's first window nothing was recorded (sonde's TensorBoard
                # trace is then the whole run's: not a window)
                last = _publish(p, output_dir, rank, before, ok,
                                windows=steps >= skip_first + wait)
            if p.enabled and steps < skip_first + wait:
                raise NoWindowRecorded(
                    "profiler: no step was recorded, so there is no trace to export (the "
                    "original's export_chrome_trace fails here too): %d step_profiler() "
                    "call(s), and the schedule's first window begins at step %d (skip_first=%d "
                    "+ wait=%d)" % (steps, skip_first + wait, skip_first, wait))
            if last:
                print("💾 Chrome trace saved to: %s" % last)
            if text is not None:
                print("\n📈 Profiling Summary:")
                print(text)
            if nsight_error:
                print("⚠️  NSight profiling failed to stop: %s" % nsight_error)
            elif nsight_enabled:
                print("✅ NSight profiling completed")
            return result

        run.nsight_output = nsight_output
        return run

    return wrap


def _nsight_unavailable():
    """Why the CUDA profiler range cannot be had, as the original finds out (torch.cuda.cudart()
    raising: "Torch not compiled with CUDA enabled" on a CPU build), or None. sonde opens the
    range itself (libcudart, in C); a program without torch is not asked."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        torch.cuda.cudart()
    except Exception as e:  # what the original prints
        return str(e) or type(e).__name__
    return None


class ScheduleError(AssertionError, ValueError):
    """A schedule the original's torch.profiler.schedule refuses (AssertionError "Invalid
    profiler schedule arguments"); a ValueError too, what sonde raised before."""


class NoWindowRecorded(AssertionError):
    """The decorated call ended before the schedule's first window: the original's
    export_chrome_trace fails the call with an AssertionError then."""


def _check_schedule(skip_first, wait, warmup, active, repeat):
    """Raises ScheduleError where torch.profiler.schedule asserts (when the decorated function
    is called, as the original makes its schedule then)."""
    for k, v in (("skip_first", skip_first), ("wait", wait), ("warmup", warmup),
                 ("active", active), ("repeat", repeat)):
        least = 1 if k == "active" else 0
        if not isinstance(v, int) or v < least:
            raise ScheduleError("Invalid profiler schedule arguments: %s=%r (expected an "
                                "integer >= %d)" % (k, v, least))


def _windows(rank_dir):
    """{path: mtime_ns} of the TensorBoard traces under rank_dir/plugins/profile/*/."""
    out = {}
    for path in glob.glob(os.path.join(rank_dir, "plugins", "profile", "*", "*.pt.trace.json.gz")):
        try:
            out[path] = os.stat(path).st_mtime_ns
        except OSError:
            pass
    return out


def _publish(p, output_dir, rank, before, ok=True, windows=True):
    """The original's files from sonde's TensorBoard traces (one per finished window, in
    rank_{rank}/plugins/profile/NAME/HOST_PID.cycleK.pt.trace.json.gz): each window of this
    call as {output_dir}/rank_{rank}.{ns}.pt.trace.json, ns the time it was written, and
    (ok: the call returned) the last one as {output_dir}/trace_rank_{rank}.json. sonde's
    copies are then removed: TensorBoard, pointed at output_dir, lists each window once, as
    the original's. before: the traces there before the call ({path: mtime_ns}), which are
    earlier calls' (a second call's run is NAME-2, its folder beside the first's; as a
    multi-rank job's, both may share one): only traces new or written again since count.
    windows False: the call had none, and sonde's traces are only removed. Returns the path of
    trace_rank_{rank}.json, or None when not written."""
    if p.file_path is None:
        return None
    cycles = []
    for path, mtime in _windows(p.output_dir).items():
        if before.get(path) == mtime:
            continue  # an earlier call's, untouched by this one
        m = re.search(r"\.cycle(\d+)\.pt\.trace\.json\.gz$", path)
        cycles.append((int(m.group(1)) if m else 0, path))
    cycles.sort()
    ns = 0
    for _, path in cycles if windows else ():  # written in one go: distinct names, in order
        ns = max(os.stat(path).st_mtime_ns, ns + 1)
        _unzip_to(path, os.path.join(output_dir, "rank_%d.%d.pt.trace.json" % (rank, ns)))
    last = None
    if ok and windows and cycles:  # exported after the call returns, never after an exception
        last = os.path.join(output_dir, "trace_rank_%d.json" % rank)
        _unzip_to(cycles[-1][1], last)
    for _, path in cycles:
        os.remove(path)
        try:
            os.removedirs(os.path.dirname(path))  # plugins/profile/NAME/, where now empty
        except OSError:
            pass
    return last
