"""flight_check.py - what a user checks in a flight recorder's dump (tests/e2e/run.sh flight).

Usage: flight_check.py DIR STEM [--slow N] [--reason TEXT] [--took MS] [--before-min S]
                       [--before-max S] [--unclean] [--no-trace]
Exits 1 naming what is wrong: the dump's JSON report and trace must say why it was written
(trigger.reason holds TEXT; with --took, its "took X ms" at least 99% of MS, a planted sleep's
length, and under twice it: the recorder's clock rate, estimated as it runs, read a 300 ms
sleep as 299.996 ms in a CI run under TSan), hold the slow step N's 100 ms section when asked,
no section that began before the window ("serve"), the run's metadata, and the trace's first
section must start between --before-min and --before-max seconds before the trigger's instant."""
import argparse
import gzip
import json
import re
import sys


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("stem")
    ap.add_argument("--slow", type=int)
    ap.add_argument("--reason", default="")
    ap.add_argument("--took", type=float)
    ap.add_argument("--before-min", type=float, default=0.0)
    ap.add_argument("--before-max", type=float, default=2.5)
    ap.add_argument("--unclean", action="store_true")
    ap.add_argument("--no-trace", action="store_true")
    a = ap.parse_args()
    path = f"{a.dir}/{a.stem}.json"
    with open(path) as f:
        d = json.load(f)
    run = d["run"]
    tr = run.get("trigger")
    if not tr:
        fail(f"{path}: run.trigger is missing")
    if a.reason not in tr["reason"]:
        fail(f"{path}: trigger reason {tr['reason']!r} lacks {a.reason!r}")
    if a.took is not None:
        took = re.search(r"took ([0-9.]+) ms", tr["reason"])
        if not took or not 0.99 * a.took <= float(took.group(1)) < 2 * a.took:
            fail(f"{path}: trigger reason {tr['reason']!r}: not about {a.took} ms")
    if run["name"] != a.stem:
        fail(f"{path}: run name {run['name']!r}, expected {a.stem!r}")
    if run["clean_end"] == a.unclean:
        fail(f"{path}: clean_end is {run['clean_end']}")
    if run["metadata"].get("model") != "tiny":
        fail(f"{path}: the run's metadata lost model=tiny: {run['metadata']}")
    secs = {s["name"]: s for s in d["sections"]}
    if "serve" in secs:
        fail(f"{path}: 'serve' began before the window and is in it: {secs['serve']}")
    work = secs.get("step work")
    if not work or work["count"] < 50:
        fail(f"{path}: too few 'step work' sections: {work}")
    if a.slow is not None:
        if not (0.095 <= work["max_s"] < 1.0):
            fail(f"{path}: the slow step's section is not there: max {work['max_s']}")
        if f"step {a.slow} took" not in tr["reason"]:
            fail(f"{path}: the trigger names another step: {tr['reason']!r} (slow step {a.slow})")
        if d["steps"]["max_s"] < 0.095:
            fail(f"{path}: no step of 100 ms: {d['steps']['max_s']}")
    if a.no_trace:
        return
    with gzip.open(f"{a.dir}/{a.stem}.trace.json.gz") as f:
        t = json.load(f)
    evs = t["traceEvents"] if isinstance(t, dict) else t
    starts = [e["ts"] for e in evs if e.get("ph") == "X" and e.get("name") == "step work"]
    trig = [e["ts"] for e in evs if e.get("name") == "sonde.trigger"]
    if len(trig) != 1:
        fail(f"trace: {len(trig)} sonde.trigger instants, expected 1")
    before = (trig[0] - min(starts)) / 1e6
    if not (a.before_min <= before <= a.before_max):
        fail(f"trace: the first section starts {before:.3f} s before the trigger, expected "
             f"{a.before_min}..{a.before_max}")
    print(f"ok {a.stem}: {work['count']} sections, the first {before:.3f} s before the trigger; "
          f"{tr['reason']}")


main()
