"""bench_window_torch.py - the step that ends a schedule's window under torch.profiler, whose
on_trace_ready exports that window's trace, beside the same under sonde.Profiler from Python
(issue 59; bench_window.c gives libsonde's own figure from C, early and late in a long run).

The schedule is bench_window's (wait 1, warmup 1, active 2, repeat 0) with 200 ranges a step:
torch.profiler.record_function ranges under torch.profiler.profile, whose on_trace_ready calls
export_chrome_trace as tensorboard_trace_handler does; sonde.Profiler.profile sections under a
sonde.Profiler with the same schedule, whose window's trace libsonde writes in step().
Each figure is the median of the window-ending steps of windows 6..N and of windows N-9..N
(default N 40; torch's recording is slow, so its run is shorter than bench_window's).
Usage: PYTHONPATH=BUILD/python python3 bench/bench_window_torch.py [N] (make bench runs it
through tests/python/run_torch.sh, which builds the extension for torch's interpreter)."""

import os
import statistics
import sys
import tempfile
import time

import torch
import torch.profiler

import sonde

SECTIONS = 200


def window_steps(run_step, windows, section):
    """The seconds of each window-ending step (every fourth), over windows x 4 steps."""
    ends = []
    for s in range(windows * 4):
        for _ in range(SECTIONS):
            with section():
                pass
        t = time.perf_counter()
        run_step()
        t = time.perf_counter() - t
        if s % 4 == 3:
            ends.append(t)
    return ends


def under_torch(out, windows):
    def ready(prof):
        prof.export_chrome_trace(os.path.join(out, "torch-%d.json" % prof.step_num))

    sched = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=0)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                schedule=sched, on_trace_ready=ready) as prof:
        return window_steps(prof.step, windows,
                            lambda: torch.profiler.record_function("layer"))


def under_sonde(out, windows):
    p = sonde.Profiler(output_dir=out, name="window", formats=[], wait=1, warmup=1, active=2,
                       repeat=0, collect_cpu=False, collect_memory=False, collect_gpu=False,
                       from_env=False)
    try:
        return window_steps(p.step, windows, lambda: p.profile("layer"))
    finally:
        p.close()


def main():
    windows = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    if windows < 20:
        sys.exit("bench_window_torch: at least 20 windows")
    print("bench_window_torch: the step() ending a window from Python (wait 1, warmup 1, "
          "active 2, %d ranges a step, %d windows; %s, torch %s)"
          % (SECTIONS, windows, sys.executable, torch.__version__))
    for label, run in (("torch.profiler + export_chrome_trace", under_torch),
                       ("sonde.Profiler (libsonde's window trace)", under_sonde)):
        with tempfile.TemporaryDirectory() as out:
            ends = run(out, windows)
        early = statistics.median(ends[5:15])
        late = statistics.median(ends[-10:])
        print("  %-42s window 10 %8.3f ms   window %d %8.3f ms"
              % (label, early * 1e3, windows - 5, late * 1e3))


if __name__ == "__main__":
    main()
