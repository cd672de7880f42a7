"""pystress_check.py JSON FOLDED LABEL - the samples of pystress.py (e2e pyframes): every folded
line well-formed (frames, a space, a positive count), every Python function named by an
identifier path with a file that exists (or a <pseudo-file>) and a first line inside it, and
the Python frames read for most samples of the program's threads (in process, the sampler's own
thread, which reads them, is sampled too: under ASan at 4999 Hz about 40% of the samples): the
reader held on through the churn. Where off-CPU
periods were followed, each stack well-formed too, each time positive, their sum the total and
no longer than the threads could have waited (the run's duration a thread, with the most
threads pystress keeps alive at once, 8)."""
import json
import os
import re
import sys

report, folded, label = sys.argv[1:4]
total = with_py = sampler = 0
p = json.load(open(report))["profile"]
pyfuncs = {f["name"] for f in p["functions"]
           if f["object"].endswith(".py") or f["object"].startswith("<")}
name = re.compile(r"^[A-Za-z_<][\w.<>]*$")
for f in p["functions"]:
    if f["name"] not in pyfuncs or not (f["object"].endswith(".py") or f["object"].startswith("<")):
        continue
    assert name.match(f["name"]), (label, f)
    if f["object"].startswith("<"):
        continue
    assert os.path.exists(f["file"]), (label, f)
    assert 0 < f["line"] <= sum(1 for _ in open(f["file"], "rb")), (label, f)
for line in open(folded):
    m = re.match(r"^(\S+) ([1-9][0-9]*)$", line.rstrip("\n"))
    assert m, (label, line)
    frames = m.group(1).split(";")
    assert all(frames), (label, line)
    total += int(m.group(2))
    with_py += int(m.group(2)) * any(f in pyfuncs for f in frames)
    sampler += int(m.group(2)) * (frames[1:3] == ["start_thread", "reader"])  # stacks.c's
assert total >= 1000 and total == p["samples"], (label, total, p["samples"])
# of the program's own threads' samples, most with Python frames (86-87% in process under ASan,
# where the sampler's thread had 40% of all: a check on all samples moved with that share)
assert total - sampler >= 1000 and with_py >= 0.7 * (total - sampler), (
    label, with_py, total, sampler)
off = p.get("off_cpu")
if off:
    run_s = json.load(open(report))["run"]["duration_s"]
    assert 0 <= off["seconds"] <= 8 * run_s, (label, off["seconds"], run_s)
    assert abs(sum(x["seconds"] for x in off["stacks"]) - off["seconds"]) < 1e-6 or \
        len(off["stacks"]) == 100, (label, off["seconds"])
    def folded(name):  # a name as the folded stacks write it: their separators replaced
        return re.sub(r"[; \n]", "_", name)
    for x in off["stacks"]:
        frames = x["stack"].split(";")
        assert all(frames) and x["seconds"] > 0 and x["periods"] >= 1, (label, x)
        assert frames[-1] == folded(x["waits_in"]), (label, x)
        assert "python" not in x or folded(x["python"]) in frames, (label, x)
    label += ", off-CPU %.1f s in %d periods" % (off["seconds"], off["periods"])
print("%s: %d samples (%d the sampler's own), %d with Python frames, %d Python functions, all "
      "well-formed" % (label, total, sampler, with_py, len(pyfuncs)))
