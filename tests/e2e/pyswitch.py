"""pyswitch.py - a thread that sleeps 1 ms in `short` and 10 ms in `long`, in turn, 30 times
each (e2e pyframes; issue 61 #17): each off-CPU period must carry the Python function it blocked
in. Each sample's frames read in the kernel were once the previous sample's or switch's (the
last record at or before its time, where the kernel writes a sample's own just after): every
`long` wait then showed `short` and every `short` one `long`."""
import time


def short():
    time.sleep(0.001)


def long():
    time.sleep(0.010)


def warm():
    """Sleeps first (5 x 10 ms), until the sampler has given the kernel's program this thread
    (its first switches keep native frames only)."""
    for _ in range(5):
        time.sleep(0.010)


def main():
    warm()
    for _ in range(30):
        short()
        long()


main()
