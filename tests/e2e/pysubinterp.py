"""pysubinterp.py - the main thread runs spin_sub in a sub-interpreter (3.12, 3.13), then
spin_main in its own, the same work each (e2e pyframes; issue 61 #13): both must be named, the
sub-interpreter's under the frames that entered it where they are read from outside. Its samples
went to `<module>;main` (the exec call), and once a walk had met the sub-interpreter's state the
main thread's samples could carry no Python frames at all."""
try:
    import _interpreters as interpreters  # 3.13
except ImportError:
    import _xxsubinterpreters as interpreters  # 3.12

SUB = """
def spin_sub(n):
    x = 0
    for i in range(n):
        x ^= i
    return x
spin_sub(6000000)
"""


def spin_main(n):
    x = 0
    for i in range(n):
        x ^= i
    return x


def main():
    iid = interpreters.create()
    run = getattr(interpreters, "exec", None) or interpreters.run_string
    run(iid, SUB)
    spin_main(6000000)
    interpreters.destroy(iid)


main()
