"""sonde_edit.py - crafts hostile .sonde files from real ones, for the end-to-end tests: every
record is re-encoded with a correct length and CRC, so the reader takes the edit at its word.

    python3 sonde_edit.py name IN OUT NEW_NAME     the INFO record's run name replaced
"""
import struct
import sys
import zlib

MAGIC = b"\x89SONDE\r\n"
INFO = 1


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


def main(argv):
    if len(argv) != 5 or argv[1] != "name":
        sys.exit(__doc__)
    data = open(argv[2], "rb").read()
    out = bytearray(data[:16])
    for typ, flags, res, p in records(data):
        if typ == INFO:
            pairs = [(k, argv[4].encode() if k == b"name" else v) for k, v in info_pairs(p)]
            p = b"".join(put_varint(len(k)) + k + put_varint(len(v)) + v for k, v in pairs)
        out += record(typ, flags, res, p)
    open(argv[3], "wb").write(out)


if __name__ == "__main__":
    main(sys.argv)
