"""Threads on the smallest stacks Python allows (threading.stack_size(32768)), deep in calls that
go through C (map and sum call back into Python, each level taking C stack), where sonde's
handler, which runs on the sampled thread's stack, has little room left. With a duration of 0
it makes one call of that depth and exits: the test finds the depth the program alone reaches.
With OUT_DIR it samples itself in process through the sonde package (sample_hz 999, reports
"tiny" in OUT_DIR; SONDE_SAMPLE_IN_THREAD=1 takes the samples in its threads).
Usage: pytinystack.py DEPTH SECONDS [OUT_DIR]; prints "ok" when its threads ended.
pytinystack.py --alone prints the deepest even depth this interpreter reaches alone (each
depth tried in a process of its own, from 12 up, until one dies)."""
import subprocess
import sys
import threading
import time

threading.stack_size(32768)


def leaf():
    x = 0
    for i in range(20000):
        x += i
    return x


def deep(n):
    if n == 0:
        return leaf()
    return sum(map(lambda _: deep(n - 1), [0]))


def work(depth, seconds):
    t0 = time.process_time()
    deep(depth)
    while time.process_time() - t0 < seconds:
        deep(depth)


def run(depth, seconds):
    threads = [threading.Thread(target=work, args=(depth, seconds)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def alone():
    d = 10
    while d < 200 and subprocess.run([sys.executable, __file__, str(d + 2), "0"],
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL).returncode == 0:
        d += 2
    return d


if __name__ == "__main__" and sys.argv[1] == "--alone":
    print(alone())
elif __name__ == "__main__":
    depth, seconds = int(sys.argv[1]), float(sys.argv[2])
    if len(sys.argv) > 3:
        import sonde
        with sonde.Profiler({"name": "tiny", "output_dir": sys.argv[3], "sample_hz": 999,
                             "formats": ["json", "folded"]}):
            run(depth, seconds)
    else:
        run(depth, seconds)
    print("ok")
