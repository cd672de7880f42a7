"""pyworkers.py METHOD [MAIN_SPIN] - a pool of two worker processes (multiprocessing, start
method METHOD: fork, as a PyTorch DataLoader's workers; spawn, a new interpreter exec'd) spinning
in worker_spin: the Python frames of processes the program starts (e2e pyframes). MAIN_SPIN: the
program's own process spins that many rounds first (the busiest process of the run)."""
import multiprocessing
import sys


def worker_spin(n):
    x = 0
    for i in range(n):
        x ^= i
    return x


if __name__ == "__main__":
    if len(sys.argv) > 2:
        worker_spin(int(sys.argv[2]))
    with multiprocessing.get_context(sys.argv[1]).Pool(2) as pool:
        pool.map(worker_spin, [8000000] * 4)
