/* skim.c - the first pass over every thread's events (model_build.h's sm__skim): what the build
 * must know before it builds a section. One reader of the file's threads in turn; or, where the
 * events are many and on several threads, one a CPU (at most 8, and the file's threads), each
 * taking the next file thread not yet taken, each with a decoder of its own and findings of its
 * own, merged after in the order of the file's threads (the lists by the ranges each thread's
 * entries took, the counts summed, the largest kept): the findings and the warnings are those
 * one reader gives. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model_build.h"
#include "../util/alloc.h"
#include "../util/env.h"

#define GROW SONDE_GROW
#define BIT_SET(v, i) ((v)[(i) >> 6] |= 1ull << ((i) & 63))

/* At most SB_MAX_DECODERS readers (sb_raw.dec_end's limit). */
#define MAX_READERS SB_MAX_DECODERS

/* Where one file thread's entries begin and end in its reader's lists. */
typedef struct tseg {
    int reader;
    size_t sess[2], modes[2];
} tseg;

/* One reader of the first pass. */
typedef struct skr {
    sm_skim k;               /* its threads' findings */
    sb_raw *raw;
    void *dec;               /* its decoder */
    uint32_t thread;         /* the file thread being read */
    struct dopen {
        uint32_t id;
        uint64_t tick;       /* its begin */
    } *stack;                /* the thread's sections open */
    size_t depth, cap;
    uint64_t *open_at;       /* the begins (ticks) of the sections open at their thread's end
                                (closed at the run's end, known once every thread is read) */
    size_t n_open, cap_open;
    _Atomic size_t *next;    /* the next file thread to read, shared by the readers */
    uint8_t *own;            /* sm_skim.own, shared: each reader sets its threads' */
    tseg *seg;               /* each file thread's ranges (written by the reader that read it) */
    int index, rc;
} skr;

/* Counts a section from tick t0 to tick t1 in the histogram (0 when it ends before it begins). */
static void count_dur(uint64_t *hist, uint64_t t0, uint64_t t1)
{
    int64_t d = (int64_t)(t1 - t0);
    hist[sm__dur_bucket(d > 0 ? (uint64_t)d : 0)]++;
}

/* An END: closes the innermost, or the one it names and those open inside it. 1 when it named
 * one open (its BEGIN counted its id as used), else 0. */
static int end_of(skr *r, const sb_ev *e)
{
    if (!r->depth)
        return 0;
    size_t k = r->depth - 1;
    if (e->id) {
        while (k > 0 && r->stack[k].id != e->id)
            k--;
        if (r->stack[k].id != e->id)
            return 0;
    }
    for (size_t j = r->depth; j-- > k;)
        count_dur(r->k.hist, r->stack[j].tick, e->tick);
    r->depth = k;
    return e->id != 0;
}

static int skim_batch(void *ctx, const sb_batch *bt)
{
    skr *r = ctx;
    sm_skim *k = &r->k;
    const int unclean = !k->clean_end; /* the run's end is the last tick seen */
    for (size_t i = 0; i < bt->n; i++) {
        const sb_ev *e = &bt->ev[i];
        if (unclean && e->tick > k->end_tick)
            k->end_tick = e->tick;
        if (e->kind <= SONDE_K_END) { /* a section's edge (most events), of no shared kind */
            if (e->kind == SONDE_K_END) {
                if (end_of(r, e))
                    continue;
            } else {
                if (GROW(r->stack, r->depth, r->cap))
                    return -1;
                r->stack[r->depth++] = (struct dopen){e->id, e->tick};
            }
            if (e->id > k->max_id)
                k->max_id = e->id;
            BIT_SET(k->used, e->id);
            continue;
        }
        switch (e->kind) {
        case SONDE_K_MODE: /* its id is a step number, not a name */
            if (GROW(k->modes, k->n_modes, k->cap_modes))
                return -1;
            k->modes[k->n_modes++] = (sm_mode_ev){e->tick, e->id, e->arg};
            continue;
        case SONDE_K_METADATA:
            if (e->arg > k->max_id)
                k->max_id = e->arg;
            BIT_SET(k->used, e->arg);
            break;
        case SONDE_K_GAP:
            k->marked += e->arg;
            break;
        case SONDE_K_STEP:
            if ((e->arg & ~SONDE_STEP_BEGIN) > k->last_step)
                k->last_step = e->arg & ~SONDE_STEP_BEGIN;
            k->step_ends += !(e->arg & SONDE_STEP_BEGIN);
            if (k->stepped && k->step_thread != r->thread)
                k->step_thread = UINT32_MAX;
            else if (!k->stepped)
                k->step_thread = r->thread;
            k->stepped = 1;
            break;
        case SONDE_K_INSTANT:
            k->instants++;
            if (sm__idcount_add(&k->inst, e->id))
                return -1;
            break;
        case SONDE_K_SESSION_BEGIN:
        case SONDE_K_SESSION_END:
            if (GROW(k->sess, k->n_sess, k->cap_sess))
                return -1;
            k->sess[k->n_sess++] = (sm_sess_ev){e->tick, e->id, r->thread,
                                                e->kind == SONDE_K_SESSION_BEGIN};
            break;
        default:
            break;
        }
        if (SM_SHARED_KIND(e->kind))
            r->own[r->thread] = 0;
        if (e->id > k->max_id)
            k->max_id = e->id;
        BIT_SET(k->used, e->id);
    }
    return 0;
}

/* Reader r failed (out of memory): the others stop too. */
static void *reader_failed(skr *r)
{
    r->rc = -1;
    atomic_store(r->next, r->raw->n_threads);
    return NULL;
}

/* Reads file threads, the next one not yet taken each time, until none is left. */
static void *reader_run(void *arg)
{
    skr *r = arg;
    sb_raw *raw = r->raw;
    for (;;) {
        size_t t = atomic_fetch_add(r->next, 1);
        if (t >= raw->n_threads)
            break;
        tseg *g = &r->seg[t];
        g->reader = r->index;
        g->sess[0] = r->k.n_sess;
        g->modes[0] = r->k.n_modes;
        r->thread = (uint32_t)t;
        r->own[t] = 1;
        r->depth = 0;
        if (raw->events(r->dec, t, 1, skim_batch, r))
            return reader_failed(r);
        for (size_t j = 0; j < r->depth; j++) {
            if (GROW(r->open_at, r->n_open, r->cap_open))
                return reader_failed(r);
            r->open_at[r->n_open++] = r->stack[j].tick;
        }
        g->sess[1] = r->k.n_sess;
        g->modes[1] = r->k.n_modes;
    }
    return NULL;
}

void sm__skim_free(sm_skim *sk)
{
    sonde__free(sk->used);
    sonde__free(sk->sess);
    sonde__free(sk->modes);
    sonde__free(sk->hist);
    sonde__free(sk->own);
    sm__idcount_free(&sk->inst);
    memset(sk, 0, sizeof *sk);
}

static int reader_init(skr *r, const sm_skim *sk, sb_raw *raw)
{
    memset(r, 0, sizeof *r);
    r->k.clean_end = sk->clean_end;
    r->k.end_tick = sk->end_tick;
    r->raw = raw;
    r->k.used = sonde__calloc(SM_MAX_ID / 64, sizeof *r->k.used);
    r->k.hist = sonde__calloc(SM_DUR_BUCKETS, sizeof *r->k.hist);
    return r->k.used && r->k.hist ? 0 : -1;
}

/* The entries of list (each size bytes) that the file threads' ranges (field at off in their
 * tseg) name in the readers' lists, in the order of the threads. */
static void *in_thread_order(const tseg *seg, size_t n_threads, size_t off, void *const *lists,
                             size_t n, size_t size)
{
    uint8_t *out = sonde__malloc(n ? n * size : 1);
    if (!out)
        return NULL;
    size_t at = 0;
    for (size_t t = 0; t < n_threads; t++) {
        const size_t *range = (const size_t *)((const char *)&seg[t] + off);
        size_t len = (range[1] - range[0]) * size;
        if (!len) /* (its reader's list may be none) */
            continue;
        memcpy(out + at, (const uint8_t *)lists[seg[t].reader] + range[0] * size, len);
        at += len;
    }
    return out;
}

/* The n readers' findings into sk, as one reader would have made them. */
static int merge(sm_skim *sk, skr *r, int n, const tseg *seg, size_t n_threads)
{
    sm_skim *a = &r[0].k;
    void *sess[MAX_READERS], *modes[MAX_READERS];
    int stepped = 0;
    *sk = (sm_skim){.clean_end = a->clean_end, .end_tick = a->end_tick,
                    .step_thread = a->step_thread};
    for (int i = 0; i < n; i++) {
        const sm_skim *b = &r[i].k;
        sk->end_tick = b->end_tick > sk->end_tick ? b->end_tick : sk->end_tick;
        sk->marked += b->marked;
        sk->last_step = b->last_step > sk->last_step ? b->last_step : sk->last_step;
        sk->step_ends += b->step_ends;
        sk->instants += b->instants;
        if (b->stepped && stepped++ == 0) /* of one reader's threads alone, or of several */
            sk->step_thread = b->step_thread;
        sk->max_id = b->max_id > sk->max_id ? b->max_id : sk->max_id;
        sk->n_sess += b->n_sess;
        sk->n_modes += b->n_modes;
        sess[i] = b->sess;
        modes[i] = b->modes;
        if (i == 0)
            continue;
        for (size_t k = 0; k < SM_MAX_ID / 64; k++)
            a->used[k] |= b->used[k];
        for (size_t k = 0; k < SM_DUR_BUCKETS; k++)
            a->hist[k] += b->hist[k];
        if (sm__idcount_merge(&a->inst, &b->inst))
            return -1;
    }
    sk->stepped = stepped > 0;
    if (stepped > 1)
        sk->step_thread = UINT32_MAX;
    sk->used = a->used;
    sk->hist = a->hist;
    sk->inst = a->inst;
    a->used = a->hist = NULL;
    memset(&a->inst, 0, sizeof a->inst);
    sk->sess = in_thread_order(seg, n_threads, offsetof(tseg, sess), sess, sk->n_sess,
                               sizeof *sk->sess);
    sk->modes = in_thread_order(seg, n_threads, offsetof(tseg, modes), modes, sk->n_modes,
                                sizeof *sk->modes);
    sk->cap_sess = sk->n_sess;
    sk->cap_modes = sk->n_modes;
    return sk->sess && sk->modes ? 0 : -1;
}

int sm_report_threads(int *chosen)
{
    const char *env = sonde__getenv("SONDE_READ_THREADS");
    long want = env && *env ? strtol(env, NULL, 10) : 0;
    if (chosen)
        *chosen = want >= 1;
    if (want < 1) { /* the CPUs this process may run on (taskset, a cpuset), else those online */
        cpu_set_t set;
        want = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                           : sysconf(_SC_NPROCESSORS_ONLN);
    }
    return want < 1 ? 1 : want > SM_REPORT_THREADS_MAX ? SM_REPORT_THREADS_MAX : (int)want;
}

int sm__threads_for(uint64_t bytes)
{
    int chosen, want = sm_report_threads(&chosen);
    return chosen || bytes >= SM_SEVERAL_FROM_BYTES ? want : 1;
}

int sm__readers_for(const sb_raw *raw)
{
    if (raw->n_threads < 2 || !raw->dec_new)
        return 1;
    int want = sm__threads_for(raw->bytes);
    return (size_t)want > raw->n_threads ? (int)raw->n_threads : want;
}

int sm__skim(sb_raw *raw, uint64_t cut_tick, sm_skim *sk)
{
    skr r[MAX_READERS];
    pthread_t th[MAX_READERS];
    int started[MAX_READERS] = {0};
    int n = sm__readers_for(raw), rc = -1;
    _Atomic size_t next = 0;
    tseg *seg = sonde__calloc(raw->n_threads ? raw->n_threads : 1, sizeof *seg);
    uint8_t *own = sonde__calloc(raw->n_threads ? raw->n_threads : 1, 1);
    memset(r, 0, sizeof r);
    if (!seg || !own)
        goto out;
    for (int i = 0; i < n; i++) {
        if (reader_init(&r[i], sk, raw))
            goto out;
        r[i].next = &next;
        r[i].seg = seg;
        r[i].own = own;
        r[i].index = i;
        /* several: each its own decoder, keeping its warnings apart until dec_end */
        r[i].dec = n == 1 ? raw->events_src : raw->dec_new(raw->events_src);
        if (!r[i].dec)
            goto out;
    }
    for (int i = 1; i < n; i++)
        started[i] = pthread_create(&th[i], NULL, reader_run, &r[i]) == 0;
    reader_run(&r[0]);
    for (int i = 1; i < n; i++) {
        if (started[i])
            pthread_join(th[i], NULL);
        else
            reader_run(&r[i]); /* no thread to be had: what is left, in turn */
    }
    for (int i = 0; i < n; i++)
        if (r[i].rc)
            goto out;
    if (n == 1) {
        *sk = r[0].k;
        memset(&r[0].k, 0, sizeof r[0].k);
    } else if (merge(sk, r, n, seg, raw->n_threads)) {
        goto out;
    }
    /* the sections open at their thread's end closed at the run's (in any order: a count) */
    uint64_t end = sk->end_tick > cut_tick ? sk->end_tick : cut_tick;
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < r[i].n_open; j++)
            count_dur(sk->hist, r[i].open_at[j], end);
    sk->own = own;
    own = NULL;
    rc = 0;
out:
    if (n > 1) {
        void *decs[MAX_READERS];
        for (int i = 0; i < n; i++)
            decs[i] = r[i].dec;
        if (raw->dec_end(raw->events_src, decs, n))
            rc = -1;
    }
    for (int i = 0; i < n; i++) {
        sm__skim_free(&r[i].k);
        sonde__free(r[i].stack);
        sonde__free(r[i].open_at);
    }
    sonde__free(seg);
    sonde__free(own);
    return rc;
}

int sm__skim_open_session(sm_skim *sk, const sm_part *part, size_t n_threads)
{
    if (!part || !part->open || part->name >= SM_MAX_ID || part->thread >= n_threads)
        return 0;
    for (size_t i = 0; i < sk->n_sess; i++)
        if (sk->sess[i].begin && sk->sess[i].tick == part->tick &&
            sk->sess[i].name == part->name)
            return 0; /* its begin is in the part */
    if (GROW(sk->sess, sk->n_sess, sk->cap_sess))
        return -1;
    sk->sess[sk->n_sess++] = (sm_sess_ev){part->tick, part->name, part->thread, 1};
    if (part->name > sk->max_id)
        sk->max_id = part->name;
    BIT_SET(sk->used, part->name);
    return 0;
}
