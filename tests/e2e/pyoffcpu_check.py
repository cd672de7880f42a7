"""pyoffcpu_check.py JSON LABEL - the off-CPU time of pyoffcpu.py (e2e pyframes): each thread's
planted wait found under its Python function, with what it waited in, at least as long as
planted and no longer than the run; the CPU samples still the spinning main thread's. Where
the context-switch event is refused (not root, kernel.perf_event_paranoid 2), the report has no
off_cpu and the test says so."""
import json
import os
import sys

report, label = sys.argv[1:3]
d = json.load(open(report))
p = d["profile"]
off = p.get("off_cpu")
paranoid = int(open("/proc/sys/kernel/perf_event_paranoid").read())
if off is None:
    assert p["method"] != "perf_event" or (os.geteuid() != 0 and paranoid > 1), (label, p["method"])
    print("%s: off-CPU not followed here (perf_event_paranoid %d, not root), as documented" % (
        label, paranoid))
    sys.exit(0)
run_s = d["run"]["duration_s"]


def waited(fn, leaf_words):
    stacks = [x for x in off["stacks"] if fn in x["stack"].split(";")]
    secs = sum(x["seconds"] for x in stacks)
    assert stacks, (label, fn, off["stacks"][:5])
    best = max(stacks, key=lambda x: x["seconds"])
    assert any(w in best["waits_in"] for w in leaf_words), (label, fn, best)
    return secs, best


sleep_s, sleep_x = waited("sleeper", ["nanosleep", "sleep"])
queue_s, queue_x = waited("waiter", ["futex", "sem", "lll"])
lock_s, lock_x = waited("locker", ["futex", "sem", "lll"])
# at least the planted waits (less the few microseconds between a call and its switch: 5%),
# the lock's at least most of the main thread's 0.4 s of spinning; none longer than the run
assert 0.95 * 0.6 <= sleep_s <= run_s, (label, sleep_s, run_s)
assert 0.95 * 0.5 <= queue_s <= run_s and "Queue.get" in queue_x["stack"], (label, queue_s, queue_x)
assert 0.3 <= lock_s <= run_s, (label, lock_s, run_s)
assert sleep_x["python"] == "sleeper", (label, sleep_x)
assert off["seconds"] >= sleep_s + queue_s + lock_s - 1e-6, (label, off["seconds"])
# the CPU samples: the spinning main thread's above all (its 0.4 s of CPU; the interpreter's
# start and imports take the rest, more of it on a loaded machine), no wait among them
assert p["python"][0]["name"] == "spin", (label, p["python"][:3])
spin = p["python"][0]["own"]
assert spin >= 0.4 * p["samples"], (label, spin, p["samples"])
# by section: in process the sleeps are in sections "nap" and the queue's wait in one "fetch"
# (pyoffcpu.py), each period under the innermost section open on its thread when it blocked;
# from outside the program opens none
secs = {x["name"]: x for x in off["sections"]}
if any(x["name"] == "nap" for x in d["sections"]):
    # (short waits there too, the GIL's: their stacks may lack the Python frames)
    assert 0.95 * 0.6 <= secs["nap"]["seconds"] <= run_s and secs["nap"]["periods"] >= 2, (
        label, secs)
    assert 0.95 * 0.5 <= secs["fetch"]["seconds"] <= run_s, (label, secs)
    assert set(secs) <= {"nap", "fetch"}, (label, secs)  # the locker and main wait in none
    assert abs(off["in_sections_seconds"] - sum(x["seconds"] for x in off["sections"])) < 1e-6
    text = open(report[:-len(".json")] + ".txt").read()
    assert "Off-CPU time by the innermost section open" in text and "\n  nap " in text, (label,)
    label += ", by section (nap %.2f s, fetch %.2f s)" % (secs["nap"]["seconds"],
                                                         secs["fetch"]["seconds"])
else:
    assert not secs and off["in_sections_seconds"] == 0, (label, secs)
# NAME.offcpu.folded: the same stacks, microseconds each, summing to the total
folded = report[:-len(".json")] + ".offcpu.folded"
us = 0
for line in open(folded):
    stack, n = line.rstrip("\n").rsplit(" ", 1)
    assert stack.split(";")[0] and int(n) > 0, (label, line)
    us += int(n)
assert abs(us - off["seconds"] * 1e6) <= len(off["stacks"]) + 1 or len(off["stacks"]) == 100, (
    label, us, off["seconds"])
# NAME.pb.gz: the same periods as pprof's off_cpu sample type, each stack a sample of its own
# (CPU values 0) with every frame, the CPU time still the default type; the sleeper's stacks
# hold its time (the JSON names the 100 longest stacks, the profile all of them)
pb = report[:-len(".json")] + ".pb.gz"
if os.path.exists(pb):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import pprof  # tests/e2e/pprof.py, the tests' own reader
    prof = pprof.read(pb)
    assert prof["types"] == [("samples", "count"), ("cpu", "nanoseconds"),
                             ("off_cpu_periods", "count"), ("off_cpu", "nanoseconds")] and \
        prof["default_type"] == "cpu", (label, prof["types"], prof["default_type"])
    offs = [sa for sa in prof["samples"] if sa["values"][3]]
    cpus = [sa for sa in prof["samples"] if sa["values"][1]]
    assert all(sa["values"][:2] == [0, 0] and sa["values"][2] > 0 for sa in offs) and \
        all(sa["values"][2:] == [0, 0] for sa in cpus), (label, prof["samples"][:3])
    assert sum(sa["values"][2] for sa in offs) == off["periods"], (label, off["periods"])
    assert abs(sum(sa["values"][3] for sa in offs) - off["seconds"] * 1e9) <= 1e3, (label,)

    def names(sa):
        return [prof["functions"][fn]["name"] for loc in sa["locations"]
                for fn, _ in prof["locations"][loc]]
    slept = sum(sa["values"][3] for sa in offs if "sleeper" in names(sa)) / 1e9
    assert slept >= sleep_s - 1e-6, (label, slept, sleep_s)
    assert any(names(sa)[0] == sleep_x["waits_in"] for sa in offs if "sleeper" in names(sa)), (
        label, sleep_x["waits_in"])
    # every frame at its line (FRAMELINES): the sleeper's time at its time.sleep(0.3), the
    # waiter's at its q.get(timeout=0.5)
    src = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "pyoffcpu.py")).read()
    src = src.split("\n")
    for fname, text in (("sleeper", "time.sleep(0.3)"), ("waiter", "q.get(timeout=0.5)")):
        at, all_ns = 0, 0
        for sa in offs:
            for loc in sa["locations"]:
                for fn, line in prof["locations"][loc]:
                    f = prof["functions"][fn]
                    if f["name"] == fname and f["filename"].endswith("pyoffcpu.py"):
                        all_ns += sa["values"][3]
                        at += sa["values"][3] * (line > 0 and src[line - 1].strip() == text)
        assert all_ns and at >= 0.99 * all_ns, (label, fname, at, all_ns)
    label += ", the pprof off_cpu samples"
# NAME.trace.json.gz (when written): the periods as "blocked: ..." slices on their threads,
# the sleeper's two 0.3 s sleeps among them
trace = report[:-len(".json")] + ".trace.json.gz"
if os.path.exists(trace):
    import gzip
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import check  # tests/e2e/check.py: every slice on a named thread of a named process, nested
    check.check_trace(trace)
    t = json.load(gzip.open(trace))
    ev = [e for e in (t["traceEvents"] if isinstance(t, dict) else t) if e.get("cat") == "off_cpu"]
    assert all(e["name"].startswith("blocked: ") and e["dur"] > 0 and e["args"]["stack"]
               for e in ev), (label, ev[:3])
    slept = [e for e in ev if e["args"].get("python") == "sleeper" and e["dur"] >= 0.95 * 0.3e6]
    assert len(slept) == 2 and slept[0]["tid"] == slept[1]["tid"], (label, slept)
    label += ", %d trace slices" % len(ev)
    # NAME.pftrace (when written): the same slices, on "thread TID off-CPU" tracks
    pf = report[:-len(".json")] + ".pftrace"
    if os.path.exists(pf):
        import pftrace  # tests/e2e/pftrace.py, the tests' own reader
        t = pftrace.read(pf)
        sl = [x for x in t["slices"] if x["cat"] == "off_cpu"]
        assert len(sl) == len(ev), (label, len(sl), len(ev))
        for a, b in zip(sorted(x["dur"] / 1e3 for x in sl), sorted(e["dur"] for e in ev)):
            assert abs(a - b) <= 0.001, (label, a, b)
        assert all(pftrace.track_name(t, x["track"]).endswith(" off-CPU") and
                   x["name"].startswith("blocked: ") for x in sl), (label, sl[:2])
        label += ", the same in the pftrace"
# NAME.html (when written): the table, the sleeper's row among the first
page = report[:-len(".json")] + ".html"
if os.path.exists(page):
    html = open(page).read()
    at = html.find('<table id="off-cpu-table"')
    assert at > 0, (label, "no off-CPU table in the HTML report")
    rows = html[at:html.index("</table>", at)].split("<tr>")[2:]
    assert 0 < len(rows) <= 20 and any("<td>sleeper</td>" in r for r in rows[:5]), (label, rows[:5])
    label += ", the HTML table"
print("%s: off-CPU %.2f s in %d periods; sleeper %.2f s in %s, waiter %.2f s in %s (%s), "
      "locker %.2f s in %s" % (label, off["seconds"], off["periods"], sleep_s,
                                sleep_x["waits_in"], queue_s, queue_x["waits_in"],
                                queue_x["python"], lock_s, lock_x["waits_in"]))
