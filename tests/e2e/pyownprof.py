"""A program with a SIGPROF profiler of its own (setitimer(ITIMER_PROF) and a handler, as vmprof
and other statistical profilers do), set after sonde's sampling in its threads began: its
handler must get its own timer's signals alone, sonde's samples in its threads must go on (with
its Python frames: own_loop), and the timer it leaves running as it exits must not end it
(sonde's writing at exit uses CPU after Python has restored SIGPROF's default). Prints how many
times its handler ran and how many its timer alone accounts for."""
import signal
import sys
import time

calls = 0


def handler(sig, frame):
    global calls
    calls += 1


def own_loop(seconds):
    t0 = time.process_time()
    x = 0
    while time.process_time() - t0 < seconds:
        for i in range(2000):  # user time, which the counters count
            x += i
    return time.process_time() - t0


time.sleep(0.3)  # the sampling in its threads has begun by now
signal.signal(signal.SIGPROF, handler)
signal.setitimer(signal.ITIMER_PROF, 0.01, 0.01)
cpu = own_loop(1.0)
signal.setitimer(signal.ITIMER_PROF, 0, 0)
print(f"calls {calls} own {cpu / 0.01:.0f}")
# left running at exit: 20 ms of CPU is more than Python's finalization takes after it restores
# SIGPROF's default (with 1 ms, the program alone was ended by it now and then), less than sonde's
# writing of the samples at exit
signal.setitimer(signal.ITIMER_PROF, 0.02, 0.02)
sys.exit(0)
