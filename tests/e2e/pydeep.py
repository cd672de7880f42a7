"""pydeep.py - a stack deeper than a sample keeps (issue 61 #11): deep() recurses DEPTH times,
then spins in leaf() for about a second of CPU. Its samples must keep the outermost frames
(<module>, main) and mark what they left out, "[truncated N frames]"."""
import sys
import time

DEPTH = int(sys.argv[1]) if len(sys.argv) > 1 else 200


def leaf():
    end = time.process_time() + 1.0
    x = 0
    while time.process_time() < end:
        x += 1
    return x


def deep(n):
    return leaf() if n == 0 else deep(n - 1) + 0


def main():
    deep(DEPTH)


main()
