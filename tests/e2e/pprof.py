#!/usr/bin/env python3
"""pprof.py - the tests' own reader of pprof's profile.proto (NAME.pb.gz), written from
github.com/google/pprof's proto/profile.proto without its generated code.

  pprof.py FILE.pb.gz        the profile, as JSON: its sample types, period, functions,
                             locations and samples
"""
import gzip
import json
import sys

from pftrace import msg


def varints(b):
    """The values of a packed repeated varint field."""
    out, v, sh = [], 0, 0
    for c in b:
        v |= (c & 0x7F) << sh
        sh += 7
        if not c & 0x80:
            out.append(v)
            v, sh = 0, 0
    if sh:
        raise ValueError("packed varints end inside a value")
    return out


def packed(m, f):
    """A repeated varint field, packed or not."""
    out = []
    for v in m.get(f, []):
        out.extend(varints(v) if isinstance(v, bytes) else [v])
    return out


def read(path):
    """The Profile in path (gzip-compressed or not) as a dict:
    types [(type, unit)], default_type (the default sample type's name, "" when unset: the
    last), period, functions {id: {name, filename, start_line}},
    locations {id: [(function id, line)]}, samples [{locations, values, labels}]."""
    data = open(path, "rb").read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    p = msg(data)
    strings = [s.decode() for s in p.get(6, [])]
    if not strings or strings[0] != "":
        raise ValueError("string_table[0] must be \"\"")

    def s(m, f):
        return strings[m[f][-1]] if f in m else ""

    out = {"types": [(s(msg(v), 1), s(msg(v), 2)) for v in p.get(1, [])],
           "default_type": strings[p[14][-1]] if 14 in p else "",
           "period": p.get(12, [0])[-1], "functions": {}, "locations": {}, "samples": []}
    for f in p.get(5, []):
        f = msg(f)
        out["functions"][f[1][-1]] = {"name": s(f, 2), "filename": s(f, 4),
                                      "start_line": f.get(5, [0])[-1]}
    for loc in p.get(4, []):
        loc = msg(loc)
        lines = [msg(li) for li in loc.get(4, [])]
        out["locations"][loc[1][-1]] = [(li[1][-1], li.get(2, [0])[-1]) for li in lines]
    for sa in p.get(2, []):
        sa = msg(sa)
        labels = {s(msg(lb), 1): s(msg(lb), 2) for lb in sa.get(3, [])}
        out["samples"].append({"locations": packed(sa, 1), "values": packed(sa, 2),
                               "labels": labels})
    for sa in out["samples"]:
        if len(sa["values"]) != len(out["types"]):
            raise ValueError("a sample has %d values for %d sample types" % (
                len(sa["values"]), len(out["types"])))
        for loc in sa["locations"]:
            if loc not in out["locations"]:
                raise ValueError("a sample names location %d, which the profile lacks" % loc)
    for loc in out["locations"].values():
        for fn, _ in loc:
            if fn not in out["functions"]:
                raise ValueError("a location names function %d, which the profile lacks" % fn)
    return out


def leaf(prof, sample):
    """The innermost (function name, line) of a sample; ("", 0) for a sample of no location."""
    if not sample["locations"]:
        return "", 0
    fn, line = prof["locations"][sample["locations"][0]][-1]
    return prof["functions"][fn]["name"], line


if __name__ == "__main__":
    print(json.dumps(read(sys.argv[1]), indent=1, default=str))
