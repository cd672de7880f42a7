"""pystress.py SECONDS - Python that makes and drops frames, threads, generators, coroutines,
code objects and exceptions as fast as it can, for the Python frame reader to sample (e2e
pyframes, issue 39): whatever a frame looks like when a sample comes, the reader must give a
shorter stack, never a fault or a hang. Prints the rounds it ran."""
import asyncio
import sys
import threading
import time


def deep(n):
    return 0 if n == 0 else 1 + deep(n - 1)


def numbers(n):
    for i in range(n):
        yield i


async def chain(n):
    if n:
        await chain(n - 1)
        await asyncio.sleep(0)
    return n


def churn(until, rounds):
    while time.monotonic() < until:
        deep(60)
        sum(numbers(200))
        asyncio.run(chain(15))
        namespace = {}
        exec(compile("def made():\n    return [x for x in range(30)]\nmade()", "<made>", "exec"),
             namespace)
        del namespace
        try:
            raise ValueError("thrown")
        except ValueError:
            pass
        rounds[0] += 1


def main(seconds):
    end = time.monotonic() + seconds
    rounds = [0]
    while time.monotonic() < end:
        until = min(end, time.monotonic() + 0.25)
        threads = [threading.Thread(target=churn, args=(until, rounds)) for _ in range(4)]
        for t in threads:
            t.start()
        churn(until, rounds)
        for t in threads:
            t.join()
    print("rounds", rounds[0])


if __name__ == "__main__":
    main(float(sys.argv[1]))
