"""python -m sonde ARGS: the sonde command (export, summary, report, aggregate, merge, diff, ...)
from the extension, for an interpreter that has the package but not the executable; and
`python -m sonde [FLAGS] SCRIPT.py [ARGS]` (or `-m MODULE`), which runs a Python program with
function tracing, monitoring and reports (sonde/_run.py)."""

import sys

import sonde
from sonde import _sonde


def main(argv):
    if not argv or argv[0] in ("-h", "--help", "-V", "--version", "help") or \
            _sonde.cli_is_command(argv[0]):
        return sonde.cli(argv)
    from sonde import _run
    return _run.run(argv)


def entry():
    """The `sonde` console script that pip installs: the same command, in this process."""
    sys.exit(main(sys.argv[1:]))


if __name__ == "__main__":
    entry()
