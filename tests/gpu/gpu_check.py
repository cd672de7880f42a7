"""gpu_check.py MODE DIR - sonde's GPU paths on a real GPU, for a machine that has one (CI has
none: tests/gpu/device_check.sh runs this where a GPU is lent, docs/integrations.md says what it
found). A small MLP trains for 30 steps on cuda:0 (the CPU when torch sees no GPU, so the script
can be tried anywhere); MODE picks what records it:

  inproc  sonde.Profiler with NVML sampling every 50 ms, CUPTI kernels (cuda_activity),
          track_cuda(sync, memory, snapshot), instrument(with_flops, backward) and CPU samples
          with Python frames at 999 Hz; then the reports' GPU figures are checked and printed
  ops     the same model under profile_operators with ProfilerActivity.CUDA (torch's own CUPTI
          use through Kineto): the operator table's CUDA times, the kernels linked to operators
  plain   no sonde in the program (for `sonde run` from outside: NVML and Python frames)

Each check prints "ok: ..." or "FAIL: ..."; the exit status is the number of failures."""
import json
import os
import sys
import time

import torch

MODE, OUT = sys.argv[1], sys.argv[2]
DEV = "cuda:0" if torch.cuda.is_available() else "cpu"
WIDTH, BATCH = (2048, 512) if DEV != "cpu" else (256, 64)  # a CPU try stays quick
FAILS = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        FAILS.append(what)


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(WIDTH, 2 * WIDTH), torch.nn.ReLU(),
                               torch.nn.Linear(2 * WIDTH, WIDTH)).to(DEV)


def train_step(model, opt, x):
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def run_plain():
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(BATCH, WIDTH, device=DEV)
    t0 = time.time()
    while time.time() - t0 < 3:  # long enough for NVML's samples from outside
        train_step(model, opt, x)
        if DEV != "cpu":
            torch.cuda.synchronize()
    print("plain: trained for %.1f s on %s" % (time.time() - t0, DEV))


def load(name):
    with open(os.path.join(OUT, name + ".json")) as f:
        return json.load(f)


def run_inproc():
    import sonde
    import sonde.torch
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(BATCH, WIDTH, device=DEV)
    with sonde.Profiler(name="inproc", output_dir=OUT, gpu_interval_s=0.05, cuda_activity=True,
                        sample_hz=999, formats="json,txt,trace,folded,pprof,html") as prof:
        sonde.torch.track_cuda(sync=True, memory=True, snapshot=True)
        with sonde.torch.instrument(model, with_flops=True, backward=True):
            t0, steps = time.time(), 0
            while steps < 30 or time.time() - t0 < 3:  # NVML's utilization is a 1/6-1 s mean
                with prof.profile("train_step"):
                    train_step(model, opt, x)
                prof.step()
                steps += 1
    r = load("inproc")
    print("inproc: top-level keys", sorted(r))
    counters = {c["name"]: c for c in r.get("counters", [])}
    gpu = sorted(n for n in counters if n.lower().startswith(("gpu", "cuda")))
    print("inproc: GPU counters", gpu)
    for n in gpu:
        c = counters[n]
        print("   %-36s samples %4d  min %10.2f  mean %10.2f  max %10.2f" %
              (n, c["samples"], c["min"], c["mean"], c["max"]))
    if DEV == "cpu":
        return
    check(any("util" in n for n in gpu), "NVML utilization counter present")
    util = [counters[n]["max"] for n in gpu if "util" in n]
    check(util and max(util) > 0, "NVML utilization above 0 while training (max %s)" % util)
    check(any("allocated" in n for n in gpu), "track_cuda's allocated-MiB counter present")
    ga = r.get("gpu_activity") or {}
    print("inproc: gpu_activity", json.dumps({k: v for k, v in ga.items()
                                              if not isinstance(v, list)}))
    for k in ga.get("top_kernels", [])[:8]:
        print("   kernel %-70.70s %5d  %.6f s" % (k["name"], k["count"], k["total_s"]))
    for k in ga.get("kernels_by_section", [])[:8]:
        print("   by section %-40s %5d  %.6f s" % (k["name"], k["count"], k["total_s"]))
    check(ga.get("kernels", 0) >= 30 * 4, "CUPTI kernels recorded (%s)" % ga.get("kernels"))
    # backward's kernels are launched by autograd's device thread: with instrument(backward=
    # True) its sections (model.N.backward) are there to link them to
    by = {k["name"] for k in ga.get("kernels_by_section", [])}
    check({"model.0", "model.2", "train_step"} <= by and any(n.endswith(".backward") for n in by),
          "kernels by section: forward modules, backward sections, the step (%s)" % sorted(by))
    # not all: the loss's backward and the gradients' accumulation run on autograd's thread
    # outside every module's backward section (the H200 run: 79%, 3 kernels and a copy a step)
    linked = ga.get("linked_to_sections", 0)
    work = sum(ga.get(k, 0) for k in ("kernels", "memcpy", "memset"))
    check(linked >= 0.7 * work, "GPU work linked to the sections that launched it: %s of %s "
          "kernels, copies and sets" % (linked, work))
    names = {s["name"]: s for s in r.get("sections", [])}
    step = names.get("train_step")
    check(step is not None and step["count"] == steps, "%d train_step sections" % steps)
    snaps = [f for f in os.listdir(OUT) if f.endswith(".pickle")]
    check(bool(snaps), "track_cuda's memory snapshot written (%s)" % snaps)
    folded = open(os.path.join(OUT, "inproc.folded")).read().splitlines()
    py = [ln for ln in folded if "train_step" in ln]
    check(bool(py), "Python frames in the CPU samples (%d stacks name train_step)" % len(py))
    for ln in sorted(folded, key=lambda s: -int(s.rsplit(" ", 1)[1]))[:5]:
        print("   folded", ln[-160:])


def run_ops():
    import sonde
    import sonde.torch
    from torch.profiler import ProfilerActivity
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(BATCH, WIDTH, device=DEV)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEV != "cpu" else [])
    with sonde.Profiler(name="ops", output_dir=OUT, wait=1, warmup=1, active=5,
                        formats="json,txt,trace") as prof:
        sonde.torch.profile_operators(activities=acts)
        for _ in range(10):
            with prof.profile("train_step"):
                train_step(model, opt, x)
            prof.step()
    r = load("ops")
    ops = r.get("operators") or {}
    rows = ops.get("by_name", [])
    print("inproc ops: %d operator names" % len(rows))
    for row in rows[:10]:
        print("   %-40.40s calls %5d  self cpu %.6f  self cuda %.6f" %
              (row["name"], row["calls"], row["self_cpu_s"], row["self_cuda_s"]))
    check(any(row["name"] == "aten::addmm" for row in rows), "aten::addmm in the operator table")
    if DEV == "cpu":
        return
    cuda_s = sum(row["self_cuda_s"] for row in rows)
    check(cuda_s > 0, "the operator table has CUDA time (%.6f s)" % cuda_s)
    ga = r.get("gpu_activity") or {}
    print("ops: gpu_activity", json.dumps({k: v for k, v in ga.items() if not isinstance(v, list)}))
    check(ga.get("kernels", 0) > 0, "torch's kernels folded in as CUDA activity (%s)" %
          ga.get("kernels"))


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    print("%s: Python %s, torch %s, device %s%s" % (
        MODE, sys.version.split()[0], torch.__version__, DEV,
        " (%s)" % torch.cuda.get_device_name(0) if DEV != "cpu" else ""), flush=True)
    {"inproc": run_inproc, "ops": run_ops, "plain": run_plain}[MODE]()
    sys.exit(len(FAILS))
