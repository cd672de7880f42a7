/* buf.h - growable byte buffer with the encoders every writer in sonde needs (varint, JSON, CSV). */
#ifndef SONDE_UTIL_BUF_H
#define SONDE_UTIL_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct sbuf {
    char *data;   /* NUL-terminated when len < cap */
    size_t len;
    size_t cap;
    int oom;      /* set once an allocation failed; later appends are ignored */
} sbuf;

void sbuf_init(sbuf *b);
void sbuf_free(sbuf *b);
void sbuf_reset(sbuf *b);
/* Each append returns 0, or -1 (and sets b->oom) when memory ran out. */
int sbuf_reserve(sbuf *b, size_t extra);
int sbuf_add_slow(sbuf *b, const void *p, size_t n);
static inline int sbuf_add(sbuf *b, const void *p, size_t n)
{
    if (b->len + n + 1 > b->cap)
        return sbuf_add_slow(b, p, n);
    __builtin_memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
    return 0;
}
/* Takes back the last n bytes appended (to reopen a JSON object); nothing after an oom. */
void sbuf_unput(sbuf *b, size_t n);
int sbuf_puts(sbuf *b, const char *s);
int sbuf_putc(sbuf *b, char c);
int sbuf_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string literal with quotes; invalid UTF-8 bytes become U+FFFD. NULL writes null. */
int sbuf_json_str(sbuf *b, const char *s);
/* A JSON number; NaN and infinities (not JSON) are written as null. */
int sbuf_json_num(sbuf *b, double v);
/* Text for an HTML page (an element's text or a quoted attribute): & < > " ' as entities,
 * invalid UTF-8 and the control characters HTML does not allow (all C0 but TAB, LF and CR, and
 * DEL) as U+FFFD, as sbuf_json_str does. NULL writes nothing. 0, or -1 out of memory. */
int sbuf_html_str(sbuf *b, const char *s);
/* A CSV field, quoted when it holds a comma, quote, CR or LF. */
int sbuf_csv_str(sbuf *b, const char *s);
/* Makes what b holds from byte `from` on safe to print on a terminal: control characters but
 * newline and tab become \xHH, C1 controls \u00HH, invalid UTF-8 U+FFFD, so no name read from a
 * file can move the cursor, retitle the window or clear the screen. 0, or -1 out of memory. */
int sbuf_text_safe(sbuf *b, size_t from);
/* Names printed in a line of text (a table row, "Warning: ...") must not start lines of their
 * own, nor shift the columns after them: sbuf_oneline returns s itself, or, when s holds a line
 * break (LF, CR, or a Unicode line or paragraph separator) or a TAB, a copy with each written as
 * \n, \r, \u2028, \u2029 or \x09, owned by the pool
 * until sbuf_pool_free. Out of memory: "?" and pool->oom set. sbuf_text_safe does the rest. */
typedef struct sbuf_pool {
    char **v;
    size_t n, cap;
    int oom;
} sbuf_pool;
const char *sbuf_oneline(sbuf_pool *pool, const char *s);
/* The same for a markdown table cell: also each '|' written as "\|", so a name cannot split
 * its row into more cells. */
const char *sbuf_md_cell(sbuf_pool *pool, const char *s);
void sbuf_pool_free(sbuf_pool *pool);
/* Prints one line to f (the newline added): fmt's text with line breaks and TABs written as
 * sbuf_oneline does and control characters as sbuf_text_safe does, so a name or reason in it
 * can neither start a line of its own nor reach the terminal as an escape. */
void sbuf_say(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An unsigned decimal integer, without printf. */
int sbuf_u64(sbuf *b, uint64_t v);
/* ns as microseconds with three decimals ("12.345"), without printf. */
int sbuf_us3(sbuf *b, int64_t ns);
/* v / 10^places exactly, with places decimals (at most 18): sbuf_decimal(b, ns, 6) is ns as
 * milliseconds. */
int sbuf_decimal(sbuf *b, int64_t v, unsigned places);

/* LEB128 varints over raw memory: put returns bytes written (at most 10); get returns bytes
 * read, or 0 when the input ends early or the value overflows 64 bits. */
static inline size_t varint_put(uint8_t *out, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}
size_t varint_get(const uint8_t *in, size_t avail, uint64_t *v);
/* A string field of a record: its length as a varint, then its bytes (at most max of them; s
 * NULL is the empty string). Returns bytes written. Async-signal-safe. */
static inline size_t str_put(uint8_t *out, const char *s, size_t max);

/* An INFO pair: key and value, each a string field. */
static inline size_t kv_put(uint8_t *out, const char *k, const char *v)
{
    size_t n = str_put(out, k, SIZE_MAX);
    return n + str_put(out + n, v, SIZE_MAX);
}

static inline size_t str_put(uint8_t *out, const char *s, size_t max)
{
    size_t n = s ? strlen(s) : 0;
    if (n > max)
        n = max;
    size_t k = varint_put(out, n);
    if (n)
        memcpy(out + k, s, n);
    return k + n;
}
static inline uint64_t zigzag_enc(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static inline int64_t zigzag_dec(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

#endif
