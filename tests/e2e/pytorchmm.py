"""A torch program for sonde run's default (issue 39): most of its CPU is BLAS work that
torch.mm does for heavy_matmul, whose samples must carry heavy_matmul above the operator's native
frames. Prints the CPU seconds its loop took."""
import time

import torch


def heavy_matmul(a, b, n):
    for _ in range(n):
        torch.mm(a, b)


def main():
    torch.set_num_threads(1)
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    t0 = time.process_time()
    heavy_matmul(a, b, 400)
    print("%.3f" % (time.process_time() - t0))


main()
