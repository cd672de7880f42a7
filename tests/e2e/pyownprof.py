"""A program with a SIGPROF profiler of its own (setitimer(ITIMER_PROF) and a handler, as vmprof
and other statistical profilers do), set after sonde's sampling in its threads began: its
handler must get its own timer's signals alone, sonde's samples in its threads must go on (with
its Python frames: own_loop), and the timer it leaves running as it exits must not end it
(sonde's writing at exit uses CPU after SIGPROF's default is back). Prints how many
times its handler ran and how many its timer alone accounts for."""
import os
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
# left running as it leaves, with SIGPROF at its default (as Python's finalization restores it):
# os._exit, so that nothing but sonde's writing of the samples (8-11 ms of CPU here) runs between
# the timer's start and the process's end. 1 ms is less than that writing; the microseconds
# before it are all the program spends. (With sys.exit, Python's own finalization takes 8-10 ms
# of CPU after the restore, 20 ms under load now and then: a 20 ms timer ended the program
# alone in a CI run.)
sys.stdout.flush()
signal.signal(signal.SIGPROF, signal.SIG_DFL)
signal.setitimer(signal.ITIMER_PROF, 0.001, 0.001)
os._exit(0)
