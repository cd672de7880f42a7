"""pyspacey.py - a function whose code's qualified name has a space (code.replace, as a
decorator library may do): its samples must keep their other Python frames (main, <module>, and
spin inside it); only that frame may go (every Python frame of the sample went)."""
from pymix import spin  # this file's folder is sys.path[0]; pymix runs nothing on import


def work(cpu_s):
    return spin(cpu_s)


work.__code__ = work.__code__.replace(co_qualname="my work", co_name="my work")


def main():
    work(0.5)


main()
