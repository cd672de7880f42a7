/* pb.c - see pb.h. */
#include "pb.h"

#include <string.h>

void pb_varint(sbuf *b, uint64_t v)
{
    uint8_t t[10];
    sbuf_add(b, t, varint_put(t, v));
}

void pb_uint(sbuf *b, unsigned field, uint64_t v)
{
    pb_varint(b, (uint64_t)field << 3);
    pb_varint(b, v);
}

void pb_double(sbuf *b, unsigned field, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    uint8_t t[8];
    for (int i = 0; i < 8; i++)
        t[i] = (uint8_t)(u >> (8 * i));
    pb_varint(b, (uint64_t)field << 3 | 1);
    sbuf_add(b, t, 8);
}

void pb_bytes(sbuf *b, unsigned field, const void *s, size_t n)
{
    pb_varint(b, (uint64_t)field << 3 | 2);
    pb_varint(b, n);
    sbuf_add(b, s ? s : "", n);
}

void pb_str(sbuf *b, unsigned field, const char *s)
{
    pb_bytes(b, field, s, s ? strlen(s) : 0);
}

size_t pb_open(sbuf *b, unsigned field)
{
    pb_varint(b, (uint64_t)field << 3 | 2);
    size_t at = b->len;
    sbuf_add(b, "\0\0\0\0", 4);
    return at;
}

int pb_close(sbuf *b, size_t at)
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
