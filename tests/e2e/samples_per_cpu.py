"""samples_per_cpu.py RUN.json LOW HIGH LABEL - the run's CPU samples against the CPU time of
its process tree (rusage, in the run's metadata) at its sampling rate: fails unless LOW <= ratio
<= HIGH (a sample lost or counted twice moves it), else prints LABEL with the figures (e2e
pyframes)."""
import json
import sys

r = json.load(open(sys.argv[1]))
low, high, label = float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
p, meta = r["profile"], r["run"]["metadata"]
cpu = float(meta["cpu_user_s"]) + float(meta["cpu_system_s"])
ratio = p["samples"] / (cpu * p["hz"])
assert low <= ratio <= high, (label, "samples against the tree's CPU time", p["samples"], cpu, ratio)
print("%s: %d samples for %.2f s of CPU (x%.2f), %s"
      % (label, p["samples"], cpu, ratio, p["method"]))
