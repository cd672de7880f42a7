"""pyshares.py SECONDS [OUT_DIR] - a pure-Python program whose functions take known shares of its
CPU time: hot70, warm20 and cool10 run the same loop 7, 2 and 1 times as long (docs/stacks.md,
e2e pyframes). It measures the shares itself (process_time around each call) and prints them as
one JSON line. With OUT_DIR it samples itself in process through the sonde package (sample_hz
999, reports in OUT_DIR, name "inproc"); without, it is sampled from outside (`sonde run`)."""
import json
import sys
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


def main(seconds):
    used = {"hot70": 0.0, "warm20": 0.0, "cool10": 0.0}
    end = time.process_time() + seconds
    while time.process_time() < end:
        for f in (hot70, warm20, cool10):
            t = time.process_time()
            f(3000)
            used[f.__name__] += time.process_time() - t
    total = sum(used.values())
    print(json.dumps({k: 100.0 * v / total for k, v in used.items()}))


if __name__ == "__main__":
    seconds = float(sys.argv[1])
    if len(sys.argv) > 2:
        import sonde
        with sonde.Profiler({"name": "inproc", "output_dir": sys.argv[2], "sample_hz": 999,
                             "formats": ["json"]}):
            main(seconds)
    else:
        main(seconds)
