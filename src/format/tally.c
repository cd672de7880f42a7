/* tally.c - the tally of a run's events (tally.h): its slow paths, merging, and the SUMMARY
 * record's encoding. */
#include "tally.h"

#include <string.h>

#include "../util/alloc.h"
#include "../util/buf.h"
#include "../util/pb.h"

#define GROW SONDE_GROW
#define SUMMARY_VERSION 1u

int sonde_idcount_add(sonde_idcount *c, uint32_t id, uint64_t n)
{
    if (2 * (c->used + 1) > c->cap) { /* at most half full */
        size_t nc = c->cap ? c->cap * 2 : 64;
        uint32_t *ni = sonde__calloc(nc, sizeof *ni);
        uint64_t *nn = sonde__calloc(nc, sizeof *nn);
        if (!ni || !nn) {
            sonde__free(ni);
            sonde__free(nn);
            return -1;
        }
        for (size_t i = 0; i < c->cap; i++) {
            if (!c->id1[i])
                continue;
            size_t h = (c->id1[i] * 2654435761u) & (nc - 1);
            while (ni[h])
                h = (h + 1) & (nc - 1);
            ni[h] = c->id1[i];
            nn[h] = c->n[i];
        }
        sonde__free(c->id1);
        sonde__free(c->n);
        c->id1 = ni;
        c->n = nn;
        c->cap = nc;
    }
    size_t h = ((id + 1u) * 2654435761u) & (c->cap - 1);
    while (c->id1[h] && c->id1[h] != id + 1u)
        h = (h + 1) & (c->cap - 1);
    if (!c->id1[h]) {
        c->id1[h] = id + 1u;
        c->used++;
    }
    c->n[h] += n;
    return 0;
}

int sonde_idcount_merge(sonde_idcount *into, const sonde_idcount *from)
{
    for (size_t i = 0; i < from->cap; i++)
        if (from->id1[i] && sonde_idcount_add(into, from->id1[i] - 1u, from->n[i]))
            return -1;
    return 0;
}

void sonde_idcount_free(sonde_idcount *c)
{
    sonde__free(c->id1);
    sonde__free(c->n);
    memset(c, 0, sizeof *c);
}

int sonde_tally_init(sonde_tally *t)
{
    memset(t, 0, sizeof *t);
    t->hist = sonde__calloc(SONDE_DUR_BUCKETS, sizeof *t->hist);
    t->used = sonde__calloc(SONDE_MAX_ID / 64, sizeof *t->used);
    if (t->hist && t->used)
        return 0;
    sonde_tally_free(t);
    return -1;
}

void sonde_tally_free(sonde_tally *t)
{
    sonde__free(t->hist);
    sonde__free(t->used);
    sonde_idcount_free(&t->inst);
    memset(t, 0, sizeof *t);
}

void sonde_tally_thread_free(sonde_tally_thread *th)
{
    sonde__free(th->open);
    sonde__free(th->sess);
    sonde__free(th->modes);
    memset(th, 0, sizeof *th);
}

int sonde_tally_begin_grow(sonde_tally_thread *th)
{
    return GROW(th->open, th->depth, th->cap_open);
}

static void mark_used(sonde_tally *t, uint32_t id)
{
    if (id > t->max_id)
        t->max_id = id;
    t->used[id >> 6] |= 1ull << (id & 63);
}

int sonde_tally_other(sonde_tally *t, sonde_tally_thread *th, uint32_t thread, unsigned kind,
                      uint32_t id, uint64_t tick, uint32_t arg)
{
    switch (kind) {
    case SONDE_K_MODE: /* its id is a step number, not a name */
        if (GROW(th->modes, th->n_modes, th->cap_modes))
            return -1;
        th->modes[th->n_modes++] = (sonde_tally_mode){tick, id, arg};
        return 0;
    case SONDE_K_METADATA:
        mark_used(t, arg);
        break;
    case SONDE_K_GAP:
        t->marked += arg;
        break;
    case SONDE_K_STEP:
        if ((arg & ~SONDE_STEP_BEGIN) > t->last_step)
            t->last_step = arg & ~SONDE_STEP_BEGIN;
        t->step_ends += !(arg & SONDE_STEP_BEGIN);
        if (t->stepped && t->step_thread != thread)
            t->step_thread = UINT32_MAX;
        else if (!t->stepped)
            t->step_thread = thread;
        t->stepped = 1;
        break;
    case SONDE_K_INSTANT:
        t->instants++;
        if (sonde_idcount_add(&t->inst, id, 1))
            return -1;
        break;
    case SONDE_K_SESSION_BEGIN:
    case SONDE_K_SESSION_END:
        if (GROW(th->sess, th->n_sess, th->cap_sess))
            return -1;
        th->sess[th->n_sess++] =
            (sonde_tally_sess){tick, id, thread, kind == SONDE_K_SESSION_BEGIN};
        break;
    default:
        break;
    }
    if (SONDE_SHARED_KIND(kind))
        th->shared = 1;
    mark_used(t, id);
    return 0;
}

int sonde_tally_merge(sonde_tally *into, const sonde_tally *from)
{
    into->marked += from->marked;
    into->last_step = from->last_step > into->last_step ? from->last_step : into->last_step;
    into->step_ends += from->step_ends;
    into->instants += from->instants;
    if (from->stepped) {
        if (into->stepped && into->step_thread != from->step_thread)
            into->step_thread = UINT32_MAX;
        else if (!into->stepped)
            into->step_thread = from->step_thread;
        into->stepped = 1;
    }
    into->max_id = from->max_id > into->max_id ? from->max_id : into->max_id;
    for (size_t k = 0; k <= from->max_id / 64; k++)
        into->used[k] |= from->used[k];
    for (size_t k = 0; k < SONDE_DUR_BUCKETS; k++)
        into->hist[k] += from->hist[k];
    return sonde_idcount_merge(&into->inst, &from->inst);
}

/* ------------------------------------------------------------------------------------------
 * The SUMMARY record: varints throughout (docs/formats.md, "SUMMARY")
 * ---------------------------------------------------------------------------------------- */

void sonde_tally_encode(sbuf *out, const sonde_tally *t, const sonde_tally_thread *th,
                        size_t n_threads)
{
    pb_varint(out, SUMMARY_VERSION);
    pb_varint(out, t->marked);
    pb_varint(out, t->last_step);
    pb_varint(out, t->step_ends);
    pb_varint(out, t->instants);
    pb_varint(out, t->stepped ? (uint64_t)t->step_thread + 1 : 0);
    pb_varint(out, t->max_id);
    size_t n_used = 0;
    for (size_t k = 0; k <= t->max_id / 64; k++)
        n_used += (size_t)__builtin_popcountll(t->used[k]);
    pb_varint(out, n_used);
    for (uint32_t id = 0, prev = 0; id <= t->max_id; id++) /* ascending, each after the last */
        if (t->used[id >> 6] >> (id & 63) & 1) {
            pb_varint(out, id - prev);
            prev = id;
        }
    size_t n_hist = 0;
    for (size_t i = 0; i < SONDE_DUR_BUCKETS; i++)
        n_hist += t->hist[i] != 0;
    pb_varint(out, n_hist);
    for (size_t i = 0, prev = 0; i < SONDE_DUR_BUCKETS; i++)
        if (t->hist[i]) {
            pb_varint(out, i - prev);
            pb_varint(out, t->hist[i]);
            prev = i;
        }
    pb_varint(out, t->inst.used);
    for (size_t i = 0; i < t->inst.cap; i++)
        if (t->inst.id1[i]) {
            pb_varint(out, t->inst.id1[i] - 1u);
            pb_varint(out, t->inst.n[i]);
        }
    pb_varint(out, n_threads);
    for (size_t i = 0; i < n_threads; i++) {
        const sonde_tally_thread *h = &th[i];
        pb_varint(out, (uint64_t)(h->seen != 0) | (uint64_t)(h->shared != 0) << 1);
        pb_varint(out, h->depth);
        for (size_t j = 0; j < h->depth; j++) {
            pb_varint(out, h->open[j].id);
            pb_varint(out, h->open[j].tick);
        }
        pb_varint(out, h->n_sess);
        for (size_t j = 0; j < h->n_sess; j++) {
            pb_varint(out, h->sess[j].tick);
            pb_varint(out, h->sess[j].name);
            pb_varint(out, (uint64_t)h->sess[j].begin);
        }
        pb_varint(out, h->n_modes);
        for (size_t j = 0; j < h->n_modes; j++) {
            pb_varint(out, h->modes[j].tick);
            pb_varint(out, h->modes[j].step);
            pb_varint(out, h->modes[j].arg);
        }
    }
}

/* The decoder: a cursor, and 1 once anything was malformed. */
typedef struct dcur {
    const uint8_t *p, *end;
    int bad;
} dcur;

static uint64_t get(dcur *c)
{
    uint64_t v = 0;
    size_t k = c->bad ? 0 : varint_get(c->p, (size_t)(c->end - c->p), &v);
    if (!k)
        c->bad = 1;
    c->p += k;
    return v;
}

/* A value at most max, else malformed. */
static uint64_t get_max(dcur *c, uint64_t max)
{
    uint64_t v = get(c);
    if (v > max)
        c->bad = 1;
    return c->bad ? 0 : v;
}

/* A count of entries of at least per bytes each: no more than the bytes left allow. */
static size_t get_count(dcur *c, size_t per)
{
    return (size_t)get_max(c, (uint64_t)(c->end - c->p) / per);
}

/* An id the tally named used (else malformed). */
static uint32_t get_id(dcur *c, const sonde_tally *t)
{
    uint32_t id = (uint32_t)get_max(c, t->max_id);
    if (!(t->used[id >> 6] >> (id & 63) & 1))
        c->bad = 1;
    return id;
}

static int decode_run(dcur *c, sonde_tally *t)
{
    if (get(c) != SUMMARY_VERSION)
        return 1;
    t->marked = get(c);
    t->last_step = get_max(c, UINT32_MAX);
    t->step_ends = get(c);
    t->instants = get(c);
    uint64_t st = get_max(c, (uint64_t)UINT32_MAX + 1);
    t->stepped = st != 0;
    t->step_thread = st ? (uint32_t)(st - 1) : 0;
    t->max_id = (uint32_t)get_max(c, SONDE_MAX_ID - 1);
    size_t n = get_count(c, 1);
    for (uint64_t i = 0, id = 0; i < n && !c->bad; i++) {
        id += get_max(c, SONDE_MAX_ID);
        if (id > t->max_id || (i && id == 0))
            return 1;
        t->used[id >> 6] |= 1ull << (id & 63);
    }
    n = get_count(c, 2);
    for (size_t i = 0, b = 0; i < n && !c->bad; i++) {
        b += (size_t)get_max(c, SONDE_DUR_BUCKETS);
        if (b >= SONDE_DUR_BUCKETS)
            return 1;
        t->hist[b] += get(c);
    }
    n = get_count(c, 2);
    for (size_t i = 0; i < n && !c->bad; i++) {
        uint32_t id = get_id(c, t);
        uint64_t k = get(c);
        if (!c->bad && sonde_idcount_add(&t->inst, id, k))
            return -1;
    }
    return c->bad;
}

/* A list's count (entries of per bytes at least), and room for it in *list (size bytes an
 * entry; *cap its count). 0, or -1 out of memory. */
static int list_room(dcur *c, size_t per, void **list, size_t size, size_t *cap)
{
    size_t n = get_count(c, per);
    if (n && !(*list = sonde__calloc(n, size)))
        return -1;
    *cap = n;
    return 0;
}

static int decode_thread(dcur *c, const sonde_tally *t, sonde_tally_thread *h, uint32_t index)
{
    uint64_t flags = get_max(c, 3);
    h->seen = (int)(flags & 1);
    h->shared = (int)(flags >> 1 & 1);
    if (list_room(c, 2, (void **)&h->open, sizeof *h->open, &h->cap_open))
        return -1;
    for (; h->depth < h->cap_open && !c->bad; h->depth++) {
        h->open[h->depth].id = get_id(c, t);
        h->open[h->depth].tick = get(c);
    }
    if (list_room(c, 3, (void **)&h->sess, sizeof *h->sess, &h->cap_sess))
        return -1;
    for (; h->n_sess < h->cap_sess && !c->bad; h->n_sess++) {
        sonde_tally_sess *s = &h->sess[h->n_sess];
        s->tick = get(c);
        s->name = get_id(c, t);
        s->thread = index;
        s->begin = (int)get_max(c, 1);
    }
    if (list_room(c, 3, (void **)&h->modes, sizeof *h->modes, &h->cap_modes))
        return -1;
    for (; h->n_modes < h->cap_modes && !c->bad; h->n_modes++) {
        sonde_tally_mode *md = &h->modes[h->n_modes];
        md->tick = get(c);
        md->step = (uint32_t)get_max(c, UINT32_MAX);
        md->arg = (uint32_t)get_max(c, UINT32_MAX);
    }
    return c->bad;
}

int sonde_tally_decode(const uint8_t *p, const uint8_t *end, size_t max_threads, sonde_tally *t,
                       sonde_tally_thread **th, size_t *n_threads)
{
    dcur c = {p, end, 0};
    *th = NULL;
    *n_threads = 0;
    int r = decode_run(&c, t);
    if (r)
        return r;
    size_t n = get_count(&c, 4);
    if (c.bad || n > max_threads)
        return 1;
    if (n && !(*th = sonde__calloc(n, sizeof **th)))
        return -1;
    *n_threads = n;
    for (size_t i = 0; i < n; i++)
        if ((r = decode_thread(&c, t, &(*th)[i], (uint32_t)i)) != 0)
            return r;
    return c.p == c.end ? 0 : 1;
}
