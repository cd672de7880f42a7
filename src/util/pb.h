/* pb.h - protobuf wire encoding onto an sbuf, for the writers of protobuf formats (Perfetto's
 * trace, pprof's profile): varints, fixed64 doubles, length-delimited strings and nested
 * messages whose length is written once they are complete. */
#ifndef SONDE_UTIL_PB_H
#define SONDE_UTIL_PB_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

void pb_varint(sbuf *b, uint64_t v);
/* A varint field (uint64, int64 as two's complement, bool, enum). */
void pb_uint(sbuf *b, unsigned field, uint64_t v);
/* A double field (fixed64, little-endian). */
void pb_double(sbuf *b, unsigned field, double v);
/* A string or bytes field; s NULL is the empty string. */
void pb_bytes(sbuf *b, unsigned field, const void *s, size_t n);
void pb_str(sbuf *b, unsigned field, const char *s);
/* A nested message: pb_open writes its tag and room for its length and returns where; pb_close
 * writes the length in as few bytes as it takes, moving the message back over the room left.
 * A message of 2^28 bytes or more cannot be closed: pb_close marks b failed (b->oom) and
 * returns -1. */
size_t pb_open(sbuf *b, unsigned field);
int pb_close(sbuf *b, size_t at);

#endif
