"""pyoffcpu.py [OUT_DIR] - a Python program whose threads block for known times (e2e pyframes,
off-CPU time; docs/stacks.md): `sleeper` sleeps 0.3 s twice, `waiter` waits 0.5 s on an empty
queue (Queue.get with a timeout), `locker` waits on a lock the main thread holds while it spins
for 0.4 s of CPU time (from when `locker` is about to take it); then the main thread joins
them. With OUT_DIR it samples itself in process through the sonde package (999 Hz, reports named "offcpu" there; test_sonde.py);
without, it is sampled from outside (`sonde run`)."""
import queue
import sys
import threading
import time


def sleeper():
    for _ in range(2):
        time.sleep(0.3)


def waiter(q):
    try:
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
                             "formats": "json,txt"}):
            main()
    else:
        main()
