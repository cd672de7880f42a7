/* tally.h - what a run's events add up to before any section is built: the tally the reader's
 * first pass makes of the events it decodes (model/skim.c) and the recorder's writer makes of
 * the events it writes (record/writer.c), written as the SUMMARY record before END
 * (docs/formats.md) so that a reading of a cleanly ended file builds the model in one pass.
 * One piece of code counts for both, so the record says what the first pass would have found.
 *
 * It holds the sections' durations in ticks in a log histogram (values under 64 ticks exactly,
 * then 64 buckets an octave: at most 1.6% wide), each thread's sections open at its end (their
 * begins, to be closed at the run's end by the reader), the GAP markers' dropped events, the
 * steps, the instants per name, the ids events name, and each thread's session and schedule
 * events in its order. */
#ifndef SONDE_FORMAT_TALLY_H
#define SONDE_FORMAT_TALLY_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

#define SONDE_DUR_BUCKETS (64 + 58 * 64)
/* Ids an event may name (a tag's id, a METADATA value): those past it are a malformed block. */
#define SONDE_MAX_ID (1u << 22)

static inline size_t sonde_dur_bucket(uint64_t d)
{
    if (d < 64)
        return (size_t)d;
    int e = 63 - __builtin_clzll(d); /* 6 .. 63 */
    return 64 + (size_t)(e - 6) * 64 + (size_t)((d >> (e - 6)) & 63);
}

/* The lowest duration of bucket i. */
static inline uint64_t sonde_bucket_low(size_t i)
{
    if (i < 64)
        return i;
    size_t e = (i - 64) / 64 + 6, f = (i - 64) % 64;
    return (uint64_t)(64 + f) << (e - 6);
}

/* The kinds of event whose building adds to what every thread's add to in turn (the records'
 * budgets, the extras of sections, metrics, parameters): a file thread with none of them builds
 * only its own sections, folds and statistics (the reader may build it on a thread of its own). */
#define SONDE_SHARED_KINDS                                                                         \
    (1u << SONDE_K_DSTEP | 1u << SONDE_K_BLOCK | 1u << SONDE_K_PARAMS | 1u << SONDE_K_INSTANT |    \
     1u << SONDE_K_COUNTER | 1u << SONDE_K_STEP | 1u << SONDE_K_METRIC |                           \
     1u << SONDE_K_THROUGHPUT | 1u << SONDE_K_FLOPS | 1u << SONDE_K_METADATA)
#define SONDE_SHARED_KIND(k) ((SONDE_SHARED_KINDS >> (k)) & 1u) /* k < SONDE_K_COUNT (16 at most) */

/* Counts per id (an open-addressing table: memory follows the ids counted, not their values). */
typedef struct sonde_idcount {
    uint32_t *id1;           /* id + 1, 0: empty */
    uint64_t *n;
    size_t cap, used;        /* cap a power of two (0: none yet) */
} sonde_idcount;
/* n more of id. 0, or -1 out of memory. */
int sonde_idcount_add(sonde_idcount *c, uint32_t id, uint64_t n);
/* from's counts added to into's. 0, or -1 out of memory. */
int sonde_idcount_merge(sonde_idcount *into, const sonde_idcount *from);
void sonde_idcount_free(sonde_idcount *c);

typedef struct sonde_tally_mode { /* a step schedule's mode change (MODE) */
    uint64_t tick;
    uint32_t step, arg;
} sonde_tally_mode;

typedef struct sonde_tally_sess { /* a session's begin or end */
    uint64_t tick;
    uint32_t name, thread;
    int begin;
} sonde_tally_sess;

typedef struct sonde_tally_open { /* a section open on a thread */
    uint32_t id;
    uint64_t tick;               /* its begin */
} sonde_tally_open;

/* One thread's part, in its events' order. */
typedef struct sonde_tally_thread {
    sonde_tally_open *open;
    size_t depth, cap_open;
    sonde_tally_sess *sess;
    size_t n_sess, cap_sess;
    sonde_tally_mode *modes;
    size_t n_modes, cap_modes;
    int seen;                    /* it had events */
    int shared;                  /* one of them of a SONDE_SHARED_KIND */
    uint64_t next_slot;          /* (the writer's) the slot after the last event counted: a
                                    reader decodes a thread's blocks in slot order, so the
                                    writer counts them in that order too */
    int held_back;               /* (the writer's) a pass held its chunks back to keep order */
} sonde_tally_thread;

/* The run's part. */
typedef struct sonde_tally {
    uint64_t *hist;              /* SONDE_DUR_BUCKETS counts of the closed sections' ticks */
    uint64_t marked, last_step, step_ends, instants;
    uint32_t step_thread;        /* the thread that marked steps, UINT32_MAX: several */
    int stepped;                 /* some thread marked a step */
    uint32_t max_id;
    uint64_t *used;              /* bitmap of the ids events name (SONDE_MAX_ID bits) */
    sonde_idcount inst;          /* instants per name id */
} sonde_tally;

/* 0, or -1 out of memory (t then holds nothing to free). */
int sonde_tally_init(sonde_tally *t);
void sonde_tally_free(sonde_tally *t);
void sonde_tally_thread_free(sonde_tally_thread *th);

/* A section from tick begin to tick end counted in the histogram (0 when it ends before it
 * begins). */
static inline void sonde_tally_count(sonde_tally *t, uint64_t begin, uint64_t end)
{
    int64_t d = (int64_t)(end - begin);
    t->hist[sonde_dur_bucket(d > 0 ? (uint64_t)d : 0)]++;
}

/* The depth an END of id (0: the innermost) leaves th at, as a reader takes it: the innermost
 * open section closes, or the one id names and those open inside it (th->open[k .. depth) are
 * the sections it closes); th->depth itself when it closes none (nothing open, or id names no
 * open section). */
static inline size_t sonde_tally_closes(const sonde_tally_thread *th, uint32_t id)
{
    if (!th->depth)
        return 0;
    size_t k = th->depth - 1;
    if (id) {
        while (k > 0 && th->open[k].id != id)
            k--;
        if (th->open[k].id != id)
            return th->depth;
    }
    return k;
}

/* An END of id (0: the innermost) at tick: the sections it closes (sonde_tally_closes) each
 * counted in the histogram. 1 when it named one open. */
static inline int sonde_tally_end(sonde_tally *t, sonde_tally_thread *th, uint32_t id,
                                  uint64_t tick)
{
    size_t k = sonde_tally_closes(th, id);
    if (k == th->depth)
        return 0;
    for (size_t j = th->depth; j-- > k;)
        sonde_tally_count(t, th->open[j].tick, tick);
    th->depth = k;
    return id != 0;
}

/* The events' other kinds (sonde_tally_event's slow path). */
int sonde_tally_other(sonde_tally *t, sonde_tally_thread *th, uint32_t thread, unsigned kind,
                      uint32_t id, uint64_t tick, uint32_t arg);
int sonde_tally_begin_grow(sonde_tally_thread *th);

/* One event of thread (its index in the file) in its order: kind, its id (< SONDE_MAX_ID), tick
 * and arg (a METADATA value's id < SONDE_MAX_ID). 0, or -1 out of memory. */
static inline int sonde_tally_event(sonde_tally *t, sonde_tally_thread *th, uint32_t thread,
                                    unsigned kind, uint32_t id, uint64_t tick, uint32_t arg)
{
    th->seen = 1;
    if (kind > SONDE_K_END)
        return sonde_tally_other(t, th, thread, kind, id, tick, arg);
    if (kind == SONDE_K_END) {
        if (sonde_tally_end(t, th, id, tick))
            return 0;
    } else {
        if (th->depth == th->cap_open && sonde_tally_begin_grow(th))
            return -1;
        th->open[th->depth++] = (sonde_tally_open){id, tick};
    }
    if (id > t->max_id)
        t->max_id = id;
    t->used[id >> 6] |= 1ull << (id & 63);
    return 0;
}

/* from's run part added to into's (the histograms, counts, ids and instants; the steps' thread
 * as one tally of both in turn would say). 0, or -1 out of memory. */
int sonde_tally_merge(sonde_tally *into, const sonde_tally *from);

/* The SUMMARY record's payload for t and threads th[0 .. n_threads) (docs/formats.md) appended
 * to *out (an sbuf, util/buf.h; its oom flag set when out of memory). */
struct sbuf;
void sonde_tally_encode(struct sbuf *out, const sonde_tally *t, const sonde_tally_thread *th,
                        size_t n_threads);
/* A SUMMARY payload [p, end) into t (initialised by the caller) and *th (n_threads of them,
 * allocated here; NULL when none) for a file of max_threads threads. 0; 1 when it is malformed
 * (an id past SONDE_MAX_ID, a thread past max_threads, a bucket past the histogram, bytes left
 * over; what was taken is freed by the caller as on success); -1 out of memory. */
int sonde_tally_decode(const uint8_t *p, const uint8_t *end, size_t max_threads, sonde_tally *t,
                       sonde_tally_thread **th, size_t *n_threads);

#endif
