"""pycallback.py - Python called back from C: sorted() (C code) calls key() for each element,
so a sample in key has two runs of the evaluation loop with the C code of sorted between them
(e2e pyframes, sampled with sample_cfi: the native frames interleaved with the Python ones)."""


def key(x):
    y = 0
    for i in range(20):
        y ^= i
    return -x


def main():
    for _ in range(5):
        sorted(range(200000), key=key)


if __name__ == "__main__":
    main()
