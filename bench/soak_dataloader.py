"""soak_dataloader.py [RUNS] - issue 62's soak: RUNS (100) runs of
tests/python/dataloader_workers.py (a DataLoader with two forked workers, each item in a
"load_item" section, 2 epochs of 64 items),
persistent_workers alternately on and off, beside two busy loops, on the interpreter that has
torch (make soak runs it through tests/python/run_torch.sh). A run counts as hung past 120 s. It
checks each run: exit 0 and "done" printed, every worker's file there (2 persistent workers, 4
otherwise) ended cleanly or by the SIGTERM torch sends persistent workers (its SIGNAL record:
every event until the signal written), and the 128 items' sections in them all. Prints a line
per failure and the totals; exit 1 when any run failed."""
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

import sonde

HERE = os.path.dirname(os.path.abspath(__file__))
PROG = os.path.join(HERE, "..", "tests", "python", "dataloader_workers.py")


def check_run(d, persistent, out):
    """What went wrong in one run (an empty list: nothing)."""
    wrong = []
    if out.returncode != 0 or out.stdout != "done\n":
        wrong.append("exit %d, printed %r: %s" % (out.returncode, out.stdout, out.stderr[-300:]))
    workers = sorted(glob.glob(os.path.join(d, "dl-pid*.sonde")))
    want = 2 if persistent else 4
    if len(workers) != want:
        wrong.append("%d worker file(s), %d expected" % (len(workers), want))
    items = 0
    for w in workers:
        rdir = os.path.join(d, "r")
        if sonde.cli(["export", w, "--format", "json", "-o", rdir, "--quiet"]) != 0:
            wrong.append("%s cannot be read" % os.path.basename(w))
            continue
        with open(os.path.join(rdir, os.path.basename(w)[:-len(".sonde")] + ".json")) as f:
            rep = json.load(f)
        items += sum(s["count"] for s in rep["sections"] if s["name"] == "load_item")
        if any("did not end cleanly" in x for x in rep.get("warnings", [])):
            wrong.append("%s: %s" % (os.path.basename(w), rep["warnings"]))  # how, unknown
    if items != 128:
        wrong.append("%d of the 128 items' sections in the workers' files" % items)
    return wrong


def main(runs):
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    failed = hung = 0
    t0 = time.monotonic()
    try:
        for i in range(runs):
            persistent = i % 2 == 0
            with tempfile.TemporaryDirectory() as d:
                try:
                    out = subprocess.run([sys.executable, PROG, d, "1" if persistent else "0"],
                                         capture_output=True, text=True, timeout=120)
                except subprocess.TimeoutExpired:
                    hung += 1
                    failed += 1
                    print("run %d (persistent %d): hung past 120 s" % (i, persistent))
                    continue
                wrong = check_run(d, persistent, out)
            if wrong:
                failed += 1
                print("run %d (persistent %d): %s" % (i, persistent, "; ".join(wrong)))
    finally:
        for b in busy:
            b.kill()
            b.wait()
    print("soak: %d DataLoader runs (persistent workers in half) beside two busy loops on %s, "
          "%.0f s: %d failed, %d hung" % (runs, sys.executable, time.monotonic() - t0, failed,
                                         hung))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 100))
