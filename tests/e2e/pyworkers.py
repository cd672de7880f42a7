"""pyworkers.py METHOD - a pool of two worker processes (multiprocessing, start method METHOD:
fork, as a PyTorch DataLoader's workers; spawn, a new interpreter exec'd) spinning in
worker_spin: the Python frames of processes the program starts (e2e pyframes)."""
import multiprocessing
import sys


def worker_spin(n):
    x = 0
    for i in range(n):
        x ^= i
    return x


if __name__ == "__main__":
    with multiprocessing.get_context(sys.argv[1]).Pool(2) as pool:
        pool.map(worker_spin, [8000000] * 4)
