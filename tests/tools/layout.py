#!/usr/bin/env python3
"""layout.py SRC - the code's shape as issues 38 and 59 fixed it: no C file over 1,500 lines and
no C function over 150 lines in src/, tools/ and python/ (the project's style: a function's braces
at the start of a line). Prints each offender with its length; exits 1 if there is one."""
import os
import re
import sys

MAX_FILE, MAX_FUNCTION = 1500, 150


def functions(lines):
    """(name, first line, length) of each function: from its signature's first line to the
    closing brace at the start of a line."""
    i = 0
    while i < len(lines):
        if lines[i].startswith("{") and i > 0:
            j = i - 1
            while j > 0 and "(" not in lines[j] and lines[j].strip():
                j -= 1
            m = re.search(r"([A-Za-z_]\w*)\s*\(", lines[j])
            k = i + 1
            while k < len(lines) and not lines[k].startswith("}"):
                k += 1
            yield (m.group(1) if m else "?"), j + 1, k - j + 1
            i = k
        i += 1


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "."
    bad, files, funcs = [], 0, 0
    for top in ("src", "tools", "python"):
        for root, _, names in os.walk(os.path.join(src, top)):
            for n in sorted(names):
                if not n.endswith((".c", ".h")):
                    continue
                path = os.path.join(root, n)
                lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
                files += 1
                rel = os.path.relpath(path, src)
                if len(lines) - 1 > MAX_FILE:
                    bad.append("%s: %d lines (at most %d)" % (rel, len(lines) - 1, MAX_FILE))
                for name, at, n_lines in functions(lines):
                    funcs += 1
                    if n_lines > MAX_FUNCTION:
                        bad.append("%s:%d: %s is %d lines (at most %d)" %
                                   (rel, at, name, n_lines, MAX_FUNCTION))
    for b in bad:
        print(b)
    if files < 50 or funcs < 500:  # the walk found the code, or the check means nothing
        print("layout: only %d files and %d functions under %s" % (files, funcs, src))
        return 1
    print("layout: %d C files, %d functions; %d over the limits" % (files, funcs, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
