"""python -m sonde ARGS: the sonde command (export, summary, report, aggregate, merge, diff, ...),
from the extension, for an interpreter that has the package but not the executable."""

import sys

import sonde

sys.exit(sonde.cli(sys.argv[1:]))
