/* reader.c - parses a .sonde file: header, records (checked by length and CRC), per-thread event
 * blocks de-duplicated by slot index, clock anchors; then hands the decoded events to model.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "../format/format.h"
#include "../util/clock.h"
#include "../util/error.h"
#include "../util/buf.h"
#include "model_build.h"
#include "../util/alloc.h"
#include "../util/sort.h"

#define GROW SONDE_GROW

typedef struct rblock {
    uint64_t first, nslots, base_tick;
    uint64_t off;          /* where its events are in the file */
    size_t len;
    size_t order;
} rblock;

typedef struct rthread {
    uint32_t index, tid;
    char *name;
    rblock *blocks;
    size_t n_blocks, cap_blocks;
} rthread;

typedef struct rstate rstate;

/* What decodes: the file's records (the reading's own), or a thread's events a batch at a time
 * (the reading's own, or a second for the first pass's other thread: dec_new). */
typedef struct rdec {
    rstate *s;
    sb_ev *batch_ev;       /* the batch decode_thread hands over (RBATCH events) */
    double (*batch_v)[SONDE_MAX_VALUES]; /* and its events' values */
    uint8_t *scratch;      /* the bytes read with pread (src_at) */
    size_t cap_scratch;
    int apart;             /* its warnings kept here, with their threads, until dec_end */
    struct rwarned {
        uint32_t thread;
        char *text;
    } *warned;
    size_t n_warned, cap_warned;
} rdec;

struct rstate {
    const char *fname;
    sb_raw raw;            /* what model.c consumes */
    rthread *th;           /* indexed by thread index */
    size_t n_th;
    size_t cap_anchor;
    size_t cap_warn;
    uint32_t version;      /* the file's format version */
    size_t max_threads;    /* thread indices are dense: no more than the file has records for */
    /* The file: in memory (data), or read a record or a block at a time with pread from fd
     * into a decoder's scratch, so no reading holds the whole file (sm_read_file_set). */
    const uint8_t *data;
    int fd;
    rdec dec;              /* the reading's own decoder */
    /* Where the EVENTS records' checksums are summed after the walk, on several threads
     * (defer: sm__check_records), the records to sum in sums. */
    int defer;
    sb_sum *sums;
    size_t n_sums, cap_sums;
};

const uint8_t *sm__bytes_at(const uint8_t *data, int fd, uint64_t off, size_t len, uint8_t **buf,
                            size_t *cap)
{
    if (data)
        return data + off;
    if (len > *cap) {
        uint8_t *g = sonde__realloc(*buf, len);
        if (!g) {
            errno = ENOMEM;
            return NULL;
        }
        *buf = g;
        *cap = len;
    }
    for (size_t got = 0; got < len;) {
        ssize_t r = pread(fd, *buf + got, len - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            errno = r ? errno : EIO;
            return NULL;
        }
        got += (size_t)r;
    }
    return *buf;
}

/* The len bytes at off (within the file's size): in memory, or read into d's scratch buffer,
 * valid until its next call. NULL when out of memory (errno ENOMEM) or the file could not be
 * read there (it shrank, or an I/O error). */
static const uint8_t *src_at(rdec *d, uint64_t off, size_t len)
{
    return sm__bytes_at(d->s->data, d->s->fd, off, len, &d->scratch, &d->cap_scratch);
}

static int rwarn(rstate *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int rwarn(rstate *s, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (!s->raw.warnings) /* the model took them (sm__build): a build's are added anew */
        s->cap_warn = 0;
    if (GROW(s->raw.warnings, s->raw.n_warnings, s->cap_warn))
        return -1;
    char *w = sonde__strdup(tmp);
    if (!w)
        return -1;
    s->raw.warnings[s->raw.n_warnings++] = w;
    return 0;
}

int sm__get_str(const uint8_t **pp, const uint8_t *end, size_t max, char **out)
{
    uint64_t n;
    size_t k = varint_get(*pp, (size_t)(end - *pp), &n);
    if (!k || n > (uint64_t)(end - *pp - (ptrdiff_t)k) || n > max)
        return -1;
    char *s = sonde__malloc(n + 1);
    if (!s)
        return -2;
    memcpy(s, *pp + k, n);
    s[n] = 0;
    *pp += k + n;
    *out = s;
    return 0;
}

/* A string of any length. */
#define get_str(pp, end, out) sm__get_str(pp, end, SIZE_MAX, out)

int sm__get_var(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
    size_t k = varint_get(*pp, (size_t)(end - *pp), v);
    if (!k)
        return -1;
    *pp += k;
    return 0;
}

static rthread *thread_at(rstate *s, uint64_t idx)
{
    if (idx >= s->max_threads) /* a crafted index: it would size the table */
        return NULL;
    if (idx >= s->n_th) {
        size_t nn = (size_t)idx + 1;
        rthread *t = sonde__realloc(s->th, nn * sizeof *t);
        if (!t)
            return NULL;
        memset(t + s->n_th, 0, (nn - s->n_th) * sizeof *t);
        for (size_t i = s->n_th; i < nn; i++)
            t[i].index = (uint32_t)i;
        s->th = t;
        s->n_th = nn;
    }
    return &s->th[idx];
}

/* A number of the INFO record within lo..hi, else 0 (unknown): a crafted file's "nan" or 1e308
 * would make every time in the report undefined (fuzz_sonde's INFO mutations found it). */
static double info_num(const char *v, double lo, double hi)
{
    char *end;
    double d = strtod(v, &end);
    return end != v && isfinite(d) && d >= lo && d <= hi ? d : 0;
}

static int parse_info(rstate *s, const uint8_t *p, const uint8_t *end)
{
    while (p < end) {
        char *k = NULL, *v = NULL;
        if (get_str(&p, end, &k) || get_str(&p, end, &v)) {
            sonde__free(k);
            return -1;
        }
        char **slot = NULL;
        if (!strcmp(k, "name")) slot = &s->raw.name;
        else if (!strcmp(k, "host")) slot = &s->raw.host;
        else if (!strcmp(k, "program")) slot = &s->raw.program;
        else if (!strcmp(k, "cmdline")) slot = &s->raw.cmdline;
        else if (!strcmp(k, "clock")) slot = &s->raw.clock;
        else if (!strcmp(k, "unit")) slot = &s->raw.unit;
        else if (!strcmp(k, "sonde_version")) slot = &s->raw.sonde_version;
        else if (!strcmp(k, "pid")) s->raw.pid = atoi(v);
        else if (!strcmp(k, "ticks_per_s")) s->raw.ticks_per_s = info_num(v, 1e3, 1e13);
        else if (!strcmp(k, "peak_flops")) s->raw.peak_flops = info_num(v, 0, 1e30);
        else if (strchr(k, '.')) { /* system.* and config.*: kept as they are */
            if (GROW(s->raw.info, s->raw.n_info, s->raw.cap_info)) {
                sonde__free(k);
                sonde__free(v);
                return -2;
            }
            s->raw.info[s->raw.n_info++] = (sm_kv){k, v};
            continue;
        }
        if (slot) {
            sonde__free(*slot);
            *slot = v;
        } else {
            sonde__free(v);
        }
        sonde__free(k);
    }
    return 0;
}

static int parse_site(rstate *s, const uint8_t *p, const uint8_t *end)
{
    uint64_t id, line;
    char *name = NULL, *file = NULL, *func = NULL;
    if (sm__get_var(&p, end, &id) || id >= SM_MAX_ID || get_str(&p, end, &name) ||
        get_str(&p, end, &file) || get_str(&p, end, &func) || sm__get_var(&p, end, &line)) {
        sonde__free(name);
        sonde__free(file);
        sonde__free(func);
        return -1;
    }
    if (GROW(s->raw.sites, s->raw.n_sites, s->raw.cap_sites)) { /* sm__build sorts them by id */
        sonde__free(name);
        sonde__free(file);
        sonde__free(func);
        return -2;
    }
    sm_site *st = &s->raw.sites[s->raw.n_sites++];
    memset(st, 0, sizeof *st);
    st->id = (uint32_t)id;
    st->name = name;
    st->file = *file ? file : (sonde__free(file), NULL);
    st->func = *func ? func : (sonde__free(func), NULL);
    st->line = (int)(line > 1000000000 ? 0 : line);
    return 0;
}

static int parse_thread(rstate *s, const uint8_t *p, const uint8_t *end)
{
    uint64_t idx, tid;
    char *name = NULL;
    if (sm__get_var(&p, end, &idx) || sm__get_var(&p, end, &tid) || get_str(&p, end, &name))
        return -1;
    rthread *t = thread_at(s, idx);
    if (!t) {
        sonde__free(name);
        return -1;
    }
    sonde__free(t->name);
    t->name = name;
    t->tid = (uint32_t)tid;
    return 0;
}

/* An EVENTS record of len bytes whose payload is at at in the file, its first bytes from p to
 * end (its block's header, at most 48 bytes, or more). */
static int parse_events(rstate *s, const uint8_t *p, const uint8_t *end, size_t len, uint64_t at,
                        size_t order)
{
    const uint8_t *p0 = p;
    uint64_t idx, tid, first, nslots;
    if (sm__get_var(&p, end, &idx) || sm__get_var(&p, end, &tid) || sm__get_var(&p, end, &first) ||
        sm__get_var(&p, end, &nslots) || end - p < 8)
        return -1;
    rthread *t = thread_at(s, idx);
    if (!t)
        return -1;
    if (!t->tid)
        t->tid = (uint32_t)tid;
    if (GROW(t->blocks, t->n_blocks, t->cap_blocks))
        return -2;
    rblock *b = &t->blocks[t->n_blocks++];
    b->first = first;
    b->nslots = nslots;
    b->base_tick = sonde_get_u64le(p);
    b->off = at + (uint64_t)(p + 8 - p0);
    b->len = len - (size_t)(p + 8 - p0);
    b->order = order;
    return 0;
}

static int cmp_block(const void *a, const void *b)
{
    const rblock *x = a, *y = b;
    if (x->first != y->first)
        return x->first < y->first ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* sm__get_var for the event loop: most varints there are one byte (a kind and a small id, a
 * short delta), read inline; the rest go through varint_get. */
static inline int ev_var(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
    if (*pp < end && **pp < 0x80) {
        *v = *(*pp)++;
        return 0;
    }
    return sm__get_var(pp, end, v);
}

/* Events handed to the model a batch at a time: a thread's events are never all held at once. */
#define RBATCH 4096

/* A warning of d's, on thread ti: the reading's (rwarn), or kept apart with its thread. */
static int dwarn(rdec *d, uint32_t ti, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int dwarn(rdec *d, uint32_t ti, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (!d->apart)
        return rwarn(d->s, "%s", tmp);
    if (GROW(d->warned, d->n_warned, d->cap_warned))
        return -1;
    if (!(d->warned[d->n_warned].text = sonde__strdup(tmp)))
        return -1;
    d->warned[d->n_warned++].thread = ti;
    return 0;
}

static void dec_free(rdec *d)
{
    for (size_t i = 0; i < d->n_warned; i++)
        sonde__free(d->warned[i].text);
    sonde__free(d->warned);
    sonde__free(d->batch_ev);
    sonde__free(d->batch_v);
    sonde__free(d->scratch);
}

/* d's batches made (its file s, its warnings kept apart or not). 0, or -1 out of memory. */
static int dec_init(rdec *d, rstate *s, int apart)
{
    d->s = s;
    d->apart = apart;
    d->batch_ev = sonde__malloc(RBATCH * sizeof *d->batch_ev);
    d->batch_v = sonde__malloc(RBATCH * sizeof *d->batch_v);
    return d->batch_ev && d->batch_v ? 0 : -1;
}

/* sb_raw.dec_new: a decoder of src's file whose warnings are kept apart; NULL out of memory. */
static void *dec_new(void *src)
{
    rdec *d = sonde__calloc(1, sizeof *d);
    if (d && dec_init(d, ((rdec *)src)->s, 1)) {
        dec_free(d);
        sonde__free(d);
        d = NULL;
    }
    return d;
}

/* sb_raw.dec_end: the warnings decs kept apart added to the reading's, by thread (each decoder
 * read its threads in increasing order, each thread in one decoder: the order one decoder
 * reading them all would have given), and decs freed. 0, -1 out of memory. */
static int dec_end(void *src, void **decs, int n)
{
    rstate *s = ((rdec *)src)->s;
    size_t at[SB_MAX_DECODERS] = {0};
    int rc = n > SB_MAX_DECODERS ? -1 : 0;
    for (;;) {
        int best = -1;
        for (int i = 0; i < n && i < SB_MAX_DECODERS; i++) {
            const rdec *d = decs[i];
            if (d && at[i] < d->n_warned &&
                (best < 0 || d->warned[at[i]].thread <
                                 ((const rdec *)decs[best])->warned[at[best]].thread))
                best = i;
        }
        if (best < 0 || rc)
            break;
        if (rwarn(s, "%s", ((const rdec *)decs[best])->warned[at[best]++].text))
            rc = -1;
    }
    for (int i = 0; i < n; i++)
        if (decs[i]) {
            dec_free(decs[i]);
            sonde__free(decs[i]);
        }
    return rc;
}

/* Decodes thread t's blocks in slot order, skipping slots already seen, and hands the events to
 * fn a batch at a time. The blocks were sorted by cmp_block (read_src). warn: a malformed block
 * is named in a warning (the first pass does it; the second would repeat it). */
static int decode_thread(void *src, size_t ti, int warn, sb_batch_fn fn, void *ctx)
{
    rdec *d = src;
    rstate *s = d->s;
    rthread *t = &s->th[ti];
    uint64_t covered = 0;
    sb_ev *const evs = d->batch_ev; /* the batch in locals: the stores into it (a byte among
                                       them, which may alias anything) reload nothing */
    size_t n_ev = 0, nv_used = 0;
    for (size_t bi = 0; bi < t->n_blocks; bi++) {
        rblock *b = &t->blocks[bi];
        uint64_t slot = b->first, prev = b->base_tick;
        const uint8_t *p = src_at(d, b->off, b->len), *end = p ? p + b->len : NULL;
        if (!p && errno == ENOMEM)
            return -2;
        if (!p) /* the file changed under the reading: as a malformed block */
            goto bad;
        while (p < end) {
            uint64_t tag, dz, arg = 0;
            int no_id = 0; /* an id libsonde never writes: a malformed block */
            if (end - p >= 2 && !((p[0] | p[1]) & 0x80)) { /* most: a one-byte tag and delta */
                tag = p[0];
                dz = p[1];
                p += 2;
            } else if (ev_var(&p, end, &tag) || ev_var(&p, end, &dz)) {
                goto bad;
            } else {
                no_id = tag >= (uint64_t)s->raw.id_bound << 4;
            }
            unsigned kind = (unsigned)(tag & 15u), nv = 0, slots = 1;
            const uint8_t *vals = p;
            if (kind > SONDE_K_END) { /* a section's edges (most events) carry neither an arg
                                         nor values */
                if (kind >= SONDE_K_COUNT)
                    goto bad;
                if (sonde_kind_has_arg_v(kind, s->version) && ev_var(&p, end, &arg))
                    goto bad;
                nv = sonde_kind_values(kind);
                if ((size_t)(end - p) < nv * 8u)
                    goto bad;
                vals = p;
                p += nv * 8u;
                slots = sonde_kind_slots(kind);
                no_id |= arg >= s->raw.id_bound && kind == SONDE_K_METADATA;
            }
            uint64_t tick = prev + (uint64_t)zigzag_dec(dz);
            prev = tick;
            if (slot >= covered) {
                if (no_id)
                    goto bad;
                if (n_ev == RBATCH) {
                    sb_batch bt = {evs, n_ev, (const double(*)[SONDE_MAX_VALUES])d->batch_v};
                    if (fn(ctx, &bt))
                        return -1;
                    n_ev = nv_used = 0;
                }
                sb_ev *e = &evs[n_ev++];
                *e = (sb_ev){.tick = tick, .id = (uint32_t)(tag >> 4), .arg = (uint32_t)arg,
                             .kind = (uint8_t)kind};
                if (nv) { /* the values out of line: most events (sections) have none */
                    double *v = d->batch_v[nv_used];
                    memset(v, 0, sizeof d->batch_v[0]);
                    for (unsigned i = 0; i < nv; i++) {
                        uint64_t bits = sonde_get_u64le(vals + 8 * i);
                        memcpy(&v[i], &bits, 8);
                    }
                    e->vi = (uint32_t)++nv_used;
                }
            }
            slot += slots;
        }
        if (slot > covered)
            covered = slot;
        continue;
    bad:
        if (warn && dwarn(d, (uint32_t)ti, "%s: thread %u: a malformed event block at slot %llu "
                          "was skipped", s->fname, t->index, (unsigned long long)slot))
            return -2;
    }
    sb_batch bt = {evs, n_ev, (const double(*)[SONDE_MAX_VALUES])d->batch_v};
    if (n_ev && fn(ctx, &bt))
        return -1;
    return 0;
}

/* The len bytes at `at` of the record at off into *out: 0; 1 when they cannot be read (a
 * warning says so: the reading stops there); -1 out of memory. */
static int record_bytes(rstate *s, size_t off, uint64_t at, size_t len, const uint8_t **out)
{
    *out = src_at(&s->dec, at, len);
    if (*out)
        return 0;
    int e = errno;
    if (e == ENOMEM)
        return -1;
    return rwarn(s, "%s: cannot read the record at offset %zu (%s): read up to it", s->fname,
                 off, strerror(e)) ? -1 : 1;
}

/* The STATS record's keys, each with the sb_raw figure it sets (others are skipped). */
static const struct {
    const char *key;
    size_t at;
} g_stats_keys[] = {
    {"dropped_events", offsetof(sb_raw, dropped)},
    {"writer_cpu_ns", offsetof(sb_raw, writer_cpu_ns)},
    {"sampler_cpu_ns", offsetof(sb_raw, sampler_cpu_ns)},
    {"stacks_cpu_ns", offsetof(sb_raw, stacks_cpu_ns)},
    {"stacks_cfi_unwound", offsetof(sb_raw, stacks_cfi)},
    {"stacks_py_way", offsetof(sb_raw, stacks_py_way)},
    {"stacks_py_kernel_runs", offsetof(sb_raw, stacks_py_kernel_runs)},
    {"stacks_py_kernel_ns", offsetof(sb_raw, stacks_py_kernel_ns)},
    {"backpressure_chunks", offsetof(sb_raw, bp_chunks)},
    {"backpressure_ns", offsetof(sb_raw, bp_ns)},
};

/* One record of the walk (read_src_as): type, its bytes from p to end (an EVENTS record's
 * first ones alone where its sum is left for later), len in all, at its offset. 0; -1 malformed
 * (said and skipped); -2 out of memory. */
static int parse_record(rstate *s, unsigned type, const uint8_t *p, const uint8_t *end,
                        uint32_t len, uint64_t at, size_t *order)
{
    int r = 0;
    uint64_t v;
    switch (type) {
    case SONDE_R_INFO: r = parse_info(s, p, end); break;
    case SONDE_R_SITE: r = parse_site(s, p, end); break;
    case SONDE_R_THREAD: r = parse_thread(s, p, end); break;
    case SONDE_R_EVENTS: r = parse_events(s, p, end, len, at, (*order)++); break;
    case SONDE_R_ANCHOR: {
        uint64_t t, mo, re;
        if (sm__get_var(&p, end, &t) || sm__get_var(&p, end, &mo) || sm__get_var(&p, end, &re)) {
            r = -1;
            break;
        }
        if (GROW(s->raw.anchors, s->raw.n_anchors, s->cap_anchor)) {
            r = -2;
            break;
        }
        sb_anchor *a = &s->raw.anchors[s->raw.n_anchors++];
        a->tick = t;
        a->mono_ns = mo;
        a->real_ns = re;
        break;
    }
    case SONDE_R_WARNING: {
        char *w = NULL;
        r = get_str(&p, end, &w);
        if (!r) {
            if (GROW(s->raw.warnings, s->raw.n_warnings, s->cap_warn)) {
                sonde__free(w);
                r = -2;
            } else {
                s->raw.warnings[s->raw.n_warnings++] = w;
            }
        }
        break;
    }
    case SONDE_R_STATS:
        while (!r && p < end) {
            char *k = NULL;
            r = get_str(&p, end, &k);
            if (!r && sm__get_var(&p, end, &v))
                r = -1;
            for (size_t i = 0; !r && i < sizeof g_stats_keys / sizeof g_stats_keys[0]; i++)
                if (!strcmp(k, g_stats_keys[i].key)) {
                    *(uint64_t *)((char *)&s->raw + g_stats_keys[i].at) = v;
                    break;
                }
            sonde__free(k);
        }
        break;
    case SONDE_R_CLEAR:
        if (sm__get_var(&p, end, &v))
            r = -1;
        else if (v > s->raw.clear_tick)
            s->raw.clear_tick = v;
        break;
    case SONDE_R_GPU:
        r = sm__gpu_parse(&s->raw, p, end);
        break;
    case SONDE_R_OPS:
        r = sm__ops_parse(&s->raw, p, end);
        break;
    case SONDE_R_SAMPLES:
    case SONDE_R_STACKS:
    case SONDE_R_FUNCS:
    case SONDE_R_FUNCLOC:
    case SONDE_R_LINES:
    case SONDE_R_FRAMELINES:
    case SONDE_R_OFFCPU:
        r = sm__profile_parse(&s->raw, type, p, end);
        break;
    case SONDE_R_SUMMARY: { /* the last one counts; it is read only where the file ended */
        uint8_t *copy = sonde__malloc(len ? len : 1);
        if (!copy)
            return -2;
        memcpy(copy, p, len);
        sonde__free(s->raw.summary);
        s->raw.summary = copy;
        s->raw.summary_len = len;
        break;
    }
    case SONDE_R_END:
        if (sm__get_var(&p, end, &v))
            r = -1;
        else {
            s->raw.end_tick = v;
            s->raw.clean_end = 1;
        }
        break;
    case SONDE_R_SIGNAL: { /* the last one counts */
        uint64_t tick;
        if (sm__get_var(&p, end, &v) || sm__get_var(&p, end, &tick) || v > 64)
            r = -1;
        else
            s->raw.flushed_on_signal = (int)v;
        break;
    }
    default:
        break; /* a later version's record: skipped */
    }
    return r;
}

/* Whether records of this type hold the run's events (as opposed to describing it): those
 * sm_read_file_from leaves out before its offset. */
static int events_record(unsigned type)
{
    return type == SONDE_R_EVENTS || type == SONDE_R_SAMPLES || type == SONDE_R_OFFCPU ||
           type == SONDE_R_GPU || type == SONDE_R_OPS;
}

/* The bytes of an EVENTS record the walk reads where its checksum is summed later: its block's
 * header (at most 48 bytes) with room to spare. */
#define EVENTS_HEAD 52

/* A stretch of the file the walk reads (walk): [off, end); the records of events before from
 * are passed over, and so are the clock anchors there but the file's first (the model's clock
 * is a line through its first and last anchors); the others' places go to rs where not NULL
 * (sm_read_file_from). *first: where the first record at or past from begins. */
typedef struct walk_span {
    size_t off, end;
    uint64_t from;
    sm_resume *rs;
    size_t first;
    int notes;        /* places an earlier reading noted: a record of events there is not what
                         was noted (the file changed), and stops the walk (1) */
} walk_span;

/* Notes that the record at [at, to) describes the run: a place the next reading reads again. */
static int resume_add(sm_resume *rs, uint64_t at, uint64_t to)
{
    if (rs->n_defs && rs->defs[rs->n_defs - 1].end == at) {
        rs->defs[rs->n_defs - 1].end = to;
        return 0;
    }
    if (GROW(rs->defs, rs->n_defs, rs->cap_defs))
        return -1;
    rs->defs[rs->n_defs++] = (sm_resume_span){at, to};
    return 0;
}

/* Walks the records of w (the reading's own, read_src_as). 0 when it reached w's end, 1 when a
 * torn or unreadable record stopped it (said in a warning), -1 out of memory. w->off is where
 * it stopped. */
static int walk(rstate *s, walk_span *w, size_t *order)
{
    const char *fname = s->fname;
    size_t n = w->end;
    while (w->off < n) {
        size_t off = w->off;
        if (w->first == SIZE_MAX && off >= w->from)
            w->first = off;
        if (n - off < SONDE_RECORD_HEADER_LEN)
            return rwarn(s, "%s: torn record header at offset %zu: read up to it", fname, off)
                       ? -1 : 1;
        const uint8_t *h;
        size_t want = SONDE_RECORD_HEADER_LEN;
        if (s->defer) /* with the block's header of an EVENTS record, in the same read */
            want += n - off - want < EVENTS_HEAD ? n - off - want : EVENTS_HEAD;
        int got = record_bytes(s, off, off, want, &h);
        if (got)
            return got;
        unsigned type = h[0];
        uint32_t len = sonde_get_u32le(h + 4), crc = sonde_get_u32le(h + 8);
        if (len > SONDE_RECORD_MAX || len > n - off - SONDE_RECORD_HEADER_LEN)
            return rwarn(s, "%s: torn last record at offset %zu (%u bytes announced, %zu "
                            "present): read up to it", fname, off, len,
                         n - off - SONDE_RECORD_HEADER_LEN) ? -1 : 1;
        uint64_t at = off + SONDE_RECORD_HEADER_LEN;
        if (w->notes && events_record(type))
            return 1;
        if (off < w->from && (events_record(type) ||
                              (type == SONDE_R_ANCHOR && s->raw.n_anchors))) {
            w->off = at + len; /* before the part asked for */
            continue;
        }
        const uint8_t *p, *end;
        if (s->defer && type == SONDE_R_EVENTS) { /* summed later (sm__check_records) */
            if (GROW(s->sums, s->n_sums, s->cap_sums))
                return -1;
            s->sums[s->n_sums++] = (sb_sum){at, len, crc};
            p = h + SONDE_RECORD_HEADER_LEN;
            end = p + (len < EVENTS_HEAD ? len : EVENTS_HEAD);
        } else {
            got = record_bytes(s, off, at, len, &p);
            if (got)
                return got;
            end = p + len;
            if ((uint32_t)crc32(0L, p, len) != crc)
                return rwarn(s, "%s: record at offset %zu fails its checksum: read up to it",
                             fname, off) ? -1 : 1;
        }
        w->off = at + len;
        if (s->raw.summary && events_record(type)) /* it does not count these */
            s->raw.summary_stale = 1;
        int r = parse_record(s, type, p, end, len, at, order);
        if (r == -2)
            return -1;
        if (r) /* a record skipped: its events, if any, were counted where the reading has none */
            s->raw.summary_stale = 1;
        if (r && rwarn(s, "%s: malformed record of type %u at offset %zu was skipped", fname,
                       type, off))
            return -1;
        if (!r && off < w->from && w->rs && resume_add(w->rs, off, w->off))
            return -1;
    }
    if (w->first == SIZE_MAX)
        w->first = w->off;
    return 0;
}

/* sm_read_file_from's walk: the records that describe the run, those before rs->walked from
 * the places an earlier reading noted (rs may be NULL: none), then the file from there, its
 * events from `from` on. *off: where the first record at or past from begins, for rs. 0; 2
 * when a noted place no longer holds what was walked there (rs emptied: read again); -1 out
 * of memory. */
static int resume_walk(rstate *s, sm_resume *rs, uint64_t from, size_t n, size_t *off,
                       size_t *order)
{
    sm_resume none = {0};
    if (!rs)
        rs = &none;
    if (from < rs->walked || rs->walked > n || rs->walked < SONDE_FILE_HEADER_LEN) {
        sm_resume_free(rs); /* another file, or an earlier part of it: from the start */
        rs->walked = SONDE_FILE_HEADER_LEN;
    }
    for (size_t i = 0; i < rs->n_defs; i++) {
        walk_span w = {rs->defs[i].at, rs->defs[i].end, 0, NULL, SIZE_MAX, 1};
        int r = rs->defs[i].end <= n ? walk(s, &w, order) : 1;
        if (r < 0)
            return -1;
        if (r) {
            sm_resume_free(rs);
            return 2;
        }
    }
    walk_span w = {rs->walked, n, from, rs == &none ? NULL : rs, SIZE_MAX, 0};
    int r = walk(s, &w, order);
    *off = w.first;
    return r < 0 ? -1 : 0;
}

/* The file in memory (data), or n bytes read from fd as they are needed (data NULL). defer:
 * the EVENTS records' checksums summed after the walk on threads threads (sm__check_records),
 * the walk reading only their blocks' headers; where a sum is wrong, the file is read again
 * with each record summed before it is read, as with defer 0, so that the reading stops where
 * it would have (the sums being right, the walk read what it would have). */
static int read_src_as(const uint8_t *data, int fd, size_t n, const char *fname,
                       const sb_opts *o, sm_model *m, int threads)
{
    memset(m, 0, sizeof *m);
    rstate s;
    memset(&s, 0, sizeof s);
    s.data = data;
    s.fd = fd;
    s.dec.s = &s;
    s.raw.id_bound = SM_MAX_ID;
    s.defer = threads > 1;
    int again = 0;
    int rc = 0;
    size_t off = SONDE_FILE_HEADER_LEN, order = 0;
    const uint8_t *head =
        n >= SONDE_FILE_HEADER_LEN ? src_at(&s.dec, 0, SONDE_FILE_HEADER_LEN) : NULL;
    uint32_t version = head ? sonde_get_u32le(head + 8) : 0;
    if (!head && n >= SONDE_FILE_HEADER_LEN)
        rc = errno == ENOMEM ? sonde__fail(SONDE_ENOMEM, "%s: out of memory while reading", fname)
                             : sonde__fail(SONDE_EIO, "%s: %s", fname, strerror(errno));
    else if (!head || memcmp(head, SONDE_FILE_MAGIC, SONDE_FILE_MAGIC_LEN) != 0)
        rc = sonde__fail(SONDE_EFORMAT, "%s: not a .sonde file (bad magic)", fname);
    else if (version < 1 || version > SONDE_FILE_VERSION)
        rc = sonde__fail(SONDE_EFORMAT,
                         "%s: .sonde format version %u is not supported (this sonde reads 1 to "
                         "%u)", fname, version, SONDE_FILE_VERSION);
    if (rc)
        goto done;
    s.fname = fname;
    s.max_threads = n / 12 + 64; /* each thread has a THREAD or EVENTS record, 12 bytes or more */
    s.version = version;
    uint64_t from = o->from <= n ? o->from : 0; /* past the end: another file, read whole */
    s.raw.bytes = n - from; /* what the reading has to decode (the first pass's threads) */
    uint64_t walk_from = sonde__mono_ns();
    sm_resume *rs = from ? o->resume : NULL;
    if (!from && o->resume)
        sm_resume_free(o->resume);
    if (from) { /* the run's description before it, then the events from it */
        int r = resume_walk(&s, rs, from, n, &off, &order);
        if (r < 0)
            goto oom;
        if (r == 2) { /* the file changed where it was walked before: read it as it is now */
            again = 1;
            goto done;
        }
    } else if (walk(&s, &(walk_span){off, n, 0, NULL, SIZE_MAX, 0}, &order) < 0) {
        goto oom;
    }
    if (s.defer) { /* the checksums the walk left */
        int bad = sm__check_records(data, fd, s.sums, s.n_sums, threads);
        if (bad < 0)
            goto oom;
        if (bad) {
            again = 1;
            goto done;
        }
    }
    double walk_s = (double)(sonde__mono_ns() - walk_from) / 1e9;
    if (!s.raw.clean_end && s.raw.flushed_on_signal) {
        const char *sig = sigabbrev_np(s.raw.flushed_on_signal);
        if (rwarn(&s, "%s: the run ended by SIG%s (signal %d), or soon after it: sonde's handler "
                      "wrote every event recorded until the signal; no END record follows",
                  fname, sig ? sig : "?", s.raw.flushed_on_signal))
            goto oom;
    } else if (!s.raw.clean_end &&
               rwarn(&s, "%s: the run did not end cleanly (no END record): the process crashed, "
                         "was killed, or is still running", fname)) {
        goto oom;
    }
    if (!s.raw.n_anchors) {
        rc = sonde__fail(SONDE_EFORMAT, "%s: no clock anchor in the file", fname);
        goto done;
    }
    s.raw.n_threads = s.n_th;
    s.raw.threads = sonde__calloc(s.n_th ? s.n_th : 1, sizeof *s.raw.threads);
    if (!s.raw.threads || dec_init(&s.dec, &s, 0))
        goto oom;
    for (size_t i = 0; i < s.n_th; i++) {
        s.raw.threads[i].index = (uint32_t)i;
        s.raw.threads[i].tid = s.th[i].tid;
        s.raw.threads[i].name = s.th[i].name;
        s.th[i].name = NULL;
        sonde__sort(s.th[i].blocks, s.th[i].n_blocks, sizeof *s.th[i].blocks, cmp_block);
    }
    s.raw.events = decode_thread;
    s.raw.events_src = &s.dec;
    s.raw.dec_new = dec_new;
    s.raw.dec_end = dec_end;
    s.raw.opts = *o;
    rc = sm__build(&s.raw, m, fname);
    if (!rc)
        m->read_times.walk_s = walk_s;
    if (rs && !rc)
        rs->walked = off; /* the first record at or past from: the next reading walks from it */
    else if (rs)
        sm_resume_free(rs);
    goto done;
oom:
    rc = sonde__fail(SONDE_ENOMEM, "%s: out of memory while reading", fname);
    if (o->resume)
        sm_resume_free(o->resume);
done:
    for (size_t i = 0; i < s.n_th; i++) {
        sonde__free(s.th[i].name);
        sonde__free(s.th[i].blocks);
    }
    sonde__free(s.th);
    sonde__free(s.sums);
    dec_free(&s.dec);
    sb_raw_free(&s.raw);
    if (rc)
        sm_free(m);
    return again ? read_src_as(data, fd, n, fname, o, m, 1) : rc;
}

/* read_src_as with the EVENTS records' checksums summed on several threads where the file is
 * large or SONDE_READ_THREADS asks for several (as the first pass's readers, sm__readers_for). */
static int read_src(const uint8_t *data, int fd, size_t n, const char *fname, const sb_opts *o,
                    sm_model *m)
{
    /* a part of a file (sm_read_file_from) is summed as it is walked: it is small, and its
     * walk notes places for the next one, which a second walk would note twice */
    return read_src_as(data, fd, n, fname, o, m, o->from ? 1 : sm__threads_for(n));
}

int sm_read_mem(const uint8_t *data, size_t n, const char *fname, sm_model *m)
{
    return sm_read_mem_fed(data, n, fname, NULL, m);
}

int sm_read_mem_fed(const uint8_t *data, size_t n, const char *fname, const sm_feed *feed,
                    sm_model *m)
{
    const sb_opts o = {NULL, 0, feed, 0, NULL, NULL, NULL, NULL, 0};
    return read_src(data, -1, n, fname, &o, m);
}

int sm_feed_whenever_folded(void *ctx, const sm_model *m, uint64_t sections)
{
    (void)ctx;
    (void)m;
    (void)sections;
    return 1;
}

int sm_read_file(const char *path, sm_model *m)
{
    return sm_read_file_set(path, NULL, 0, m);
}

int sm_read_file_set(const char *path, const sm_kv *set, size_t n_set, sm_model *m)
{
    return sm_read_file_fed(path, set, n_set, NULL, m);
}

/* A file read with o (sm_read_file_fed, sm_read_file_from). */
static int read_path(const char *path, const sb_opts *o, sm_model *m)
{
    memset(m, 0, sizeof *m);
    int rc, fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block it */
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        /* a record or a block at a time, as the passes need them: never the whole file */
        rc = read_src(NULL, fd, (size_t)st.st_size, path, o, m);
        close(fd);
    } else { /* the library's own reasons why it cannot be read (not found, not a file) */
        if (fd >= 0)
            close(fd);
        char *buf;
        size_t got;
        rc = sonde__read_input(path, SIZE_MAX - 1, &buf, &got);
        if (rc)
            return rc;
        rc = read_src((const uint8_t *)buf, -1, got, path, o, m);
        sonde__free(buf);
    }
    if (!rc) {
        m->path = sonde__strdup(path);
        if (!m->path) {
            sm_free(m);
            return sonde__fail(SONDE_ENOMEM, "%s: out of memory", path);
        }
    }
    return rc;
}

int sm_read_file_fed(const char *path, const sm_kv *set, size_t n_set, const sm_feed *feed,
                     sm_model *m)
{
    const sb_opts o = {set, n_set, feed, 0, NULL, NULL, NULL, NULL, 0};
    return read_path(path, &o, m);
}

int sm_read_file_ops(const char *path, const sm_consumer *const *ops, void *const *states,
                     size_t n, sm_model *m)
{
    const sb_opts o = {NULL, 0, NULL, 0, NULL, NULL, ops, states, n};
    return read_path(path, &o, m);
}

int sm_read_file_from(const char *path, const sm_part *part, sm_resume *rs, sm_model *m)
{
    const sb_opts o = {NULL, 0, NULL, part->from, rs, part, NULL, NULL, 0};
    return read_path(path, &o, m);
}

int sm_read_mem_from(const uint8_t *data, size_t n, const char *fname, const sm_part *part,
                     sm_resume *rs, sm_model *m)
{
    const sb_opts o = {NULL, 0, NULL, part->from, rs, part, NULL, NULL, 0};
    return read_src(data, -1, n, fname, &o, m);
}

void sm_resume_free(sm_resume *rs)
{
    sonde__free(rs->defs);
    memset(rs, 0, sizeof *rs);
}

int sm_each_section_by_end(const sm_model *m)
{
    return m->sections_folded && m->path && !m->merged;
}

int sm_each_section(const sm_model *m, sm_section_fn fn, void *ctx)
{
    if (!sm_each_section_by_end(m)) {
        for (size_t i = 0; i < m->n_spans; i++)
            if (fn(ctx, m, &m->spans[i]))
                return -1;
        return 0;
    }
    /* the sections come as they close; the second model holds as few as the reading can (one
     * section, one record of each kind): with m's own limits it held as much as m again (the
     * SQLite export's peak RSS doubled: 297 MiB at 10^7 edges against 135) */
    const sm_kv few[] = {{"config.report_max_sections", "1"}, {"config.report_max_records", "1"}};
    sm_model again;
    const sm_feed every = {NULL, fn, ctx};
    int rc = sm_read_file_fed(m->path, few, 2, &every, &again);
    if (!rc)
        sm_free(&again);
    return rc;
}
