#!/usr/bin/env python3
"""check.py - end-to-end checks of sonde's report files, as a user would read them.

  check.py demo DIR NAME STEPS BLOCKS      the demo's JSON, CSVs, text and trace
  check.py count JSON SECTION N [--unclean] [--signal NAME] a report holds N instances of
      SECTION (--signal: its warnings say the run ended by SIGNAME at sonde's flush)
  check.py trace FILE.trace.json.gz        the trace parses, and events balance and nest per thread
  check.py tensorboard LOGDIR RUN JSON...   LOGDIR/plugins/profile/RUN holds one worker trace per
                                           report, as TensorBoard's profile plugins find them
"""
import glob
import os
import re
import csv
import gzip
import json
import sys


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def expect(cond, msg):
    if not cond:
        fail(msg)


def load_json(path):
    with open(path) as f:
        return json.load(f)


def section(report, name):
    for s in report["sections"]:
        if s["name"] == name:
            return s
    fail("section %r missing from the report (have %s)" % (name, [s["name"] for s in report["sections"]]))


def check_trace(path):
    with gzip.open(path, "rt") as f:
        trace = json.load(f)
    # the JSON array form; the object form when the run has CPU samples (their stackFrames and
    # samples beside the events)
    if isinstance(trace, dict):
        expect(set(trace) == {"displayTimeUnit", "traceEvents", "stackFrames", "samples"}, "object form keys %s" % sorted(trace))
        frames = trace["stackFrames"]
        expect(all(f.get("parent") is None or f["parent"] in frames for f in frames.values()), "every frame's parent is a frame")
        expect(all(s["sf"] in frames for s in trace["samples"] if "sf" in s), "every sample's frame is a frame")
        expect(all(isinstance(s["ts"], (int, float)) and s["weight"] >= 1 for s in trace["samples"]), "samples have times and weights")
        events = trace["traceEvents"]
    else:
        events = trace
    expect(isinstance(events, list), "trace events are a JSON array")
    procs = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
    expect(len(procs) >= 1, "a process_name metadata event")
    threads = {(e["pid"], e["tid"]) for e in events if e.get("ph") == "M" and e["name"] == "thread_name"}
    per_tid = {}
    for e in events:
        ph = e.get("ph")
        expect(ph in ("M", "X", "i", "C", "B", "E", "s", "f"), "known phase %r" % ph)
        if ph == "X":
            expect(e["dur"] >= 0, "non-negative duration")
            expect((e["pid"], e["tid"]) in threads, "section on a named thread")
            expect(e["pid"] in procs, "section in a named process")
            per_tid.setdefault((e["pid"], e["tid"]), []).append(e)
        if ph == "C":
            expect(isinstance(e["args"]["value"], (int, float)), "counter value is a number")
    # Complete events balance and nest: on each thread, sorted by start (longest first on ties),
    # every event ends before the enclosing one does.
    for key, evs in per_tid.items():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in evs:
            end = e["ts"] + e["dur"]
            while stack and e["ts"] >= stack[-1] - 1e-6:
                stack.pop()
            if stack:
                expect(end <= stack[-1] + 1e-3, "event %s at %s on %s overlaps its parent without nesting" % (e["name"], e["ts"], key))
            stack.append(end)
    return events


def check_tensorboard(logdir, run, reports):
    # The names torch-tb-profiler accepts (its WORKER_PATTERN and NODE_PROCESS_PATTERN, as its
    # source defines them): WORKER[.TIMESTAMP].pt.trace.json[.gz], WORKER = NODE_PID.
    worker_re = re.compile(r"^(.*?)(?:\.\d+)?\.pt\.trace\.json(?:\.gz)?$")
    node_pid_re = re.compile(r"^(.*)_(\d+)$")
    files = sorted(glob.glob(os.path.join(logdir, "plugins", "profile", run, "*")))
    expect(len(files) == len(reports), "%d worker files for %d reports: %s" % (len(files), len(reports), files))
    pids = set()
    for path in files:
        m = worker_re.match(os.path.basename(path))
        expect(m is not None, "%s: not a name TensorBoard reads" % path)
        nm = node_pid_re.match(m.group(1))
        expect(nm is not None, "%s: worker is not NODE_PID" % path)
        pids.add(int(nm.group(2)))
        with gzip.open(path, "rt") as f:
            doc = json.load(f)
        expect(isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list),
               "%s: the object form with traceEvents" % path)
        rep = [load_json(r) for r in reports if load_json(r)["run"]["pid"] == int(nm.group(2))]
        expect(len(rep) == 1, "%s: no report of pid %s" % (path, nm.group(2)))
        rep = rep[0]
        ev = doc["traceEvents"]
        anns = {}
        for e in ev:
            if e.get("cat") == "user_annotation":
                anns[e["name"]] = anns.get(e["name"], 0) + 1
        want = {s["name"]: s["count"] for s in rep["sections"]}
        expect(anns == want, "%s: sections %s, report %s" % (path, anns, want))
        steps = sorted((e for e in ev if e.get("name", "").startswith("ProfilerStep#")),
                       key=lambda e: e["ts"])
        want_steps = rep["steps"]["count"] or 1  # a run without steps is one ProfilerStep#0
        expect(len(steps) == want_steps, "%s: %d ProfilerStep spans, %d steps" % (path, len(steps), rep["steps"]["count"]))
        # every event has a name, every complete event a category (the plugin reads both)
        expect(all("name" in e for e in ev), "%s: an event without a name" % path)
        expect(all(e.get("cat") for e in ev if e.get("ph") == "X"), "%s: an X event without cat" % path)
        gpu = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
        if rep.get("gpu_activity"):
            expect(len(gpu) == rep["gpu_activity"]["kernels"] + rep["gpu_activity"]["memcpy"] +
                   rep["gpu_activity"]["memset"], "%s: GPU events" % path)
            procs = {e["pid"]: e["args"]["name"] for e in ev if e.get("name") == "process_name"}
            expect(all(procs.get(e["pid"]) == "GPU %d" % e["args"]["device"] for e in gpu),
                   "%s: GPU work on the device's process, as PyTorch lays it out" % path)
        for a, b in zip(steps, steps[1:]):
            # in order, never overlapping (a gap between them when steps mark their begin)
            expect(a["ts"] + a["dur"] <= b["ts"] + 0.01, "steps follow one another")
    expect(len(pids) == len(reports), "one worker per process")
    print("tensorboard OK: %d workers in run %s" % (len(files), run))


def check_demo(d, name, steps, blocks):
    stem = "%s/%s" % (d, name)
    r = load_json(stem + ".json")
    expect(r["schema"] == "sonde-report" and r["schema_version"] == 1, "schema and version")
    expect(r["run"]["clean_end"] is True, "clean end")
    expect(r["summary"]["dropped_events"] == 0, "nothing dropped")
    counts = {
        "load": 1, "text_encoding": 1, "embedding_lookup": 1, "encoder_layer": 4,
        "denoising": 1, "denoise_step": steps, "denoise_block": steps * blocks, "decode": 1,
    }
    for sec, n in counts.items():
        expect(section(r, sec)["count"] == n, "%s count %d, expected %d" % (sec, section(r, sec)["count"], n))
    expect(r["summary"]["sections"] == sum(counts.values()), "summary section count")
    expect(r["steps"]["count"] == steps and len(r["steps"]["durations_s"]) == steps, "steps")
    blk = section(r, "denoise_block")
    expect(blk["threads"] == 2, "blocks ran on 2 worker threads")
    expect(blk["flops"] > 0 and blk["flops_per_s"] > 0, "FLOPs recorded on blocks")
    expect(blk["min_s"] <= blk["p50_s"] <= blk["p90_s"] <= blk["p99_s"] <= blk["max_s"], "percentiles ordered")
    expect(abs(blk["total_s"] - blk["mean_s"] * blk["count"]) < 1e-6 * max(1, blk["total_s"]), "mean * count = total")
    units = {t["unit"]: t for t in r["throughput"]}
    expect(units["frames"]["units"] > 0 and units["frames"]["per_s"] > 0, "frames/s")
    expect(units["tokens"]["units"] == 77, "77 tokens encoded")
    enc = section(r, "text_encoding")
    expect(enc["unit"] == "tokens" and enc["units"] == 77, "tokens on text_encoding")
    expect(enc["self_s"] < enc["total_s"], "self time below total for a parent")
    sess = {s["name"]: s for s in r["sessions"]}
    expect(set(sess) == {"setup", "generate"}, "two sessions")
    expect(sess["generate"]["metadata"]["prompt"].startswith("a red fox"), "session metadata")
    gen_secs = {s["name"] for s in sess["generate"]["sections"]}
    expect("denoise_block" in gen_secs and "load" not in gen_secs, "sections grouped by session")
    ctr = {c["name"]: c for c in r["counters"]}
    expect(ctr["latent_rms"]["samples"] == steps, "one counter sample per step")
    expect(any(e["name"] == "video ready" for e in r["events"]), "instant event")
    expect(any(m["owner"] == "load" and m["name"] == "parameters" for m in r["metrics"]), "metric on load")
    expect(r["warnings"] == [], "no warnings: %s" % r["warnings"])

    with open(stem + ".csv") as f:
        rows = list(csv.DictReader(f))
    expect({row["name"] for row in rows} == set(counts), "a CSV row per section name")
    for row in rows:
        expect(int(row["count"]) == counts[row["name"]], "CSV count of %s" % row["name"])
    with open(stem + ".instances.csv") as f:
        inst = list(csv.DictReader(f))
    expect(len(inst) == sum(counts.values()), "a CSV row per instance")
    expect(any("block=" in row["metadata"] for row in inst), "instance metadata in the CSV")

    with open(stem + ".txt") as f:
        txt = f.read()
    expect("denoise_block" in txt and "frames/s" in txt and "Steps: %d" % steps in txt, "text summary")
    lines = [l for l in txt.splitlines() if l.startswith("denoise_block")]
    expect(len(lines) == 1, "one table row per section name")

    ev = check_trace(stem + ".trace.json.gz")
    xs = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "section"]
    expect(len(xs) == sum(counts.values()), "a trace event per section")
    expect(any(e.get("args", {}).get("block") is not None for e in xs), "metadata as trace args")
    expect(sum(1 for e in ev if e.get("ph") == "C" and e["name"] == "latent_rms") == steps, "counter track")
    print("demo reports OK: %d sections, %d trace events" % (len(xs), len(ev)))


def main(argv):
    if len(argv) < 2:
        fail(__doc__)
    cmd = argv[1]
    if cmd == "demo":
        check_demo(argv[2], argv[3], int(argv[4]), int(argv[5]))
    elif cmd == "count":
        r = load_json(argv[2])
        got = section(r, argv[3])["count"]
        expect(got == int(argv[4]), "%s: %d instances of %s, expected %s" % (argv[2], got, argv[3], argv[4]))
        if "--unclean" in argv:
            expect(r["run"]["clean_end"] is False, "an unclean end is reported")
            expect(any("did not end cleanly" in w or "the run ended by SIG" in w
                       for w in r["warnings"]), "a warning says so")
        if "--signal" in argv:  # the signal whose flush it ended at, named (SIGNAL record)
            sig = argv[argv.index("--signal") + 1]
            expect(any("the run ended by SIG%s " % sig in w for w in r["warnings"]),
                   "%s: the warnings name SIG%s: %s" % (argv[2], sig, r["warnings"]))
        print("%s: %d x %s OK" % (argv[2], got, argv[3]))
    elif cmd == "absent":
        r = load_json(argv[2])
        expect(all(s["name"] != argv[3] for s in r["sections"]),
               "%s: section %s should not be in the report" % (argv[2], argv[3]))
        print("%s: no %s OK" % (argv[2], argv[3]))
    elif cmd == "tensorboard":
        check_tensorboard(argv[2], argv[3], argv[4:])
    elif cmd == "trace":
        ev = check_trace(argv[2])
        print("trace OK: %d events" % len(ev))
    else:
        fail("unknown command " + cmd)


if __name__ == "__main__":
    main(sys.argv)
