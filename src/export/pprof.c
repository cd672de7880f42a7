/* pprof.c - NAME.pb.gz: the CPU samples as pprof's profile (github.com/google/pprof,
 * proto/profile.proto), gzip-compressed, the input of `pprof` and speedscope. A location per
 * function (the samples keep function names, not addresses), a sample per distinct stack with
 * its count and its CPU time (count times the sampling period), labelled with its process. */
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "export.h"
#include "../util/alloc.h"
#include "../util/pb.h"
#include "../util/strmap.h"

/* Field numbers of profile.proto. */
enum {
    PR_SAMPLE_TYPE = 1, PR_SAMPLE = 2, PR_LOCATION = 4, PR_FUNCTION = 5, PR_STRING = 6,
    PR_DURATION = 10, PR_PERIOD_TYPE = 11, PR_PERIOD = 12,
    VT_TYPE = 1, VT_UNIT = 2,
    SA_LOCATION = 1, SA_VALUE = 2, SA_LABEL = 3, LB_KEY = 1, LB_STR = 2,
    LO_ID = 1, LO_LINE = 4, LI_FUNCTION = 1,
    FN_ID = 1, FN_NAME = 2, FN_SYSTEM_NAME = 3, FN_FILENAME = 4,
};

typedef struct strs {
    strmap map;
    const char **v;
    size_t n, cap;
    char **owned;          /* the strings copied into the table (str_copy) */
    size_t n_owned, cap_owned;
    int oom;
} strs;

/* A string's index in the string table, added when new (index 0 is ""). */
static uint64_t str_id(strs *t, const char *s)
{
    int k = strmap_get(&t->map, s);
    if (k >= 0)
        return (uint64_t)k;
    if (SONDE_GROW(t->v, t->n, t->cap) || strmap_put(&t->map, s, (int)t->n)) {
        t->oom = 1;
        return 0;
    }
    t->v[t->n] = s;
    return t->n++;
}

/* The same for a string that does not outlive the call: copied when new. */
static uint64_t str_copy(strs *t, const char *s)
{
    int k = strmap_get(&t->map, s);
    if (k >= 0)
        return (uint64_t)k;
    char *c = sonde__strdup(s);
    if (!c || SONDE_GROW(t->owned, t->n_owned, t->cap_owned)) {
        sonde__free(c);
        t->oom = 1;
        return 0;
    }
    t->owned[t->n_owned++] = c;
    return str_id(t, c);
}

static void value_type(sbuf *b, unsigned field, uint64_t type, uint64_t unit)
{
    size_t at = pb_open(b, field);
    pb_uint(b, VT_TYPE, type);
    pb_uint(b, VT_UNIT, unit);
    pb_close(b, at);
}

/* The Profile message, whole (its size grows with distinct stacks and functions only). */
static int profile(const sm_model *m, sbuf *b)
{
    const sm_profile *p = &m->profile;
    strs t;
    memset(&t, 0, sizeof t);
    strmap_init(&t.map);
    str_id(&t, "");
    uint64_t samples = str_id(&t, "samples"), count = str_id(&t, "count");
    uint64_t cpu = str_id(&t, "cpu"), ns = str_id(&t, "nanoseconds");
    uint64_t process = str_id(&t, "process");
    uint64_t period = p->hz ? 1000000000ull / p->hz : 0;
    value_type(b, PR_SAMPLE_TYPE, samples, count);
    value_type(b, PR_SAMPLE_TYPE, cpu, ns);
    value_type(b, PR_PERIOD_TYPE, cpu, ns);
    pb_uint(b, PR_PERIOD, period);
    pb_uint(b, PR_DURATION, (uint64_t)(m->duration_ns > 0 ? m->duration_ns : 0));
    for (size_t i = 0; i < p->n_funcs; i++) { /* function i and its location: id i + 1 */
        size_t at = pb_open(b, PR_FUNCTION);
        pb_uint(b, FN_ID, i + 1);
        uint64_t name = str_id(&t, p->funcs[i].name);
        pb_uint(b, FN_NAME, name);
        pb_uint(b, FN_SYSTEM_NAME, name);
        pb_uint(b, FN_FILENAME, str_id(&t, p->funcs[i].object));
        pb_close(b, at);
        at = pb_open(b, PR_LOCATION);
        pb_uint(b, LO_ID, i + 1);
        size_t line = pb_open(b, LO_LINE);
        pb_uint(b, LI_FUNCTION, i + 1);
        pb_close(b, line);
        pb_close(b, at);
    }
    sbuf packed;
    sbuf_init(&packed);
    char comm[64];
    for (size_t i = 0; i < p->n_stacks && p->first; i++) {
        size_t at = pb_open(b, PR_SAMPLE);
        sbuf_reset(&packed); /* the locations, innermost first */
        for (size_t k = p->first[i + 1]; k-- > p->first[i];)
            pb_varint(&packed, p->frames[k] + 1);
        pb_bytes(b, SA_LOCATION, packed.data, packed.len);
        sbuf_reset(&packed);
        pb_varint(&packed, p->counts[i]);
        pb_varint(&packed, p->counts[i] * period);
        pb_bytes(b, SA_VALUE, packed.data, packed.len);
        const char *semi = strchr(p->stacks[i], ';'); /* the folded line starts with it */
        size_t n = semi ? (size_t)(semi - p->stacks[i]) : strlen(p->stacks[i]);
        snprintf(comm, sizeof comm, "%.*s", (int)(n < sizeof comm ? n : sizeof comm - 1),
                 p->stacks[i]);
        size_t lb = pb_open(b, SA_LABEL);
        pb_uint(b, LB_KEY, process);
        pb_uint(b, LB_STR, str_copy(&t, comm));
        pb_close(b, lb);
        pb_close(b, at);
    }
    sbuf_free(&packed);
    for (size_t i = 0; i < t.n; i++)
        pb_str(b, PR_STRING, t.v[i]);
    for (size_t i = 0; i < t.n_owned; i++)
        sonde__free(t.owned[i]);
    sonde__free(t.owned);
    sonde__free(t.v);
    strmap_free(&t.map);
    return t.oom || b->oom ? -1 : 0;
}

int sx_pprof_stream(const sm_model *m, sx_sink sink, void *ctx)
{
    sbuf b;
    sbuf_init(&b);
    if (profile(m, &b) != 0) {
        sbuf_free(&b);
        return -1;
    }
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) { /* gzip */
        sbuf_free(&b);
        return -1;
    }
    unsigned char out[1 << 16];
    z.next_in = (Bytef *)b.data;
    z.avail_in = (uInt)b.len;
    int err = 0, zr;
    do {
        z.next_out = out;
        z.avail_out = sizeof out;
        zr = deflate(&z, Z_FINISH);
        if (zr == Z_STREAM_ERROR)
            err = 1;
        else if (sizeof out - z.avail_out &&
                 sink(ctx, (const char *)out, sizeof out - z.avail_out) != 0)
            err = 1;
    } while (!err && zr != Z_STREAM_END);
    deflateEnd(&z);
    sbuf_free(&b);
    return err ? -1 : 0;
}
