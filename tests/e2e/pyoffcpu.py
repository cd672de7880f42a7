"""pyoffcpu.py [OUT_DIR [MAX_SECTIONS]] - a Python program whose threads block for known times
(e2e pyframes, off-CPU time; docs/stacks.md): `sleeper` sleeps 0.3 s twice, `waiter` waits 0.5 s
on an empty queue (Queue.get with a timeout), `locker` waits on a lock the main thread holds
while it spins for 0.4 s of CPU time (from when `locker` is about to take it); then the main
thread joins them. With OUT_DIR it samples itself in process through the sonde package (999 Hz,
reports named "offcpu" there; test_sonde.py), each sleep in a section "nap" and the queue's
wait in one "fetch", the report holding MAX_SECTIONS sections (report_max_sections; default 0,
all); without, it is sampled from outside (`sonde run`)."""
import contextlib
import queue
import sys
import threading
import time

PROF = None  # the sonde.Profiler in process


def section(name):
    return PROF.profile(name) if PROF else contextlib.nullcontext()


def sleeper():
    for _ in range(2):
        with section("nap"):
            time.sleep(0.3)


def waiter(q):
    try:
        with section("fetch"):
            q.get(timeout=0.5)
    except queue.Empty:
        pass


def locker(lock, ready):
    ready.set()  # the main thread spins from here: this wait does not hang on when it started
    with lock:
        pass


def spin(seconds):
    start = time.process_time()
    x = 0
    while time.process_time() - start < seconds:
        x += 1
    return x


def main():
    lock, ready = threading.Lock(), threading.Event()
    lock.acquire()
    threads = [threading.Thread(target=sleeper), threading.Thread(target=waiter, args=(queue.Queue(),)),
               threading.Thread(target=locker, args=(lock, ready))]
    for t in threads:
        t.start()
    ready.wait()
    spin(0.4)
    lock.release()
    for t in threads:
        t.join()


if __name__ == "__main__":
    if len(sys.argv) > 1:
        import sonde
        with sonde.Profiler({"name": "offcpu", "output_dir": sys.argv[1], "sample_hz": 999,
                             "formats": "json,txt",
                             "report_max_sections": int(sys.argv[2]) if len(sys.argv) > 2 else 0
                             }) as PROF:
            main()
    else:
        main()
