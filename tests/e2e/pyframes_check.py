"""pyframes_check.py JSON FOLDED SHARES LABEL - the Python frames of a pyshares.py run (e2e
pyframes): the innermost of hot70/warm20/cool10 in each folded stack gives the shares within 5
points (or 4 standard deviations of the run's draws, where wider) of 70/20/10 and of what the
program measured itself; every stack through them reads
<module>;main;FUNCTION;spin outermost first; the JSON's functions say where each is defined, its
Python table gives spin the samples as their innermost Python frame, and its lines table names
spin's loop; NAME.pb.gz and the Chrome trace (when written) carry the same functions."""
import gzip
import json
import math
import os
import sys

report, folded, measured, label = sys.argv[1:5]
want = ("hot70", "warm20", "cool10")
count = dict.fromkeys(want, 0)
total = 0
torn = 0  # samples whose Python frames were read short at the outer end (below)
for line in open(folded):
    stack, n = line.rstrip("\n").rsplit(" ", 1)
    frames = stack.split(";")
    hit = [f for f in frames if f in want]
    if not hit:
        continue
    total += int(n)
    count[hit[-1]] += int(n)
    i = frames.index(hit[-1])
    whole = ["<module>", "main", hit[-1], "spin"]
    if frames[i - 2:i + 2] == whole or frames[i - 2:i + 1] == whole[:3]:
        continue
    # taken in the thread by its SIGPROF handler, a sample can find its native stack unwound
    # no further than the innermost frame and its Python frames read short at the outer end
    # (the thread was interrupted where neither is whole): the process, then the inner part of
    # <module>;main;FUNCTION;spin. Such a stack is shorter, never wrong, and rare (3 of 2006
    # samples when written; docs/stacks.md)
    assert any(frames[1:1 + len(whole) - k] == whole[k:] for k in (1, 2)), (label, stack)
    torn += int(n)
assert total >= 300, (label, total)
assert torn <= 0.01 * total, (label, "torn stacks", torn, total)
got = {k: 100.0 * count[k] / total for k in want}
own = json.loads(open(measured).read().strip().splitlines()[-1])
# within 5 points of what the program measured of itself (process_time around each call), and
# of 70/20/10 when it ran as designed: on a loaded machine its own CPU time shifts (a CI run
# beside the ASan suites: the program measured 61/30.5/8.5 of itself, and sonde sampled
# 61.1/30.0/8.9), and what the samples must match is the time the program took
designed = all(abs(own[k] - share) <= 5 for k, share in zip(want, (70, 20, 10)))
p = json.load(open(report))["profile"]
# the shares' precision is that of the draws (profile.draws: the timers' signals come at the
# kernel's tick, each counting as the periods since the last): within 5 points, or 4 standard
# deviations of the draws these stacks had where that is wider
draws = p["draws"] * total / p["samples"]


def near(got, want):
    return abs(got - want) <= max(5, 400 * math.sqrt(want / 100 * (1 - want / 100) / draws))


for k, share in zip(want, (70, 20, 10)):
    assert near(got[k], own[k]) and (not designed or near(got[k], share)), (
        label, k, got, own, round(draws))
fn = {f["name"]: f for f in p["functions"] if f.get("file", "").endswith("pyshares.py")}
src = open(sys.argv[0].replace("pyframes_check.py", "pyshares.py")).read().splitlines()
for k in want + ("spin", "main"):
    f = fn[k]
    assert f["object"] == f["file"] and src[f["line"] - 1].startswith("def " + k), (label, f)
# the Python table: each function's total is the samples its frame is in, spin owns them
table = {f["name"]: f for f in p["python"] if f["file"].endswith("pyshares.py")}
for k in want:
    assert table[k]["total"] == count[k] and table[k]["own"] <= 0.02 * total, (label, table[k], count)
assert table["spin"]["own"] >= 0.95 * total, (label, table["spin"], total)
loop = [i + 1 for i, s in enumerate(src) if "for i in range(n)" in s or "x ^= i" in s]
lines = [x for x in p.get("lines", []) if x.get("function") == "spin"]
# a sample's line is its innermost frame's: by perf (frame pointers, which stop in libpython)
# mostly spin's; taken in the threads (backtrace: whole native stacks), mostly the
# interpreter's own C code's (its DWARF lines), spin's only now and then (none at all in a CI
# run): there, those spin has are still its loop's
assert (lines or p["method"] != "perf_event") and \
    sum(x["self"] for x in lines if x["line"] in loop) >= 0.8 * sum(x["self"] for x in lines), (
        label, p["method"], lines)
# in process, each call is a section of its function's name: the sections' samples come in the
# same shares, and each section's Python samples are spin's own
secs = {x["name"]: x for x in p.get("sections", [])}
if secs:
    for k, share in zip(want, (70, 20, 10)):
        s = secs[k]
        sh = 100.0 * s["samples"] / total
        assert near(sh, own[k]) and (not designed or near(sh, share)), (
            label, k, s["samples"], total, own, round(draws))
        assert s["python"][0]["name"] == "spin" and s["python"][0]["own_share"] >= 0.9, (label, s)
# pprof (NAME.pb.gz beside the folded stacks): the Python functions with their file and line,
# and as many samples under hot70 as the folded stacks have
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))
import pprof  # noqa: E402
prof = pprof.read(folded[:-len(".folded")] + ".pb.gz")
funcs = {f["name"]: f for f in prof["functions"].values() if f["filename"].endswith("pyshares.py")}
for k in want + ("spin",):
    assert src[funcs[k]["start_line"] - 1].startswith("def " + k), (label, funcs[k])
hot = [fid for fid, f in prof["functions"].items() if f is funcs["hot70"]]
under = sum(sa["values"][0] for sa in prof["samples"]
            if any(fn in hot for loc in sa["locations"] for fn, _ in prof["locations"][loc]))
assert under == table["hot70"]["total"], (label, under, table["hot70"])
# every frame at its own line (FRAMELINES), not the innermost's alone: hot70 at its call of spin
# in (almost) all of its samples, main's lines inside main
at, n_main, in_main = {}, 0, 0
main_def = funcs["main"]["start_line"]
main_end = next(i for i in range(main_def, len(src)) if src[i].startswith("def ") or
                (src[i] and not src[i][0].isspace() and not src[i].startswith("#")))
for sa in prof["samples"]:
    for loc in sa["locations"]:
        for fn, line in prof["locations"][loc]:
            f = prof["functions"][fn]
            if f is funcs["hot70"]:
                at[line] = at.get(line, 0) + sa["values"][0]
            elif f is funcs["main"] and line:
                n_main += sa["values"][0]
                in_main += sa["values"][0] * (main_def < line <= main_end)
call = funcs["hot70"]["start_line"] + 1  # its one line: return spin(7 * n)
assert src[call - 1].strip() == "return spin(7 * n)", (label, call)
assert at.get(call, 0) >= 0.9 * sum(at.values()) > 0, (label, "hot70's lines", at)
assert n_main and in_main == n_main, (label, "main's lines", n_main, in_main)
# the Chrome trace, when written: its stackFrames name the Python functions
trace = folded[:-len(".folded")] + ".trace.json.gz"
if os.path.exists(trace):
    names = {f["name"] for f in json.load(gzip.open(trace))["stackFrames"].values()}
    assert set(want) | {"spin", "main", "<module>"} <= names, (label, sorted(names)[:20])
print("%s: %d samples (%d draws), %s (the program measured %s)" % (
    label, total, round(draws), {k: round(v, 1) for k, v in got.items()},
    {k: round(v, 1) for k, v in own.items()}))
