"""sonde_edit.py - crafts hostile .sonde files from real ones, for the end-to-end tests: every
record is re-encoded with a correct length and CRC, so the reader takes the edit at its word.

    python3 sonde_edit.py name IN OUT NEW_NAME     the INFO record's run name replaced
    python3 sonde_edit.py lose_end IN OUT          the END of the first outermost section of the
                                                   first thread becomes a GAP marker, as when
                                                   the recorder dropped that END for want of a
                                                   buffer (same slot, so the stream stays whole)
    python3 sonde_edit.py drop IN OUT TYPE         every record of type TYPE (a number) left out
    python3 sonde_edit.py info IN OUT KEY VALUE    the INFO record's KEY set to VALUE (added when
                                                   it has none), e.g. config.max_data_points
"""
import struct
import sys
import zlib

MAGIC = b"\x89SONDE\r\n"
INFO, EVENTS = 1, 4
BEGIN, END, GAP = 0, 1, 11
SLOTS = {3: 2, 4: 2, 5: 2, 6: 2, 15: 2, 13: 3, 14: 3}   # kind -> slots (else 1)
VALUES = {3: 1, 4: 1, 6: 1, 15: 1, 5: 2, 13: 4, 14: 4}  # kind -> doubles after the event
HAS_ARG = {2, 7, 8, 11, 12, 13, 14}


def varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def put_varint(v):
    out = bytearray()
    while True:
        c = v & 0x7F
        v >>= 7
        out.append(c | (0x80 if v else 0))
        if not v:
            return bytes(out)


def records(data):
    assert data[:8] == MAGIC, "not a .sonde file"
    off = 16
    while off + 12 <= len(data):
        typ, flags, res, length, crc = struct.unpack_from("<BBHII", data, off)
        yield typ, flags, res, data[off + 12:off + 12 + length]
        off += 12 + length


def record(typ, flags, res, payload):
    return struct.pack("<BBHII", typ, flags, res, len(payload), zlib.crc32(payload)) + payload


def info_pairs(p):
    i, out = 0, []
    while i < len(p):
        n, i = varint(p, i)
        k = p[i:i + n]
        i += n
        n, i = varint(p, i)
        out.append((k, p[i:i + n]))
        i += n
    return out


def events(p):
    """The thread of an EVENTS payload and its events as (slot, start, end, kind) byte spans."""
    thread, i = varint(p, 0)
    _, i = varint(p, i)
    slot, i = varint(p, i)
    nslots, i = varint(p, i)
    i += 8
    out, last = [], slot + nslots
    while slot < last:
        at = i
        tag, i = varint(p, i)
        _, i = varint(p, i)
        kind = tag & 15
        if kind in HAS_ARG:
            _, i = varint(p, i)
        i += 8 * VALUES.get(kind, 0)
        out.append((slot, at, i, kind))
        slot += SLOTS.get(kind, 1)
    return thread, out


def lose_end(recs):
    """Replaces the first outermost END of thread 0 (in every copy of its slot) by GAP, 1."""
    depth, seen, target = 0, set(), None
    for typ, _, _, p in recs:
        if typ != EVENTS or target is not None:
            continue
        thread, evs = events(p)
        for slot, _, _, kind in evs if thread == 0 else []:
            if slot in seen:
                continue
            seen.add(slot)
            if kind == BEGIN:
                depth += 1
            elif kind == END:
                depth -= 1
                if depth == 0:
                    target = slot
                    break
    assert target is not None, "no outermost section ends on thread 0"
    out = []
    for typ, flags, res, p in recs:
        if typ == EVENTS and events(p)[0] == 0:
            for slot, a, b, kind in events(p)[1]:
                if slot == target:
                    _, j = varint(p, a)
                    delta_end = varint(p, j)[1]
                    p = p[:a] + put_varint(GAP) + p[j:delta_end] + put_varint(1) + p[b:]
                    break
        out.append((typ, flags, res, p))
    return out


def main(argv):
    if not (len(argv) == 5 and argv[1] in ("name", "drop") or
            len(argv) == 6 and argv[1] == "info" or
            len(argv) == 4 and argv[1] == "lose_end"):
        sys.exit(__doc__)
    data = open(argv[2], "rb").read()
    recs = list(records(data))
    if argv[1] == "lose_end":
        recs = lose_end(recs)
    out = bytearray(data[:16])
    if argv[1] == "drop":
        recs = [r for r in recs if r[0] != int(argv[4])]
    for typ, flags, res, p in recs:
        if typ == INFO and argv[1] in ("name", "info"):
            key, value = (b"name", argv[4].encode()) if argv[1] == "name" else \
                (argv[4].encode(), argv[5].encode())
            pairs = [(k, value if k == key else v) for k, v in info_pairs(p)]
            if key not in [k for k, _ in pairs]:
                pairs.append((key, value))
            p = b"".join(put_varint(len(k)) + k + put_varint(len(v)) + v for k, v in pairs)
        out += record(typ, flags, res, p)
    open(argv[3], "wb").write(out)


if __name__ == "__main__":
    main(sys.argv)
