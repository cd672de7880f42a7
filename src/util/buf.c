/* buf.c - growable byte buffer, varints and the JSON/CSV string encoders. */
#define _GNU_SOURCE
#include "buf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "alloc.h"

void sbuf_init(sbuf *b) { memset(b, 0, sizeof *b); }

void sbuf_free(sbuf *b)
{
    sonde__free(b->data);
    sbuf_init(b);
}

void sbuf_reset(sbuf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = 0;
}

int sbuf_reserve(sbuf *b, size_t extra)
{
    if (b->oom)
        return -1;
    if (b->len + extra + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) {
        if (cap > SIZE_MAX / 2) {
            b->oom = 1;
            return -1;
        }
        cap *= 2;
    }
    char *d = sonde__realloc(b->data, cap);
    if (!d) {
        b->oom = 1;
        return -1;
    }
    b->data = d;
    b->cap = cap;
    return 0;
}

int sbuf_add_slow(sbuf *b, const void *p, size_t n)
{
    if (sbuf_reserve(b, n))
        return -1;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
    return 0;
}

void sbuf_unput(sbuf *b, size_t n)
{
    if (b->oom || n > b->len)
        return;
    b->len -= n;
    b->data[b->len] = 0;
}

int sbuf_puts(sbuf *b, const char *s) { return sbuf_add(b, s, strlen(s)); }

int sbuf_putc(sbuf *b, char c) { return sbuf_add(b, &c, 1); }

int sbuf_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[256];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    if ((size_t)n < sizeof tmp)
        return sbuf_add(b, tmp, (size_t)n);
    if (sbuf_reserve(b, (size_t)n))
        return -1;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when the bytes are not valid UTF-8. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        return (s[1] & 0xc0) == 0x80 ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
        if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80)
            return 0;
        if (c == 0xe0 && s[1] < 0xa0)
            return 0; /* overlong */
        if (c == 0xed && s[1] >= 0xa0)
            return 0; /* surrogate */
        return 3;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80)
            return 0;
        if (c == 0xf0 && s[1] < 0x90)
            return 0;
        if (c == 0xf4 && s[1] >= 0x90)
            return 0;
        return 4;
    }
    return 0;
}

int sbuf_json_str(sbuf *b, const char *str)
{
    static const char hex[] = "0123456789abcdef";
    if (!str)
        return sbuf_add(b, "null", 4);
    const unsigned char *s = (const unsigned char *)str;
    if (sbuf_reserve(b, strlen(str) + 2))
        return -1;
    b->data[b->len++] = '"';
    while (*s) {
        size_t run = 0;
        while (s[run] >= 0x20 && s[run] < 0x80 && s[run] != '"' && s[run] != '\\')
            run++;
        if (run) {
            if (sbuf_add(b, s, run))
                return -1;
            s += run;
            continue;
        }
        unsigned c = *s;
        if (c >= 0x80) {
            size_t n = utf8_len(s);
            if (n) {
                if (sbuf_add(b, s, n))
                    return -1;
                s += n;
            } else {
                if (sbuf_add(b, "\\ufffd", 6))
                    return -1;
                s++;
            }
            continue;
        }
        char esc[7] = {'\\', 0, 0, 0, 0, 0, 0};
        size_t n = 2;
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        default:
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            n = 6;
        }
        if (sbuf_add(b, esc, n))
            return -1;
        s++;
    }
    return sbuf_putc(b, '"');
}

int sbuf_json_num(sbuf *b, double v)
{
    if (!isfinite(v))
        return sbuf_add(b, "null", 4);
    if (v == floor(v) && fabs(v) < 9e15)
        return sbuf_printf(b, "%.0f", v);
    /* the shortest text that reads back as the same double, so a report read back gives the
     * same figures */
    char tmp[40];
    for (int prec = 9; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (strtod(tmp, NULL) == v)
            break;
    }
    return sbuf_puts(b, tmp);
}

int sbuf_csv_str(sbuf *b, const char *str)
{
    if (!str)
        return 0;
    const unsigned char *s = (const unsigned char *)str;
    /* OWASP's CSV injection guidance: a cell a spreadsheet would take for a formula is quoted and
     * begins with a ' */
    int formula = s[0] && strchr("=+-@\t\r", s[0]);
    int quote = formula || strpbrk(str, ",\"\r\n");
    if ((quote && sbuf_putc(b, '"')) || (formula && sbuf_putc(b, '\'')))
        return -1;
    while (*s) {
        if (*s >= 0x80) { /* valid UTF-8 as it is, anything else as U+FFFD, as in JSON */
            size_t n = utf8_len(s);
            if (n ? sbuf_add(b, s, n) : sbuf_add(b, "\xef\xbf\xbd", 3))
                return -1;
            s += n ? n : 1;
            continue;
        }
        if ((*s == '"' && sbuf_putc(b, '"')) || sbuf_putc(b, (char)*s))
            return -1;
        s++;
    }
    return quote ? sbuf_putc(b, '"') : 0;
}

int sbuf_html_str(sbuf *b, const char *str)
{
    if (!str)
        return 0;
    for (const unsigned char *s = (const unsigned char *)str; *s;) {
        unsigned c = *s;
        size_t n = c >= 0x80 ? utf8_len(s) : 1;
        int rc;
        switch (c) {
        case '&': rc = sbuf_puts(b, "&amp;"); break;
        case '<': rc = sbuf_puts(b, "&lt;"); break;
        case '>': rc = sbuf_puts(b, "&gt;"); break;
        case '"': rc = sbuf_puts(b, "&quot;"); break;
        case '\'': rc = sbuf_puts(b, "&#39;"); break;
        default: /* invalid UTF-8 and the controls HTML does not allow: U+FFFD, as in JSON */
            if (!n || (c < 0x20 && c != '\n' && c != '\t' && c != '\r') || c == 0x7f)
                rc = sbuf_add(b, "\xef\xbf\xbd", 3);
            else
                rc = sbuf_add(b, s, n);
        }
        if (rc)
            return -1;
        s += n ? n : 1;
    }
    return 0;
}

int sbuf_text_safe(sbuf *b, size_t from)
{
    if (b->oom || from >= b->len)
        return b->oom ? -1 : 0;
    sbuf o;
    sbuf_init(&o);
    const unsigned char *s = (const unsigned char *)b->data + from;
    const unsigned char *end = (const unsigned char *)b->data + b->len;
    while (s < end) {
        unsigned c = *s;
        size_t n = c >= 0x80 ? utf8_len(s) : 1;
        if (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f) ||
            (n >= 2 && !(c == 0xc2 && s[1] < 0xa0))) { /* text, and UTF-8 but C1 controls */
            sbuf_add(&o, s, n);
            s += n;
        } else if (n == 2) { /* C1 control (CSI 0x9b is ESC [ to a terminal) */
            sbuf_printf(&o, "\\u%04x", s[1]);
            s += 2;
        } else if (c >= 0x80) {
            sbuf_add(&o, "\xef\xbf\xbd", 3);
            s++;
        } else {
            sbuf_printf(&o, "\\x%02x", c);
            s++;
        }
    }
    b->len = from;
    if (!o.oom)
        sbuf_add(b, o.data ? o.data : "", o.len);
    else
        b->oom = 1;
    sbuf_free(&o);
    return b->oom ? -1 : 0;
}

/* The length of what at s a name in a line of text may not hold as it is: a line break (LF, CR,
 * U+2028, U+2029) or a TAB, which would move the columns after it; 0 when none. */
static size_t line_break(const char *s)
{
    if (*s == '\n' || *s == '\r' || *s == '\t')
        return 1;
    return (unsigned char)s[0] == 0xe2 && (unsigned char)s[1] == 0x80 &&
                   ((unsigned char)s[2] == 0xa8 || (unsigned char)s[2] == 0xa9)
               ? 3
               : 0;
}

/* The string o holds (its NUL added), now owned by pool; "?" (pool->oom set) out of memory. */
static const char *pool_keep(sbuf_pool *pool, sbuf *o)
{
    sbuf_putc(o, 0);
    if (o->oom || SONDE_GROW(pool->v, pool->n, pool->cap)) {
        sbuf_free(o);
        pool->oom = 1;
        return "?";
    }
    pool->v[pool->n++] = o->data;
    return o->data;
}

const char *sbuf_oneline(sbuf_pool *pool, const char *s)
{
    if (!s)
        return s;
    const char *q = s;
    while (*q && !line_break(q))
        q++;
    if (!*q)
        return s;
    sbuf o;
    sbuf_init(&o);
    for (q = s; *q;) {
        size_t n = line_break(q);
        if (n == 1)
            sbuf_puts(&o, *q == '\n' ? "\\n" : *q == '\r' ? "\\r" : "\\x09");
        else if (n == 3)
            sbuf_puts(&o, q[2] == (char)0xa8 ? "\\u2028" : "\\u2029");
        else
            sbuf_putc(&o, *q);
        q += n ? n : 1;
    }
    return pool_keep(pool, &o);
}

const char *sbuf_md_cell(sbuf_pool *pool, const char *s)
{
    s = sbuf_oneline(pool, s);
    if (!s || !strchr(s, '|'))
        return s;
    sbuf o;
    sbuf_init(&o);
    for (; *s; s++) {
        if (*s == '|')
            sbuf_puts(&o, "\\|");
        else
            sbuf_putc(&o, *s);
    }
    return pool_keep(pool, &o);
}

void sbuf_say(FILE *f, const char *fmt, ...)
{
    sbuf b;
    sbuf_pool pool = {0};
    sbuf_init(&b);
    va_list ap;
    va_start(ap, fmt);
    char *line = NULL;
    int n = vasprintf(&line, fmt, ap);
    va_end(ap);
    if (n >= 0) {
        sbuf_puts(&b, sbuf_oneline(&pool, line));
        sbuf_text_safe(&b, 0);
    }
    if (n >= 0 && !b.oom && !pool.oom)
        fprintf(f, "%.*s\n", (int)b.len, b.data ? b.data : "");
    else /* out of memory: the format alone, which is ours */
        fprintf(f, "%s\n", fmt);
    free(line);
    sbuf_free(&b);
    sbuf_pool_free(&pool);
}

void sbuf_pool_free(sbuf_pool *pool)
{
    for (size_t i = 0; i < pool->n; i++)
        sonde__free(pool->v[i]);
    sonde__free(pool->v);
    memset(pool, 0, sizeof *pool);
}

int sbuf_u64(sbuf *b, uint64_t v)
{
    char tmp[24];
    int i = (int)sizeof tmp;
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return sbuf_add(b, tmp + i, sizeof tmp - (size_t)i);
}

int sbuf_decimal(sbuf *b, int64_t v, unsigned places)
{
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v, scale = 1;
    if (places > 18)
        places = 18;
    for (unsigned i = 0; i < places; i++)
        scale *= 10;
    if ((v < 0 && sbuf_putc(b, '-')) || sbuf_u64(b, u / scale))
        return -1;
    if (!places)
        return 0;
    char f[20];
    f[0] = '.';
    uint64_t frac = u % scale;
    for (unsigned i = places; i > 0; i--, frac /= 10)
        f[i] = (char)('0' + frac % 10);
    return sbuf_add(b, f, places + 1);
}

int sbuf_us3(sbuf *b, int64_t ns)
{
    return sbuf_decimal(b, ns, 3);
}

size_t varint_get(const uint8_t *in, size_t avail, uint64_t *v)
{
    uint64_t r = 0;
    for (size_t i = 0; i < avail && i < 10; i++) {
        uint64_t byte = in[i];
        if (i == 9 && byte > 1)
            return 0;
        r |= (byte & 0x7f) << (7 * i);
        if (!(byte & 0x80)) {
            *v = r;
            return i + 1;
        }
    }
    return 0;
}
