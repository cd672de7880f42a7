"""sqlite_check.py - docs/formats.md's example queries against databases whose answers are
planted (tests/e2e/planted.c), for the e2e case `sqlite`. The queries are read from the page
("-- QN:" opens each), so the documented queries are the tested ones.

    python3 sqlite_check.py DOCS planted DB JSON INSTANCES_CSV GPU SAMPLES
        one planted run: every query's planted answer; GPU (1/0): the fake CUPTI made its
        kernels; SAMPLES (1/0): its CPU was sampled
    python3 sqlite_check.py DOCS ranks DB INSTANCES_CSV...
        the four ranks of a planted job merged (`sonde merge -o X.sqlite`), rank r's instances
        CSV the r-th
    python3 sqlite_check.py DOCS same DB_A DB_B
        two databases of one run hold the same sections with the same nesting (one written with
        every section held, one from a model that folds them)
    python3 sqlite_check.py DOCS report DB JSON
        Q3 equals the run's JSON report (count and total of every section name)
Prints a line per check; exits 1 with the failed assertion.
"""
import csv
import json
import re
import sqlite3
import sys


def queries(docs):
    """{N: sql} of the page's ```sql blocks, by their "-- QN:" line."""
    with open(docs) as f:
        text = f.read()
    out = {}
    for block in re.findall(r"```sql\n(.*?)```", text, re.S):
        m = re.match(r"-- Q(\d+):", block)
        if m:
            out[int(m.group(1))] = block
    assert sorted(out) == list(range(1, 11)), "docs/formats.md: queries %s" % sorted(out)
    return out


def run(db, sql):
    return db.execute(sql).fetchall()


def durations_ns(path, name):
    """The durations of section name in an instances CSV, in ns (its seconds have 9 digits)."""
    return sorted(round(float(r["duration_s"]) * 1e9) for r in csv.DictReader(open(path))
                  if r["name"] == name)


def nearest_rank_p99(values):
    return values[(99 * len(values) + 99) // 100 - 1]


def check_report(q, db, report):
    rows = {r[0]: r for r in run(db, q[3])}
    for s in report["sections"]:
        got = rows.get(s["name"])
        assert got and got[1] == s["count"], ("Q3 count", s["name"], got, s["count"])
        assert abs(got[2] - s["total_s"]) <= 1e-9 * max(1, s["total_s"]), \
            ("Q3 total", s["name"], got[2], s["total_s"])
    assert len(rows) == len(report["sections"]), (sorted(rows), len(report["sections"]))
    print("Q3: %d section names, counts and totals as the JSON report's" % len(rows))


def planted(q, db, report, instances, gpu, samples):
    top = run(db, q[1])
    assert len(top) == 5 and top[0][1] == 6 and top[0][2] >= 1000, ("Q1", top)
    print("Q1: the slowest step is step 6 (%.1f ms; 1 s planted)" % top[0][2])
    p99 = run(db, q[2])
    want = nearest_rank_p99(durations_ns(instances, "forward")) / 1e6
    assert len(p99) == 1 and abs(p99[0][1] - want) < 1e-9 and p99[0][1] >= 2, ("Q2", p99, want)
    print("Q2: forward's p99 %.3f ms, as the instances CSV's" % p99[0][1])
    check_report(q, db, report)
    inside = run(db, q[4])
    assert [(r[0], r[1], r[2]) for r in inside] == [(6, 2, "attention")], ("Q4", inside)
    print("Q4: batch 6's forward is in step 6 and holds attention")
    kernels = run(db, q[5])
    steps = run(db, q[6])
    if gpu:
        assert kernels == [("gemm_kernel", 10, 3000.0), ("attn_kernel", 10, 1000.0)], \
            ("Q5", kernels)
        print("Q5: under forward, gemm_kernel 10 x 300 us and attn_kernel 10 x 100 us")
        assert [r[0] for r in steps] == list(range(10)), ("Q6 steps", steps)
        for step, device, stream, step_ns, busy, idle in steps:
            assert (device, stream, busy, idle) == (0, 7, 600000, step_ns - 600000), \
                ("Q6", step, device, stream, busy, idle)
        print("Q6: every step's GPU 0 stream 7 busy 600 us exactly, idle the rest")
    else:
        assert kernels == [] and steps == [], ("Q5/Q6 without GPU work", kernels, steps)
    hot = run(db, q[7])
    if samples:
        assert hot and hot[0][0].startswith("hot_spin") and hot[0][2] == 0, ("Q7", hot)  # or its clone
        print("Q7: steps 4-5's samples are in hot_spin first (%d samples)" % hot[0][3])
    loss = run(db, q[8])
    assert loss == [(i, 1.0 / (i + 1)) for i in range(10)], ("Q8", loss)
    print("Q8: the loss at each step's end, 1/(step+1) exactly")
    assert run(db, q[9]) == [], "Q9: operators in a run without any"
    slow = run(db, q[10])
    assert [r[0] for r in slow] == list(range(10)), ("Q10", slow)


def ranks(q, db, instances):
    runs = run(db, "SELECT rank, label, world_size FROM runs ORDER BY rank")
    assert [(r[0], r[2]) for r in runs] == [(r, 4) for r in range(4)], ("runs", runs)
    assert all(r[1].startswith("rank %d (" % r[0]) for r in runs), ("labels", runs)
    top = run(db, q[1])
    assert top[0][1] == 6 and top[0][2] >= 1000, ("Q1 merged", top)
    print("Q1: the slowest step is step 6 (rank %d's, %.1f ms)" % (top[0][0], top[0][2]))
    p99 = run(db, q[2])
    assert [r[0] for r in p99] == [0, 1, 2, 3], ("Q2 ranks", p99)
    for (rank, ms), path in zip(p99, instances):
        want = nearest_rank_p99(durations_ns(path, "forward")) / 1e6
        assert abs(ms - want) < 1e-9 and ms >= 2 + 40 * rank, ("Q2", rank, ms, want)
    assert [r[1] for r in p99] == sorted(r[1] for r in p99), ("Q2 not by rank", p99)
    print("Q2: forward's p99 per rank " + ", ".join("%.1f ms" % r[1] for r in p99) +
          ", each its instances CSV's")
    slow = run(db, q[10])
    assert [(r[0], r[1]) for r in slow] == [(s, 3) for s in range(10)], ("Q10", slow)
    assert all(r[3] > 0 for r in slow), ("Q10 behind", slow)
    print("Q10: every step's slowest rank is rank 3, %.1f-%.1f ms behind the fastest" %
          (min(r[3] for r in slow), max(r[3] for r in slow)))


def nesting(db):
    """Every section as (run, thread, name, depth, start, end, its parent's name and start)."""
    return sorted(run(db, """
        SELECT s.run_id, s.thread, n.name, s.depth, s.start_ns, s.end_ns, pn.name, p.start_ns
        FROM sections s JOIN names n ON n.name_id = s.name_id
        LEFT JOIN sections p ON p.id = s.parent LEFT JOIN names pn ON pn.name_id = p.name_id"""),
        key=lambda r: tuple("" if v is None else str(v) for v in r))


def main():
    docs, mode, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    q = queries(docs)
    db = sqlite3.connect("file:%s?mode=ro" % args[0], uri=True)
    version = run(db, "PRAGMA user_version")[0][0]
    assert version == 1 == run(db, "SELECT version FROM sonde_schema")[0][0], version
    if mode == "planted":
        planted(q, db, json.load(open(args[1])), args[2], args[3] == "1", args[4] == "1")
    elif mode == "ranks":
        ranks(q, db, args[1:])
    elif mode == "report":
        check_report(q, db, json.load(open(args[1])))
    elif mode == "same":
        other = sqlite3.connect("file:%s?mode=ro" % args[1], uri=True)
        a, b = nesting(db), nesting(other)
        assert a == b and all(r[6] is not None for r in a if r[3] > 0), \
            ("the nesting differs", len(a), len(b), [x for x in a if x not in b][:3])
        print("%d sections, each with its parent, the same held or folded" % len(a))
    else:
        sys.exit("sqlite_check.py: unknown mode %s" % mode)


if __name__ == "__main__":
    main()
