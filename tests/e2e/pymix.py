"""pymix.py - a Python program whose process tree mixes what sonde run samples two ways by
default (docs/stacks.md, "sonde run --sample-in-thread"): a shell child that loops (no Python:
sampled from outside), a Python child killed by SIGKILL (it never writes the samples it took in
its threads: those from outside stand), and its own Python loop (sampled in its threads). Prints
the killed child's pid."""
import subprocess
import sys
import time


def spin(cpu_s):
    """Loops for cpu_s seconds of this process's CPU time (a count of iterations took 0.09 s on
    a fast machine: too few samples at 999 Hz for the test's 100)."""
    x = i = 0
    end = time.process_time() + cpu_s
    while time.process_time() < end:
        for _ in range(10000):
            x ^= i
            i += 1
    return x


def main():
    subprocess.run(["sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"], check=True)
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    start = time.time()
    while time.time() - start < 0.8:  # the child spins about this long
        time.sleep(0.05)
    child.kill()
    child.wait()
    spin(0.3)
    print(child.pid)


if __name__ == "__main__":
    main()
