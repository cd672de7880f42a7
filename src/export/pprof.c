/* pprof.c - NAME.pb.gz: the CPU samples as pprof's profile (github.com/google/pprof,
 * proto/profile.proto), gzip-compressed, the input of `pprof` and speedscope. A function per
 * function of the samples, with its source file and the line it is defined at where the DWARF
 * says; a location per function (the samples keep function names, not addresses) and one more
 * per source line the samples were running (`pprof -lines`): every frame's line where the
 * sampler recorded them (FRAMELINES: a Python frame's, a native one's where the DWARF says),
 * else the innermost frame's alone (an older file); a sample per distinct stack and lines, with
 * its count and its CPU time (count times the sampling period), labelled with its process.
 * Where off-CPU periods were followed (docs/stacks.md), two more sample types, off_cpu_periods
 * and off_cpu (nanoseconds), and a sample per off-CPU stack and lines holding them (its CPU
 * values 0); the default sample type stays cpu (`pprof -sample_index=off_cpu` for them). */
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
    PR_DURATION = 10, PR_PERIOD_TYPE = 11, PR_PERIOD = 12, PR_DEFAULT_SAMPLE_TYPE = 14,
    VT_TYPE = 1, VT_UNIT = 2,
    SA_LOCATION = 1, SA_VALUE = 2, SA_LABEL = 3, LB_KEY = 1, LB_STR = 2,
    LO_ID = 1, LO_LINE = 4, LI_FUNCTION = 1, LI_LINE = 2,
    FN_ID = 1, FN_NAME = 2, FN_SYSTEM_NAME = 3, FN_FILENAME = 4, FN_START_LINE = 5,
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

/* A Location: id, and one Line of function func (an sm_profile.funcs index) at line (0:
 * unknown). */
static void location(sbuf *b, uint64_t id, size_t func, unsigned line)
{
    size_t at = pb_open(b, PR_LOCATION);
    pb_uint(b, LO_ID, id);
    size_t ln = pb_open(b, LO_LINE);
    pb_uint(b, LI_FUNCTION, func + 1);
    if (line)
        pb_uint(b, LI_LINE, line);
    pb_close(b, ln);
    pb_close(b, at);
}

/* The locations of each function at each line every frame's line was known at (FRAMELINES):
 * ids after the functions' and the innermost lines' (profile()), written as they are first
 * used. */
typedef struct flocs {
    strmap ids;
    uint64_t next;
    char key[48];
} flocs;

/* The location of function func at line (0: the function's own, id func + 1). */
static uint64_t floc(flocs *l, sbuf *b, uint32_t func, unsigned line)
{
    if (!line)
        return (uint64_t)func + 1;
    snprintf(l->key, sizeof l->key, "%u:%u", func, line);
    int id = strmap_get(&l->ids, l->key);
    if (id >= 0)
        return (uint64_t)id;
    uint64_t at = l->next++;
    if (at > INT32_MAX || strmap_put(&l->ids, l->key, (int)at))
        b->oom = 1; /* the profile is not written */
    location(b, at, func, line);
    return at;
}

/* A Sample of the stack frames[0, n) (sm_profile.funcs indexes, outermost first) with its
 * values (one per sample type), labelled process proc: its innermost location leaf in place of
 * its innermost function's (0: that function's); with lines (FRAMELINES, outermost first) each
 * frame at its own line's location (l). */
static void sample(sbuf *b, sbuf *packed, const uint32_t *frames, size_t n, uint64_t leaf,
                   const uint32_t *lines, flocs *l, const uint64_t *values, size_t n_values,
                   uint64_t process, uint64_t proc)
{
    sbuf_reset(packed); /* the locations, innermost first */
    size_t k = n;
    if (leaf && k) {
        pb_varint(packed, leaf);
        k--;
    }
    while (k-- > 0) /* (a line's location is written before the sample that names it) */
        pb_varint(packed, lines ? floc(l, b, frames[k], lines[k]) : frames[k] + 1);
    size_t at = pb_open(b, PR_SAMPLE);
    pb_bytes(b, SA_LOCATION, packed->data, packed->len);
    sbuf_reset(packed);
    for (size_t v = 0; v < n_values; v++)
        pb_varint(packed, values[v]);
    pb_bytes(b, SA_VALUE, packed->data, packed->len);
    size_t lb = pb_open(b, SA_LABEL);
    pb_uint(b, LB_KEY, process);
    pb_uint(b, LB_STR, proc);
    pb_close(b, lb);
    pb_close(b, at);
}

/* The process a folded line names (its first element), as a string of the table. */
static uint64_t process_of(strs *t, const char *line)
{
    char comm[64];
    const char *semi = strchr(line, ';');
    size_t n = semi ? (size_t)(semi - line) : strlen(line);
    snprintf(comm, sizeof comm, "%.*s", (int)(n < sizeof comm ? n : sizeof comm - 1), line);
    return str_copy(t, comm);
}

/* The Profile message, whole (its size grows with distinct stacks, lines and functions only). */
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
    size_t n_types = 2; /* and with off-CPU periods, two more: the CPU time stays the default */
    if (p->n_off) {
        value_type(b, PR_SAMPLE_TYPE, str_id(&t, "off_cpu_periods"), count);
        value_type(b, PR_SAMPLE_TYPE, str_id(&t, "off_cpu"), ns);
        pb_uint(b, PR_DEFAULT_SAMPLE_TYPE, cpu);
        n_types = 4;
    }
    value_type(b, PR_PERIOD_TYPE, cpu, ns);
    pb_uint(b, PR_PERIOD, period);
    pb_uint(b, PR_DURATION, (uint64_t)(m->duration_ns > 0 ? m->duration_ns : 0));
    for (size_t i = 0; i < p->n_funcs; i++) { /* function i and its location: id i + 1 */
        const sm_func *fn = &p->funcs[i];
        size_t at = pb_open(b, PR_FUNCTION);
        pb_uint(b, FN_ID, i + 1);
        uint64_t name = str_id(&t, fn->name);
        pb_uint(b, FN_NAME, name);
        pb_uint(b, FN_SYSTEM_NAME, name);
        pb_uint(b, FN_FILENAME, str_id(&t, fn->file ? fn->file : fn->object));
        if (fn->file && fn->line)
            pb_uint(b, FN_START_LINE, fn->line);
        pb_close(b, at);
        location(b, i + 1, i, 0);
    }
    for (size_t j = 0; j < p->n_lines; j++) /* line j: location n_funcs + 1 + j */
        location(b, p->n_funcs + 1 + j, p->lines[j].func, p->lines[j].line);
    sbuf packed;
    sbuf_init(&packed);
    flocs l = {.next = p->n_funcs + 1 + p->n_lines};
    strmap_init(&l.ids);
    size_t sl = 0, sf = 0;
    for (size_t i = 0; i < p->n_stacks && p->first; i++) {
        uint64_t proc = process_of(&t, p->stacks[i]), rest = p->counts[i];
        const uint32_t *fr = p->frames + p->first[i];
        size_t n = p->first[i + 1] - p->first[i];
        while (sf < p->n_stack_flines && p->stack_flines[sf].stack < i)
            sf++;
        int every = sf < p->n_stack_flines && p->stack_flines[sf].stack == i;
        for (; sf < p->n_stack_flines && p->stack_flines[sf].stack == i; sf++) {
            const sm_stack_flines *e = &p->stack_flines[sf]; /* each frame at its line */
            uint64_t v[4] = {e->count, e->count * period, 0, 0};
            sample(b, &packed, fr, n, 0, p->flines + e->at, &l, v, n_types, process, proc);
            rest -= e->count;
        }
        while (sl < p->n_stack_lines && p->stack_lines[sl].stack < i)
            sl++;
        for (; !every && sl < p->n_stack_lines && p->stack_lines[sl].stack == i; sl++) {
            const sm_stack_line *e = &p->stack_lines[sl]; /* the innermost frame's line alone */
            uint64_t v[4] = {e->count, e->count * period, 0, 0};
            sample(b, &packed, fr, n, p->n_funcs + 1 + e->line, NULL, &l, v, n_types, process,
                   proc);
            rest -= e->count; /* its lines' counts are parts of its count (profile.c) */
        }
        uint64_t v[4] = {rest, rest * period, 0, 0};
        if (rest) /* its samples at no known line */
            sample(b, &packed, fr, n, 0, NULL, &l, v, n_types, process, proc);
    }
    for (size_t i = 0; i < p->n_off && n_types == 4; i++) { /* off-CPU: periods and time */
        const sm_offstack *x = &p->off[i];
        uint64_t proc = process_of(&t, x->stack), periods = x->periods, off_ns = x->ns;
        size_t lo = 0, hi = p->n_off_flines; /* its lines' variants (by stack id) */
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (p->off_flines[mid].off < x->id)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (; lo < p->n_off_flines && p->off_flines[lo].off == x->id; lo++) {
            const sm_off_flines *e = &p->off_flines[lo];
            uint64_t v[4] = {0, 0, e->periods, e->ns};
            sample(b, &packed, x->frames, x->n_frames, 0, p->flines + e->at, &l, v, n_types,
                   process, proc);
            periods -= e->periods;
            off_ns -= e->ns;
        }
        uint64_t v[4] = {0, 0, periods, off_ns};
        if (periods) /* its periods at no known line */
            sample(b, &packed, x->frames, x->n_frames, 0, NULL, &l, v, n_types, process, proc);
    }
    strmap_free(&l.ids);
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
