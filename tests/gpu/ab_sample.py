#!/usr/bin/env python3
"""ab_sample.py SONDE PYTHON [ROUNDS] [--in-process] - what sampling a Python program at 999 Hz costs, measured
as alternating rounds (bench_sample's least-of-three cannot tell the ways apart on a machine whose
runs drift by 20%): each round runs the work alone, under `sonde run` with no samples, sampled from
outside (--sample-outside) and sampled as `sonde run` does by default (in the program's threads),
in a new order each round, and takes each command's process-tree CPU time (RUSAGE_CHILDREN).
With --in-process, the ways of a program sampling itself (sonde.Profiler, the sonde package on
PYTHONPATH): sample_hz 0, 999 read by the sampler (perf, a wake-up a sample), and 999 taken in
its threads (SONDE_SAMPLE_IN_THREAD=1), each against the same round's sample_hz 0.
Prints each way's median and least time, and the median over rounds of its ratio to the same
round's unsampled run: drift between rounds cancels in the ratio. The work: tests/e2e/pyshares.py
r50 (make bench's bench_sample Python work). Used on the lent GPU machine (docs/stacks.md, "What
it costs"); it asserts nothing."""
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: ab_sample.py SONDE PYTHON [ROUNDS]")
    inproc = "--in-process" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--in-process"]
    sonde, py = args[0], args[1]
    rounds = int(args[2]) if len(args) > 2 else 12
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e", "pyshares.py")
    out = tempfile.mkdtemp(prefix="ab_sample.")

    def run(hz, *flags):
        return [sonde, "run", "--quiet", "--format", "none", "-o", out, "--name", "ab",
                "--sample-hz", hz, *flags, "--", py, script, "r50"]

    env = dict(os.environ, SONDE_SAMPLE_PYTHON="1")
    ways = {
        "alone": [py, script, "r50"],
        "run, no samples": run("0", "--sample-outside"),
        "run --sample-outside": run("999", "--sample-outside"),
        "run (default)": run("999"),
    }
    base_way = "run, no samples"
    if inproc:
        ways = {
            "sample_hz 0": [py, script, "r50", out, "0"],
            "999, by the sampler": [py, script, "r50", out, "999"],
            "999, in its threads": ["/usr/bin/env", "SONDE_SAMPLE_IN_THREAD=1", py, script, "r50",
                                    out, "999"],
        }
        base_way = "sample_hz 0"
    times = {k: [] for k in ways}
    for r in range(rounds):
        order = list(ways)
        random.Random(r).shuffle(order)
        for k in order:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run(ways[k], env=env, check=True, stdout=subprocess.DEVNULL)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            times[k].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    base = times[base_way]
    print("%d rounds, %s, process-tree CPU s" % (rounds, py))
    for k, t in times.items():
        ratios = [a / b - 1 for a, b in zip(t, base)]
        print("  %-22s median %.3f  least %.3f  over %s, median of rounds %+.1f%%" %
              (k, statistics.median(t), min(t), base_way, 100 * statistics.median(ratios)))


if __name__ == "__main__":
    main()
