/* build_threads.c - the build's second pass over the file's threads, in thread order. A file
 * thread whose events build nothing the threads share (sm_skim.own: sections only) may be built
 * on a helper thread, with a decoder of its own, into a fragment: a model of its own (the run's
 * read-only parts, its own spans and folds) and a context of its own (statistics, counts). The
 * reading's thread builds the others in turn itself, and each own thread either itself (when no
 * helper has taken it yet) or by merging its fragment when it reaches it: the spans and folds
 * appended with their indices moved, the statistics added (sm__sink_merge: the same figures in
 * any order), the counts summed. The model is the one a single thread builds. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "model_build.h"
#include "../util/alloc.h"

enum { FREE, HELPER, DONE, MAIN }; /* a file thread's state */

/* A file thread built by a helper. */
typedef struct frag {
    sm_model m;
    bctx b;
    int rc;
} frag;

typedef struct helpers {
    bctx *b;                 /* the run's */
    const sm_model *tmpl_m;  /* what a fragment starts from, taken before any helper starts */
    uint64_t end_tick;
    size_t *own;             /* the own threads, in order */
    size_t n_own;
    _Atomic size_t next;     /* the next of them a helper may take */
    _Atomic int *state;      /* per file thread */
    frag **done;             /* per file thread: its fragment, once DONE (NULL: out of memory) */
    _Atomic int stop;        /* the reading failed: take nothing more */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    void *dec[SB_MAX_DECODERS];
    pthread_t th[SB_MAX_DECODERS];
    int started[SB_MAX_DECODERS];
    int n;                   /* helpers */
} helpers;

typedef struct helper {
    helpers *h;
    void *dec;
} helper;

static void frag_free(frag *f)
{
    if (!f)
        return;
    sonde__free(f->m.spans);
    sonde__free(f->m.folds);
    sonde__free(f->b.open_n);
    sm__sink_free(&f->b.sink);
    for (size_t i = 0; i < f->b.n_ssink; i++)
        sm__sink_free(&f->b.ssink[i]);
    sonde__free(f->b.ssink);
    sonde__free(f);
}

/* A fragment as the template of the model has it, with the run's settings (b->set and its
 * sessions' sinks, which the build does not change) and its own spans, folds, statistics and
 * counts. NULL out of memory. */
static frag *frag_new(const helpers *h)
{
    frag *f = sonde__calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->m = *h->tmpl_m;
    f->m.spans = NULL;
    f->m.n_spans = 0;
    f->m.folds = NULL;
    f->m.n_folds = 0;
    f->m.short_spans = 0;
    const bctx *run = h->b;
    bctx *b = &f->b;
    b->m = &f->m;
    b->set = run->set;
    b->top_run = -1;
    b->fragment = 1;
    if (sm__sink_init(&b->sink, h->tmpl_m) ||
        !(b->open_n = sonde__calloc(b->sink.n_groups ? b->sink.n_groups : 1, sizeof *b->open_n)))
        goto fail;
    if (run->n_ssink) {
        if (!(b->ssink = sonde__calloc(run->n_ssink, sizeof *b->ssink)))
            goto fail;
        for (; b->n_ssink < run->n_ssink; b->n_ssink++)
            if (sm__sink_init(&b->ssink[b->n_ssink], h->tmpl_m))
                goto fail;
    }
    return f;
fail:
    frag_free(f);
    return NULL;
}

/* Takes the next own thread no one has taken and builds it into a fragment, with decoder dec:
 * 1, or 0 when none is left (or the reading failed). */
static int take_one(helpers *h, void *dec)
{
    for (;;) {
        size_t i = atomic_fetch_add(&h->next, 1);
        if (i >= h->n_own || atomic_load(&h->stop))
            return 0;
        size_t t = h->own[i];
        int expect = FREE;
        if (!atomic_compare_exchange_strong(&h->state[t], &expect, HELPER))
            continue; /* the reading's thread built it itself */
        frag *f = frag_new(h);
        if (f)
            f->rc = sm__build_thread(&f->b, dec, t, h->end_tick);
        pthread_mutex_lock(&h->mu);
        h->done[t] = f;
        atomic_store(&h->state[t], DONE);
        pthread_cond_broadcast(&h->cv);
        pthread_mutex_unlock(&h->mu);
        return 1;
    }
}

static void *helper_run(void *arg)
{
    helper *me = arg;
    while (take_one(me->h, me->dec)) {
    }
    return NULL;
}

/* Entries moved from a fragment's array into the run's at a time: the fragment's array gives
 * back each part once moved (a realloc that shrinks it), so the two hold the fragment's
 * entries once, not twice, while they move. */
#define MOVE_AT_ONCE 65536

/* The n entries of from (size sz) into to from index at, the last part first, from shrunk
 * after each part and freed at the end; move_fix moves the indices of each part by off. */
static void move_parts(void *to, size_t at, void *from, size_t n, size_t sz, int32_t off,
                       void (*move_fix)(void *v, size_t n, int32_t off))
{
    while (n > 0) {
        size_t k = n > MOVE_AT_ONCE ? MOVE_AT_ONCE : n;
        n -= k;
        char *dst = (char *)to + (at + n) * sz;
        memcpy(dst, (char *)from + n * sz, k * sz);
        move_fix(dst, k, off);
        void *g = n ? sonde__realloc(from, n * sz) : NULL;
        if (g) /* NULL: kept as it was (shrinking cannot fail but may) */
            from = g;
    }
    sonde__free(from);
}

static void fix_spans(void *v, size_t n, int32_t off)
{
    sm_span *s = v;
    for (size_t i = 0; i < n; i++)
        if (s[i].parent >= 0)
            s[i].parent += off;
}

static void fix_folds(void *v, size_t n, int32_t off)
{
    sm_fold_run *r = v;
    for (size_t i = 0; i < n; i++) {
        if (r[i].box >= 0)
            r[i].box += off;
        if (r[i].closer >= 0)
            r[i].closer += off;
    }
}

/* Fragment f into the run, as building its file thread in b would have left it; f's spans and
 * folds are given back as they move. 0, or -1 out of memory. */
static int merge_frag(bctx *b, frag *f)
{
    sm_model *m = b->m, *fm = &f->m;
    if (m->n_spans + fm->n_spans > INT32_MAX || m->n_folds + fm->n_folds > INT32_MAX)
        return -1; /* span indices are int32: what one thread building them could not pass */
    if (SONDE_RESERVE(m->spans, m->n_spans, fm->n_spans, b->cap_spans) ||
        SONDE_RESERVE(m->folds, m->n_folds, fm->n_folds, b->cap_folds))
        return -1;
    int32_t off = (int32_t)m->n_spans;
    move_parts(m->spans, m->n_spans, fm->spans, fm->n_spans, sizeof *m->spans, off, fix_spans);
    fm->spans = NULL;
    m->n_spans += fm->n_spans;
    move_parts(m->folds, m->n_folds, fm->folds, fm->n_folds, sizeof *m->folds, off, fix_folds);
    fm->folds = NULL;
    m->n_folds += fm->n_folds;
    m->short_spans += fm->short_spans;
    bcount_add(&b->n, &f->b.n);
    if (sm__sink_merge(&b->sink, &f->b.sink))
        return -1;
    for (size_t i = 0; i < b->n_ssink; i++)
        if (sm__sink_merge(&b->ssink[i], &f->b.ssink[i]))
            return -1;
    return 0;
}

/* Starts up to n - 1 helpers over the own threads (own_of: per file thread), with a template
 * of the run's model (tm: taken now, before the reading's thread changes it). 0 (none started
 * is not a failure: the reading's thread builds them all), or -1 out of memory. */
static int helpers_start(helpers *h, bctx *b, const uint8_t *own_of, int n, sm_model *tm,
                         helper *hs)
{
    sb_raw *raw = b->set.raw;
    for (size_t t = 0; t < raw->n_threads; t++)
        h->n_own += own_of[t] != 0;
    if (h->n_own < 2 || n < 2)
        return 0;
    h->own = sonde__malloc(h->n_own * sizeof *h->own);
    h->state = sonde__calloc(raw->n_threads, sizeof *h->state);
    h->done = sonde__calloc(raw->n_threads, sizeof *h->done);
    if (!h->own || !h->state || !h->done)
        return -1;
    h->n_own = 0;
    for (size_t t = 0; t < raw->n_threads; t++)
        if (own_of[t])
            h->own[h->n_own++] = t;
    *tm = *b->m;
    h->tmpl_m = tm;
    /* the first own thread is the reading's thread's to build: the helpers start at the second */
    atomic_store(&h->next, 1);
    if ((size_t)n > h->n_own) /* a helper for each own thread past the first at most */
        n = (int)h->n_own;
    for (int i = 0; i < n - 1; i++) {
        if (!(h->dec[i] = raw->dec_new(raw->events_src)))
            return -1;
        h->n = i + 1;
        hs[i] = (helper){h, h->dec[i]};
    }
    for (int i = 0; i < h->n; i++)
        h->started[i] = pthread_create(&h->th[i], NULL, helper_run, &hs[i]) == 0;
    return 0;
}

/* Stops and joins the helpers, frees what they built and was not merged. -1 when their decoders'
 * end failed, else rc. */
static int helpers_end(helpers *h, size_t n_threads, int rc)
{
    atomic_store(&h->stop, 1);
    for (int i = 0; i < h->n; i++)
        if (h->started[i])
            pthread_join(h->th[i], NULL);
    if (h->n && h->b->set.raw->dec_end(h->b->set.raw->events_src, h->dec, h->n))
        rc = -1;
    for (size_t t = 0; h->done && t < n_threads; t++)
        frag_free(h->done[t]);
    sonde__free(h->own);
    sonde__free(h->state);
    sonde__free(h->done);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    return rc;
}

/* File thread t, own: built here if no one has taken it, else its fragment merged once done;
 * until then, the reading's thread builds the next own thread no one has taken into a fragment,
 * as a helper does. */
static int build_own(helpers *h, size_t t)
{
    bctx *b = h->b;
    int expect = FREE;
    if (atomic_compare_exchange_strong(&h->state[t], &expect, MAIN))
        return sm__build_thread(b, b->set.raw->events_src, t, h->end_tick);
    while (atomic_load(&h->state[t]) != DONE && take_one(h, b->set.raw->events_src)) {
    }
    pthread_mutex_lock(&h->mu);
    while (atomic_load(&h->state[t]) != DONE)
        pthread_cond_wait(&h->cv, &h->mu);
    frag *f = h->done[t];
    h->done[t] = NULL;
    pthread_mutex_unlock(&h->mu);
    if (f && f->b.summary_wrong)
        b->summary_wrong = 1;
    int rc = !f || f->rc || merge_frag(b, f) ? -1 : 0; /* its threads[t].spans set by it */
    frag_free(f);
    return rc;
}

int sm__build_threads(bctx *b, const uint8_t *own, uint64_t end_tick)
{
    sb_raw *raw = b->set.raw;
    helpers h;
    memset(&h, 0, sizeof h);
    h.b = b;
    h.end_tick = end_tick;
    pthread_mutex_init(&h.mu, NULL);
    pthread_cond_init(&h.cv, NULL);
    sm_model tm;
    helper hs[SB_MAX_DECODERS];
    int rc = -1;
    int n = own && raw->dec_new ? sm__readers_for(raw) : 1;
    if (n > 1 && helpers_start(&h, b, own, n, &tm, hs))
        goto out;
    for (size_t t = 0; t < raw->n_threads; t++) {
        int r = h.n && own[t] ? build_own(&h, t)
                              : sm__build_thread(b, raw->events_src, t, end_tick);
        if (r)
            goto out;
    }
    rc = 0;
out:
    return helpers_end(&h, raw->n_threads, rc);
}
