"""pyshares.py SECONDS|rROUNDS [OUT_DIR [HZ]] - a pure-Python program whose functions take known
shares of its CPU time: hot70, warm20 and cool10 run the same loop 7, 2 and 1 times as long
(docs/stacks.md, e2e pyframes). It runs for SECONDS of CPU time, or ROUNDS rounds of the three
(a fixed amount of work, for bench_sample), measures the shares itself (process_time around each
call) and prints them as one JSON line. With OUT_DIR it samples itself in process through the
sonde package (sample_hz HZ, default 999, reports in OUT_DIR, name "inproc"; each call in a
section of its function's name); without, it is
sampled from outside (`sonde run`). PYSHARES_IDLE_THREADS=N starts N threads that wait on an
event all along (a program with many threads, most idle)."""
import json
import os
import sys
import threading
import time


def spin(n):
    x = 0
    for i in range(n):  # small ints only: every iteration costs the same
        x ^= i
    return x


def hot70(n):
    return spin(7 * n)


def warm20(n):
    return spin(2 * n)


def cool10(n):
    return spin(n)


def main(amount, prof=None):
    used = {"hot70": 0.0, "warm20": 0.0, "cool10": 0.0}
    done = threading.Event()
    idle = [threading.Thread(target=done.wait)
            for _ in range(int(os.environ.get("PYSHARES_IDLE_THREADS", "0")))]
    for t in idle:
        t.start()
    rounds = int(amount[1:]) if amount.startswith("r") else -1
    end = time.process_time() + (float(amount) if rounds < 0 else 0)
    while (rounds < 0 and time.process_time() < end) or rounds > 0:
        rounds -= 1
        for f in (hot70, warm20, cool10):
            t = time.process_time()
            if prof:  # in process: each call in a section of its name
                with prof.profile(f.__name__):
                    f(100000)
            else:
                f(100000)
            used[f.__name__] += time.process_time() - t
    done.set()
    for t in idle:
        t.join()
    total = sum(used.values())
    print(json.dumps({k: 100.0 * v / total for k, v in used.items()}))


if __name__ == "__main__":
    if len(sys.argv) > 2:
        import sonde
        hz = int(sys.argv[3]) if len(sys.argv) > 3 else 999
        with sonde.Profiler({"name": "inproc", "output_dir": sys.argv[2], "sample_hz": hz,
                             "formats": ["json"]}) as prof:
            main(sys.argv[1], prof)
    else:
        main(sys.argv[1])
