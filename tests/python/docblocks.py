"""docblocks.py - what the reference-document tests share: a document's code blocks, and a test
case that runs in a fresh temporary directory (the blocks write relative paths)."""

import gc
import glob
import os
import re
import shutil
import tempfile
import unittest

REF = os.environ.get("REFERENCE_DOCS_DIR") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "reference")


def blocks(number, lang="python"):
    """The ```LANG blocks of reference document NUMBER ("001"), in order; SkipTest when the
    documents are not beside the checkout."""
    path = glob.glob(os.path.join(REF, number + "_*.txt"))
    if not path:
        raise unittest.SkipTest("no reference document %s in %s" % (number, REF))
    with open(path[0], encoding="utf-8") as f:
        text = f.read()
    return re.findall(r"```%s\n(.*?)```" % lang, text, re.S)


class InTempDir(unittest.TestCase):
    """Each test in its own empty working directory, removed afterwards."""

    def setUp(self):
        self.cwd = os.getcwd()
        self.dir = tempfile.mkdtemp(prefix="sonde-compat-", dir=os.environ.get("TMPDIR"))
        os.chdir(self.dir)

    def tearDown(self):
        # A profiler the test left open (an original's API may have no end: Inferix's
        # cleanup() keeps it usable) is closed while its directory is still there; else its
        # files are written at the interpreter's exit into a directory removed by then.
        import sonde
        for o in gc.get_objects():
            if isinstance(o, sonde.Profiler) and o._handle is not None:
                o.close(raise_on_error=False)
        os.chdir(self.cwd)
        shutil.rmtree(self.dir, ignore_errors=True)
