#!/usr/bin/env python3
"""pftrace.py - the tests' own reader of Perfetto protobuf traces (NAME.pftrace), written from
Perfetto's trace protos without their generated code: wire format, compressed packets, packet
sequences, interned names and categories, incremental clocks, track descriptors.

  pftrace.py FILE.pftrace                    what the trace holds, as JSON
  pftrace.py plain FILE.pftrace OUT          OUT: the trace with its compressed packets inflated
  pftrace.py compare FILE.pftrace TRACE.json.gz
      checks that both traces show the same sections (kept and folded), operators, instants,
      counters, steps and sessions on the same threads at the same times; exits 1 naming the
      first difference.
"""
import gzip
import json
import struct
import sys
import zlib


def fields(buf):
    """The (field, wire type, value) of one message; value: int, or bytes for LEN."""
    i, n = 0, len(buf)

    def varint():
        nonlocal i
        v = shift = 0
        while True:
            if i >= n:
                raise ValueError("varint runs past the end")
            b = buf[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return v
            if shift > 63:
                raise ValueError("varint longer than 10 bytes")

    while i < n:
        key = varint()
        f, wt = key >> 3, key & 7
        if wt == 0:
            yield f, wt, varint()
        elif wt == 1:
            yield f, wt, buf[i:i + 8]
            i += 8
        elif wt == 2:
            ln = varint()
            if i + ln > n:
                raise ValueError("field %d runs past the end" % f)
            yield f, wt, buf[i:i + ln]
            i += ln
        elif wt == 5:
            yield f, wt, buf[i:i + 4]
            i += 4
        else:
            raise ValueError("wire type %d" % wt)


def msg(buf):
    """field -> list of values"""
    out = {}
    for f, _, v in fields(buf):
        out.setdefault(f, []).append(v)
    return out


def one(m, f, default=None):
    return m[f][-1] if f in m else default


def signed(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def packets(data):
    """The Trace's packets in order, those inside compressed_packets (zlib) in their place."""
    for f, wt, pkt in fields(data):
        if f != 1 or wt != 2:
            raise ValueError("a Trace holds only packets (field 1), found field %d" % f)
        z = [v for f2, wt2, v in fields(pkt) if f2 == 50 and wt2 == 2]
        if not z:
            yield pkt
            continue
        for blob in z:
            try:
                inner = zlib.decompress(blob)
            except zlib.error as e:
                raise ValueError("compressed_packets do not inflate: %s" % e)
            yield from packets(inner)


def plain(path, out):
    """The trace with its compressed packets inflated: what protoc --decode_raw can show."""
    with open(path, "rb") as f:
        data = f.read()
    with open(out, "wb") as f:
        for pkt in packets(data):
            n, head = len(pkt), bytearray([0x0A])
            while True:
                head.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
                n >>= 7
                if not n:
                    break
            f.write(bytes(head) + pkt)


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    tracks = {}      # uuid -> {"name", "pid", "tid", "parent", "counter"}
    seqs = {}        # sequence id -> state
    slices, instants, counts = [], [], []
    open_ = {}       # track uuid -> stack of open slices
    for pkt in packets(data):
        p = msg(pkt)
        sid = one(p, 10, 0)
        flags = one(p, 13, 0)
        if flags & 2 and not flags & 1 and sid not in seqs:
            raise ValueError("sequence %d needs state it never set" % sid)
        st = seqs.setdefault(sid, {"names": {}, "cats": {}, "track": 0, "clock": None,
                                   "last": None})
        if flags & 1:
            st.update(names={}, cats={}, track=0, clock=None, last=None)
        if 59 in p:  # TracePacketDefaults
            d = msg(one(p, 59))
            st["clock"] = one(d, 58)
            if 11 in d:
                st["track"] = one(msg(one(d, 11)), 11, 0)
        if 12 in p:  # InternedData
            for blob in p[12]:
                idata = msg(blob)
                for e in idata.get(1, []):
                    e = msg(e)
                    st["cats"][one(e, 1)] = one(e, 2).decode()
                for e in idata.get(2, []):
                    e = msg(e)
                    st["names"][one(e, 1)] = one(e, 2).decode()
        if 6 in p:  # ClockSnapshot: the sequence's incremental clock starts here
            for c in msg(one(p, 6)).get(1, []):
                c = msg(c)
                if one(c, 3):
                    st["last"] = one(c, 2)
            continue
        if 60 in p:
            t = msg(one(p, 60))
            d = {"parent": one(t, 5, 0), "counter": 8 in t,
                 "name": one(t, 2, b"").decode()}
            if 3 in t:
                pd = msg(one(t, 3))
                d.update(pid=one(pd, 1), name=one(pd, 6, b"").decode())
            if 4 in t:
                td = msg(one(t, 4))
                d.update(pid=one(td, 1), tid=one(td, 2), name=one(td, 5, b"").decode())
            tracks[one(t, 1)] = d
            continue
        if 11 not in p:
            continue
        ts = one(p, 8, 0)
        clock = one(p, 58, st["clock"])
        if clock is not None and 64 <= clock < 128:
            if st["last"] is None:
                raise ValueError("sequence %d: a delta time before its clock snapshot" % sid)
            ts = st["last"] = st["last"] + ts
        e = msg(one(p, 11))
        uuid = one(e, 11, st["track"])
        typ = one(e, 9, 0)
        name = one(e, 23)
        name = name.decode() if name is not None else st["names"].get(one(e, 10))
        cats = [st["cats"][c] for c in e.get(3, [])]
        args = {}
        for a in e.get(4, []):
            a = msg(a)
            k = one(a, 10, b"").decode()
            if 6 in a:
                args[k] = one(a, 6).decode()
            elif 5 in a:
                args[k] = struct.unpack("<d", one(a, 5))[0]
            elif 4 in a:
                args[k] = signed(one(a, 4))
        if typ == 1:
            open_.setdefault(uuid, []).append({"track": uuid, "name": name, "ts": ts,
                                               "cat": cats[0] if cats else "", "args": args})
        elif typ == 2:
            if not open_.get(uuid):
                raise ValueError("an end on track %d with no slice open" % uuid)
            s = open_[uuid].pop()
            if ts < s["ts"]:
                raise ValueError("slice %r ends before it begins" % s["name"])
            s["dur"] = ts - s["ts"]
            s["depth"] = len(open_[uuid])
            slices.append(s)
        elif typ == 3:
            instants.append({"track": uuid, "name": name, "ts": ts, "args": args})
        elif typ == 4:
            counts.append({"track": uuid, "ts": ts,
                           "value": struct.unpack("<d", one(e, 44))[0]})
    left = [s["name"] for st in open_.values() for s in st]
    if left:
        raise ValueError("slices never ended: %s" % left[:5])
    return {"tracks": tracks, "slices": slices, "instants": instants, "counters": counts}


def track_name(t, uuid):
    d = t["tracks"].get(uuid)
    if d is None:
        raise ValueError("an event on track %d, never described" % uuid)
    if d["parent"] in t["tracks"] and "tid" in t["tracks"][d["parent"]]:
        return t["tracks"][d["parent"]]["name"] + "/" + d["name"]
    return d["name"]


def compare(pf_path, json_path):
    t = read(pf_path)
    with gzip.open(json_path, "rt") as f:
        ev = json.load(f)
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    tname = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
             if e.get("ph") == "M" and e.get("name") == "thread_name"}

    def us(ns):
        return round(ns / 1000.0, 3)

    # every time is an offset from the earliest in the pftrace; the JSON trace's are from the
    # run's start: both meet at the earliest section
    secs = [s for s in t["slices"] if s["cat"] in ("section", "folded")]
    jsec = [e for e in ev if e.get("ph") == "X" and e.get("cat") in ("section", "folded")]
    if not secs or not jsec:
        raise ValueError("no sections: %d in the pftrace, %d in the JSON trace"
                         % (len(secs), len(jsec)))
    base_pf = min(s["ts"] for s in secs)
    base_js = min(e["ts"] for e in jsec)

    def pf_rows(items, with_dur=True):
        return sorted((track_name(t, s["track"]), s["name"], us(s["ts"] - base_pf),
                       us(s["dur"]) if with_dur else 0) for s in items)

    def js_rows(items, with_dur=True):
        return sorted((tname.get((e["pid"], e["tid"]), e.get("tid")), e["name"],
                       round(e["ts"] - base_js, 3), round(e["dur"], 3) if with_dur else 0)
                      for e in items)

    def same(what, a, b):
        if len(a) != len(b):
            raise ValueError("%s: %d in the pftrace, %d in the JSON trace" % (what, len(a), len(b)))
        for x, y in zip(a, b):
            if x[:2] != y[:2] or abs(x[2] - y[2]) > 0.0015 or abs(x[3] - y[3]) > 0.0015:
                raise ValueError("%s differ: pftrace %r, JSON %r" % (what, x, y))

    same("sections", pf_rows(secs), js_rows(jsec))
    ops = [s for s in t["slices"] if s["cat"] == "cpu_op"]
    jops = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "cpu_op"
            and not e["name"].startswith("ProfilerStep#")]
    for s in ops:  # on the thread's "cpu ops" track
        s["track"] = t["tracks"][s["track"]]["parent"]
    same("operators", pf_rows(ops), js_rows(jops))
    same("instants", pf_rows(t["instants"], False),
         js_rows([e for e in ev if e.get("ph") == "i"], False))
    for cat in ("step", "session", "kernel", "gpu_memcpy", "gpu_memset"):
        a = sorted((s["name"], us(s["ts"] - base_pf), us(s["dur"]))
                   for s in t["slices"] if s["cat"] == cat)
        b = sorted((e["name"], round(e["ts"] - base_js, 3), round(e["dur"], 3))
                   for e in ev if e.get("ph") == "X" and e.get("cat") == cat)
        same(cat + "s", [("", x[0], x[1], x[2]) for x in a], [("", x[0], x[1], x[2]) for x in b])
    a = sorted((track_name(t, c["track"]), us(c["ts"] - base_pf), c["value"])
               for c in t["counters"])
    b = sorted((e["name"], round(e["ts"] - base_js, 3), e["args"]["value"]) for e in ev
               if e.get("ph") == "C" and e["name"] != "step")
    same("counter samples", [(x[0], "", x[1], 0) for x in a], [(x[0], "", x[1], 0) for x in b])
    bad = [(x, y) for x, y in zip(a, b) if abs(x[2] - y[2]) > 1e-9 * max(1.0, abs(y[2]))]
    if bad:
        raise ValueError("counter values differ: %r" % (bad[0],))
    return {"sections": len(secs), "folded": sum(s["cat"] == "folded" for s in secs),
            "operators": len(ops), "instants": len(t["instants"]),
            "counter_samples": len(a), "tracks": len(t["tracks"])}


if __name__ == "__main__":
    try:
        if len(sys.argv) == 4 and sys.argv[1] == "compare":
            print(json.dumps(compare(sys.argv[2], sys.argv[3])))
        elif len(sys.argv) == 4 and sys.argv[1] == "plain":
            plain(sys.argv[2], sys.argv[3])
        elif len(sys.argv) == 2:
            print(json.dumps(read(sys.argv[1]), default=str))
        else:
            sys.exit(__doc__)
    except ValueError as e:
        sys.exit("pftrace.py: %s" % e)
