"""pyspacey.py - a function whose code's qualified name has a space (code.replace, as a
decorator library may do): its samples must keep their outer Python frames (main, <module>); only
that frame may go (every Python frame of the sample went)."""
import time


def work(cpu_s):
    x = i = 0
    end = time.process_time() + cpu_s
    while time.process_time() < end:
        for _ in range(10000):
            x ^= i
            i += 1
    return x


work.__code__ = work.__code__.replace(co_qualname="my work", co_name="my work")


def main():
    work(0.5)


main()
