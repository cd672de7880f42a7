"""A program with a SIGPROF profiler of its own (setitimer(ITIMER_PROF) and a handler, as vmprof
and other statistical profilers do), set after sonde's sampling in its threads began: its
handler must get its own timer's signals alone, and the timer it leaves running as it exits must
not end it (sonde's writing at exit uses CPU after Python has restored SIGPROF's default).
Prints how many times its handler ran and how many its timer alone accounts for."""
import signal
import sys
import time

calls = 0


def handler(sig, frame):
    global calls
    calls += 1


time.sleep(0.3)  # the sampling in its threads has begun by now
signal.signal(signal.SIGPROF, handler)
signal.setitimer(signal.ITIMER_PROF, 0.01, 0.01)
t0 = time.process_time()
x = 0
while time.process_time() - t0 < 1.0:
    x += 1
signal.setitimer(signal.ITIMER_PROF, 0, 0)
cpu = time.process_time() - t0
print(f"calls {calls} own {cpu / 0.01:.0f}")
signal.setitimer(signal.ITIMER_PROF, 0.001, 0.001)  # left running at exit
sys.exit(0)
