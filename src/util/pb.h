/* pb.h - protobuf wire encoding onto an sbuf, for the writers of protobuf formats (Perfetto's
 * trace, pprof's profile): varints, fixed64 doubles, length-delimited strings and nested
 * messages whose length is written once they are complete. */
#ifndef SONDE_UTIL_PB_H
#define SONDE_UTIL_PB_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "buf.h"

/* pb_uint: a varint field (uint64, int64 as two's complement, bool, enum). pb_double: a double
 * (fixed64, little-endian). pb_bytes / pb_str: a string or bytes field (s NULL: empty). A nested
 * message: pb_open writes its tag and room for its length and returns where; pb_close writes the
 * length in as few bytes as it takes, moving the message back over the room left. A message of
 * 2^28 bytes or more cannot be closed: pb_close marks b failed (b->oom) and returns -1. Inline:
 * a protobuf writer calls them several times per event. */
static inline void pb_varint(sbuf *b, uint64_t v)
{
    uint8_t t[10];
    sbuf_add(b, t, varint_put(t, v));
}

static inline void pb_uint(sbuf *b, unsigned field, uint64_t v)
{
    pb_varint(b, (uint64_t)field << 3);
    pb_varint(b, v);
}

static inline void pb_double(sbuf *b, unsigned field, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    uint8_t t[8];
    for (int i = 0; i < 8; i++)
        t[i] = (uint8_t)(u >> (8 * i));
    pb_varint(b, (uint64_t)field << 3 | 1);
    sbuf_add(b, t, 8);
}

/* A string as its varint length and its bytes, without a field tag (s NULL: empty): the value
 * of a length-delimited field, and the str of sonde's own records (format.h). */
static inline void pb_lenstr(sbuf *b, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    pb_varint(b, n);
    sbuf_add(b, s ? s : "", n);
}

static inline void pb_bytes(sbuf *b, unsigned field, const void *s, size_t n)
{
    pb_varint(b, (uint64_t)field << 3 | 2);
    pb_varint(b, n);
    sbuf_add(b, s ? s : "", n);
}

static inline void pb_str(sbuf *b, unsigned field, const char *s)
{
    pb_bytes(b, field, s, s ? strlen(s) : 0);
}

static inline size_t pb_open(sbuf *b, unsigned field)
{
    pb_varint(b, (uint64_t)field << 3 | 2);
    size_t at = b->len;
    sbuf_add(b, "\0\0\0\0", 4);
    return at;
}

static inline int pb_close(sbuf *b, size_t at)
{
    if (b->oom)
        return -1;
    size_t n = b->len - at - 4;
    if (n >= (1u << 28)) {
        b->oom = 1;
        return -1;
    }
    uint8_t t[10];
    size_t k = varint_put(t, n);
    memmove(b->data + at + k, b->data + at + 4, n);
    memcpy(b->data + at, t, k);
    b->len -= 4 - k;
    return 0;
}

#endif
